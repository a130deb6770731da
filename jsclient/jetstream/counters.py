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
    docstrings say what they take, return and raise.

    Args:
        js: The context whose publishes and reads it uses.
    """

    def __init__(self, js: JetStream) -> None:
        """Keep ``js``; nothing is checked or sent.

        Raises:
            : Nothing; the context is taken as it is.
        """
        self._js = js

    def add(self, subject: str, delta: int, timeout: float) -> int:
        """Add ``delta`` to the counter on ``subject``: :meth:`jsclient.JetStream.counter_add`, which says more.

        Args:
            subject: As there.
            delta: As there.
            timeout: Seconds to wait for the stream's ack.

        Returns:
            The counter's new total.

        Raises:
            JetStreamAPIError: The stream acked without a total; and what :meth:`jsclient.JetStream.counter_add`
                raises.
        """
        check_publish_subject(subject)
        headers = {msgopts.INCR_HEADER: msgopts.increment_value(delta)}
        self._js.require(features.COUNTERS)
        ack = self._js.publish(subject, b"", headers=headers, timeout=timeout)
        if ack.val is None:
            raise JetStreamAPIError(0, 0, f"stream {ack.stream!r} acked an add to {subject!r} without a total")
        return int(ack.val)

    def get(self, stream: str, subject: str, timeout: float) -> int:
        """The total of the counter on ``subject``: :meth:`jsclient.JetStream.counter_get`, whose docstring says more.

        Args:
            stream: As there.
            subject: As there.
            timeout: Seconds to wait for the direct get's answer.

        Returns:
            The counter's total.

        Raises:
            Error: What :meth:`jsclient.JetStream.counter_get` raises.
        """
        check_publish_subject(subject)
        self._js.require(features.COUNTERS)
        try:
            data = self._js.direct_get(stream, last_by_subj=subject, timeout=timeout).data
        except DirectGetDisabledError:
            data = self._js.get_msg(stream, last_by_subj=subject, timeout=timeout).data
        return api.decode_counter(data, subject)

    def get_many(self, stream: str, subjects: list[str], timeout: float) -> dict[str, int]:
        """The totals of many counters as of one moment: :meth:`jsclient.JetStream.counter_get_many`, whose docstring
        says more.

        Args:
            stream: As there.
            subjects: As there.
            timeout: Seconds to wait for each of the direct get's answers.

        Returns:
            Each counter's total by its subject; subjects nothing was added on are left out.

        Raises:
            Error: What :meth:`jsclient.JetStream.counter_get_many` raises.
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
