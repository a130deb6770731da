"""The message-manager layer: every message a JetStream subscription receives gets one verdict.

A status is classified once (:func:`.status.classify`) and looked up in its
workflow's table below: the tables are the whole policy (docs/guides/internals.rst,
"The consumption engine").

Threads:

* :meth:`MessageManager.arrive` runs on the connection's **reader thread**,
  as the core subscription's hook.  Heartbeats are handled there and never
  queued (a stalled consumer's flow control is answered at once); user
  messages are checked for order when the workflow tracks it.  It never
  blocks and never calls user code.
* :meth:`MessageManager.judge` runs on the **taking thread** (``next_msg``,
  ``fetch``, iteration, a dispatcher).  Flow control is answered there, when
  the request reaches the head of the queue: that is its point, the
  consumer has caught up.
* The heartbeat monitor (:meth:`MessageManager.watch`) checks on the
  connection's **watchdog thread**; its alarm only hands work elsewhere.

Locks: ``_fc_lock`` makes "answer each flow-control subject once" hold
between the reader (a stalled heartbeat) and the taker; nothing else is
taken under it.  The sequence fields are written by the reader thread only.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..errors import ConnectionClosedError, MessageGapError
from ..headers import status_of
from ..observe import ConsumerKind
from .metadata import ack_sequences
from .status import NO_STATUS, Kind, Status, classify
from .watchdog import Counted, HeartbeatMonitor

if TYPE_CHECKING:
    from ..core.iface import CoreAPI
    from ..message import Msg


class Verdict(enum.Enum):
    """What a workflow must do next: one enum from the manager's tables up to every workflow."""

    MESSAGE = "message"  # hand it to the user
    HANDLED = "handled"  # dealt with here (heartbeat, flow control, the end of an older request)
    END = "end"  # the pull request or batch is over; nothing is wrong
    WARNING = "warning"  # the request failed for a passing reason: telegraph it, then ask again
    RESET = "reset"  # recreate the consumer (ordered)
    ERROR = "error"  # terminal: raise it (or report it, for a callback)
    # The channel's own, never in a table: no message came.
    TIMED_OUT = "timed out"  # nothing by the deadline
    WOKEN = "woken"  # woken by Channel.wake
    DROPPED = "dropped"  # the port dropped messages here (only for a channel that asks: Gaps.SIGNAL)


Table = Mapping[Kind, Verdict]


def _table(default: Verdict, **verdicts: Verdict) -> Table:
    """A verdict for every kind: the ones named, ``default`` for the rest."""
    unknown = set(verdicts) - set(Kind.__members__)
    assert not unknown, unknown
    assert not {Verdict.TIMED_OUT, Verdict.WOKEN, Verdict.DROPPED} & {default, *verdicts.values()}, "the channel's own"
    return {kind: verdicts.get(kind.name, default) for kind in Kind}


_V = Verdict
#: The normal ends of a pull request (ADR-37 "not telegraphed").
_PULL_ENDS = {k: _V.END for k in ("NO_MESSAGES", "REQUEST_TIMEOUT", "MAX_BYTES", "BATCH_COMPLETED", "WRONG_PIN")}

#: Push subscriptions (ADR-15): only heartbeats and flow control are expected.
PUSH = _table(_V.ERROR, MESSAGE=_V.MESSAGE, HEARTBEAT=_V.HANDLED, FLOW_CONTROL=_V.HANDLED)
#: Ordered consumer (ADR-17): a deleted consumer is recreated where delivery stands.
ORDERED = _table(_V.ERROR, MESSAGE=_V.MESSAGE, HEARTBEAT=_V.HANDLED, FLOW_CONTROL=_V.HANDLED,
                 CONSUMER_DELETED=_V.RESET)
#: ``fetch``: a leader change or server shutdown ends the request like a 408 (the consumer
#: lives: what came is returned, the next fetch asks again); no room (MaxWaiting, 503) is raised.
FETCH = _table(_V.ERROR, MESSAGE=_V.MESSAGE, HEARTBEAT=_V.HANDLED, FLOW_CONTROL=_V.HANDLED,
               REQUEST_LOST=_V.END, **_PULL_ENDS)
#: ``messages()`` (ADR-37 consume): the same ends, but no room is reported and asked again after a pause.
CONSUME = _table(_V.ERROR, MESSAGE=_V.MESSAGE, HEARTBEAT=_V.HANDLED, FLOW_CONTROL=_V.HANDLED,
                 REQUEST_LOST=_V.END, BUSY=_V.WARNING, **_PULL_ENDS)
#: Batched direct get (ADR-31): 204 ends one batch, 404 means nothing (more) matches.
DIRECT_BATCH = _table(_V.ERROR, MESSAGE=_V.MESSAGE, END_OF_BATCH=_V.END, NO_MESSAGES=_V.END)

#: Publish acks taken from an inbox (fast ingest's answers, the Spark sink's acks): any status ends the
#: collection (a 503: no stream stores the subject).
ACKS = _table(_V.ERROR, MESSAGE=_V.MESSAGE)

#: Every table by workflow name (the docs' status table says the same in words; the tests check both).
TABLES: Mapping[str, Table] = {
    "push": PUSH, "ordered": ORDERED, "fetch": FETCH, "consume": CONSUME, "direct batch": DIRECT_BATCH,
    "acks": ACKS,
}


class MessageManager:
    """One JetStream subscription's statuses: the verdict, flow control once, heartbeats, sequences.

    This base tracks no order; :class:`GapReporting` and :class:`StrictOrder`
    say what an out-of-order message means.
    """

    def __init__(self, core: CoreAPI) -> None:
        self._core = core
        self._fc_lock = threading.Lock()
        self._fc_answered: str | None = None  # guarded by _fc_lock
        #: Flow-control requests answered (each subject once).
        self.flow_control_answers = 0
        #: The status :meth:`judge` last classified (taking thread).
        self.status: Status = NO_STATUS
        # Reader thread only: the last message accepted in order.
        self.consumer_seq = 0
        self.stream_seq = 0
        self._monitor: HeartbeatMonitor | None = None

    # -- reader thread -----------------------------------------------------------
    def arrive(self, msg: Msg) -> bool:
        """True consumes ``msg`` here (a heartbeat, or a message out of order the workflow drops)."""
        header = msg.header
        if header is not None and status_of(header) is not None:
            status = classify(msg)
            if status.kind is not Kind.HEARTBEAT:
                return False  # judged at the head of the queue, in order
            behind = status.last_consumer is not None and self.server_sent(status.last_consumer)
            if not behind and status.flow_control_subject:
                self.answer_flow_control(status.flow_control_subject)
            return True
        return self.sequenced(msg.reply)

    def sequenced(self, reply: str | None) -> bool:
        """A user message arrived; True drops it.  This base keeps everything."""
        return False

    def server_sent(self, consumer_seq: int) -> bool:
        """A heartbeat says the server sent up to ``consumer_seq``; True when some never arrived."""
        return False

    # -- taking thread -------------------------------------------------------------
    def judge(self, msg: Msg, table: Table) -> Verdict:
        """The verdict of ``msg`` under ``table``; flow control is answered here."""
        header = msg.header
        if header is None or status_of(header) is None:
            return Verdict.MESSAGE
        status = self.status = classify(msg)
        if status.kind is Kind.FLOW_CONTROL and status.flow_control_subject:
            self.answer_flow_control(status.flow_control_subject)
        return table[status.kind]

    # -- either thread ---------------------------------------------------------------
    def answer_flow_control(self, subject: str) -> None:
        with self._fc_lock:
            if subject == self._fc_answered:
                return
            self._fc_answered = subject
            self.flow_control_answers += 1
        with contextlib.suppress(ConnectionClosedError):
            self._core.publish_control(subject, b"")

    def watch(
        self, sub: Counted, interval: float, alarm: float, on_alarm: Callable[[], None], kind: ConsumerKind
    ) -> None:
        """Have the watchdog call ``on_alarm`` once ``sub`` stays silent for ``alarm`` seconds (``kind``: the
        reader's, as the alarm is told to an observer)."""
        self.unwatch()
        self._monitor = HeartbeatMonitor(self._core.watchdog, sub, interval, alarm, on_alarm, kind).start()

    def rearm(self) -> None:
        """Watchdog thread, from an alarm: count the silence afresh, so a silence that goes on alarms again."""
        monitor = self._monitor
        if monitor is not None:
            monitor.reset()

    @property
    def alarm(self) -> float:
        return self._monitor.alarm if self._monitor is not None else 0.0

    def unwatch(self) -> None:
        monitor, self._monitor = self._monitor, None
        if monitor is not None:
            monitor.stop()


class GapReporting(MessageManager):
    """Push: a skipped consumer sequence is reported as :class:`MessageGapError`; delivery goes on."""

    def __init__(self, core: CoreAPI, consumer: Callable[[], str]) -> None:
        super().__init__(core)
        self._consumer = consumer
        #: Gaps reported so far.
        self.gaps = 0

    def sequenced(self, reply: str | None) -> bool:
        seqs = ack_sequences(reply)
        if seqs is not None:
            cseq, sseq = seqs
            last = self.consumer_seq
            if cseq > last + 1 and last != 0:
                self._gap(last + 1, cseq)
            self.consumer_seq = cseq
            self.stream_seq = sseq
        return False

    def server_sent(self, consumer_seq: int) -> bool:
        # Before any message a heartbeat only tells where a bound consumer stands.
        last = self.consumer_seq
        if last != 0 and consumer_seq > last:
            self._gap(last + 1, consumer_seq + 1)
        if consumer_seq > last:
            self.consumer_seq = consumer_seq
        return False

    def _gap(self, first_missing: int, next_seq: int) -> None:
        self.gaps += 1
        self._core.report_error(MessageGapError(first_missing, next_seq, self._consumer()))


class StrictOrder(MessageManager):
    """Ordered: only the next consumer sequence is accepted; anything else calls ``on_gap`` and is dropped.

    The caller runs :meth:`arrive` under its own lock (it also checks its
    generation there) and ``on_gap`` runs under that lock.
    """

    def __init__(self, core: CoreAPI, on_gap: Callable[[], None]) -> None:
        super().__init__(core)
        self._on_gap = on_gap

    def restart(self) -> None:
        """A new consumer delivers from consumer sequence 1 again; flow control starts afresh."""
        self.consumer_seq = 0
        with self._fc_lock:
            self._fc_answered = None

    def sequenced(self, reply: str | None) -> bool:
        seqs = ack_sequences(reply)
        if seqs is None:
            return True
        cseq, sseq = seqs
        if cseq != self.consumer_seq + 1:
            self._on_gap()
            return True
        self.consumer_seq = cseq
        self.stream_seq = sseq
        return False

    def server_sent(self, consumer_seq: int) -> bool:
        if consumer_seq > self.consumer_seq:
            self._on_gap()
            return True
        return False
