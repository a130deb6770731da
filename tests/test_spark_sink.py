"""The jetstream sink and failOnDataLoss on real Spark and a real nats-server, the way pipelines fail.

A checkpointed streaming copy is SIGKILLed mid-write (in a child process) and
restarted after the target's duplicate_window has passed; a batch write's task
fails after it has provably stored rows and is retried after the window; a
stream loses messages between planning and reading, or is made again under a
checkpoint.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

import jsclient
import jsclient.spark
from jsclient.errors import ProtocolError
from jsclient.protocol import MsgEvent
from jsclient.server import NatsCluster, NatsServer
from jsclient.spark import SparkOptions
from tests.test_protocol_entries import DAMAGE, FRAMES, outcome, reference, wire_of

pytest.importorskip("pyspark.sql", reason="install the spark extra: pip install -e '.[spark]'")

from jsclient.spark.source import CONSUMER_IDLE, DataLossError, plan_ranges, read_range

HERE = Path(__file__).parent


def atomic_stream(js: jsclient.JetStream, name: str, prefix: str, window: float = 1.0) -> None:
    """A target stream that takes atomic batches and the sink's commit markers, with a short dedupe window."""
    js.add_stream(
        name=name,
        subjects=[f"{prefix}.>", f"_jsclient.commits.{name}.>"],
        allow_atomic=True,
        allow_direct=True,
        duplicate_window=window,
    )


def data_of(js: jsclient.JetStream, stream: str, subject: str) -> list[bytes]:
    return [m.data for m in js.direct_get_batch(stream, subject, max_messages=100_000)]


def markers(js: jsclient.JetStream, stream: str) -> list[dict[str, int]]:
    try:
        found = js.direct_get_batch(stream, f"_jsclient.commits.{stream}.>", max_messages=10_000)
        return [json.loads(m.data) for m in found]
    except jsclient.MessageNotFoundError:
        return []


# -- options ---------------------------------------------------------------------------


def test_spark_option_keys_are_ignored_and_typos_still_named() -> None:
    parsed = SparkOptions.parse(
        {"checkpointLocation": "/tmp/x", "queryName": "q", "path": "p", "stream": "S", "commitPrefix": "c.d"}
    )
    assert (parsed.stream, parsed.commit_prefix) == ("S", "c.d")
    with pytest.raises(jsclient.InvalidArgumentError, match="unknown jetstream option 'checkpointLocaton'"):
        SparkOptions.parse({"checkpointLocaton": "/tmp/x"})


@pytest.mark.needs_server("2.12")  # the atomic sink
def test_checkpointed_write_stream_with_a_query_name_resumes(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path
) -> None:
    """checkpointLocation and queryName reach the sink's options; a second run writes only what is new."""
    js.add_stream(name="IN", subjects=["in.>"], allow_direct=True)
    atomic_stream(js, "OUTS", "outs")
    for i in range(500):
        js.publish_async(f"in.{i % 3}", b"%d" % i)
    js.publish_async_completed(timeout=30)

    def run() -> None:
        src = spark.readStream.format("jetstream").option("servers", server.url).option("stream", "IN").load()
        query = (
            src.selectExpr("replace(subject, 'in.', 'outs.') as subject", "data")
            .writeStream.format("jetstream")
            .option("servers", server.url)
            .option("stream", "OUTS")
            .option("checkpointLocation", str(tmp_path / "cp"))
            .queryName("resumes")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None

    run()
    assert sorted(int(d) for d in data_of(js, "OUTS", "outs.>")) == list(range(500))
    run()  # nothing new: nothing written
    for i in range(500, 520):
        js.publish(f"in.{i % 3}", b"%d" % i)
    run()
    assert sorted(int(d) for d in data_of(js, "OUTS", "outs.>")) == list(range(520))
    assert len(markers(js, "OUTS")) <= 2  # one per partition is kept, the rest purged after each micro-batch


# -- exactly once, the way it fails in production ---------------------------------------


def _checkpoint_batches(checkpoint: Path) -> tuple[int, int]:
    """The newest micro-batch planned (offsets/) and the newest committed (commits/); -1 for none."""

    def newest(folder: str) -> int:
        names = [int(p.name) for p in (checkpoint / folder).glob("*") if p.name.isdigit()]
        return max(names, default=-1)

    return newest("offsets"), newest("commits")


def kill_mid_writes(
    command: list[str], checkpoint: Path, stored: Callable[[], int], in_write: Callable[[int], bool], *, kills: int
) -> subprocess.CompletedProcess[str]:
    """Run the query ``command`` and SIGKILL its whole process group once ``stored()`` grew by 1,000, ``kills``
    times (``make soak``: two more), each followed by 2 s (past the target's 1 s duplicate_window); then run it
    to its end and return that.

    At least one kill must land inside a micro-batch's write: the checkpoint planned a micro-batch it did not
    commit, and ``in_write(that batch)`` says the target already holds rows of it (so the restart replays rows
    that are stored).  Until one has, it kills again, at most three more times."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    kills += 2 if os.environ.get("JSCLIENT_SOAK") == "1" else 0
    replayed_with_rows_stored = 0
    for kill in range(kills + 3):
        if kill >= kills and replayed_with_rows_stored:
            break
        before = stored()
        child = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while stored() < before + 1000:  # a chunk of the current batch is in
                assert child.poll() is None, f"the query ended before kill {kill}"
                assert time.monotonic() < deadline, "the query wrote nothing within 120 s"
                time.sleep(0.02)
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
        planned, committed = _checkpoint_batches(checkpoint)
        if planned > committed and in_write(planned):
            replayed_with_rows_stored += 1
        time.sleep(2.0)  # longer than the target's duplicate_window: message ids cannot save a replay now
    assert replayed_with_rows_stored >= 1, "no kill landed inside a micro-batch's write; the test proved nothing"
    done = subprocess.run(command, env=env, start_new_session=True, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.needs_server("2.12")  # the atomic sink
def test_streaming_copy_killed_mid_write_and_restarted_is_exactly_once(
    server: NatsServer, js: jsclient.JetStream, tmp_path: Path
) -> None:
    """SIGKILL the whole query (driver JVM and Python workers) while a micro-batch is being written, wait out the
    target's 1 s duplicate_window, restart from the checkpoint; twice (four times in ``make soak``); then let it
    finish.

    Each kill is checked to have landed inside a write: the checkpoint has planned a micro-batch it has not
    committed, and the target already holds commit markers (stored rows) of that very micro-batch, so the
    restart replays rows that are in the stream.  Every input must appear exactly once in the output.
    """
    total = 12_000
    js.add_stream(name="SRC", subjects=["src.>"], allow_direct=True)
    atomic_stream(js, "DST", "dst", window=1.0)
    for i in range(total):
        js.publish_async(f"src.{i % 4}", b"row-%d" % i, headers={"N": str(i)} if i % 3 == 0 else None)
    js.publish_async_completed(timeout=60)
    checkpoint = tmp_path / "checkpoint"
    command = [sys.executable, str(HERE / "spark_stream_child.py"), server.url, str(checkpoint)]

    def in_write(planned: int) -> bool:
        return any(m["batch"] == planned and m["rows"] > 0 for m in markers(js, "DST"))

    done = kill_mid_writes(command, checkpoint, lambda: js.stream_info("DST").state.messages, in_write, kills=2)
    assert "query finished" in done.stdout
    out = Counter(data_of(js, "DST", "dst.>"))
    assert sum(out.values()) == total, f"{sum(out.values()) - total} duplicates"
    assert set(out) == {b"row-%d" % i for i in range(total)}
    stored = {m.data: m.headers.get("N") for m in js.direct_get_batch("DST", "dst.>", max_messages=100_000)}
    assert all(stored[b"row-%d" % i] == (str(i) if i % 3 == 0 else None) for i in range(total))


def _fail_once_after_stored(url: str, stream: str, window: float, flag: str, subjects: str = "out.p0") -> Any:
    """A UDF that, in partition 0's first attempt, waits until the sink has stored rows of that partition (on
    ``subjects``), outlives the stream's duplicate_window, and fails: so the retry comes late, over rows already
    stored."""
    from pyspark.sql.functions import udf

    @udf("binary")
    def pass_or_fail(i: int, data: bytes) -> bytes:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0 and i == 1900:
            with jsclient.connect(url) as nc:
                js = nc.jetstream()
                stored = 0
                for _ in range(600):
                    state = js.stream_info(stream, subjects_filter=subjects).state
                    stored = sum((state.subjects or {}).values())
                    if stored >= 999:
                        break
                    time.sleep(0.05)
            Path(flag).write_text(str(stored))
            time.sleep(window + 1.0)
            raise RuntimeError(f"injected failure after {stored} rows of partition 0 were stored")
        return data

    return pass_or_fail


def _write_8000(spark: Any, url: str, stream: str, udf: Any, *, bucket: str | None = None) -> None:
    """8,000 rows of 200 bytes in 4 partitions.  Rows of realistic size: Spark hands a Python writer its input
    through a 64 KiB buffer, so rows of a few bytes would all still be in it when the UDF fails.  Into
    ``bucket`` instead of ``stream``: keys p<partition>.k<n mod 50>, each written 40 times in order."""
    partition = "cast(spark_partition_id() as string)"
    name, payload = ("key", "value") if bucket else ("subject", "data")
    df = spark.range(0, 8000, numPartitions=4).selectExpr(
        "id",
        (f"concat('p', {partition}, '.k', cast(id % 50 as string))" if bucket else f"concat('out.p', {partition})")
        + f" as {name}",
        f"cast(lpad(cast(id as string), 200, ' ') as binary) as {payload}",
    )
    df = df.select(name, udf("id", payload).alias(payload))
    target = ("bucket", bucket) if bucket else ("stream", stream)
    df.write.format("jetstream").option("servers", url).option(*target).mode("append").save()


@pytest.mark.needs_server("2.12")  # the atomic sink
def test_a_task_retried_after_the_window_is_exactly_once_with_markers(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path
) -> None:
    atomic_stream(js, "OUT", "out", window=1.0)
    flag = tmp_path / "failed"
    _write_8000(spark, server.url, "OUT", _fail_once_after_stored(server.url, "OUT", 1.0, str(flag)))
    assert int(flag.read_text()) >= 999, "the failed attempt had stored no rows: the retry proved nothing"
    stored = sorted(int(d) for d in data_of(js, "OUT", "out.>"))
    assert stored == list(range(8000))  # none twice, none lost
    # The job committed: each task's markers are trimmed to its last, which a zombie attempt must follow.
    assert [m["rows"] for m in markers(js, "OUT")] == [2000] * 4  # one per partition: 4 x 2,000 rows


def test_without_atomic_batches_a_late_retry_duplicates_as_readme_says(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path
) -> None:
    """The same failure on a stream without allow_atomic: message ids dedupe only within duplicate_window."""
    js.add_stream(name="OUTID", subjects=["out.>"], duplicate_window=1.0, allow_direct=True)
    flag = tmp_path / "failed"
    _write_8000(spark, server.url, "OUTID", _fail_once_after_stored(server.url, "OUTID", 1.0, str(flag)))
    stored = Counter(int(d) for d in data_of(js, "OUTID", "out.>"))
    assert set(stored) == set(range(8000))
    assert sum(stored.values()) - 8000 >= int(flag.read_text()) >= 999  # what the failed attempt stored, again


def test_within_the_window_message_ids_deduplicate_a_retry(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path
) -> None:
    js.add_stream(name="OUTW", subjects=["out.>"], duplicate_window=120, allow_direct=True)
    flag = tmp_path / "failed"
    _write_8000(spark, server.url, "OUTW", _fail_once_after_stored(server.url, "OUTW", 0.0, str(flag)))
    assert int(flag.read_text()) >= 999
    assert sorted(int(d) for d in data_of(js, "OUTW", "out.>")) == list(range(8000))


@pytest.mark.needs_server("2.12")  # the atomic sink
def test_the_sink_names_what_it_needs(server: NatsServer, js: jsclient.JetStream, caplog: Any) -> None:
    from jsclient.spark.sink import SinkMode, plan_write

    js.add_stream(name="NOMARK", subjects=["nm.>"], allow_atomic=True)
    with pytest.raises(jsclient.InvalidArgumentError, match=r"add '_jsclient\.commits\.NOMARK\.>' to the stream"):
        plan_write(SparkOptions.parse({"servers": server.url, "stream": "NOMARK"}))
    with pytest.raises(jsclient.InvalidArgumentError, match="'MISSING' does not exist"):
        plan_write(SparkOptions.parse({"servers": server.url, "stream": "MISSING"}))
    js.add_stream(name="IDS", subjects=["ids.>"], duplicate_window=30)
    with caplog.at_level(logging.WARNING, logger="jsclient.spark"):
        plan = plan_write(SparkOptions.parse({"servers": server.url, "subject": "ids.x"}))
    assert (plan.mode, plan.stream) == (SinkMode.MSGID, "IDS")
    assert "only within the duplicate_window of stream 'IDS' (30 s)" in caplog.text


# -- failOnDataLoss --------------------------------------------------------------------


@pytest.mark.server_behaviour("2.11", "the planner counts with batched direct gets, which 2.10 lacks")
@pytest.mark.parametrize("retention", ["limits", "interest", "workqueue"])
def test_messages_removed_after_planning_are_loss(
    server: NatsServer, js: jsclient.JetStream, caplog: Any, retention: str
) -> None:
    """The executor's read of a planned range finds fewer messages than the stream held when it was planned:
    through a consumer of the task's own (limits), or by direct get (interest: a consumer would be interest;
    work queue: an ack-none consumer is refused)."""
    js.add_stream(name="GONE", subjects=["gone.>"], allow_direct=True, retention=retention)
    if retention == "interest":
        js.add_consumer("GONE", durable_name="keep", ack_policy="explicit")  # so that the stream keeps them
    for i in range(3000):
        js.publish_async(f"gone.{i % 2}", b"%d" % i)
    js.publish_async_completed(timeout=30)
    info = js.stream_info("GONE")
    for filters in ("", "gone.1", "gone.0,gone.1"):
        opts = SparkOptions.parse({"servers": server.url, "stream": "GONE", "minPartitions": "2", "subjects": filters})
        ranges = plan_ranges(js, opts, 1001, 3000, info)
        assert [r.expected for r in ranges] == ([1000, 1000] if filters != "gone.1" else [500, 500])
        assert [r.pull for r in ranges] == [retention == "limits"] * 2
    opts = SparkOptions.parse({"servers": server.url, "stream": "GONE", "minPartitions": "2", "batchSize": "300"})
    first, second = plan_ranges(js, opts, 1001, 3000, info)
    odd = SparkOptions.parse({"servers": server.url, "stream": "GONE", "minPartitions": "2", "subjects": "gone.1"})
    odd_first, odd_second = plan_ranges(js, odd, 1001, 3000, info)
    js.purge_stream("GONE", seq=1501)  # aged out between planning and reading
    js.delete_msg("GONE", 2500)
    assert sum(b.num_rows for b in read_range(opts, second)) == 999
    assert sum(b.num_rows for b in read_range(odd, odd_second)) == 499  # 2500 (gone.1) was deleted: not loss
    with pytest.raises(DataLossError, match=r"held 1000 messages in sequences 1001\.\.2000.*and 500 were left to "
                       r"read: sequences 1001\.\.1500 purged"):
        list(read_range(opts, first))
    with pytest.raises(DataLossError, match=r"held 500 messages in sequences 1001\.\.2000.*250 of them purged"):
        list(read_range(odd, odd_first))  # filtered: the missing can only be counted
    lenient = SparkOptions.parse({**{"servers": server.url, "stream": "GONE"}, "failOnDataLoss": "false"})
    with caplog.at_level(logging.WARNING, logger="jsclient.spark"):
        rows = sum(b.num_rows for b in read_range(lenient, first))
    assert rows == 500 and "sequences 1001..1500 purged or expired" in caplog.text
    # The reads left nothing on the server: no consumer of theirs, and the stream's own consumer untouched.
    assert js.consumer_names("GONE") == (["keep"] if retention == "interest" else [])
    if retention == "interest":
        assert js.consumer_info("GONE", "keep").num_pending == 1499


def test_pulled_messages_decode_alike_from_every_ack_reply_form() -> None:
    """Server-free: sequence and time come from the ack reply, in either form the server writes (with domain and
    account hash, or without), in bulk or one at a time when the forms are mixed; a reply that is no ack
    subject is named."""
    from jsclient.spark.arrow import deliveries_to_batch

    plain = [b"o.1 1 $JS.ACK.S.C.1.7.3.1700000000123456789.3", b"o.2 1 $JS.ACK.S.C.1.9.4.1700000001000000000.0"]
    domain = [a.replace(b"$JS.ACK.S", b"$JS.ACK.hub.HASH.S") + b".tok" for a in plain]
    headers = [b"", b"NATS/1.0\r\nA:  b \r\nNats-Expected-Stream: S\r\n\r\n"]
    payloads = [b"one", b"two\r\n"]
    want = [
        {"subject": "o.1", "data": b"one", "headers": None, "stream": "S", "seq": 7,
         "timestamp": dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=dt.UTC)},
        {"subject": "o.2", "data": b"two\r\n", "headers": [("A", [" b "])], "stream": "S", "seq": 9,
         "timestamp": dt.datetime(2023, 11, 14, 22, 13, 21, tzinfo=dt.UTC)},
    ]
    for args in (plain, domain, [plain[0], domain[1]]):
        batch, in_range, seqs = deliveries_to_batch(args, headers, payloads, "S", 9)
        assert batch.to_pylist() == want and in_range == 2 and seqs.to_pylist() == [7, 9]
    batch, in_range, _ = deliveries_to_batch(plain, headers, payloads, "S", 8)
    assert [r["seq"] for r in batch.to_pylist()] == [7] and in_range == 1
    for bad in ([b"o.1 1 _INBOX.x", plain[1]], [b"o.1 1", plain[1]]):
        with pytest.raises(jsclient.Error, match=r"is not a \$JS\.ACK subject"):
            deliveries_to_batch(bad, headers, payloads, "S", 9)


def test_a_payload_holding_crlf_and_bytes_that_are_not_utf8_ends_the_run_and_raises_nothing() -> None:
    """Server-free: after a payload holding CRLF the cutter's pieces are out of step, and a piece that looks like
    a MSG line with bytes that are not UTF-8 must end the run (the parser reads the rest), not fail the read."""
    from jsclient.spark.arrow import cut_deliveries

    def frame(seq: int, data: bytes) -> bytes:
        return b"MSG s.1 1 $JS.ACK.S.C.1.%d.%d.1700000000000001000.0 %d\r\n%s\r\n" % (seq, seq, len(data), data)

    tricky = frame(2, b"a\r\nMSG x \xff r 1\r\nMSG y 1 r \xfe")
    wire = frame(1, b"first") + tricky + frame(3, b"third")
    taken, run = cut_deliveries(wire)
    assert taken == len(frame(1, b"first")) and run is not None and run.payloads.to_pylist() == [b"first"]
    events, rest = reference(wire)
    assert rest == b"" and [e.data for e in events] == [b"first", b"a\r\nMSG x \xff r 1\r\nMSG y 1 r \xfe", b"third"]
    assert cut_deliveries(tricky + frame(3, b"third")) == (0, None)


def test_the_cutter_ends_its_run_at_the_first_line_each_check_refuses() -> None:
    """Server-free: each check of the frame cutter (numpy over all the frames at once) ends the run exactly at
    the frame it refuses, whatever follows; bare CR and LF in payloads and a long run stay in it."""
    from jsclient.spark.arrow import cut_deliveries, run_to_batch

    def frame(seq: int, data: bytes = b"x", line: bytes | None = None) -> bytes:
        reply = b"$JS.ACK.S.C.1.%d.%d.1700000000000001000.0" % (seq, seq)
        return (line or b"MSG s.%d 1 %s %d" % (seq, reply, len(data))) + b"\r\n" + data + b"\r\n"

    good = b"".join(frame(i, b"a\rb\nc " * (i % 3)) for i in range(1, 2001))
    odd = {
        "unprintable": frame(0, line=b"MSG s.\x7f 1 r 1"),
        "control byte": frame(0, line=b"MSG s.\t 1 r 1"),
        "not UTF-8": frame(0, line=b"MSG s.\xff 1 r 1"),
        "no reply": frame(0, line=b"MSG s 1 1"),
        "an empty word": frame(0, line=b"MSG s  1 r 1"),
        "an empty subject": frame(0, line=b"MSG  1 r 1"),
        "an empty reply": frame(0, line=b"MSG s 1  1"),
        "a word more": frame(0, line=b"MSG s 1 r r 1"),
        "sid not digits": frame(0, line=b"MSG s a r 1"),
        "size of ten digits": frame(0, line=b"MSG s 1 r 0000000001"),
        "size not digits": frame(0, line=b"MSG s 1 r 1a"),
        "size too small": frame(0, b"xy", line=b"MSG s 1 r 1"),
        "CRLF in the payload": frame(0, b"a\r\nb"),
        "headers": b"HMSG s 1 r 12 13\r\nNATS/1.0\r\n\r\nx\r\n",
        "a status": b"HMSG _INBOX.x 1 28 28\r\nNATS/1.0 408 Request Timeout\r\n\r\n\r\n",
        "a ping": b"PING\r\n",
        "a line too long": frame(0, line=b"MSG s." + b"a" * (64 * 1024) + b" 1 r 1"),
        "a frame not whole": frame(0)[:-1],
    }
    for name, bad in odd.items():
        for before in (good, frame(7), b""):
            wire = before + bad + frame(9) + good
            taken, run = cut_deliveries(wire)
            assert taken == len(before), name
            events, rest = reference(wire[:taken])
            assert rest == b"" and (run.count if run else 0) == len(events), name
            if run is not None:
                assert run.payloads.to_pylist() == [e.data for e in events], name
                assert run.replies.to_pylist() == [e.reply.encode() for e in events], name
    taken, run = cut_deliveries(good)
    assert taken == len(good) and run is not None and run.count == 2000
    batch, in_range, _ = run_to_batch(run, "S", 10**9)
    assert batch.column("seq").to_pylist() == list(range(1, 2001)) and in_range == 2000
    assert batch.column("subject").to_pylist()[:2] == ["s.1", "s.2"]


def test_a_message_larger_than_the_kept_scratch_is_cut_whole_and_leaves_no_large_array_behind() -> None:
    """Server-free: the cutter's reused arrays stay bounded after bytes gathered around one large message."""
    from jsclient.spark import arrow

    data = bytes(range(256)) * (9 << 12)  # 9 MiB, every byte value
    assert len(data) > arrow._SCRATCH_KEPT
    wire = b"MSG big 1 $JS.ACK.S.C.1.1.1.1700000000000001000.0 %d\r\n%s\r\nPING\r\n" % (len(data), data)
    taken, run = arrow.cut_deliveries(wire)
    assert taken == len(wire) - len(b"PING\r\n") and run is not None and run.payloads[0].as_py() == data
    assert max(len(a) for a in arrow._cache.scratch) <= arrow._SCRATCH_KEPT


def test_ack_replies_of_mixed_forms_give_their_sequences_and_times() -> None:
    """Server-free: replies whose dots are found in one scan are cut at fixed places only when every reply has
    as many as the first; replies of two forms, or the same count of dots spread unevenly, take the slower
    paths and still give each message its own sequence and time."""
    import pyarrow as pa

    from jsclient.spark.arrow import PulledRun, run_to_batch

    plain = b"$JS.ACK.S.C.1.%d.%d.1700000000%09d.0"
    domain = b"$JS.ACK.hub.acc.S.C.1.%d.%d.1700000000%09d.0.tok"
    old = b"$JS.ACK.hub.acc.S.C.1.%d.%d.1700000000%09d.0"
    for forms in ([plain] * 3, [domain] * 3, [plain, domain, plain], [old, plain, domain], [old] * 3):
        replies = [form % (i, i, i * 1000) for i, form in enumerate(forms, start=5)]
        run = PulledRun(pa.array([b"s.a", b"s.b", b"s.c"]), pa.array(replies), pa.array([b"1", b"2", b"3"]))
        for sliced in (run, PulledRun(*(pa.concat_arrays([pa.array([b"z"], pa.binary()), a]).slice(1)
                                        for a in (run.subjects, run.replies, run.payloads)))):
            batch, _, seqs = run_to_batch(sliced, "S", 100)
            assert seqs.to_pylist() == [5, 6, 7]
            stamps = [t.value for t in batch.column("timestamp")]
            assert stamps == [(1_700_000_000_000_000_000 + i * 1000) // 1000 for i in (5, 6, 7)]
    # As many dots in all as three replies of the first's form, but one fewer in the second and one more in the
    # third: not cut at the first's places (which would read the third's first token as the second's time).
    uneven = [b"$JS.ACK.S.C.1.5.5.1700000000000005000.0", b"$JS.ACK.S.C.1.6.6.1700000000000006000",
              b"$JS.ACK.S.C.1.7.7.1700000000000007000.0.x"]
    run = PulledRun(pa.array([b"s.a", b"s.b", b"s.c"]), pa.array(uneven), pa.array([b"1", b"2", b"3"]))
    with pytest.raises(jsclient.Error, match="has 8 tokens"):
        run_to_batch(run, "S", 100)


@settings(max_examples=400, deadline=None)
@given(frames=FRAMES, damage=DAMAGE)
def test_runs_of_deliveries_are_cut_as_the_reference_reads_them(frames: list, damage: list) -> None:
    """Server-free: what :func:`cut_deliveries` takes from a pull's bytes is whole frames, the messages the
    reference reading finds there, plain MSG frames with a reply; all of them when nothing is damaged, up to
    the first with headers, without a reply, with CRLF in its payload or followed by a PING."""
    from jsclient.spark.arrow import cut_deliveries, run_to_batch

    wire = wire_of(frames, damage)
    taken, run = cut_deliveries(wire)
    events, rest = reference(wire[:taken])
    assert rest == b"" and all(type(e) is MsgEvent and e.header is None and e.reply for e in events)
    got = [] if run is None else list(zip(run.subjects.to_pylist(), run.replies.to_pylist(),
                                          run.payloads.to_pylist(), strict=True))
    assert got == [(e.subject.encode(), e.reply.encode(), e.data) for e in events]
    whole = outcome(lambda: reference(wire)[0])
    assert whole is ProtocolError or whole[: len(events)] == events
    if run is not None:
        assert run.counted == sum(len(s) + len(r) + len(d) for s, r, d in got)
        assert run.last_reply == got[-1][1]
    if not damage:
        plain = 0
        for _, _, reply, header, payload, ping in frames:
            if header is not None or reply is None or b"\r\n" in payload:
                break
            plain += 1
            if ping:
                break
        assert len(got) == plain
    acked = [(f"s.{i}".encode(), b"$JS.ACK.S.C.1.%d.%d.1700000000000001000.0" % (i, i), b"%d\r\n" % i)
             for i in range(1, 4)]
    taken, run = cut_deliveries(b"".join(b"MSG %s 1 %s %d\r\n%s\r\n" % (s, r, len(d), d) for s, r, d in acked))
    assert taken == 0 and run is None  # a payload with CRLF, first: nothing for the run
    acked = [(s, r, d.strip()) for s, r, d in acked]
    taken, run = cut_deliveries(b"".join(b"MSG %s 1 %s %d\r\n%s\r\n" % (s, r, len(d), d) for s, r, d in acked))
    assert run is not None
    batch, in_range, seqs = run_to_batch(run, "S", 2)
    assert [(r["subject"], r["data"], r["seq"]) for r in batch.to_pylist()] == [("s.1", b"1", 1), ("s.2", b"2", 2)]
    assert in_range == 2 and seqs.to_pylist() == [1, 2, 3]


def test_atomic_chunks_and_their_frames_are_what_the_row_by_row_rules_make(monkeypatch: pytest.MonkeyPatch) -> None:
    """Server-free: the sink's Arrow-built member frames are byte for byte those member_frame makes one at a
    time (with and without header lines, from slices), and chunks close at CHUNK_ROWS rows or at the row whose
    payload reaches CHUNK_BYTES, across record batches and after rows an earlier attempt stored."""
    import random

    import pyarrow as pa

    from jsclient.jetstream.batch import member_frame
    from jsclient.spark import sink

    rng = random.Random(7)
    subjects = [b"copy.%d" % rng.randrange(10 ** rng.randrange(1, 9)) for _ in range(999)]
    payloads = [rng.randbytes(rng.choice([0, 1, 10, 100, 1000])) for _ in range(999)]
    payloads[3] = rng.randbytes(70_000)  # frame sizes past those the sink looks up, in the slices that hold it
    batch_id = b"0123456789abcdef0123456789abcdef"
    for lines in ([b""] * 999, [rng.choice([b"", b"A: b\r\n", b"Nats-Msg-Id: x\r\nB: c\r\n"]) for _ in range(999)]):
        rows = sink.Columns.of(subjects, payloads, lines)
        for start, n in ((0, 999), (1, 998), (500, 7), (998, 1)):
            want = b"".join(member_frame(s, h, batch_id, i, d) for i, (s, h, d) in enumerate(
                zip(subjects[start:start + n], lines[start:start + n], payloads[start:start + n], strict=True), 1))
            assert sink.member_frames(rows.slice(start, n), batch_id) == want

    class Chunks(sink._AtomicTask):
        def __init__(self, skipped: int) -> None:  # no server: only the chunking
            self.stored = self.skipped = skipped
            self.seen = self.pending_rows = self.pending_bytes = 0
            self.pending = []
            self.inflight = None
            self.closed: list[list[bytes]] = []

        def _flush(self) -> None:
            self.closed.append(sink.Columns.concat(self.pending).payloads.to_pylist())
            self.pending, self.pending_rows, self.pending_bytes = [], 0, 0

    monkeypatch.setattr(sink, "CHUNK_ROWS", 7)
    monkeypatch.setattr(sink, "CHUNK_BYTES", 100)
    for _ in range(300):
        sizes = rng.choice([[0], [10], [0, 30, 99], [100, 150, 1]])
        data = [b"y" * rng.choice(sizes) for _ in range(rng.randrange(40))]
        skipped = rng.choice([0, 0, rng.randrange(len(data) + 3)])
        task = Chunks(skipped)
        cuts = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, rng.randrange(5))))
        for lo, hi in zip([0, *cuts], [*cuts, len(data)], strict=True):
            if hi > lo:
                task.add(sink.Columns.of([b"s"] * (hi - lo), data[lo:hi], [b""] * (hi - lo)))
        task.finish()
        want: list[list[bytes]] = [[]]
        for payload in data[skipped:]:
            want[-1].append(payload)
            if len(want[-1]) >= 7 or sum(map(len, want[-1])) >= 100:
                want.append([])
        assert task.closed == [chunk for chunk in want if chunk]
    string_data = pa.RecordBatch.from_pydict({"subject": ["a.b", "a.b"], "data": ["é", None]})
    plan = sink.WritePlan(sink.SinkMode.MSGID, None, None, None)
    cols = sink.StreamRows(SparkOptions.parse({"servers": "nats://127.0.0.1:1"}), plan)(string_data)
    assert cols.lists() == ([b"a.b", b"a.b"], ["é".encode(), b""], [b"", b""])


def test_a_task_abandoning_its_range_removes_its_consumer(server: NatsServer, js: jsclient.JetStream) -> None:
    """Spark stops reading a partition early (a limit): the task's consumer goes at once, not after its idle
    timeout; one that could not be removed (the task died) carries an idle timeout for the server."""
    js.add_stream(name="HALF", subjects=["half.>"])
    for i in range(5000):
        js.publish_async("half.x", b"%d" % i)
    js.publish_async_completed(timeout=30)
    opts = SparkOptions.parse({"servers": server.url, "stream": "HALF", "batchSize": "500"})
    (whole,) = plan_ranges(js, opts, 1, 5000, js.stream_info("HALF"))
    batches = read_range(opts, whole)
    assert next(batches).num_rows > 0
    (name,) = js.consumer_names("HALF")
    config = js.consumer_info("HALF", name).config
    assert (config.ack_policy, config.mem_storage, config.inactive_threshold) == ("none", True, CONSUMER_IDLE)
    batches.close()
    assert js.consumer_names("HALF") == []


@pytest.mark.server_behaviour("2.11", "the planner counts with batched direct gets, which 2.10 lacks")
def test_a_replicated_stream_is_read_whole_through_one_replica_consumers() -> None:
    """An R3 stream on a three-server cluster: each task's consumer (one replica, in memory) is placed by the
    meta leader and pulled through whichever server the task reached; every message is read once."""
    with NatsCluster(3) as cluster, jsclient.connect(cluster.urls) as nc:
        js = nc.jetstream(timeout=5)
        deadline = time.monotonic() + 30
        while True:
            try:
                js.add_stream(name="R3READ", subjects=["r3r.>"], num_replicas=3, allow_direct=True)
                break
            except (jsclient.JetStreamAPIError, jsclient.TimeoutError):  # the meta leader is still being elected
                assert time.monotonic() < deadline, "the cluster formed no JetStream meta leader"
                time.sleep(0.5)
        for i in range(3000):
            js.publish_async(f"r3r.{i % 3}", b"%d" % i)
        js.publish_async_completed(timeout=30)
        opts = SparkOptions.parse({"servers": ",".join(cluster.urls), "stream": "R3READ", "minPartitions": "3"})
        ranges = plan_ranges(js, opts, 1, 3000, js.stream_info("R3READ"))
        assert [r.pull for r in ranges] == [True] * 3 and sum(r.expected or 0 for r in ranges) == 3000
        seqs = [row["seq"] for r in ranges for b in read_range(opts, r) for row in b.to_pylist()]
        assert seqs == list(range(1, 3001))
        assert js.consumer_names("R3READ") == []
        jsclient.spark.connections.close_all()  # this test's own servers go: so do the links to them


def test_without_direct_get_a_range_below_the_first_sequence_is_loss(
    server: NatsServer, js: jsclient.JetStream
) -> None:
    """The docs: a stream without allow_direct has no counts to check against, so only a range that starts below
    the stream's first sequence is reported."""
    js.add_stream(name="NODIRECT", subjects=["nd.>"])
    for i in range(200):
        js.publish_async("nd.x", b"%d" % i)
    js.publish_async_completed(timeout=30)
    opts = SparkOptions.parse({"servers": server.url, "stream": "NODIRECT", "minPartitions": "2"})
    first, second = plan_ranges(js, opts, 1, 200, js.stream_info("NODIRECT"))
    assert first.expected is None
    js.purge_stream("NODIRECT", seq=51)
    with pytest.raises(DataLossError, match=r"no longer holds sequence 1, planned to be read"):
        list(read_range(opts, first))
    assert [r["seq"] for b in read_range(opts, second) for r in b.to_pylist()] == list(range(101, 201))


def test_the_sink_refuses_header_lines_smuggled_in_values(server: NatsServer, js: jsclient.JetStream) -> None:
    import pyarrow as pa

    from jsclient.spark.sink import plan_write, write_batches

    js.add_stream(name="HDR", subjects=["hdr.>"])
    opts = SparkOptions.parse({"servers": server.url, "stream": "HDR"})
    plan = plan_write(opts)
    map_type = pa.map_(pa.string(), pa.list_(pa.string()))
    bad = [
        {"subject": ["hdr.a"], "data": [b"x"], "msg_id": ["id-1\r\nNats-Rollup: all"]},
        {"subject": ["hdr.a"], "data": [b"x"], "headers": pa.array([[("A", ["ok\r\nB: smuggled"])]], map_type)},
        {"subject": ["hdr.a"], "data": [b"x"], "headers": pa.array([[("bad name", ["v"])]], map_type)},
    ]
    for columns in bad:
        with pytest.raises(jsclient.BadHeaderError):
            write_batches(opts, plan, iter([pa.RecordBatch.from_pydict(columns)]), write="w", batch_id=0, partition=0)
    assert js.stream_info("HDR").state.messages == 0


def test_a_stream_made_again_under_a_checkpoint_is_loss(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path
) -> None:
    js.add_stream(name="AGAIN", subjects=["again.>"], allow_direct=True)
    for i in range(50):
        js.publish("again.x", b"old-%d" % i)

    seen: dict[str, list[bytes]] = {"true": [], "false": []}

    def run(fail: str) -> Any:
        src = (
            spark.readStream.format("jetstream").option("servers", server.url).option("stream", "AGAIN")
            .option("failOnDataLoss", fail).load()
        )
        query = (
            src.writeStream.foreachBatch(lambda df, _: seen[fail].extend(bytes(r.data) for r in df.collect()))
            .option("checkpointLocation", str(tmp_path / fail)).trigger(availableNow=True).start()
        )
        query.awaitTermination(120)
        return query

    assert run("true").exception() is None and run("false").exception() is None
    js.delete_stream("AGAIN")
    js.add_stream(name="AGAIN", subjects=["again.>"], allow_direct=True)
    for i in range(80):  # more than before: sequence numbers alone would not show it
        js.publish("again.x", b"new-%d" % i)
    with pytest.raises(Exception, match="deleted and created again"):
        run("true").awaitTermination(60)
    assert run("false").exception() is None
    assert seen["false"] == [b"old-%d" % i for i in range(50)] + [b"new-%d" % i for i in range(80)]


# -- headers and payloads round trip --------------------------------------------------


@pytest.mark.needs_server("2.12")  # the atomic sink
def test_a_read_then_write_copy_is_byte_identical(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    js.add_stream(name="ORIG", subjects=["orig.>"], allow_direct=True)
    atomic_stream(js, "COPY", "copy")
    sent = []
    for i in range(300):
        data = b"%d:" % i + bytes([i % 256, 0, 13, 10, 255]) * (i % 7) + b"\r\n"
        headers: dict[str, Any] = {"Trace": f"  spaced {i}  ", "Multi": ["a", " b", "c "]} if i % 2 else {}
        if i % 5 == 0:
            headers["Nats-Msg-Id"] = f"orig-{i}"
        js.publish(f"orig.{i % 3}", data, headers=headers or None, expected_last_seq=i if i % 4 == 0 else None)
        sent.append((f"orig.{i % 3}", data, headers))
    df = spark.read.format("jetstream").option("servers", server.url).option("stream", "ORIG").load()
    rows = {r.seq: r for r in df.collect()}
    assert not any(k.startswith("Nats-") and k != "Nats-Msg-Id" for r in rows.values() for k in (r.headers or {}))
    df.selectExpr("replace(subject, 'orig.', 'copy.') as subject", "data", "headers").write.format(
        "jetstream"
    ).option("servers", server.url).option("stream", "COPY").mode("append").save()
    copied = list(js.direct_get_batch("COPY", "copy.>", max_messages=1000))
    assert len(copied) == 300
    by_data: dict[tuple[str, bytes, str], Any] = {}
    for m in copied:
        by_data[(m.subject.replace("copy.", "orig."), m.data, m.headers.get("Trace", ""))] = m
    for subject, data, headers in sent:
        m = by_data[(subject, data, headers.get("Trace", ""))]
        assert m.data == data
        assert m.headers.get_all("Multi") == headers.get("Multi", [])
        assert m.headers.get("Nats-Msg-Id") == headers.get("Nats-Msg-Id")
        assert "Nats-Expected-Last-Sequence" not in m.headers


def test_kv_get_many_in_map_in_arrow(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    kv = js.create_key_value("prices")
    for i in range(20):
        kv.put(f"p{i}", b"%d" % (i * 10))
    opts = SparkOptions.parse({"servers": server.url})

    def enrich(batches: Any) -> Any:
        import pyarrow as pa

        for batch in batches:
            keys = batch.column("key").to_pylist()
            values = jsclient.spark.kv_get_many(opts, "prices", keys)
            yield pa.RecordBatch.from_arrays([batch.column("key"), pa.array(values, pa.binary())], ["key", "value"])

    df = spark.range(100, numPartitions=3).selectExpr("concat('p', cast(id % 25 as string)) as key")
    out = {r.key: r.value for r in df.mapInArrow(enrich, "key string, value binary").collect()}
    assert out["p3"] == b"30" and out["p21"] is None and len(out) == 25
