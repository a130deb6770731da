"""Requests: the reply mux, its tokens, waiters and futures, and the deadline sweep.

One wildcard inbox (``<inbox_prefix>.<random>.*``) serves every request of
a connection; each request gets a token, the last token of its reply
subject, and a :class:`~jsclient.core.state.Waiter` (``request()``) or a
:class:`~jsclient.futures.ReplyFuture` (``request_async``) listed in the
router's ``waiters`` under it before the request is sent.  How a failed
request tells whether it can have reached the server: docs/guides/internals.rst, "How a request failed".

Threads: **callers** list and unlist their entries; the **reader** pops
an entry when its reply arrives (:mod:`jsclient.core.router`), or the
caller pops its own when it reads the reply itself (the fast path,
:mod:`jsclient.core.fastpath`); the **timer thread** (``jsclient-timer``)
sweeps expired futures (:meth:`Requests.sweep`).  Whoever pops an entry
settles it, so each settles once.

Locks (their order: :mod:`jsclient.core`): ``mux_lock`` guards creating
the inbox; ``deadline_lock`` guards ``sweeping`` and ``_unsent``.  A forked
child builds a new Requests (see :mod:`jsclient.core.session`), so
neither a flag nor a lock held by a parent's thread at the fork carries
over.
"""

from __future__ import annotations

import itertools
import math
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, overload

from ..errors import ConnectionClosedError, NoRespondersError, RequestFailure, RequestOutcome, TimeoutError
from ..futures import ReplyFuture, ReplyKind, settle_lock
from ..headers import HeadersInput
from ..message import Msg
from ..payload import as_bytes as _as_bytes
from ..protocol import REQUEST_FRAME, REQUEST_HEAD, REQUEST_LINE, PubEncoder, R, ReplyShape, remember
from ..scheduler import Scheduler
from .fastpath import await_reply
from .router import Router, count_settled, no_responders
from .state import Waiter

if TYPE_CHECKING:
    import queue

    from .iface import CoreAPI
    from .reader import Reader
    from .writer import Writer

#: An async request is sent at once, not left for a waiter or the flusher,
#: when the async requests still in the buffer are at least 1/SEND_SHARE of
#: all requests outstanding: while the server has plenty to answer they
#: gather into one write, and when it is about to run dry they leave now.
#: A lone request goes at once.
SEND_SHARE = 3
#: While async requests are out, their deadlines are swept at least this often
#: (seconds), and sooner when one is due sooner.
SWEEP_EVERY = 0.5


class Requests:
    """request() and request_async() of one connection (per process)."""

    def __init__(
        self,
        *,
        router: Router,
        writer: Writer,
        reader: Reader,
        encoder: PubEncoder,
        timers: Scheduler,
        events: queue.SimpleQueue[Callable[[], object] | None],
        inbox_prefix: str,
        subscribe_inbox: Callable[[str], int],
        core: CoreAPI,
    ) -> None:
        self._router = router
        self._waiters = router.waiters
        self._writer = writer
        self._link = writer.link
        self._reader = reader
        self._encoder = encoder
        self._timers = timers
        self._events = events
        self._inbox_prefix = inbox_prefix
        self._subscribe_inbox = subscribe_inbox  # subscribes, returns the sid
        self._core = core  # the general publish path (validates, encodes headers, back-pressure)
        self.mux_lock = threading.Lock()
        self.prefix = ""  # "<inbox>." once the mux exists
        self._tokens = itertools.count(1)
        #: request()'s waiters, used again: one answered or given up (and no longer listed) is
        #: as good as new, its lock held.  At most as many as request() callers at once.
        self._spare: list[Waiter] = []
        # subject -> b"PUB <subject> <reply inbox prefix>": validated subjects only.
        self.heads: dict[str, bytes] = {}
        self.deadline_lock = threading.Lock()
        self.sweeping = False  # a sweep is scheduled (guarded by deadline_lock)
        #: Links lost so far, and when the last was (monotonic), set by the session: a request whose
        #: timeout comes after a loss during its wait says so.
        self.losses = 0
        self.lost_at = -math.inf
        # Tokens of requests queued while the link was down, all at generation _unsent_gen (deadline_lock).
        self._unsent: set[str] = set()
        self._unsent_gen = -1
        #: request_async's futures: the reply as it came.
        self.plain_kind = ReplyKind(before_wait=writer.send_pending)

    def ensure_mux(self) -> str:
        prefix = self.prefix
        if prefix:
            return prefix
        with self.mux_lock:
            if not self.prefix:
                inbox = f"{self._inbox_prefix}.{secrets.token_hex(11)}"
                sid = self._subscribe_inbox(inbox + ".*")
                self._router.set_mux(sid, inbox + ".")
                self.prefix = inbox + "."
            return self.prefix

    # -- request() ---------------------------------------------------------------
    @overload
    def request(self, subject: str, payload: bytes, timeout: float, headers: HeadersInput | None) -> Msg: ...

    @overload
    def request(
        self, subject: str, payload: bytes, timeout: float, headers: HeadersInput | None, shape: ReplyShape[R]
    ) -> R: ...

    def request(
        self, subject: str, payload: bytes, timeout: float, headers: HeadersInput | None,
        shape: ReplyShape[Any] | None = None,
    ) -> Any:
        """Send and wait for the first reply (``timeout`` already checked).

        With ``shape``, the shape's value or its decoder's error: what the
        shape's reader made of a reply this caller read itself, else what its
        decoder makes of the message (see :mod:`jsclient.core.fastpath`).
        """
        if type(payload) is not bytes:
            payload = _as_bytes(payload)
        if not self.prefix:
            self.ensure_mux()
        number = next(self._tokens)
        token = str(number)
        losses = self.losses  # a loss while it waits makes its timeout say so
        spare = self._spare
        waiter = spare.pop() if spare else Waiter()
        waiters = self._waiters
        waiters[token] = waiter
        answered = False
        try:
            n = len(payload)
            head = self.heads.get(subject) if headers is None and type(subject) is str else None
            if head is None and headers is None:
                head = self._new_head(subject)
            if head is None or n > self._encoder.max_payload or not self._writer.send_frame(
                REQUEST_FRAME % (head, number, n, payload), n
            ):
                self._publish(subject, payload, token, headers, send_now=True)
            answered = await_reply(self._reader, waiter, timeout, token, number, shape)
        finally:
            # Unanswered and still listed: nobody else can reach it now, so it is as good as new.
            if not answered and waiters.pop(token, None) is waiter:
                spare.append(waiter)
        if not answered:
            raise self.timed_out(subject, timeout, lost=self.losses != losses)
        # Answered: whoever took it from the table filled it once and holds it no more.
        error, msg = waiter.error, waiter.msg
        waiter.error = waiter.msg = None
        spare.append(waiter)
        if error is not None:
            raise error
        if msg.__class__ is not Msg:
            return msg  # what the shape's reader made of it
        if no_responders(msg):
            raise NoRespondersError(f"no responders for request to {subject!r}")
        if shape is not None:
            return shape.decode(msg)
        return msg

    # -- request_async() -----------------------------------------------------------
    def request_async(
        self, subject: str, payload: bytes, timeout: float, headers: HeadersInput | None, kind: ReplyKind
    ) -> Future[Any]:
        """A future for the reply (``timeout`` already checked); ``kind`` says how the reply settles."""
        if type(payload) is not bytes:
            payload = _as_bytes(payload)
        if not self.prefix:
            self.ensure_mux()
        number = next(self._tokens)
        token = str(number)
        fut: ReplyFuture[Any] = ReplyFuture(self._events, subject, kind, timeout)
        waiters = self._waiters
        waiters[token] = fut
        try:
            # Not sent here: the waiter or the flusher sends many async requests in one write.
            n = len(payload)
            head = self.heads.get(subject) if headers is None and type(subject) is str else None
            if head is None and headers is None:
                head = self._new_head(subject)
            writer = self._writer
            if head is None or n > self._encoder.max_payload or not writer.queue_message(
                REQUEST_LINE % (head, number, n), payload, n, defer=True
            ):
                # The same rule as below, counting this request: a lone one (a batch's commit) leaves from
                # this thread, and the flusher is not woken for it.
                lone = SEND_SHARE * (writer.unsent_requests + 1) >= len(waiters)
                self._publish(subject, payload, token, headers, send_now=lone)
        except BaseException:
            waiters.pop(token, None)
            raise
        self._reader.unpark()  # this reply is for no request() caller to read
        if SEND_SHARE * writer.unsent_requests >= len(waiters):
            writer.send_soon()  # the server is about to run out of requests to answer
        if not self.sweeping:  # checked after the future is listed: see sweep
            self._start_sweeping(timeout)
        return fut

    def _new_head(self, subject: Any) -> bytes | None:
        """Check a subject new to plain requests and cache the start of its PUB line (None: not a str).

        From then on a request to it is one format and one append.
        """
        if type(subject) is not str:
            return None  # the general path names the problem
        self._encoder.check_once(subject)
        return remember(self.heads, subject, REQUEST_HEAD % (subject.encode(), self.prefix.encode()))

    def _publish(
        self, subject: str, payload: bytes, token: str, headers: HeadersInput | None, *, send_now: bool
    ) -> None:
        """The general path for a request's message: headers, a payload too big, a connection not open.

        Every request queued while the link is down comes this way (the fast
        paths refuse while reconnecting), so this is where one is noted as
        not sent yet: down before and after the append, at the same
        generation, means it went into the buffer that only a new link sends.
        """
        link = self._link
        down_at = link.gen if link.transport is None else -1
        self._core.publish_message(subject, payload, reply=self.prefix + token, headers=headers, send_now=send_now)
        if down_at >= 0 and link.transport is None and link.gen == down_at:
            with self.deadline_lock:
                if self._unsent_gen != down_at:
                    self._unsent.clear()  # a link came and went since: those all left with its buffer
                    self._unsent_gen = down_at
                self._unsent.add(token)

    def timed_out(self, subject: str, timeout: float, *, lost: bool) -> TimeoutError:
        """The error of a request that got no reply within ``timeout``; ``lost``: the link broke meanwhile."""
        if lost:
            return TimeoutError(
                f"request to {subject!r}: no response within {timeout} s (the connection was lost meanwhile)",
                failure=RequestFailure.CONNECTION_LOST,
            )
        return TimeoutError(f"request to {subject!r}: no response within {timeout} s")

    def fail_waiting(self, reason: RequestFailure, text: str) -> None:
        """Closing (the state is CLOSED, so the generation is final): end every request still waiting.

        Each gets its own ConnectionClosedError: NOT_DELIVERED if it never
        left the buffer of a link that never came back, else UNKNOWN.
        """
        gen = self._link.gen
        with self.deadline_lock:
            unsent = self._unsent if self._unsent_gen == gen else set()
            self._unsent = set()
            self._unsent_gen = -1
        waiters = self._waiters
        pending: list[tuple[Waiter | ReplyFuture[Any], ConnectionClosedError]] = []
        for token in list(waiters):
            entry = waiters.pop(token, None)
            if entry is None:
                continue  # answered or given up just now
            outcome = RequestOutcome.NOT_DELIVERED if token in unsent else RequestOutcome.UNKNOWN
            pending.append((entry, ConnectionClosedError(text, outcome=outcome, failure=reason)))
        failed: list[tuple[ReplyFuture[Any], BaseException]] = []
        for entry, error in pending:
            if isinstance(entry, Waiter):
                entry.fill(error=error)
            else:
                failed.append((entry, error))
        fail_all(failed)

    # -- deadlines -------------------------------------------------------------------
    def _start_sweeping(self, timeout: float) -> None:
        with self.deadline_lock:
            if not self.sweeping:
                self.sweeping = True
                self._timers.call_later(min(timeout, SWEEP_EVERY), self.sweep)

    def sweep(self) -> None:
        """Timer thread: fail the async requests whose deadline passed; come back while any are out.

        It looks at every request in flight (in a copy: the reader pops
        replies meanwhile), at most every SWEEP_EVERY unless one is due
        sooner, so a request costs the sweeper nothing once answered.
        """
        now = time.monotonic()
        waiting = self._waiters
        expired: list[tuple[ReplyFuture[Any], BaseException]] = []
        next_due: float | None = None
        for token, pending in waiting.copy().items():  # copy() runs no Python code, so no thread cuts in
            if not isinstance(pending, ReplyFuture):
                continue  # a request() caller keeps its own time
            due = pending.due
            if due > now:
                if next_due is None or due < next_due:
                    next_due = due
            elif waiting.pop(token, None) is pending:  # else its reply came in just now
                lost = self.lost_at >= due - pending.timeout  # lost since it was made
                expired.append((pending, self.timed_out(pending.subject, pending.timeout, lost=lost)))
        if expired:
            fail_all(expired)
        with self.deadline_lock:
            if next_due is None:
                # Stop, then look again: a request lists its future before it checks
                # sweeping, so it either is seen here or sees False and starts a sweep.
                self.sweeping = False
                if not any(isinstance(pending, ReplyFuture) for pending in waiting.copy().values()):
                    return
                self.sweeping = True
        delay = 0.02 if next_due is None else max(0.02, min(next_due - time.monotonic(), SWEEP_EVERY))
        self._timers.call_later(delay, self.sweep)


def fail_pending(pending: list[Waiter | ReplyFuture[Any]], error: Exception) -> None:
    """Closing: every waiter and future still listed gets ``error`` (those :meth:`Requests.fail_waiting` missed)."""
    unanswered: list[tuple[ReplyFuture[Any], BaseException]] = []
    for entry in pending:
        if isinstance(entry, Waiter):
            entry.fill(error=error)  # type: ignore[arg-type]
        else:
            unanswered.append((entry, error))
    fail_all(unanswered)


def fail_all(failed: list[tuple[ReplyFuture[Any], BaseException]]) -> None:
    with settle_lock():
        for fut, error in failed:
            fut.settle_locked(None, error)
    count_settled([fut.kind for fut, _ in failed])
