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
from ..timeouts import DEFAULT, Timeout, answer_limit
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
        timeout: Timeout = DEFAULT,
    ) -> StoredMessage:
        """One message straight from the stream's store (any replica answers)."""
        js = self._js()
        wait = answer_limit(timeout, js.timeout)
        if last_by_subj is not None and seq is None and next_by_subj is None and start_time is None:
            return read_last(js, stream, last_by_subj, wait)
        return direct_get(
            js, stream, seq=seq, last_by_subj=last_by_subj, next_by_subj=next_by_subj, start_time=start_time,
            timeout=wait,
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
        timeout: Timeout = DEFAULT,
    ) -> DirectBatch:
        """Up to ``max_messages`` messages matching ``subject`` from ``seq`` (or ``start_time``): an iterator."""
        js = self._js()
        return direct_get_batch(
            js, stream, subject, batch=max_messages, seq=seq, start_time=start_time, max_bytes=max_bytes,
            timeout=answer_limit(timeout, js.timeout),
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
        timeout: Timeout = DEFAULT,
    ) -> DirectBatch:
        """The last message of each subject, as of one point in time, across as many batches as it takes."""
        js = self._js()
        return direct_get_last_for_subjects(
            js, stream, subjects, up_to_seq=up_to_seq, up_to_time=up_to_time, batch=max_messages,
            timeout=answer_limit(timeout, js.timeout),
        )

    # -- counters (ADR-49) -----------------------------------------------------------
    def counter_add(self, subject: str, delta: int, *, timeout: Timeout = DEFAULT) -> int:
        """Add ``delta`` (any int, negative too) to the counter on ``subject``: its new total.

        The stream needs ``allow_msg_counter``; the server adds, so concurrent
        adds from anywhere give the exact sum.  A timeout leaves it unknown
        whether the add happened: read the total before trying again.
        """
        return self._counters.add(subject, delta, answer_limit(timeout, self._js().timeout))

    def counter_get(self, stream: str, subject: str, *, timeout: Timeout = DEFAULT) -> int:
        """The counter's total (MessageNotFoundError if nothing was ever added on ``subject``)."""
        return self._counters.get(stream, subject, answer_limit(timeout, self._js().timeout))

    def counter_get_many(self, stream: str, subjects: list[str], *, timeout: Timeout = DEFAULT) -> dict[str, int]:
        """The totals of many counters as of one moment, by subject (wildcards allowed; absent ones left out).

        One multi-subject direct get; on a stream without ``allow_direct``,
        one STREAM.MSG.GET per subject (no wildcards then).
        """
        return self._counters.get_many(stream, subjects, answer_limit(timeout, self._js().timeout))
