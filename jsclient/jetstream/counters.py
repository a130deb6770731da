"""Counters (ADR-49): adds published through the context, totals read with direct gets.

Runs on the calling (user) thread; each call is one publish or one or more
reads through the context.  Nothing here is mutable, so nothing is locked and
one :class:`Counters` may be shared by many threads.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ..errors import DirectGetDisabledError, JetStreamAPIError, MessageNotFoundError
from ..protocol import check_publish_subject
from . import api, features, msgopts

if TYPE_CHECKING:
    from .context import JetStream


class Counters:
    """The counter part of a :class:`~jsclient.jetstream.context.JetStream`.

    ``add``, ``get`` and ``get_many`` are the bodies of the context's
    ``counter_add``, ``counter_get`` and ``counter_get_many``, whose
    docstrings they keep.

    Args:
        js: The context whose publishes and reads it uses.
    """

    def __init__(self, js: JetStream) -> None:
        """Keep ``js``; nothing is checked or sent.

        Raises:
            Nothing: the context is taken as it is.
        """
        self._js = js

    def add(self, subject: str, delta: int, timeout: float) -> int:
        """Add ``delta`` to the counter on ``subject`` (the context's ``counter_add``).

        Args:
            subject: The counter's subject; a stream with ``allow_msg_counter`` must store it.
            delta: What to add, any int.
            timeout: Seconds to wait for the stream's ack.

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
            ConnectionClosedError: The connection is closed or draining.
            ReconnectBufferFullError: Reconnecting, and the add does not fit the reconnect buffer; not sent.
        """
        check_publish_subject(subject)
        headers = {msgopts.INCR_HEADER: msgopts.increment_value(delta)}
        self._js.require(features.COUNTERS)
        ack = self._js.publish(subject, b"", headers=headers, timeout=timeout)
        if ack.val is None:
            raise JetStreamAPIError(0, 0, f"stream {ack.stream!r} acked an add to {subject!r} without a total")
        return int(ack.val)

    def get(self, stream: str, subject: str, timeout: float) -> int:
        """The total of the counter on ``subject`` (the context's ``counter_get``).

        Args:
            stream: The stream that holds the counter.
            subject: The counter's subject (no wildcards).
            timeout: Seconds to wait for the direct get's answer.

        Returns:
            The counter's total.

        Raises:
            InvalidArgumentError: A bad name, subject or ``timeout``, raised before anything is sent.
            FeatureNotSupportedError: A server before 2.12.
            MessageNotFoundError: Nothing was ever added on ``subject``.
            StreamNotFoundError: No such stream.
            TimeoutError: No answer in time.
            JetStreamAPIError: ``subject`` holds no counter, or any other refusal by the server.
            ConnectionClosedError: The connection is closed or draining.
        """
        check_publish_subject(subject)
        self._js.require(features.COUNTERS)
        try:
            data = self._js.direct_get(stream, last_by_subj=subject, timeout=timeout).data
        except DirectGetDisabledError:
            data = self._js.get_msg(stream, last_by_subj=subject, timeout=timeout).data
        return api.decode_counter(data, subject)

    def get_many(self, stream: str, subjects: list[str], timeout: float) -> dict[str, int]:
        """The totals of many counters as of one moment (the context's ``counter_get_many``).

        Args:
            stream: The stream that holds the counters.
            subjects: The counters' subjects (wildcards allowed on a stream with ``allow_direct``), at most 1024.
            timeout: Seconds to wait for each of the direct get's answers.

        Returns:
            Each counter's total by its subject; subjects nothing was added on are left out.

        Raises:
            InvalidArgumentError: A bad name, subject list or ``timeout``, raised before anything is sent; or a
                wildcard, on a stream without ``allow_direct``.
            FeatureNotSupportedError: A server before 2.12.
            TooManySubjectsError: The subjects match more than the server reads at once.
            StreamNotFoundError: No such stream.
            TimeoutError: No answer in time.
            JetStreamAPIError: A subject holds no counter, or any other refusal by the server.
            ConnectionClosedError: The connection is closed or draining.
        """
        js = self._js
        js.require(features.COUNTERS)  # before the multi-subject get, which a 2.10 server refuses otherwise
        try:
            return {
                m.subject: api.decode_counter(m.data, m.subject)
                for m in js.direct_get_last_for_subjects(stream, subjects, timeout=timeout)
            }
        except DirectGetDisabledError:
            totals: dict[str, int] = {}
            for subject in subjects:
                check_publish_subject(subject, "subject (a stream without allow_direct takes no wildcards)")
                with contextlib.suppress(MessageNotFoundError):
                    stored = js.get_msg(stream, last_by_subj=subject, timeout=timeout)
                    totals[subject] = api.decode_counter(stored.data, subject)
            return totals
