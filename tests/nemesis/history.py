"""Histories of what the workloads asked and got, and the checks that need no model.

Every blocking call a workload (or the nemesis itself) makes is one
:class:`Call`, with its monotonic start and end (``time.monotonic`` is
CLOCK_MONOTONIC, shared by every process of the machine, so a child's calls
sort with the parent's), the time its own timeout allows (``budget``), and
how it ended (``status``):

* ``ok``: it returned (``result``: the sequence or revision);
* ``fail``: a definite refusal the model knows (a compare-and-set on a stale revision);
* ``conflict``: a compare-and-set refused because another one on the key was still in process on the
  stream leader (nats-server's bare "wrong last sequence", with no revision): not applied, but no claim
  about the key either, since that other one may never commit (a proposal lost with a partitioned leader);
* ``unknown``: the error's ``outcome`` is UNKNOWN: no answer (TimeoutError, a lost connection), or a
  refusal that may not be the last word (a compare-and-set refused by a server in a cluster, where a
  deposed leader can refuse what the new one stores: docs/guarantees.rst);
* ``rejected``: definitely not applied (``outcome`` NOT_DELIVERED, or the server answered with an API error);
* ``unclassified``: a jsclient error that says nothing of its outcome (a contract breach);
* ``crash``: an exception that is not a jsclient error at all.
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import json
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import jsclient
from jsclient import KeyWrongRevisionError, RequestOutcome

#: Slack on every call's budget before it counts as late.  Generous on purpose: the machine has two cores
#: shared with other test runs, and each run here has some 30 threads (links, servers' clients,
#: workloads) under one GIL, so a reply that arrived in time can still wait a second to be handed over.
SLACK = 2.0


@dataclasses.dataclass(slots=True)  # a soak records hundreds of thousands
class Call:
    """One call as its caller saw it."""

    process: str
    op: str
    key: str
    start: float
    end: float | None
    budget: float
    status: str = ""
    value: str = ""
    expect: int | None = None
    result: int | None = None
    error: str = ""

    def took(self) -> float | None:
        return None if self.end is None else self.end - self.start

    def line(self) -> str:
        took = self.took()
        spent = "never returned" if took is None else f"{took:.3f}s"
        detail = f" {self.error}" if self.error else ""
        return f"{self.process} {self.op}({self.key}) {spent} of {self.budget:.2f}s: {self.status}{detail}"


#: The server's code for a compare-and-set that found the key at another revision (JSStreamWrongLastSequenceErrF,
#: "wrong last sequence: 4022"). 10164 (JSStreamWrongLastSequenceConstantErr) is the refusal while another
#: update of the key is in flight: not applied, but it says nothing of the key's revision.
STALE_REVISION = 10071


def classify(exc: BaseException) -> str:
    """The status of a call that raised ``exc`` (see the module docstring)."""
    if not isinstance(exc, jsclient.Error):
        return "crash"
    if exc.outcome is RequestOutcome.UNKNOWN:
        return "unknown"
    if isinstance(exc, KeyWrongRevisionError):
        return "fail" if exc.err_code == STALE_REVISION else "conflict"
    if exc.outcome is RequestOutcome.NOT_DELIVERED or exc.outcome is RequestOutcome.REFUSED:
        return "rejected"
    return "unclassified"


def describe(exc: BaseException) -> str:
    outcome = getattr(exc, "outcome", None)
    tail = f" [{outcome.value}]" if isinstance(outcome, RequestOutcome) else ""
    return f"{type(exc).__name__}: {exc}{tail}"[:300]


class History:
    """Calls from any number of threads, in the order they ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[Call] = []

    def add(self, call: Call) -> Call:
        with self._lock:
            self.calls.append(call)
        return call

    def extend(self, calls: Iterable[Call]) -> None:
        with self._lock:
            self.calls.extend(calls)

    def select(self, *ops: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.op in ops]

    def dump(self, path: Path) -> None:
        """JSON lines, one call a line (how a child process hands its history over)."""
        with self._lock:
            text = "".join(json.dumps(dataclasses.asdict(c)) + "\n" for c in self.calls)
        path.write_text(text)

    @staticmethod
    def load(path: Path) -> list[Call]:
        return [Call(**json.loads(line)) for line in path.read_text().splitlines() if line]

    def counts(self) -> dict[str, dict[str, int]]:
        """op -> status -> how many, for the report."""
        table: dict[str, dict[str, int]] = {}
        with self._lock:
            for c in self.calls:
                row = table.setdefault(c.op, {})
                row[c.status] = row.get(c.status, 0) + 1
        return table


def late(calls: Iterable[Call], slack: float = SLACK) -> list[Call]:
    """Calls that never returned, or returned later than their budget plus ``slack``."""
    return [c for c in calls if c.end is None or c.end - c.start > c.budget + slack]


def unexplained(calls: Iterable[Call]) -> list[Call]:
    """Calls whose error broke the error contract (no outcome) or was no jsclient error at all."""
    return [c for c in calls if c.status in ("crash", "unclassified")]


@dataclasses.dataclass(frozen=True)
class Resources:
    """What a test must give back: its threads and file descriptors."""

    threads: tuple[str, ...]
    fds: int

    @staticmethod
    def now() -> Resources:
        return Resources(tuple(sorted(t.name for t in threading.enumerate())), len(os.listdir("/proc/self/fd")))


def leftovers(baseline: Resources, *, extra_fds: int = 2, timeout: float = 15.0) -> str | None:
    """Wait (bounded) for threads and fds to come back to ``baseline``; what is still over it, or None.

    No extra thread is allowed; ``extra_fds`` allows for what the interpreter
    may keep open by itself meanwhile (a lazily opened /dev/urandom, say).
    """
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()
        now = Resources.now()
        extra = sorted((collections.Counter(now.threads) - collections.Counter(baseline.threads)).elements())
        if not extra and now.fds <= baseline.fds + extra_fds:
            return None
        if time.monotonic() > deadline:
            return f"threads over the baseline: {extra}; fds {now.fds} (baseline {baseline.fds} + {extra_fds})"
        time.sleep(0.2)
