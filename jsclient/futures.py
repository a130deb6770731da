"""The futures ``request_async`` and ``publish_async`` return.

A :class:`ReplyFuture` is a ``concurrent.futures.Future`` built to be cheap
while thousands of them are in flight:

* The garbage collector tracks one object of it, not eleven.  An async
  publish keeps its future alive until the ack returns, long enough for the
  collector's generations to walk it again and again, and with stock
  Futures those walks took half of ``publish_async``'s CPU.  So there is no
  lock per future: one module-wide lock (:func:`settle_lock`) guards every
  ReplyFuture's state, and the lists of sleepers, ``wait()`` waiters and
  done-callbacks exist only once somebody needs them.  The lock is held
  only for a few stores (never for I/O or user code), so sharing it costs
  nothing measurable, and a reader settling many replies takes it once.
* Its done-callbacks are user code, so they are posted to the connection's
  events thread instead of running on whichever thread resolves the future
  (the reader, the timer, or a thread closing the connection).
* Reading a settled future takes no lock; settling one nobody waits on is
  two stores under the lock.
* ``cancel()`` also tells ``concurrent.futures.wait``/``as_completed`` at once
  (a stock Future waits for an executor to do that, and ours have none).

Because the lock has no ``wait``/``notify_all``, every Future method that
uses them is replaced here; the tests check that against the running
Python's Future and run ``result``, ``exception``, ``cancel``, ``wait``,
``as_completed`` and done-callbacks against ReplyFuture.

Threads: any thread may call any method; :func:`settle_lock` guards the
state, the result and the three lists of every ReplyFuture.  Nothing that
blocks happens under it: stores, releasing sleepers, telling the standard
``wait()`` waiters (their own short locks), posting callbacks to the events
queue.
"""

from __future__ import annotations

import _thread
import functools
import math
import os
import queue
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, TypeVar

T = TypeVar("T")

_monotonic = time.monotonic


def _states() -> tuple[str, str, str, str, str]:
    """A Future's states (private constants of concurrent.futures), read off a stock Future."""

    def state(fut: Future[None]) -> str:
        return fut._state  # noqa: SLF001 - concurrent.futures keeps its states private: read once, at import

    fut: Future[None] = Future()
    pending = state(fut)
    fut.set_running_or_notify_cancel()
    running = state(fut)
    fut.set_result(None)
    finished = state(fut)
    fut = Future()
    fut.cancel()
    cancelled = state(fut)
    fut.set_running_or_notify_cancel()
    return pending, running, finished, cancelled, state(fut)


_PENDING, _RUNNING, _FINISHED, _CANCELLED, _CANCELLED_AND_NOTIFIED = _states()
_OPEN = (_PENDING, _RUNNING)


class ReplyKind:
    """What the futures of one kind of request share: how the reply becomes a result, and hooks.

    ``decode(reply, subject)`` turns the reply into the result (or raises the
    future's error); ``read(payload)``, given beside it, comes first and
    takes the common reply at once without a call in between (None leaves
    it to ``decode``, as a :class:`~jsclient.protocol.ReplyShape`'s pair
    does), and must not raise.
    ``on_settle(n)`` is told, once they have resolved, that ``n`` futures of
    this kind settled; ``before_wait()`` runs when ``result()`` is about to
    block (the connection sends what it buffered, so no thread has to be
    woken to do it).  All are library code.
    """

    __slots__ = ("before_wait", "decode", "on_settle", "read")

    def __init__(
        self,
        decode: Callable[[Any, str], Any] | None = None,
        on_settle: Callable[[int], None] | None = None,
        before_wait: Callable[[], None] | None = None,
        *,
        read: Callable[[bytes], Any] | None = None,
    ) -> None:
        self.decode = decode
        self.read = read
        self.on_settle = on_settle
        self.before_wait = before_wait


_PLAIN = ReplyKind()

_lock = _thread.RLock()


def settle_lock() -> _thread.RLock:
    """The lock of every ReplyFuture: a reader settling a run of replies holds it once for all of them."""
    return _lock


def _new_lock_after_fork() -> None:
    global _lock
    _lock = _thread.RLock()  # a thread of the parent may have held it; that thread is gone


os.register_at_fork(after_in_child=_new_lock_after_fork)


class ReplyFuture(Future[T]):
    """A future resolved by a connection thread; done-callbacks run on its events thread."""

    __slots__ = ("_events", "due", "kind", "subject", "timeout")

    # Class defaults until set: a new future stores only what differs between futures.
    _state = _PENDING
    _result = None
    _exception = None
    # Made on first use, so an idle future holds no lists.
    _sleepers: list[_thread.LockType] | None = None  # threads blocked in result()/exception()
    _waiter_list: list[Any] | None = None  # concurrent.futures.wait / as_completed waiters
    _callback_list: list[Callable[[Future[T]], object]] | None = None

    def __init__(
        self,
        events: queue.SimpleQueue[Callable[[], object] | None],
        subject: str,
        kind: ReplyKind = _PLAIN,
        timeout: float = math.inf,
    ) -> None:
        # Future.__init__'s fields are class defaults, and the shared lock stands in for its condition.
        self._events = events
        self.subject = subject
        self.kind = kind
        self.timeout = timeout
        self.due = _monotonic() + timeout  # when the connection's deadline sweeper fails it

    @property
    def _condition(self) -> _thread.RLock:  # type: ignore[override]
        return _lock

    # Future's list fields, made when first touched (always under _condition).
    @property
    def _waiters(self) -> list[Any]:
        if self._waiter_list is None:
            self._waiter_list = []
        return self._waiter_list

    @_waiters.setter
    def _waiters(self, waiters: list[Any]) -> None:
        self._waiter_list = waiters

    @property
    def _done_callbacks(self) -> list[Callable[[Future[T]], object]]:
        if self._callback_list is None:
            self._callback_list = []
        return self._callback_list

    # -- settling ------------------------------------------------------------
    def settle(self, result: T | None, error: BaseException | None) -> bool:
        """Finish with ``error``, or else ``result``, and wake whoever waits.

        Connection threads call this; False when the future was already done
        (cancelled by the user).
        """
        with _lock:
            return self.settle_locked(result, error)

    def settle_locked(self, result: T | None, error: BaseException | None) -> bool:
        """:meth:`settle` for a caller holding :func:`settle_lock`."""
        if self._state not in _OPEN:
            return False
        if error is None:
            self._result = result
        else:
            self._exception = error
        self._state = _FINISHED
        if self._sleepers is None and self._waiter_list is None and self._callback_list is None:
            return True  # the common case: nobody to tell
        self._wake("add_result" if error is None else "add_exception")
        return True

    def _wake(self, tell: str) -> None:
        """Under the lock, once done: wake the sleepers, tell the ``wait()`` waiters, post the callbacks."""
        if self._sleepers:
            for sleeper in self._sleepers:
                sleeper.release()
        if self._waiter_list:
            for waiter in self._waiter_list:
                getattr(waiter, tell)(self)
        if self._callback_list:
            for call in self._callback_list:
                call(self)  # only posts to the events thread

    def set_result(self, result: T) -> None:
        if not self.settle(result, None):
            raise InvalidStateError(f"{self._state}: {self!r}")

    def set_exception(self, exception: BaseException | None) -> None:
        if not self.settle(None, exception):
            raise InvalidStateError(f"{self._state}: {self!r}")

    def cancel(self) -> bool:
        with _lock:
            if self._state in (_RUNNING, _FINISHED):
                return False
            if self._state in (_CANCELLED, _CANCELLED_AND_NOTIFIED):
                return True
            self._state = _CANCELLED_AND_NOTIFIED  # no executor will do the notifying
            self._wake("add_cancelled")
        return True

    # -- reading -------------------------------------------------------------
    def done(self) -> bool:
        return self._state not in _OPEN

    def result(self, timeout: float | None = None) -> T:
        try:
            if self._state is not _FINISHED:
                self._wait_done(timeout)
            if self._exception is not None:
                raise self._exception
            return self._result  # type: ignore[return-value]
        finally:
            del self  # the raised exception's traceback must not hold the future that holds it

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state is not _FINISHED:
            self._wait_done(timeout)
        return self._exception

    def _wait_done(self, timeout: float | None) -> None:
        """Return once finished; CancelledError if cancelled, TimeoutError after ``timeout``."""
        if self._state is _PENDING and self.kind.before_wait is not None:
            self.kind.before_wait()
        deadline = None if timeout is None else time.monotonic() + timeout
        lock = _lock
        lock.acquire()
        try:
            while True:
                if self._state is _FINISHED:
                    return
                if self._state in (_CANCELLED, _CANCELLED_AND_NOTIFIED):
                    raise CancelledError()
                wait = -1.0 if deadline is None else deadline - time.monotonic()
                if deadline is not None and wait <= 0:
                    raise FutureTimeoutError()
                sleeper = _thread.allocate_lock()
                sleeper.acquire()
                if self._sleepers is None:
                    self._sleepers = []
                self._sleepers.append(sleeper)
                lock.release()
                try:
                    sleeper.acquire(True, wait)
                finally:
                    lock.acquire()
                    self._sleepers.remove(sleeper)
        finally:
            lock.release()

    def add_done_callback(self, fn: Callable[[Future[T]], object]) -> None:
        post = self._events.put

        def call(fut: Future[T]) -> None:
            post(functools.partial(fn, fut))

        with _lock:
            if self._state in _OPEN:
                self._done_callbacks.append(call)
                return
        call(self)


__all__ = ["ReplyFuture", "ReplyKind", "settle_lock"]
