"""The nemesis run (issue #42): a seeded schedule of faults on a 3-member cluster whose routes and clients go
through links, under publish and KV compare-and-set workloads; then every history goes through its checker.

Short by default (each fault kind once, about a minute, a fixed seed); ``NEMESIS_SOAK=1`` (``make soak``)
runs a long schedule with a fresh seed and overlapping client faults.  ``NEMESIS_SEED`` and
``NEMESIS_STEPS`` replay or resize either; the seed and the line that replays it are printed, and repeated
in any failure.

What is checked, once the cluster is healed and settled:

* publishes: every acked message id stored exactly once (at the acked sequence), every unknown outcome at
  most once, every refused one never, and nothing else stored;
* consumers (a durable pull consumer, the push ordered subscription, ADR-37's ordered consumer) reading
  that stream throughout: each took every stored message, the ordered ones each once and in order;
* KV: each key's compare-and-set history (threads here and in a child process) is linearizable, with the
  bucket's full log settling which unanswered updates took effect;
* every blocking call (the nemesis's own admin calls too) returned or raised within its own timeout plus
  SLACK, and every error said whether the request may have been processed (its ``outcome``);
* every workload gets through again once the cluster is healed;
* threads and file descriptors are back to what they were before the test.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec

import jsclient
from jsclient.jetstream.kv import bucket_config
from tests.nemesis.cluster import LinkedCluster
from tests.nemesis.faults import KINDS, Nemesis, Step, generate
from tests.nemesis.history import SLACK, Call, History, Resources, late, leftovers, unexplained
from tests.nemesis.linearizable import check
from tests.nemesis.workloads import (
    CLIENT_OPTIONS,
    CasWorkload,
    ConsumeWorkload,
    PublishWorkload,
    cas_histories,
    check_consumed,
    check_publishes,
    read_stream,
    retrying,
)
from tests.test_resilience import Events

SHORT_SEED = 20250142
BUCKET, KEYS = "NEM", ["k0", "k1", "k2"]
STREAMS = {"PUB": "PUB", "KV": f"KV_{BUCKET}"}
TIMEOUT = 2.0  # every workload call's own timeout
ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class Plan:
    seed: int
    steps: int
    soak: bool

    @property
    def pace(self) -> float:
        """How much slower the workloads go: a soak's history must stay in memory (some 100 MB for 10 min)."""
        return 4.0 if self.soak else 1.0

    @staticmethod
    def from_env() -> Plan:
        soak = os.environ.get("NEMESIS_SOAK") == "1"
        seed = os.environ.get("NEMESIS_SEED")
        steps = os.environ.get("NEMESIS_STEPS")
        return Plan(
            seed=int(seed) if seed else (random.SystemRandom().randrange(10**9) if soak else SHORT_SEED),
            steps=int(steps) if steps else (120 if soak else len(KINDS)),
            soak=soak,
        )

    @property
    def replay(self) -> str:
        soak = "NEMESIS_SOAK=1 " if self.soak else ""
        return f"{soak}NEMESIS_SEED={self.seed} NEMESIS_STEPS={self.steps} pytest tests/nemesis/test_nemesis.py"

    def schedule(self) -> list[Step]:
        return generate(self.seed, self.steps, streams=tuple(STREAMS), overlap=0.25 if self.soak else 0.0)


@dataclasses.dataclass
class Outcome:
    """What each checker found (problems) and saw (notes), for the report and the verdict."""

    problems: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    notes: dict[str, str] = dataclasses.field(default_factory=dict)
    timeline: list[str] = dataclasses.field(default_factory=list)

    def add(self, checker: str, problems: list[str], note: str) -> None:
        self.problems[checker] = problems
        self.notes[checker] = note

    def table(self, plan: Plan) -> str:
        rows = [f"seed {plan.seed}, {plan.steps} steps ({'soak' if plan.soak else 'short'})"]
        for checker, note in self.notes.items():
            found = self.problems.get(checker, [])
            verdict = "ok" if not found else f"{len(found)} PROBLEM(S)"
            rows.append(f"  {checker:<12} {verdict:<14} {note}")
        return "\n".join(rows)


def create_streams(js: jsclient.JetStream) -> dict[str, tuple[int, str]]:
    """The R3 stream and an R3 bucket that keeps every revision (so the log can settle unanswered updates)."""
    retrying("add_stream PUB", lambda: js.add_stream(
        name="PUB", subjects=["pub.>"], num_replicas=3, duplicate_window=7200.0))
    bucket = msgspec.structs.replace(bucket_config(BUCKET, replicas=3), max_msgs_per_subject=-1)
    retrying("add_stream KV", lambda: js.add_stream(bucket))
    kv = js.key_value(BUCKET)
    return {key: (create_once(kv, key, f"init-{key}"), f"init-{key}") for key in KEYS}


def create_once(kv: jsclient.KeyValue, key: str, value: str) -> int:
    """The key's first revision: a create whose answer was lost but which was stored is found by reading back."""
    try:
        return int(retrying(f"create {key}", functools.partial(kv.create, key, value.encode())))
    except jsclient.KeyExistsError:
        entry = retrying(f"get {key}", functools.partial(kv.get, key))
        assert entry.value == value.encode() and entry.revision, entry  # ours, from the try whose answer was lost
        return int(entry.revision)


def read_back(nemesis: Nemesis, stream: str, subject: str) -> list[jsclient.Msg]:
    """The whole stream, through the first admin connection that can read it."""
    last: Exception | None = None
    for nc in nemesis.admins:
        try:
            return read_stream(nc.jetstream(timeout=10.0), stream, subject)
        except jsclient.Error as exc:
            last = exc
    raise AssertionError(f"no member could read {stream} back: {last!r}")


def start_child(cluster: LinkedCluster, tmp: Path, seed: int,
                pace: float) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    config: dict[str, Any] = {
        "urls": cluster.client_urls, "bucket": BUCKET, "keys": KEYS, "seed": seed, "threads": 2,
        "timeout": TIMEOUT, "pace": pace, "max_seconds": 3600, "ready": str(tmp / "child.ready"),
        "stop": str(tmp / "child.stop"), "history": str(tmp / "child.history"),
    }
    with open(tmp / "child.out", "wb") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.nemesis.kv_child", json.dumps(config)], cwd=ROOT, stdout=out,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    deadline = time.monotonic() + 30
    while not Path(config["ready"]).exists():
        assert child.poll() is None, f"the KV child exited at start: {(tmp / 'child.out').read_text()}"
        assert time.monotonic() < deadline, "the KV child was not ready in 30 s"
        time.sleep(0.05)
    return child, config


def run(plan: Plan, schedule: list[Step], tmp: Path) -> Outcome:
    outcome = Outcome()
    history = History()
    baseline = Resources.now()
    with LinkedCluster(3) as cluster:
        nemesis = Nemesis(cluster, STREAMS, history)
        conns: list[jsclient.Connection] = []
        child: subprocess.Popen[bytes] | None = None
        events = Events()
        stop = threading.Event()
        consuming = threading.Event()  # set: the consumers stop (after the publishers, once caught up)
        consumers: list[ConsumeWorkload] = []
        threads: list[threading.Thread] = []
        readers: list[threading.Thread] = []
        config: dict[str, Any] = {}
        try:
            initial = create_streams(nemesis.admins[0].jetstream(timeout=5.0))
            for name in ("nemesis-pub", "nemesis-kv", "nemesis-consume"):
                conns.append(jsclient.connect(cluster.client_urls, name=name, disconnected_cb=events.on_disconnected,
                                              reconnected_cb=events.on_reconnected, **CLIENT_OPTIONS))
            publishers = PublishWorkload(conns[0].jetstream(timeout=TIMEOUT), history, stop, pace=0.005 * plan.pace,
                                         async_pace=0.02 * plan.pace)
            kv = conns[1].jetstream(timeout=TIMEOUT).key_value(BUCKET)
            threads = publishers.threads() + [
                threading.Thread(target=CasWorkload(kv, KEYS, history, stop, process=f"kv-{t}",
                                                    seed=plan.seed * 10 + t, budget=TIMEOUT,
                                                    pace=0.01 * plan.pace).run, name=f"kv-{t}")
                for t in range(3)
            ]
            consumers = [ConsumeWorkload(conns[2].jetstream(timeout=TIMEOUT), history, consuming, kind,
                                         timeout=TIMEOUT) for kind in ConsumeWorkload.KINDS]
            readers = [c.thread() for c in consumers]
            for t in threads:
                t.daemon = True  # a failed run must not keep the interpreter alive for ever either
            child, config = start_child(cluster, tmp, plan.seed, 0.01 * plan.pace)
            for t in threads + readers:
                t.start()

            nemesis.run(schedule)
            assert nemesis.settled(), f"the cluster did not settle after healing\n{nemesis.log}"
            healed = time.monotonic()
            processes = {t.name for t in threads + readers} | {"child-kv-0", "child-kv-1"}
            wait_live(history, {t.name for t in threads + readers}, healed)

            stop.set()
            Path(config["stop"]).touch()
            for t in threads:
                t.join(60)
            admin = nemesis.admins[0].jetstream()
            last = retrying("stream_info PUB", lambda: admin.stream_info("PUB")).state.last_seq
            deadline = time.monotonic() + 60
            while not all(c.caught_up(last) for c in consumers) and time.monotonic() < deadline:
                time.sleep(0.1)
            consuming.set()
            for t in readers:
                t.join(60)
            stuck = [t.name for t in threads + readers if t.is_alive()]
            child_status = child.wait(90)
            history.extend(History.load(Path(config["history"])))
            for nc in conns:
                nc.close()
            conns.clear()
            assert nemesis.settled(30, quiet=True), "the cluster did not settle after the workloads stopped"
            published = read_back(nemesis, "PUB", "pub.>")
            logged = read_back(nemesis, STREAMS["KV"], f"$KV.{BUCKET}.>")
        finally:  # on a failure too: nothing may outlive the test
            stop.set()
            consuming.set()
            if config:
                Path(config["stop"]).touch()
            for t in threads + readers:
                if t.is_alive():
                    t.join(60)
            for nc in conns:
                nc.close()
            if child is not None and child.poll() is None:
                child.kill()
                child.wait(10)
            nemesis.close()

    calls = history.calls
    live = {c.process for c in calls if c.status == "ok" and c.start >= healed} & processes
    outcome.timeline = nemesis.log
    history.dump(tmp / "history.jsonl")  # kept with the test's tmp_path, for a failure's post-mortem
    (tmp / "logs.json").write_text(json.dumps({
        "PUB": [[m.metadata.sequence.stream, m.subject, m.data.decode()] for m in published],
        "KV": [[m.metadata.sequence.stream, m.subject, m.data.decode()] for m in logged],
    }))
    outcome.add("nemesis", [], f"{len(schedule)} steps, {nemesis.leader_changes} leader changes seen, "
                f"{events.disconnected} client disconnects, {events.reconnected} reconnects")
    check_publish_history(outcome, calls, published)
    check_cas_history(outcome, calls, logged, initial)
    sequences = [m.metadata.sequence.stream for m in published]
    for consumer in consumers:
        problems, note = check_consumed(consumer, sequences)
        outcome.add(consumer.process, problems, note)
    overdue = late(calls)
    worst = max(calls, key=lambda c: (c.took() or 1e9) - c.budget)
    outcome.add("deadlines", [c.line() for c in overdue],
                f"{len(calls)} calls, slack {SLACK}s; worst: {worst.line()}")
    outcome.add("errors", [c.line() for c in unexplained(calls)], "every error classified by its outcome")
    trouble = [f"{name} never got through after the heal" for name in sorted(processes - live)]
    trouble += [f"{name} still running 60 s after stop" for name in stuck]
    if child_status != 0:
        trouble.append(f"the KV child exited with {child_status}: {(tmp / 'child.out').read_text()[-2000:]}")
    outcome.add("liveness", trouble, f"{len(live)}/{len(processes)} workers got through after the heal")
    left = leftovers(baseline)
    outcome.add("resources", [left] if left else [], f"back to {baseline.fds} fds, {len(baseline.threads)} threads")
    return outcome


def wait_live(history: History, workers: set[str], since: float, calm: float = 2.0, seconds: float = 30.0) -> None:
    """Let the workloads run on the healed cluster: ``calm`` seconds at least, and (at most ``seconds``) until
    each of ``workers`` has had a call started after ``since`` succeed.  (The child's calls are known only
    once it ends: it is judged with the others afterwards.)"""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        live = {c.process for c in history.calls if c.status == "ok" and c.start >= since}
        if workers <= live and time.monotonic() >= since + calm:
            return
        time.sleep(0.1)


def check_publish_history(outcome: Outcome, calls: list[Call], published: list[jsclient.Msg]) -> None:
    stored: dict[str, list[int]] = {}
    for msg in published:
        stored.setdefault(msg.data.decode(), []).append(msg.metadata.sequence.stream)
    problems, summary = check_publishes(calls, stored)
    attempts = sum(c.op in ("publish", "publish_async") for c in calls)
    outcome.add("publish", problems, f"{len(published)} stored, {attempts} attempts, ids: {summary}")


def check_cas_history(outcome: Outcome, calls: list[Call], logged: list[jsclient.Msg],
                      initial: dict[str, tuple[int, str]]) -> None:
    log: dict[str, list[tuple[int, str]]] = {key: [] for key in KEYS}
    for msg in logged:
        log.setdefault(msg.subject.split(".", 2)[2], []).append((msg.metadata.sequence.stream, msg.data.decode()))
    histories, problems, summary = cas_histories(calls, log, initial)
    child_ok = sum(c.op == "kv.update" and c.status == "ok" and c.process.startswith("child-") for c in calls)
    for key, ops in histories.items():
        verdict = check(ops, initial=initial[key][0])
        if not verdict.ok:
            problems.append(f"key {key}: {verdict.explain()}")
    sizes = {key: len(ops) for key, ops in histories.items()}
    outcome.add("kv-cas", problems, f"ops per key {sizes}, updates: {summary}, {child_ok} ok from the child")


def test_nemesis_schedule(tmp_path: Path) -> None:
    plan = Plan.from_env()
    schedule = plan.schedule()
    print(f"nemesis: seed {plan.seed}, {plan.steps} steps; replay: {plan.replay}")
    for n, step in enumerate(schedule, 1):
        print(f"  {n:3}. {step}")
    outcome = run(plan, schedule, tmp_path)
    print("\n".join(outcome.timeline))
    print(outcome.table(plan))
    found = {checker: problems for checker, problems in outcome.problems.items() if problems}
    kept = tmp_path
    if found:  # pytest rotates its tmp dirs: a failing run's histories are copied where the next runs leave them
        kept = ROOT / "build" / "nemesis" / f"seed-{plan.seed}-{time.strftime('%Y%m%dT%H%M%S')}"
        shutil.copytree(tmp_path, kept)
        (kept / "report.txt").write_text("\n".join([*outcome.timeline, outcome.table(plan)]) + "\n")
    print(f"histories and stream logs: {kept}")
    shown = "\n".join(f"{checker}: " + "\n  ".join(problems[:5]) for checker, problems in found.items())
    assert not found, f"seed {plan.seed} (replay: {plan.replay}; histories kept in {kept})\n{shown}\n\n" + (
        outcome.table(plan)
    )

