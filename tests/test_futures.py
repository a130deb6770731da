"""ReplyFuture must behave as a concurrent.futures.Future in every standard use.

Unit tests (no server): it swaps the Future's condition for a lighter one, so
everything the standard library does with a Future is run against it here.
"""

from __future__ import annotations

import concurrent.futures
import gc
import inspect
import queue
import threading
import time
from concurrent.futures import CancelledError, Future, InvalidStateError
from typing import Any

import pytest

from jsclient.futures import ReplyFuture


def events_thread() -> tuple[queue.SimpleQueue[Any], threading.Thread, list[str]]:
    """A stand-in for the connection's events thread, recording where callbacks ran."""
    events: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def run() -> None:
        while (fn := events.get()) is not None:
            fn()

    thread = threading.Thread(target=run, name="events-under-test", daemon=True)
    thread.start()
    return events, thread, []


def test_has_every_field_a_future_has() -> None:
    # ReplyFuture sets Future's fields itself; a Python that adds one must fail here.
    fut = ReplyFuture(queue.SimpleQueue(), "s")
    missing = [name for name in vars(Future()) if not hasattr(fut, name)]
    assert missing == []


def test_every_future_method_that_waits_or_notifies_is_replaced() -> None:
    # ReplyFuture's lock has no wait()/notify_all(): a Future method calling them would fail at run time.
    uses_condition = {
        name
        for name, fn in vars(Future).items()
        if inspect.isfunction(fn) and {"wait", "notify_all", "notify"} & set(fn.__code__.co_names)
    }
    assert uses_condition  # the check itself must see something: result() waits
    assert {name for name in uses_condition if vars(ReplyFuture).get(name) is None} == set()


def own_tracked(fut: Future[Any], other: Future[Any]) -> list[str]:
    """The objects the collector tracks that ``fut`` refers to and ``other`` (a future like it) does not."""
    shared = {id(o) for o in gc.get_referents(other)}
    return [type(o).__name__ for o in gc.get_referents(fut) if gc.is_tracked(o) and id(o) not in shared]


def test_an_idle_future_is_one_object_for_the_garbage_collector() -> None:
    # No lock or lists of its own (a stock Future makes a Condition and two lists): thousands stay in flight
    # through collections. Asked of the future itself, not of a process-wide count that other threads change.
    events: queue.SimpleQueue[Any] = queue.SimpleQueue()
    assert own_tracked(ReplyFuture(events, "s"), ReplyFuture(events, "t")) == []
    assert sorted(own_tracked(Future(), Future())) == ["Condition", "list", "list"]  # the probe sees them


def test_cancel_tells_wait_at_once() -> None:
    fut: ReplyFuture[int] = ReplyFuture(queue.SimpleQueue(), "s")
    threading.Timer(0.05, fut.cancel).start()
    done, not_done = concurrent.futures.wait([fut], timeout=10)
    assert done == {fut} and not_done == set() and fut.cancelled()


def test_result_set_by_another_thread_wakes_the_waiter() -> None:
    fut: ReplyFuture[int] = ReplyFuture(queue.SimpleQueue(), "s")
    threading.Timer(0.05, fut.set_result, (7,)).start()
    assert fut.result(timeout=5) == 7
    assert fut.done() and not fut.cancelled() and fut.exception() is None


def test_result_times_out_then_still_resolves() -> None:
    fut: ReplyFuture[int] = ReplyFuture(queue.SimpleQueue(), "s")
    with pytest.raises(concurrent.futures.TimeoutError):
        fut.result(timeout=0.05)
    with pytest.raises(concurrent.futures.TimeoutError):
        fut.result(timeout=0)
    fut.set_result(1)
    assert fut.result(timeout=0) == 1


def test_many_waiters_all_wake() -> None:
    fut: ReplyFuture[str] = ReplyFuture(queue.SimpleQueue(), "s")
    got: list[str] = []
    waiters = [threading.Thread(target=lambda: got.append(fut.result(timeout=5))) for _ in range(8)]
    for t in waiters:
        t.start()
    time.sleep(0.05)
    fut.set_result("x")
    for t in waiters:
        t.join(5)
    assert got == ["x"] * 8


def test_exception_and_double_set() -> None:
    fut: ReplyFuture[int] = ReplyFuture(queue.SimpleQueue(), "s")
    fut.set_exception(ValueError("bad"))
    with pytest.raises(ValueError, match="bad"):
        fut.result(timeout=1)
    assert isinstance(fut.exception(timeout=1), ValueError)
    with pytest.raises(InvalidStateError):
        fut.set_result(1)


def test_cancel_wakes_a_waiter_with_cancelled_error() -> None:
    fut: ReplyFuture[int] = ReplyFuture(queue.SimpleQueue(), "s")
    threading.Timer(0.05, fut.cancel).start()
    with pytest.raises(CancelledError):
        fut.result(timeout=5)
    with pytest.raises(InvalidStateError):
        fut.set_result(1)


def test_wait_and_as_completed_across_many_futures() -> None:
    futs: list[ReplyFuture[int]] = [ReplyFuture(queue.SimpleQueue(), "s") for _ in range(20)]
    for i, fut in enumerate(futs[:10]):
        fut.set_result(i)
    done, not_done = concurrent.futures.wait(futs, timeout=0.05)
    assert done == set(futs[:10]) and not_done == set(futs[10:])
    threading.Timer(0.05, lambda: [f.set_result(0) for f in futs[10:]]).start()
    assert len(list(concurrent.futures.as_completed(futs, timeout=5))) == 20
    first: list[ReplyFuture[int]] = [ReplyFuture(queue.SimpleQueue(), "s") for _ in range(3)]
    threading.Timer(0.05, first[1].set_exception, (KeyError("k"),)).start()
    done, _ = concurrent.futures.wait(first, timeout=5, return_when=concurrent.futures.FIRST_EXCEPTION)
    assert done == {first[1]}


def test_done_callbacks_run_on_the_events_thread_in_order() -> None:
    events, thread, where = events_thread()
    fut: ReplyFuture[int] = ReplyFuture(events, "s")
    for i in range(3):
        fut.add_done_callback(lambda f, i=i: where.append(f"{threading.current_thread().name}:{i}:{f.result()}"))
    fut.set_result(5)  # on this (the "reader") thread
    late = threading.Event()
    fut.add_done_callback(lambda f: (where.append(threading.current_thread().name), late.set()))
    assert late.wait(5)
    events.put(None)
    thread.join(5)
    assert where == ["events-under-test:0:5", "events-under-test:1:5", "events-under-test:2:5", "events-under-test"]
