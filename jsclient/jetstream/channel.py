"""The consumption engine: a delivery port, its message manager and a verdict table, one step at a time.

Every JetStream workflow that takes from a subscription asks a
:class:`Channel` for its next step and acts on its
:class:`~.manager.Verdict`, so every layer reads one enum (docs/guides/internals.rst,
"The consumption engine").

Threads: :meth:`Channel.step` runs on the workflow's **taking thread**,
one at a time.  :meth:`Channel.wake` may be called from any thread (the
watchdog's alarm, the reconnect thread, ``stop()``); it goes through the
port's interrupt, which has its own lock.  The channel holds no lock and
keeps no state of its own.
"""

from __future__ import annotations

import enum
import time
from typing import TYPE_CHECKING, NamedTuple

from ..errors import Error, TimeoutError
from ..headers import status_of
from ..message import Msg
from ..subscription import GapPassed, Gaps
from .manager import Table, Verdict
from .status import NO_STATUS, Request, Status, reply_error

if TYPE_CHECKING:
    from ..core.iface import DeliveryPort
    from .manager import MessageManager


#: The verdicts a step can carry, as module globals for the per-message loops (HANDLED never comes out).
MESSAGE, END, WARNING, RESET, ERROR, TIMED_OUT, WOKEN, DROPPED = (
    Verdict.MESSAGE, Verdict.END, Verdict.WARNING, Verdict.RESET, Verdict.ERROR, Verdict.TIMED_OUT, Verdict.WOKEN,
    Verdict.DROPPED,
)


class Wake(enum.Enum):
    """Why a taker was woken without a message."""

    STOPPED = "stopped"  # the iteration was stopped
    RECONNECTED = "reconnected"  # requests outstanding died with the old connection
    SILENT = "silent"  # no message or heartbeat for the alarm time
    RESET = "reset"  # the ordered consumer must be recreated


class Step(NamedTuple):
    verdict: Verdict
    msg: Msg | None = None  # the user message, or the status (its subject names the request it ends)
    status: Status = NO_STATUS  # END's, WARNING's, RESET's and ERROR's
    error: Error | None = None  # WARNING's and ERROR's
    wake: Wake | None = None  # WOKEN's
    #: The call a :data:`Wake.SILENT` alarm was for (a fetch's own heartbeat watch), 0 for any.
    serial: int = 0


class Woken(Error):
    """Internal: the interrupt a :meth:`Channel.wake` leaves on the port."""

    def __init__(self, wake: Wake, serial: int = 0) -> None:
        super().__init__(wake.value)
        self.wake = wake
        self.serial = serial


_TIMED_OUT_STEP = Step(TIMED_OUT)
_DROPPED_STEP = Step(DROPPED)
_new_step = tuple.__new__  # a Step of a message without the generated __new__'s keyword handling


def message_step(msg: Msg) -> Step:
    """The step of a user message."""
    return _new_step(Step, (MESSAGE, msg, NO_STATUS, None, None, 0))


class Channel:
    """One subscription's port, judged by ``manager`` under ``table``.

    ``request`` and ``target`` name what the messages answer (a consumer's
    deliveries, a direct get on a stream, publishes to a subject), which
    says what an error status means.  ``gaps`` is what a take does where the
    port dropped messages over its pending limits: pass it (the default), or,
    with ``Gaps.SIGNAL``, give a :data:`DROPPED` step there (the ordered
    consumer, which must recreate its consumer after the last message it
    handed out).
    """

    __slots__ = ("gaps", "manager", "port", "request", "table", "target")

    def __init__(
        self, port: DeliveryPort, manager: MessageManager, table: Table, *,
        request: Request = Request.CONSUME, target: str = "", gaps: Gaps = Gaps.PASS,
    ) -> None:
        self.port = port
        self.manager = manager
        self.table = table
        self.request = request
        self.target = target
        self.gaps = gaps

    def step(self, timeout: float | None) -> Step:
        """The next thing the workflow must act on, waiting up to ``timeout`` (None: until one comes).

        Heartbeats and flow control never come out.  The error that ended
        the subscription (closed, connection lost) is raised.
        """
        got = self.take(timeout)
        return message_step(got) if isinstance(got, Msg) else got

    def take(self, timeout: float | None) -> Msg | Step:
        """:meth:`step`, but a user message comes out as itself (the per-message loops' call)."""
        port = self.port
        try:
            msg = port.take(timeout, self.gaps)
        except TimeoutError:
            return _TIMED_OUT_STEP
        except Woken as woken:
            return Step(WOKEN, wake=woken.wake, serial=woken.serial)
        except GapPassed:
            return _DROPPED_STEP
        header = msg.header
        if header is None or status_of(header) is None:
            return msg
        return self._status(msg, timeout)

    def _status(self, msg: Msg, timeout: float | None) -> Msg | Step:
        """A status came first: judge it, and take again past the handled ones until ``timeout`` is spent."""
        port = self.port
        manager = self.manager
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            verdict = manager.judge(msg, self.table)
            if verdict is Verdict.MESSAGE:
                return msg
            if verdict is not Verdict.HANDLED:
                return self._status_step(verdict, msg)
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                msg = port.take(remaining, self.gaps)
            except TimeoutError:
                return _TIMED_OUT_STEP
            except Woken as woken:
                return Step(WOKEN, wake=woken.wake, serial=woken.serial)
            except GapPassed:
                return _DROPPED_STEP

    def judge(self, msg: Msg) -> Step | None:
        """The step of a message handed over by the core (a callback's); None when it was handled here."""
        verdict = self.manager.judge(msg, self.table)
        if verdict is Verdict.MESSAGE:
            return message_step(msg)
        if verdict is Verdict.HANDLED:
            return None
        return self._status_step(verdict, msg)

    def _status_step(self, verdict: Verdict, msg: Msg) -> Step:
        status = self.manager.status
        error = reply_error(status, self.request, self.target) if verdict is WARNING or verdict is ERROR else None
        return Step(verdict, msg, status, error)

    def ready(self) -> Step | None:
        """A step from what is already queued, without waiting; None when nothing is."""
        while self.port.pending_msgs:
            step = self.step(0)
            if step.verdict is not TIMED_OUT:
                return step
        return None

    def wake(self, wake: Wake, serial: int = 0) -> None:
        """Any thread: the taker's next step (now, if it waits) is :data:`WOKEN`."""
        self.port.interrupt(Woken(wake, serial))
