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
    """Direct gets and counter reads; the errors every call may raise are :class:`.context.JetStream`'s."""

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
        """One message straight from the stream's store (any replica answers).

        The stream needs ``allow_direct``.  Give ``seq``, ``last_by_subj``,
        ``next_by_subj`` or ``start_time`` (``next_by_subj`` goes with either of
        the other two).

        Args:
            stream: The stream's name.
            seq: The message at this stream sequence; with ``next_by_subj``, where the search starts.
            last_by_subj: The last message on this subject.
            next_by_subj: The first message on this subject (wildcards allowed) from ``seq`` or ``start_time``
                on (from the start when neither is given).
            start_time: The first message stored at or after this time (timezone-aware; server 2.11+).
            timeout: Seconds to wait for the server; left out, the context's; ``None``, no limit
                (see :doc:`/conventions`).

        Returns:
            The stored message.

        Raises:
            InvalidArgumentError: A bad name, subject, sequence, time or ``timeout``, none of the four ways, or
                two that do not go together; raised before anything is sent.
            FeatureNotSupportedError: ``start_time`` on a server before 2.11.
            MessageNotFoundError: No message matches.
            StreamNotFoundError: No such stream.
            DirectGetDisabledError: The stream does not allow direct gets.
        """
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
        """Up to ``max_messages`` messages matching ``subject`` from ``seq`` (or ``start_time``): an iterator.

        The stream needs ``allow_direct``.  Nothing is asked until the result
        is iterated, so the server's answers (and errors) come as it is.

        Args:
            stream: The stream's name.
            subject: Only messages on this subject (wildcards allowed); ``">"``, every message.
            max_messages: The most messages to read.
            seq: The stream sequence to read from; left out, 1.
            start_time: Read from the first message stored at or after this time instead (timezone-aware;
                server 2.11+).
            max_bytes: Stop once the messages read reach this many bytes (their subjects, headers and data, as
                the server counts them).
            timeout: Seconds to wait for each reply; left out, the context's; ``None``, no limit
                (see :doc:`/conventions`).

        Returns:
            An iterator over the messages; once it is done, its ``num_pending`` and ``last_sequence`` say
            where the read stopped.

        Raises:
            InvalidArgumentError: A bad name, subject, number, time or ``timeout``, or both ``seq`` and
                ``start_time``; raised before anything is sent.
            FeatureNotSupportedError: ``start_time`` on a server before 2.11.
            StreamNotFoundError: While iterating, there is no such stream.
            DirectGetDisabledError: While iterating, the stream does not allow direct gets.
            TimeoutError: While iterating, no reply came within ``timeout``.
            JetStreamAPIError: While iterating, any other refusal by the server.
        """
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
        """The last message of each subject, as of one point in time, across as many batches as it takes.

        The stream needs ``allow_direct`` (server 2.11+).  Nothing is asked
        until the result is iterated, so the server's answers (and errors) come
        as it is.

        Args:
            stream: The stream's name.
            subjects: The subjects (wildcards allowed), at most 1024.
            up_to_seq: Read as of this stream sequence: the last message of each subject at or before it.
            up_to_time: Read as of this time instead (timezone-aware).
            max_messages: The most messages in one batch (each batch is one request); left out, the server's
                limit.
            timeout: Seconds to wait for each reply; left out, the context's; ``None``, no limit
                (see :doc:`/conventions`).

        Returns:
            An iterator over the last message of each subject that has one.

        Raises:
            InvalidArgumentError: A bad name, subject list, number, time or ``timeout``, or both ``up_to_seq``
                and ``up_to_time``; raised before anything is sent.
            FeatureNotSupportedError: A server before 2.11 (found while iterating when it is a replica behind
                a newer server).
            TooManySubjectsError: While iterating, the subjects match more than the server reads at once.
            StreamNotFoundError: While iterating, there is no such stream.
            DirectGetDisabledError: While iterating, the stream does not allow direct gets.
            TimeoutError: While iterating, no reply came within ``timeout``.
            JetStreamAPIError: While iterating, any other refusal by the server.
        """
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

        Args:
            subject: The counter's subject; a stream with ``allow_msg_counter`` must store it.
            delta: What to add, any int.
            timeout: Seconds to wait for the stream's ack; left out, the context's; ``None``, no limit
                (see :doc:`/conventions`).

        Returns:
            The counter's new total.

        Raises:
            InvalidArgumentError: A bad subject or ``timeout``, or a ``delta`` that is not an int; raised before
                anything is sent.
            FeatureNotSupportedError: A server before 2.12.
            CounterError: The stream refused the add (counters are off on it, say).
            NoStreamResponseError: No stream stores ``subject``.
            TimeoutError: No ack within ``timeout``; the add may have happened.
            JetStreamAPIError: The stream acked without a total, or any other refusal.
        """
        return self._counters.add(subject, delta, answer_limit(timeout, self._js().timeout))

    def counter_get(self, stream: str, subject: str, *, timeout: Timeout = DEFAULT) -> int:
        """The counter's total (MessageNotFoundError if nothing was ever added on ``subject``).

        Args:
            stream: The stream that holds the counter.
            subject: The counter's subject (no wildcards).
            timeout: Seconds to wait for the answer; left out, the context's; ``None``, no limit
                (see :doc:`/conventions`).  A stream without ``allow_direct`` is read with ``get_msg``,
                within the same timeout.

        Returns:
            The counter's total.

        Raises:
            InvalidArgumentError: A bad name, subject or ``timeout``, raised before anything is sent.
            FeatureNotSupportedError: A server before 2.12.
            MessageNotFoundError: Nothing was ever added on ``subject``.
            StreamNotFoundError: No such stream.
            JetStreamAPIError: ``subject`` holds no counter, or any other refusal by the server.
        """
        return self._counters.get(stream, subject, answer_limit(timeout, self._js().timeout))

    def counter_get_many(self, stream: str, subjects: list[str], *, timeout: Timeout = DEFAULT) -> dict[str, int]:
        """The totals of many counters as of one moment, by subject (wildcards allowed; absent ones left out).

        One multi-subject direct get; on a stream without ``allow_direct``,
        one STREAM.MSG.GET per subject (no wildcards then).

        Args:
            stream: The stream that holds the counters.
            subjects: The counters' subjects (wildcards allowed on a stream with ``allow_direct``), at most 1024.
            timeout: Seconds to wait for each answer; left out, the context's; ``None``, no limit (see
                :doc:`/conventions`).  A stream without ``allow_direct`` is read with one ``get_msg`` per
                subject, each within this timeout.

        Returns:
            Each counter's total by its subject; subjects nothing was added on are left out.

        Raises:
            InvalidArgumentError: A bad name, subject list or ``timeout``, raised before anything is sent; or a
                wildcard, on a stream without ``allow_direct``.
            FeatureNotSupportedError: A server before 2.12.
            TooManySubjectsError: The subjects match more than the server reads at once.
            StreamNotFoundError: No such stream.
            JetStreamAPIError: A subject holds no counter, or any other refusal by the server.
        """
        return self._counters.get_many(stream, subjects, answer_limit(timeout, self._js().timeout))
