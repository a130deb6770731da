"""The atomic sink's exactly-once guarantees that only fail in a race or on a broken link (issue #42).

The docs promise, for a target stream that takes atomic batches: two attempts
of one task running at once (speculation, a zombie) cannot both commit, and
a row whose ``Nats-Msg-Id`` the stream already holds fails the write rather
than being skipped.  The sink (its module docstring) adds that a task keeps
each batch until its ack is in and, when none comes, sends it again only
after its marker shows it was not stored: so a link broken mid-write ends
with every row stored once, within the task; and that a task whose marker
names a later micro-batch refuses to write (a query run again from an older
copy of its checkpoint).
Every test here makes its failure happen on purpose against a real
nats-server, and checks that it did before checking the outcome.

Where Spark cannot be made to produce the failure on demand, the sink's task
objects are driven directly, the way ``write_batches`` drives them in an
executor, and the test says so: Spark never runs a speculative copy of a
task in local mode (it is never placed on the host of the running attempt),
and where a link breaks relative to a batch's frames only a test below Spark
can choose.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jsclient
from jsclient.server import NatsServer
from jsclient.spark import SparkOptions

pytest.importorskip("pyspark.sql", reason="install the spark extra: pip install -e '.[spark]'")

from pyspark.errors import StreamingQueryException

from jsclient.spark import sink
from jsclient.spark.connections import connection

from .proxy import Cut, FrameProxy
from .test_spark_sink import markers

pytestmark = pytest.mark.needs_server("2.12")  # every test here writes atomic batches

COMMIT = b"Nats-Batch-Commit: 1"
MEMBER = b"Nats-Batch-Sequence:"


def atomic_stream(js: jsclient.JetStream, name: str, prefix: str) -> None:
    """A target stream for the sink's atomic mode, with the server's 2-minute duplicate window: no test here
    may owe its outcome to message ids."""
    js.add_stream(
        name=name, subjects=[f"{prefix}.>", f"_jsclient.commits.{name}.>"], allow_atomic=True, allow_direct=True
    )


def record_batches(prefix: str, first: int, last: int, size: int = 500) -> list[Any]:
    """Rows ``first..last-1`` (payload ``row-<i>``, three subjects) as Arrow record batches of ``size``."""
    import pyarrow as pa

    return [
        pa.RecordBatch.from_pydict(
            {
                "subject": [f"{prefix}.{i % 3}" for i in range(lo, min(lo + size, last))],
                "data": [b"row-%d" % i for i in range(lo, min(lo + size, last))],
            }
        )
        for lo in range(first, last, size)
    ]


def stored(js: jsclient.JetStream, stream: str, subjects: str) -> Counter[bytes]:
    """How many times each payload is in the stream on ``subjects``."""
    try:
        return Counter(m.data for m in js.direct_get_batch(stream, subjects, max_messages=100_000))
    except jsclient.MessageNotFoundError:
        return Counter()


def rows(first: int, last: int) -> Counter[bytes]:
    return Counter(b"row-%d" % i for i in range(first, last))



class MarkerReads:
    """Wraps ``sink.read_marker`` to record what every read found, and whether ``after()`` held when it was
    made: the reads a task makes after its link was cut are its recovery."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, after: Callable[[], bool]) -> None:
        self.found: list[tuple[bool, Any]] = []
        real = sink.read_marker

        def spy(js: jsclient.JetStream, stream: str, subject: str) -> Any:
            marker = real(js, stream, subject)
            self.found.append((after(), marker))
            return marker

        monkeypatch.setattr(sink, "read_marker", spy)


# -- 1. two attempts of one task at once ------------------------------------------------------------


class Attempt:
    """One attempt of task (``write``, micro-batch 0, partition 0), on its own connection as on its own
    executor, driven through the sink's task object the way ``write_batches`` drives it."""

    def __init__(self, url: str, opts: SparkOptions, plan: sink.WritePlan, write: str) -> None:
        self.conn = jsclient.connect(url)
        self.opts = opts
        self.plan = plan
        self.subject = plan.marker_subject(write, 0)
        self.task = sink._AtomicTask(self.conn.jetstream(), plan, self.subject, 0, 10.0)

    def add(self, batches: list[Any]) -> None:
        rows = sink.StreamRows(self.opts, self.plan)
        for batch in batches:
            self.task.add(rows(batch))

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def attempts(server: NatsServer, js: jsclient.JetStream) -> Iterator[list[Attempt]]:
    """The attempts a test makes (with :func:`new_attempt`) against stream SPEC; their connections closed after."""
    atomic_stream(js, "SPEC", "spec")
    made: list[Attempt] = []
    yield made
    for attempt in made:
        attempt.close()


def new_attempt(server: NatsServer, made: list[Attempt], write: str = "w") -> Attempt:
    opts = SparkOptions.parse({"servers": server.url, "stream": "SPEC"})
    attempt = Attempt(server.url, opts, sink.plan_write(opts), write)
    made.append(attempt)
    return attempt


def check_lost_the_race(exc: pytest.ExceptionInfo[jsclient.JetStreamAPIError], subject: str) -> None:
    """The losing attempt's error: the marker's expected-sequence check (10071), named as a concurrent attempt."""
    assert exc.value.err_code == 10071
    assert f"another attempt wrote to {subject} meanwhile (a speculative or zombie task)" in str(exc.value)


def test_two_attempts_that_start_together_cannot_both_commit(
    server: NatsServer, js: jsclient.JetStream, attempts: list[Attempt]
) -> None:
    """A task and its speculative copy both start before either has stored anything (both read "no marker"),
    then each writes all 2,500 rows (three atomic batches).  The order is fixed so the test is deterministic:
    the copy finishes first; the original's first commit carries Nats-Expected-Last-Subject-Sequence 0 and
    the server refuses it.  Below Spark: local mode never runs a speculative copy."""
    batches = record_batches("spec", 0, 2500)
    original, copy = new_attempt(server, attempts), new_attempt(server, attempts)
    assert original.task.marker_seq == copy.task.marker_seq == 0  # both saw no marker: the race is on
    copy.add(batches)
    copy.task.finish()
    assert copy.task.published == 2500
    with pytest.raises(jsclient.JetStreamAPIError) as lost:
        original.add(batches)
        original.task.finish()
    check_lost_the_race(lost, original.subject)
    assert original.task.published == 0
    assert stored(js, "SPEC", "spec.>") == rows(0, 2500)
    # Spark retries the failed original: the retry starts from the marker and sends nothing.
    retry = new_attempt(server, attempts)
    retry.add(batches)
    retry.task.finish()
    assert (retry.task.skipped, retry.task.published) == (2500, 0)
    assert stored(js, "SPEC", "spec.>") == rows(0, 2500)


def test_a_zombie_that_starts_mid_task_cannot_commit_what_the_task_commits(
    server: NatsServer, js: jsclient.JetStream, attempts: list[Attempt]
) -> None:
    """The original has stored two of its three batches (1,998 rows) when a second attempt starts: it reads
    that marker, skips those rows and commits the last 502 first; the original's last commit expects the
    sequence of its own second marker, which is no longer the last, and is refused.  Below Spark."""
    batches = record_batches("spec", 0, 2500)
    original = new_attempt(server, attempts)
    original.add(batches[:4])  # 2,000 rows: the first batch settled, the second's commit sent
    second = sink.read_marker(js, "SPEC", original.subject)
    for _ in range(1000):  # the second batch is stored by now or very soon: wait for its marker
        if second.rows == 1998:
            break
        time.sleep(0.01)
        second = sink.read_marker(js, "SPEC", original.subject)
    assert second.rows == 1998, f"the original's second batch was not stored: {second}"
    zombie = new_attempt(server, attempts)
    assert (zombie.task.marker_seq, zombie.task.skipped) == (second.seq, 1998)
    zombie.add(batches)
    zombie.task.finish()
    assert zombie.task.published == 502
    with pytest.raises(jsclient.JetStreamAPIError) as lost:
        original.add(batches[4:])
        original.task.finish()
    check_lost_the_race(lost, original.subject)
    assert original.task.published == 1998  # what it stored before the zombie came
    assert stored(js, "SPEC", "spec.>") == rows(0, 2500)
    assert markers(js, "SPEC")[-1] == {"batch": 0, "rows": 2500}


def test_two_attempts_racing_on_two_connections_commit_once(
    server: NatsServer, js: jsclient.JetStream, attempts: list[Attempt]
) -> None:
    """Both attempts write all their rows at the same moment, on their own threads and connections: whichever
    commits a batch first wins, and the other fails at its next commit; never both.  Below Spark."""
    batches = record_batches("spec", 0, 4000)
    racers = [new_attempt(server, attempts), new_attempt(server, attempts)]
    start = threading.Barrier(2)
    outcome: dict[int, BaseException | None] = {}

    def run(i: int) -> None:
        start.wait()
        try:
            racers[i].add(batches)
            racers[i].task.finish()
            outcome[i] = None
        except BaseException as exc:  # noqa: BLE001 - judged by the test
            outcome[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert sorted(outcome) == [0, 1]
    errors = [e for e in outcome.values() if e is not None]
    assert len(errors) == 1, f"exactly one attempt must fail, got {outcome}"
    (error,) = errors
    assert isinstance(error, jsclient.JetStreamAPIError) and error.err_code == 10071, repr(error)
    assert "another attempt wrote to" in str(error)
    assert sum(r.task.published for r in racers) == 4000  # rows stored by both together: each once
    assert stored(js, "SPEC", "spec.>") == rows(0, 4000)


def test_a_zombie_of_a_batch_write_cannot_commit_after_the_write_committed(
    server: NatsServer, js: jsclient.JetStream, attempts: list[Attempt]
) -> None:
    """A speculative copy (or a zombie on a partitioned executor) starts with no marker to read; the original
    writes everything and the driver commits the write (the data source's own ``BatchWriter.commit``, which
    purges the write's markers); only then does the copy's first commit reach the server.  The docs: two
    attempts running at once cannot both commit.  Below Spark: the task objects and the driver's writer."""
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    from jsclient.spark.source import BatchWriter

    schema = StructType([StructField("subject", StringType()), StructField("data", BinaryType())])
    writer = BatchWriter(SparkOptions.parse({"servers": server.url, "stream": "SPEC"}), schema)
    batches = record_batches("spec", 0, 600)
    original = new_attempt(server, attempts, writer.write_id)
    zombie = new_attempt(server, attempts, writer.write_id)
    original.add(batches)
    original.task.finish()
    task = original.task
    writer.commit([sink.PublishedCommit(task.published, 0, task.skipped, original.subject)])
    try:
        zombie.add(batches)
        zombie.task.finish()
    except jsclient.JetStreamAPIError as exc:
        assert exc.err_code == 10071
    assert stored(js, "SPEC", "spec.>") == rows(0, 600)


# -- 2. a link cut mid-write -----------------------------------------------------------------------


class CutOnce:
    """Filters for a FrameProxy that cut the sink's link once, at a chosen frame of the second atomic batch.

    ``members``: after the 500th of its 999 members went out (the rest never reach the server);
    ``commit``: its commit is dropped with the link (nothing of the batch stored);
    ``ack``: the server's ack of its commit is dropped with the link (all of it stored, the task not told).
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.commits = 0  # commit frames the client sent before the cut
        self.members = 0  # members of the second batch the client sent before the cut
        self.acks = 0
        self.cut = False
        #: The rows each commit frame's marker claims, for every commit the client sent (before and after the cut).
        self.committed: list[int] = []

    def up(self, frame: bytes) -> bytes:
        if COMMIT in frame:
            self.committed.append(json.loads(frame.split(b"\r\n\r\n", 1)[1][:-2])["rows"])
        if self.cut:
            return frame
        if COMMIT in frame:
            self.commits += 1
            if self.where == "commit" and self.commits == 2:
                self.cut = True
                return Cut(b"")
        elif MEMBER in frame and self.commits == 1:
            self.members += 1
            if self.where == "members" and self.members == 500:
                self.cut = True
                return Cut(frame)
        return frame

    def down(self, frame: bytes) -> bytes:
        if self.cut:
            return frame
        if b'"batch":' in frame and b'"count":' in frame:  # an atomic batch's ack
            self.acks += 1
            if self.where == "ack" and self.acks == 2:
                self.cut = True
                return Cut(b"")
        return frame


def upstream_of(server: NatsServer) -> tuple[str, int]:
    host, port = server.url.rsplit("/", 1)[1].rsplit(":", 1)
    return host, int(port)


@pytest.mark.parametrize("where", ["members", "commit", "ack"])
def test_a_link_cut_mid_write_recovers_through_the_marker(
    server: NatsServer, js: jsclient.JetStream, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    """A task writing 2,500 rows (three atomic batches) through a proxy that closes its link at one frame of the
    second batch.  The connection reconnects; the task's commit fails (incomplete batch) or gets no answer
    (ackTimeout 2 s), it reads its marker again and either resends the batch (not stored) or takes it as
    stored (stored, ack lost), and the write ends with every row once, in the same task: no Spark retry.
    Below Spark (``write_batches``, the executor's entry point), so the cut lands on the chosen frame."""
    atomic_stream(js, "CUT", "cut")
    cutter = CutOnce(where)
    reads = MarkerReads(monkeypatch, lambda: cutter.cut)
    with FrameProxy(upstream_of(server), cutter.down, upstream_filter=cutter.up) as proxy:
        opts = SparkOptions.parse({"servers": proxy.url, "stream": "CUT", "ackTimeout": "2"})
        plan = sink.plan_write(opts)
        conn = connection(opts)
        try:
            with caplog.at_level(logging.INFO, logger="jsclient.spark"):
                done = sink.write_batches(opts, plan, iter(record_batches("cut", 0, 2500)), write="w", batch_id=0,
                                          partition=0)
            reconnects = conn.reconnects
        finally:
            conn.close()
    assert cutter.cut, "the link was never cut: the test proved nothing"
    assert reconnects == 1
    assert (done.published, done.skipped) == (2500, 0)
    assert stored(js, "CUT", "cut.>") == rows(0, 2500)
    # The recovery: the task read its marker again after the cut (the first read is the task's start).
    (_, first), *_ = reads.found
    assert (first.seq, first.rows) == (0, 0)
    after_cut = [marker for cut, marker in reads.found if cut]
    assert after_cut, "the task never read its marker after the cut"
    second_commits = cutter.committed.count(1998)  # commits of the second batch the client sent
    if where == "ack":
        # Stored, ack lost: the marker says the second batch is in, and it is not sent again.
        assert after_cut[0].rows == 1998
        assert cutter.acks == 2 and second_commits == 1
    else:
        # Not stored: the marker still names the first batch, and the second is sent again.
        assert after_cut[0].rows == 999
        assert "not stored" in caplog.text and "sending it again" in caplog.text, caplog.text
        assert second_commits == 2 if where == "commit" else second_commits >= 1
    assert markers(js, "CUT")[-1] == {"batch": 0, "rows": 2500}


def task_attempts(spark: Any, group: str) -> tuple[int, int]:
    """Task attempts that completed and that failed in the jobs of ``group`` (Spark's status tracker)."""
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(group)
    assert jobs, f"Spark ran no job in group {group!r}"
    completed = failed = 0
    for job in jobs:
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else ():
            stage_info = tracker.getStageInfo(stage)
            if stage_info:
                completed += stage_info.numCompletedTasks
                failed += stage_info.numFailedTasks
    return completed, failed


def test_a_spark_write_whose_link_is_cut_after_a_commit_is_exactly_once(
    spark: Any, server: NatsServer, js: jsclient.JetStream
) -> None:
    """A DataFrame write (one task, 2,500 rows) through a proxy that drops the ack of its second atomic batch
    and closes the link: the batch is stored, the executor's task is not told.  It must find out from its
    marker, within the task (no failed task attempt), and not store the batch twice."""
    atomic_stream(js, "SCUT", "scut")
    cutter = CutOnce("ack")
    df = spark.range(0, 2500, numPartitions=1).selectExpr(
        "concat('scut.', cast(id % 3 as string)) as subject",
        "cast(concat('row-', cast(id as string)) as binary) as data",
    )
    with FrameProxy(upstream_of(server), cutter.down, upstream_filter=cutter.up) as proxy:
        group = f"cut-{proxy.port}"
        spark.sparkContext.setJobGroup(group, "a write whose link is cut")
        try:
            df.write.format("jetstream").option("servers", proxy.url).option("stream", "SCUT").option(
                "ackTimeout", "2"
            ).mode("append").save()
        finally:
            spark.sparkContext.setJobGroup("", "")
            connection(SparkOptions.parse({"servers": proxy.url})).close()  # the driver's, through the proxy
    assert cutter.cut and cutter.acks == 2, "the second batch's ack was never dropped: the test proved nothing"
    assert task_attempts(spark, group) == (1, 0)  # recovered inside the task, not by a Spark retry
    assert stored(js, "SCUT", "scut.>") == rows(0, 2500)
    assert markers(js, "SCUT") == [{"batch": 0, "rows": 2500}]  # the write committed: its last marker stays


# -- the marker names a later micro-batch ---------------------------------------------------------


def test_a_query_restarted_from_an_older_checkpoint_copy_refuses_to_write(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path
) -> None:
    """A checkpoint restored from a backup taken two micro-batches ago: the same query id, so the same markers,
    and the first micro-batch it plans (1) is older than the one its marker names (2).  Writing would store
    rows a second time (the backup's micro-batch 1 covers what 1 and 2 wrote); the task refuses, naming the
    likely cause, and the query fails with nothing more stored."""
    js.add_stream(name="ORIGIN", subjects=["origin.>"], allow_direct=True)
    atomic_stream(js, "RESTORED", "restored")
    checkpoint, backup = tmp_path / "checkpoint", tmp_path / "backup"

    def publish(first: int, last: int) -> None:
        for i in range(first, last):
            js.publish_async("origin.x", b"row-%d" % i)
        js.publish_async_completed(timeout=30)

    def run(where: Path) -> StreamingQueryException | None:
        query = (
            spark.readStream.format("jetstream").option("servers", server.url).option("stream", "ORIGIN").load()
            .selectExpr("replace(subject, 'origin.', 'restored.') as subject", "data")
            .writeStream.format("jetstream").option("servers", server.url).option("stream", "RESTORED")
            .option("checkpointLocation", str(where)).trigger(availableNow=True).start()
        )
        try:
            query.awaitTermination(120)
        except StreamingQueryException as exc:
            return exc
        assert not query.isActive, "the query did not finish within 120 s"
        return None

    publish(0, 100)
    assert run(checkpoint) is None  # micro-batch 0
    shutil.copytree(checkpoint, backup)
    publish(100, 200)
    assert run(checkpoint) is None  # micro-batch 1
    publish(200, 300)
    assert run(checkpoint) is None  # micro-batch 2
    assert [m["batch"] for m in markers(js, "RESTORED")] == [2]
    assert stored(js, "RESTORED", "restored.>") == rows(0, 300)
    failed = run(backup)
    assert failed is not None, "the query from the older checkpoint wrote micro-batch 1 again"
    assert "already names micro-batch 2, later than 1" in str(failed)
    assert "is another query writing with the same checkpoint?" in str(failed)
    assert stored(js, "RESTORED", "restored.>") == rows(0, 300)


# -- 3. a message id the stream already holds ---------------------------------------------------------


def test_a_row_whose_msg_id_the_stream_holds_fails_the_write(
    spark: Any, server: NatsServer, js: jsclient.JetStream
) -> None:
    """The docs: a row whose Nats-Msg-Id the stream already holds makes the server refuse its whole batch, so the
    write fails rather than skipping it.  One task of 1,500 rows (two atomic batches, 999 + 501) whose row 1,200
    carries the id of a message already stored: the first batch is stored once, though Spark tries the task
    three times; nothing of the second batch is, not even the 201 rows before the duplicate; every attempt
    fails, and the write with it, with the server's reason."""
    atomic_stream(js, "IDS", "ids")
    js.publish("ids.old", b"already here", msg_id="order-1200")
    df = spark.range(0, 1500, numPartitions=1).selectExpr(
        "'ids.new' as subject",
        "cast(concat('row-', cast(id as string)) as binary) as data",
        "concat('order-', cast(id as string)) as msg_id",
    )
    group = "duplicate-msg-id"
    spark.sparkContext.setJobGroup(group, "a write with a message id the stream holds")
    try:
        with pytest.raises(Exception, match="BatchDuplicateMsgIdError") as failed:
            df.write.format("jetstream").option("servers", server.url).option("stream", "IDS").mode("append").save()
    finally:
        spark.sparkContext.setJobGroup("", "")
    assert task_attempts(spark, group) == (0, 3)  # every attempt Spark made failed the same way
    assert "atomic publish batch contains duplicate message id" in str(failed.value)
    assert "err_code 10201" in str(failed.value)
    assert stored(js, "IDS", "ids.new") == rows(0, 999)
    assert stored(js, "IDS", "ids.old") == Counter([b"already here"])
    stored_ids = {m.headers.get("Nats-Msg-Id") for m in js.direct_get_batch("IDS", "ids.new", max_messages=2000)}
    assert stored_ids == {f"order-{i}" for i in range(999)}  # each row kept its own id
    assert markers(js, "IDS") == [{"batch": 0, "rows": 999}]  # the failed write's marker stays, for a retry


# -- 4. rows no stream stores ---------------------------------------------------------------------------------


def msg_id_task(nc: jsclient.Connection, prefix: str, rows: int) -> sink._MsgIdTask:
    """A msg-id write task (as an executor runs it) given rows ``0..rows-1`` on ``<prefix>.0-2``, not finished."""
    opts = SparkOptions.parse({"servers": nc.connected_url or ""})
    task = sink._MsgIdTask(nc.jetstream(), "w-0-0", 100, 10.0)
    task.add(sink.StreamRows(opts, sink.WritePlan(sink.SinkMode.MSGID, None, None, None))(
        record_batches(prefix, 0, rows)[0]
    ))
    return task


@pytest.mark.needs_server("2.10")  # message ids, not atomic batches: every server in the matrix
def test_msg_id_rows_whose_id_is_still_in_process_fail_the_task(server: NatsServer) -> None:
    """A row's ack that is a duplicate of sequence 0 (how nats-server before 2.11 answers while an earlier try
    with that id is not yet stored, and may never be) fails the task with MsgIdInProcessError, so that Spark's
    retry sends the rows again under the same ids: counted as a duplicate, that row could be lost.  A core
    responder stands in for the stream and gives that ack, which the newest server does not; the other rows'
    acks, duplicates among them, are counted as the sink counts them."""

    def ack(m: jsclient.Msg) -> None:
        row = int(m.data.split(b"-")[1])
        seq, duplicate = (0 if row == 7 else row + 1), (b"true" if row % 2 else b"false")
        m.respond(b'{"stream":"H","seq":%d,"duplicate":%s}' % (seq, duplicate))

    with jsclient.connect(server.url) as stream, jsclient.connect(server.url) as nc:
        stream.subscribe("held.*", callback=ack)
        stream.flush()
        task = msg_id_task(nc, "held", 7)
        task.finish()
        assert (task.published, task.duplicates) == (7, 3)
        with pytest.raises(jsclient.MsgIdInProcessError, match="in process"):
            msg_id_task(nc, "held", 10).finish()
        assert nc.is_connected


@pytest.mark.needs_server("2.10")  # message ids, not atomic batches: every server in the matrix
def test_msg_id_rows_no_stream_stores_fail_the_task_with_no_stream_response(server: NatsServer) -> None:
    """A msg-id write whose rows' subject no stream stores: the server's 503 on the ack inbox fails the task
    with the error a publish gets (NoStreamResponseError), not a decode error and not a timeout."""
    with jsclient.connect(server.url) as nc:
        with pytest.raises(jsclient.NoStreamResponseError, match="no stream answered a publish"):
            msg_id_task(nc, "nowhere", 10).finish()
        assert nc.is_connected
