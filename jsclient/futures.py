"""The futures ``request_async`` and ``publish_async`` return.

A :class:`ReplyFuture` is a ``concurrent.futures.Future`` with three changes:

* Its done-callbacks are user code, so they are posted to the connection's
  events thread instead of running on whichever thread resolves the future
  (the reader, the timer, or a thread closing the connection).
* Its condition is a :class:`_OneWaitCondition`: one RLock instead of a
  ``threading.Condition`` (an RLock, a dict, a deque and five bound
  methods).  An async publish keeps its future alive until the ack returns;
  with thousands in flight the garbage collector walks them over and over,
  and with a stock Future those walks took half the CPU of ``publish_async``.
* Settling a future nobody waits on yet is two stores under its lock, and
  reading a settled one takes no lock: Future's general path (waiters,
  notify, callbacks) runs only when there is someone to tell.

Future's own methods (and ``concurrent.futures.wait``/``as_completed``) use
the condition only through ``with``, ``acquire``, ``release``,
``wait(timeout)`` and ``notify_all()``; those are what it provides.  The
tests run ``result``, ``exception``, ``cancel``, ``wait``, ``as_completed``
and done-callbacks against it.
"""

from __future__ import annotations

import _thread
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class _OneWaitCondition(_thread.RLock):  # type: ignore[misc]  # typeshed calls it final; CPython allows it
    """A condition variable that is its own (reentrant) lock.

    Entering, acquiring and releasing are the C lock's own methods; the waiter
    list exists only once someone waits.  Reentrant because Future locks
    again inside itself (the InvalidStateError text calls ``repr``).
    """

    _waiters: list[threading.Lock] | None = None

    def wait(self, timeout: float | None = None) -> bool:
        """Called holding the lock; returns holding it, True if notified in time."""
        waiter = threading.Lock()
        waiter.acquire()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        self.release()
        woke = False
        try:
            if timeout is None:
                woke = waiter.acquire()
            elif timeout > 0:
                woke = waiter.acquire(True, timeout)
            else:
                woke = waiter.acquire(False)
        finally:
            self.acquire()
            if not woke and waiter in self._waiters:
                self._waiters.remove(waiter)
        return woke

    def notify_all(self) -> None:
        """Called holding the lock."""
        waiters = self._waiters
        if waiters:
            for waiter in waiters:
                waiter.release()
            waiters.clear()


def _states() -> tuple[str, str]:
    """The states a Future starts and ends in (private constants of concurrent.futures)."""
    fut: Future[None] = Future()
    pending = fut._state
    fut.set_result(None)
    return pending, fut._state


_PENDING, _FINISHED = _states()


class ReplyFuture(Future[T]):
    """A future resolved by a connection thread; done-callbacks run on its events thread.

    It also carries what settling it needs: the request subject (for error
    texts), an optional decoder turning the reply (and that subject) into the result, and an
    optional hook told when it settles (both library code); and a hook
    ``result()`` calls before it blocks (the connection sends what it has
    buffered, so no thread has to be woken to do it).
    """

    __slots__ = ("_before_wait", "_events", "decode", "on_settle", "subject")

    def __init__(
        self,
        events: queue.SimpleQueue[Callable[[], object] | None],
        subject: str,
        decode: Callable[[Any, str], T] | None = None,
        on_settle: Callable[[], None] | None = None,
        before_wait: Callable[[], None] | None = None,
    ) -> None:
        # Future.__init__'s fields, without the threading.Condition it would build only to be replaced.
        self._condition = _OneWaitCondition()  # type: ignore[assignment]
        self._state = _PENDING
        self._result = None
        self._exception = None
        self._waiters = []
        self._done_callbacks: list[Callable[[Future[T]], object]] = []
        self._events = events
        self.subject = subject
        self.decode = decode
        self.on_settle = on_settle
        self._before_wait = before_wait

    # The three below skip Future's general path in the common case: a reply
    # settling a future nobody waits on yet, and reading a settled one.
    def _settle_unobserved(self, field: str, value: object) -> bool:
        """Pending, with no waiter or callback: settling is two stores.  False: take the general path."""
        cond: _OneWaitCondition = self._condition  # type: ignore[assignment]
        with cond:
            if self._state is not _PENDING or self._waiters or cond._waiters or self._done_callbacks:
                return False
            setattr(self, field, value)
            self._state = _FINISHED
            return True

    def set_result(self, result: T) -> None:
        if not self._settle_unobserved("_result", result):
            super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        if not self._settle_unobserved("_exception", exception):
            super().set_exception(exception)

    def result(self, timeout: float | None = None) -> T:
        if self._state is _FINISHED and self._exception is None:  # final: no lock needed to read it
            return self._result  # type: ignore[return-value]
        if self._state is _PENDING and self._before_wait is not None:
            self._before_wait()  # e.g. send the request now rather than wake a thread for it
        return super().result(timeout)

    def add_done_callback(self, fn: Callable[[Future[T]], object]) -> None:
        post = self._events.put
        super().add_done_callback(lambda fut: post(functools.partial(fn, fut)))


__all__ = ["ReplyFuture"]
