"""Scheduler: one thread runs every deadline of a connection (a heap, not a thread per timer).

Used for request and publish-ack deadlines, and by the JetStream heartbeat
watchdog.  Callbacks run on the ``jsclient-timer`` thread and must be
internal and quick: they decide and hand anything user-visible to the
connection's events thread.  ``_cond`` guards the heap; a callback runs with
no lock held.  Cancelling is lazy (the entry's callback is cleared and the
entry skipped when it comes due), so ``cancel()`` is O(1).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("jsclient")


class Timer:
    """A scheduled call; ``cancel()`` stops it if it has not run yet."""

    __slots__ = ("fn", "seq", "when")

    def __init__(self, when: float, seq: int, fn: Callable[[], None] | None) -> None:
        self.when = when
        self.seq = seq
        self.fn = fn

    def __lt__(self, other: Timer) -> bool:
        return (self.when, self.seq) < (other.when, other.seq)

    def cancel(self) -> None:
        self.fn = None


class Scheduler:
    """Runs callbacks at deadlines on one lazily started daemon thread."""

    def __init__(self, name: str = "jsclient-timer") -> None:
        self._name = name
        self._heap: list[Timer] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._closed = False

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer:
        timer = Timer(time.monotonic() + delay, next(self._seq), fn)
        lock = self._lock  # the condition's own lock: cheaper than ``with self._cond``
        lock.acquire()
        try:
            if self._closed:
                timer.fn = None
                return timer
            heapq.heappush(self._heap, timer)
            if self._heap[0] is timer:
                self._cond.notify()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        finally:
            lock.release()
        return timer

    def __len__(self) -> int:
        return len(self._heap)

    def _run(self) -> None:
        heap = self._heap
        cond = self._cond
        while True:
            with cond:
                while True:
                    if self._closed:
                        return
                    if not heap:
                        cond.wait()
                        continue
                    head = heap[0]
                    if head.fn is None:
                        heapq.heappop(heap)
                        continue
                    delay = head.when - time.monotonic()
                    if delay <= 0:
                        heapq.heappop(heap)
                        fn = head.fn
                        head.fn = None
                        break
                    cond.wait(delay)
            try:
                fn()
            except Exception:
                log.exception("jsclient: error in a timer callback")
            # Not kept while waiting for the next deadline: a bound method here would keep its connection alive.
            del fn, head

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(2.0)
