"""After ``os.fork()``: every live connection in the child swaps in a fresh session.

The at-fork hook runs in the child while it is the only thread, before any
user code.  Each live connection then disowns its session (closes its copy of
the socket's descriptor, never shutting the parent's link down, and touches
none of its locks, which a parent's thread may have held at the fork) and
installs a new one that refuses work (ForkedConnectionError) or reconnects
on first use with ``reconnect_after_fork=True``.  Nothing is reset by hand:
locks, flags (a sweep the parent's timer was running), buffers and waiters
are simply not carried over.

The set of live objects is also what observers list (:func:`tracked`: the
OpenTelemetry metrics read every live connection's counters from it), filled
once per connection, never per message.
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol


class Forkable(Protocol):
    def _after_fork_in_child(self) -> None: ...


_LIVE: weakref.WeakSet[Forkable] = weakref.WeakSet()


def track(obj: Forkable) -> None:
    _LIVE.add(obj)


def untrack(obj: Forkable) -> None:
    _LIVE.discard(obj)


def tracked() -> list[Forkable]:
    """What the hook renews, as a new list: every connection from connect to close, and every JetStream
    publisher.  Any thread: the set changes only when one of those is made, closed or collected, and a
    copy that such a change interrupts is made again."""
    while True:
        try:
            return list(_LIVE)
        except RuntimeError:  # "set changed size during iteration": another thread connected meanwhile
            continue


def _after_fork_in_child() -> None:
    for obj in list(_LIVE):
        obj._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
