"""The JetStream facade's reads straight from a stream's store: direct gets (ADR-31) and counters (ADR-49).

A part of :class:`~jsclient.jetstream.context.JetStream` (which inherits
it), kept apart so that the facade stays one screenful per responsibility;
the work is done in :mod:`.direct` and :mod:`.counters`.  Runs on the
caller's thread; nothing here holds state.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from ..deprecation import renamed_keywords
from .direct import DirectBatch, StoredMessage, direct_get, direct_get_batch, direct_get_last_for_subjects, read_last

if TYPE_CHECKING:
    from .context import JetStream
    from .counters import Counters


class Reads:
    """Direct gets and counter reads (see :class:`~jsclient.jetstream.context.JetStream`)."""

    _counters: Counters

    def _js(self) -> JetStream:
        return self  # type: ignore[return-value]  # only JetStream inherits this

    # -- direct get (ADR-31) ----------------------------------------------------------
    def direct_get(
        self,
        stream: str,
        seq: int | None = None,
        *,
        last_by_subj: str | None = None,
        next_by_subj: str | None = None,
        start_time: dt.datetime | None = None,
        timeout: float | None = None,
    ) -> StoredMessage:
        """One message straight from the stream's store (any replica answers)."""
        if last_by_subj is not None and seq is None and next_by_subj is None and start_time is None:
            return read_last(self._js(), stream, last_by_subj, timeout)
        return direct_get(
            self._js(), stream, seq=seq, last_by_subj=last_by_subj, next_by_subj=next_by_subj,
            start_time=start_time, timeout=timeout,
        )

    @renamed_keywords(batch="max_messages")
    def direct_get_batch(
        self,
        stream: str,
        subject: str = ">",
        *,
        max_messages: int = 100,
        seq: int | None = None,
        start_time: dt.datetime | None = None,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> DirectBatch:
        """Up to ``max_messages`` messages matching ``subject`` from ``seq`` (or ``start_time``): an iterator."""
        return direct_get_batch(
            self._js(), stream, subject, batch=max_messages, seq=seq, start_time=start_time, max_bytes=max_bytes,
            timeout=timeout,
        )

    @renamed_keywords(batch="max_messages")
    def direct_get_last_for_subjects(
        self,
        stream: str,
        subjects: list[str],
        *,
        up_to_seq: int | None = None,
        up_to_time: dt.datetime | None = None,
        max_messages: int | None = None,
        timeout: float | None = None,
    ) -> DirectBatch:
        """The last message of each subject, as of one point in time, across as many batches as it takes."""
        return direct_get_last_for_subjects(
            self._js(), stream, subjects, up_to_seq=up_to_seq, up_to_time=up_to_time, batch=max_messages,
            timeout=timeout,
        )

    # -- counters (ADR-49) -----------------------------------------------------------
    def counter_add(self, subject: str, delta: int, *, timeout: float | None = None) -> int:
        """Add ``delta`` (any int, negative too) to the counter on ``subject``: its new total.

        The stream needs ``allow_msg_counter``; the server adds, so concurrent
        adds from anywhere give the exact sum.  A timeout leaves it unknown
        whether the add happened: read the total before trying again.
        """
        return self._counters.add(subject, delta, timeout)

    def counter_get(self, stream: str, subject: str, *, timeout: float | None = None) -> int:
        """The counter's total (MessageNotFoundError if nothing was ever added on ``subject``)."""
        return self._counters.get(stream, subject, timeout)

    def counter_get_many(self, stream: str, subjects: list[str], *, timeout: float | None = None) -> dict[str, int]:
        """The totals of many counters as of one moment, by subject (wildcards allowed; absent ones left out).

        One multi-subject direct get; on a stream without ``allow_direct``,
        one STREAM.MSG.GET per subject (no wildcards then).
        """
        return self._counters.get_many(stream, subjects, timeout)
