"""The nemesis: a schedule of faults drawn from a seed, and the runner that applies them to a LinkedCluster.

Faults (``KINDS``), each on one member, "the leader" of a stream (looked up
when the step starts) or a member drawn by the seed:

* ``partition``: black-hole the member's routes both ways (half-open; clients still reach it);
* ``route-delay``: add latency to its routes; ``route-reset``: RST them (they reconnect);
* ``client-blackhole`` / ``client-delay`` / ``client-reset``: the same on the client link to it;
* ``pause``: SIGSTOP, then SIGCONT; ``kill``: kill -9, then start again on its store;
* ``stepdown``: ``$JS.API.STREAM.LEADER.STEPDOWN.<stream>`` through the JetStream API.

A schedule deals the kinds like a shuffled deck (every kind once before any
twice), so a short run of ``len(KINDS)`` steps has each once, whatever the
seed; holds, rests, latencies and targets are drawn too.  ``overlap`` is the
chance a step also carries a client fault on another member at the same time.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import time
from collections.abc import Callable
from typing import Any

import jsclient

from .cluster import LinkedCluster
from .history import Call, History, classify, describe
from .link import Link

KINDS = (
    "partition", "route-delay", "route-reset", "client-blackhole", "client-delay", "client-reset",
    "pause", "kill", "stepdown",
)
#: Seconds each kind lasts (low, high); a partition outlasts Raft's election timeout (4 to 9 s) most times.
HOLD = {
    "partition": (7.0, 12.0), "route-delay": (2.0, 5.0), "route-reset": (0.0, 0.0),
    "client-blackhole": (3.0, 5.0), "client-delay": (2.0, 4.0), "client-reset": (0.0, 0.0),
    "pause": (2.0, 6.0), "kill": (1.0, 3.0), "stepdown": (0.0, 0.0),
}
CLIENT_KINDS = ("client-blackhole", "client-delay", "client-reset")


@dataclasses.dataclass(frozen=True)
class Step:
    """One fault: on ``member``, or on the leader of ``stream`` when ``leader``."""

    kind: str
    leader: bool
    member: int
    stream: str
    hold: float
    rest: float
    latency: float = 0.0
    also: tuple[Step, ...] = ()

    def __str__(self) -> str:
        where = f"leader of {self.stream}" if self.leader else f"member {self.member}"
        extra = f" +{self.latency * 1000:.0f}ms" if self.kind.endswith("delay") else ""
        text = f"{self.kind}{extra} on {where}" if self.kind != "stepdown" else f"stepdown of {self.stream}"
        text += f" for {self.hold:.1f}s, rest {self.rest:.1f}s" if self.hold else f", rest {self.rest:.1f}s"
        return text + "".join(f" + {also}" for also in self.also)


def generate(seed: int, steps: int, *, streams: tuple[str, ...] = ("PUB", "KV"), members: int = 3,
             overlap: float = 0.0) -> list[Step]:
    """The schedule for ``seed``: the same steps every time for the same arguments."""
    rng = random.Random(seed)
    deck: list[str] = []
    schedule = []
    for _ in range(steps):
        if not deck:
            deck = list(KINDS)
            rng.shuffle(deck)
        kind = deck.pop()
        step = _draw(rng, kind, streams, members)
        if overlap and rng.random() < overlap:
            extra = dataclasses.replace(_draw(rng, rng.choice(CLIENT_KINDS), streams, members), leader=False,
                                        hold=step.hold, rest=0.0)
            step = dataclasses.replace(step, also=(extra,))
        schedule.append(step)
    return schedule


def _draw(rng: random.Random, kind: str, streams: tuple[str, ...], members: int) -> Step:
    low, high = HOLD[kind]
    return Step(
        kind=kind,
        leader=kind == "stepdown" or rng.random() < 0.5,
        member=rng.randrange(members),
        stream=rng.choice(streams),
        hold=round(rng.uniform(low, high), 1),
        rest=round(rng.uniform(1.0, 2.5), 1),
        latency=round(rng.uniform(0.05, 0.4), 2),
    )


def _info(js: jsclient.JetStream, stream: str) -> Any:
    return js.stream_info(stream)


def _nothing() -> None:
    """The undo of a fault that is over once done (a reset, a step-down)."""


def _healer(links: list[Link]) -> Callable[[], None]:
    def heal() -> None:
        for link in links:
            link.heal()

    return heal


class Nemesis:
    """Applies steps to a cluster, through admin connections of its own straight to each server.

    Every admin call is recorded in ``history`` (process "nemesis") like the
    workloads' calls, so its deadlines are checked too.  ``log`` says what
    was done and seen, for the report.
    """

    def __init__(self, cluster: LinkedCluster, streams: dict[str, str], history: History) -> None:
        self.cluster = cluster
        self.streams = streams  # the schedule's names -> the streams' names
        self.history = history
        self.log: list[str] = []
        self.leader_changes = 0
        self.faulted: set[int] = set()
        self.admins: list[jsclient.Connection] = []
        for i, srv in enumerate(cluster.servers):
            self.admins.append(jsclient.connect(
                srv.url, name=f"nemesis-admin-{i}", ignore_discovered_servers=True, max_reconnect_attempts=-1,
                reconnect_time_wait=0.2, ping_interval=1.0, max_outstanding_pings=2,
            ))
        self._started = time.monotonic()

    def close(self) -> None:
        for nc in self.admins:
            nc.close()

    def note(self, text: str) -> None:
        now = time.monotonic()
        self.log.append(f"{now - self._started:7.2f}s (monotonic {now:.3f}) {text}")

    # -- asking the cluster --------------------------------------------------------------
    def ask(self, op: str, key: str, fn: Callable[[jsclient.JetStream], Any], timeout: float = 2.0) -> Any:
        """``fn(js)`` on the first admin connection that answers (members not under a fault first); None if none."""
        order = sorted(range(len(self.admins)), key=lambda i: i in self.faulted)
        for i in order:
            js = self.admins[i].jetstream(timeout=timeout)
            call = Call("nemesis", op, key, time.monotonic(), None, timeout)
            try:
                out = fn(js)
            except Exception as exc:  # noqa: BLE001 - recorded; the next member may answer
                call.status, call.error = classify(exc), describe(exc)
                call.end = time.monotonic()
                self.history.add(call)
                continue
            call.end, call.status = time.monotonic(), "ok"
            self.history.add(call)
            return out
        return None

    def leader(self, stream: str) -> int | None:
        info = self.ask("admin.stream_info", stream, lambda js: js.stream_info(stream))
        if info is None or info.cluster is None or not info.cluster.leader:
            return None
        return self.cluster.index(info.cluster.leader)

    def settled(self, timeout: float = 60.0, *, quiet: bool = False) -> bool:
        """Until every stream has a leader and every replica is current (twice in a row, half a second apart);
        with ``quiet`` (nothing publishes any more), until the streams' contents stop changing too."""
        deadline = time.monotonic() + timeout
        last: list[tuple[int, int]] | None = None
        while time.monotonic() < deadline:
            now: list[tuple[int, int]] = []
            for stream in self.streams.values():
                info = self.ask("admin.stream_info", stream, functools.partial(_info, stream=stream))
                peers = info.cluster.replicas if info is not None and info.cluster is not None else None
                if info is None or not info.cluster or not info.cluster.leader or peers is None or \
                        len(peers) != len(self.cluster.servers) - 1 or not all(p.current for p in peers):
                    now = []
                    break
                now.append((info.state.messages, info.state.last_seq) if quiet else (0, 0))
            if now and now == last:
                return True
            last = now or None
            time.sleep(0.5)
        return False

    # -- faults --------------------------------------------------------------------------
    def run(self, schedule: list[Step]) -> None:
        """Apply each step, hold it, undo it, rest; heal everything at the end."""
        for n, step in enumerate(schedule, 1):
            undo, before = self.apply(step, n)
            undos = [undo] + [self.apply(also, n)[0] for also in step.also]
            time.sleep(step.hold)
            for fn in reversed(undos):
                fn()
            self.faulted.clear()
            time.sleep(step.rest)
            if step.leader:
                self._leader_after(step, before)
        self.heal_everything()

    def heal_everything(self) -> None:
        self.cluster.heal()
        for srv in self.cluster.servers:
            srv.resume()
            if not srv.running:
                srv.start()
        self.faulted.clear()

    def apply(self, step: Step, n: int) -> tuple[Callable[[], None], int | None]:
        """Start ``step``: what ends it, and the member that led the step's stream (when it targets the leader)."""
        stream = self.streams[step.stream]
        member = step.member
        before = None
        if step.leader:
            before = self.leader(stream)
            member = before if before is not None else step.member
        return self._start(step, n, stream, member, before), before

    def _start(self, step: Step, n: int, stream: str, member: int, before: int | None) -> Callable[[], None]:
        what = f"leader {self.cluster.servers[member].name}" if before is not None else \
            f"member {self.cluster.servers[member].name}"
        self.note(f"step {n}: {step} -> {what}")
        cluster = self.cluster
        srv = cluster.servers[member]
        if step.kind == "stepdown":
            reply = self.ask("admin.stepdown", stream, lambda js: js.conn.request(
                f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}", b"", timeout=js.timeout))
            answer = json.loads(reply.data) if reply is not None else None
            self.note(f"  stepdown answered {answer}")
            return _nothing
        self.faulted.add(member)
        if step.kind == "partition":
            cluster.isolate(member)
            return _healer(cluster.routes_of(member))
        if step.kind == "route-delay":
            for link in cluster.routes_of(member):
                link.delay(step.latency)
            return _healer(cluster.routes_of(member))
        if step.kind == "route-reset":
            for link in cluster.routes_of(member):
                link.reset()
            return _nothing
        client = cluster.client_links[member]
        if step.kind == "client-blackhole":
            client.blackhole()
            return client.heal
        if step.kind == "client-delay":
            client.delay(step.latency)
            return client.heal
        if step.kind == "client-reset":
            client.reset()
            return _nothing
        if step.kind == "pause":
            srv.pause()
            return srv.resume
        if step.kind == "kill":
            srv.kill()
            self.note(f"  killed {srv.name}")
            return lambda: self._restart(member)
        raise ValueError(f"unknown fault {step.kind!r}")

    def _restart(self, member: int) -> None:
        srv = self.cluster.servers[member]
        srv.start()
        self.note(f"  restarted {srv.name}")

    def _leader_after(self, step: Step, before: int | None) -> None:
        after = self.leader(self.streams[step.stream])
        names = [srv.name for srv in self.cluster.servers]
        shown = [names[m] if m is not None else "?" for m in (before, after)]
        if before is not None and after is not None and before != after:
            self.leader_changes += 1
        self.note(f"  leader of {step.stream}: {shown[0]} -> {shown[1]}")
