"""Is a history of one compare-and-set register linearizable?  Wing & Gong's search, with Lowe's memo.

The register holds a revision (an int; 0 for "no value").  Operations:

* ``read``, ok: saw ``value``.
* ``write``: leaves ``value``.
* ``cas``, ok: the register held ``expect``, and now holds ``value``.
* ``cas``, fail: the register did not hold ``expect`` (nothing changed).

Each operation has its real-time interval ``[start, end]``.  An ``unknown``
operation never answered: it may have taken effect at any moment after its
start, or never, so it is optional and its interval open-ended.  An ``ok``
operation with ``end=None`` took effect for sure, at an unknown moment after
its start (an update that timed out but is found in the store afterwards).

The search (Wing & Gong 1993) builds a linearization one operation at a
time: the next may be any not yet placed whose start is no later than the
earliest end among the required operations not yet placed; the model says
whether it is legal in the current state.  Lowe's memo (2017) skips a
(placed set, state) pair already explored, so the search is polynomial for
histories of few concurrent callers.  Iterative, so long histories do not
hit the recursion limit.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

INF = math.inf


@dataclasses.dataclass(frozen=True)
class Op:
    """One operation on the register (see the module docstring)."""

    process: str
    kind: str
    start: float
    end: float | None
    status: str = "ok"
    expect: int | None = None
    value: int | None = None
    label: str = ""

    def __str__(self) -> str:
        end = "?" if self.end is None else f"{self.end:.3f}"
        what = {
            "read": f"read -> {self.value}",
            "write": f"write {self.value}",
            "cas": f"cas {self.expect} -> {self.value}",
        }[self.kind]
        label = f" ({self.label})" if self.label else ""
        return f"{self.process}: {what} {self.status} [{self.start:.3f}, {end}]{label}"


@dataclasses.dataclass
class Verdict:
    """``ok`` with one linearization in ``order``; or not, with the longest linearizable prefix found and the
    operations none of which could come next (``stuck``), in ``state``."""

    ok: bool
    order: list[Op]
    stuck: list[Op]
    state: int

    def explain(self, tail: int = 5) -> str:
        if self.ok:
            return f"linearizable ({len(self.order)} operations placed)"
        lines = [f"not linearizable: after {len(self.order)} operations placed, the register holds {self.state}"]
        lines += [f"  ... {op}" for op in self.order[-tail:]]
        lines += ["  and none of these can come next:"] + [f"    {op}" for op in self.stuck]
        return "\n".join(lines)


def step(op: Op, state: int) -> int | None:
    """The register after ``op`` applied in ``state``, or None where ``op`` cannot happen there."""
    if op.kind == "read":
        return state if op.value == state else None
    if op.kind == "write":
        return op.value
    if op.kind == "cas":
        if op.status == "fail":
            return state if state != op.expect else None
        return op.value if state == op.expect else None
    raise ValueError(f"unknown operation kind {op.kind!r}")


def _relevant(op: Op) -> bool:
    """Operations that constrain anything: an unanswered read says nothing, a failed write did nothing."""
    if op.status == "unknown":
        return op.kind != "read"
    return not (op.status == "fail" and op.kind != "cas")


def check(history: Sequence[Op], initial: int = 0) -> Verdict:
    """Whether ``history`` (one register's operations, any order) is linearizable from ``initial``."""
    ops = sorted((op for op in history if _relevant(op)), key=lambda op: op.start)
    n = len(ops)
    ends = [INF if op.status == "unknown" or op.end is None else op.end for op in ops]
    by_end = sorted((i for i in range(n) if ops[i].status != "unknown"), key=lambda i: ends[i])
    Key = tuple[int, int]
    parent: dict[Key, tuple[Key, int] | None] = {(0, initial): None}
    # Nodes: (placed bitmask, state, first unplaced index into by_end, first unplaced index into ops, count).
    stack: list[tuple[int, int, int, int, int]] = [(0, initial, 0, 0, 0)]
    best: tuple[int, Key, list[Op]] = (-1, (0, initial), [])
    while stack:
        done, state, pe, ps, count = stack.pop()
        while pe < len(by_end) and done >> by_end[pe] & 1:
            pe += 1
        if pe == len(by_end):
            return Verdict(True, _order(parent, (done, state), ops), [], state)
        horizon = ends[by_end[pe]]
        while ps < n and done >> ps & 1:
            ps += 1
        candidates = []
        i = ps
        while i < n and ops[i].start <= horizon:
            if not done >> i & 1:
                candidates.append(i)
            i += 1
        pushed = False
        for i in reversed(candidates):  # the earliest-starting is explored first
            after = step(ops[i], state)
            if after is None:
                continue
            key = (done | 1 << i, after)
            if key in parent:
                continue
            parent[key] = ((done, state), i)
            stack.append((key[0], after, pe, ps, count + 1))
            pushed = True
        if not pushed and count > best[0]:
            best = (count, (done, state), [ops[i] for i in candidates])
    _, key, stuck = best
    return Verdict(False, _order(parent, key, ops), stuck, key[1])


def _order(parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None], key: tuple[int, int],
           ops: list[Op]) -> list[Op]:
    order: list[Op] = []
    link = parent[key]
    while link is not None:
        key, i = link
        order.append(ops[i])
        link = parent[key]
    order.reverse()
    return order
