"""After ``os.fork()``: every live connection in the child swaps in a fresh session.

The at-fork hook runs in the child while it is the only thread, before any
user code.  Each live connection then disowns its session (closes its copy of
the socket's descriptor, never shutting the parent's link down, and touches
none of its locks, which a parent's thread may have held at the fork) and
installs a new one that refuses work (ForkedConnectionError) or reconnects
on first use with ``reconnect_after_fork=True``.  Nothing is reset by hand:
locks, flags (a sweep the parent's timer was running), buffers and waiters
are simply not carried over.
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


def _after_fork_in_child() -> None:
    for obj in list(_LIVE):
        obj._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
