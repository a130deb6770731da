"""Each feature a server may lack, on the server this run tests against (issue #39).

On a release new enough a feature works (a minimal real call); on an older
one it raises FeatureNotSupportedError naming the feature and the release it
needs, before anything is sent (``out_msgs`` unchanged), and the connection
stays usable.  Which half a test checks follows the release of the binary
under test (``NATS_SERVER_BIN``), never what the client reads from INFO, so
``make test`` proves both halves across the matrix.  The direct gets a 2.10
server lacks are read another way there (one get per message); the tests say
which answers must be the same on every release.
"""

from __future__ import annotations

import datetime as dt
import io
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

import jsclient
from jsclient.jetstream import features
from jsclient.jetstream.api import StreamConsumerSource, StreamSource
from jsclient.jetstream.direct import StoredMessage, count_matching
from jsclient.jetstream.features import Feature
from jsclient.message import Msg
from jsclient.options import Options
from jsclient.server import NatsServer

from .conftest import server_release

pytestmark = pytest.mark.compat

T = TypeVar("T")



def has(feature: Feature) -> bool:
    """Whether the release under test has ``feature`` (from the binary's own version)."""
    major, minor = (int(part) for part in feature.version.split("."))
    return server_release() >= (major, minor)


def refused_or_works(nc: jsclient.Connection, feature: Feature, call: Callable[[], T]) -> T | None:
    """``call()``'s result where the server has ``feature``; else the refusal, checked, and None."""
    if has(feature):
        return call()
    sent = nc.stats()["out_msgs"]
    with pytest.raises(jsclient.FeatureNotSupportedError) as info:
        call()
    assert f"{feature.name} needs nats-server {feature.version} or newer" in str(info.value)
    assert nc.stats()["out_msgs"] == sent, "a refused call sent something"
    nc.flush(timeout=5)  # still healthy
    return None


def _later(**delta: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(**delta)


# -- API levels (ADR-44) ----------------------------------------------------------------------------


def test_the_level_is_what_the_server_supports(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    """2.11 announces no api_lvl in INFO yet has level 1; 2.10 has 0: a missing field is not read as 0."""
    level = js.api_level()
    assert type(level) is int
    info = nc.server_info
    if server_release() < (2, 11):
        assert "api_lvl" not in info and level == 0 and features.server_level(info) == 0
    elif server_release() < (2, 12):
        assert "api_lvl" not in info and level == 1 and features.server_level(info) == 1
    else:
        assert info["api_lvl"] == level == features.server_level(info) >= 3


def test_every_feature_has_a_test_here() -> None:
    tested = {
        features.MESSAGE_TTL, features.DELETE_MARKERS, features.CONSUMER_PAUSE, features.PRIORITY_GROUPS,
        features.PRIORITIZED, features.COUNTERS, features.ATOMIC_BATCH, features.SCHEDULES, features.ASYNC_PERSIST,
        features.FAST_BATCH, features.REPEATING_SCHEDULES, features.SCHEDULE_SOURCE, features.SOURCE_CONSUMER,
        features.CONSUMER_RESET, features.ACK_FLOW_CONTROL, features.BATCHED_DIRECT_GET, features.MULTI_LAST_DIRECT_GET,
        features.START_TIME_GET,
    }
    assert set(features.ALL) == tested


# -- 2.11 ---------------------------------------------------------------------------------------------


def test_per_message_ttl(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    feature = features.MESSAGE_TTL
    if refused_or_works(nc, feature, lambda: js.add_stream(name="CTTL", subjects=["cttl"], allow_msg_ttl=True)) is None:
        js.add_stream(name="CTTL", subjects=["cttl"])  # where the calls below must be refused
    ack = refused_or_works(nc, feature, lambda: js.publish("cttl", b"x", ttl=60.0))  # a float without a fraction
    later = refused_or_works(nc, feature, lambda: js.publish_async("cttl", b"y", ttl=dt.timedelta(minutes=1)))
    kv = refused_or_works(nc, feature, lambda: js.create_key_value("cttl", limit_marker_ttl=60.0))
    if kv is None:
        kv = js.create_key_value("cttl")
    revision = refused_or_works(nc, feature, lambda: kv.create("k", b"v", ttl=60.0))
    purged = refused_or_works(nc, feature, lambda: kv.purge("k", ttl=60))
    if has(feature):
        assert ack is not None and later is not None and later.result(5).seq == 2
        assert js.get_msg("CTTL", ack.seq).hdrs == b"NATS/1.0\r\nNats-TTL: 60\r\n\r\n"
        assert kv.status().limit_marker_ttl == 60.0 and revision == 1 and purged == 2
    else:
        assert js.stream_info("CTTL").state.messages == 0 and kv.status().values == 0


def test_delete_markers(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    made = refused_or_works(
        nc, features.DELETE_MARKERS, lambda: js.add_stream(name="CDM", subjects=["cdm"], subject_delete_marker_ttl=60)
    )
    assert made is None or made.config.subject_delete_marker_ttl == 60.0


def test_consumer_pause(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    js.add_stream(name="CP", subjects=["cp"])
    js.add_consumer("CP", durable_name="d")
    feature = features.CONSUMER_PAUSE
    paused = refused_or_works(nc, feature, lambda: js.pause_consumer("CP", "d", _later(hours=1)))
    resumed = refused_or_works(nc, feature, lambda: js.resume_consumer("CP", "d"))
    made = refused_or_works(
        nc, feature, lambda: js.add_consumer("CP", durable_name="p", pause_until=_later(hours=1))
    )
    if has(feature):
        assert paused is not None and paused.paused and resumed is not None and not resumed.paused
        assert made is not None and made.paused


def test_priority_groups(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    js.add_stream(name="CPG", subjects=["cpg"])
    js.add_consumer("CPG", durable_name="plain")
    feature = features.PRIORITY_GROUPS
    made = refused_or_works(
        nc, feature,
        lambda: js.add_consumer("CPG", durable_name="g", priority_groups=["jobs"], priority_policy="pinned_client"),
    )
    member = refused_or_works(nc, feature, lambda: js.pull_subscribe("cpg", "g" if made else "plain", group="jobs"))
    refused_or_works(nc, feature, lambda: js.unpin_consumer("CPG", "g" if made else "plain", "jobs"))
    if has(feature):
        assert made is not None and made.config.priority_groups == ["jobs"]
        js.publish("cpg", b"1")
        assert member is not None and [m.data for m in member.fetch(1, timeout=5)] == [b"1"] and member.pin_id
        member.unsubscribe()


def test_direct_get_by_start_time(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    """A 2.10 server ignores start_time beside next_by_subj (the wrong message) and refuses it alone."""
    js.add_stream(name="CST", subjects=["cst.>"], allow_direct=True)
    for i in range(3):
        js.publish(f"cst.{i}", b"%d" % i)
    past = _later(hours=-1)
    feature = features.START_TIME_GET
    one = refused_or_works(nc, feature, lambda: js.direct_get("CST", next_by_subj="cst.1", start_time=past))
    got = refused_or_works(nc, feature, lambda: js.get_msg("CST", start_time=past))
    batch = refused_or_works(nc, feature, lambda: js.direct_get_batch("CST", "cst.>", max_messages=5, start_time=past))
    if has(feature):
        assert one is not None and got is not None and batch is not None
        assert (one.seq, got.seq, [m.seq for m in batch]) == (2, 1, [1, 2, 3])
        with pytest.raises(jsclient.MessageNotFoundError):
            js.direct_get("CST", next_by_subj="cst.1", start_time=_later(hours=1))


def test_multi_subject_direct_get(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    """A 2.10 server answers 408 Empty Request: refused at the call, before anything is sent."""
    js.add_stream(name="CML", subjects=["cml.>"], allow_direct=True)
    for subject, data in (("cml.a", b"1"), ("cml.b", b"2"), ("cml.a", b"3"), ("cml.c", b"4"), ("cml.b", b"5")):
        js.publish(subject, data)
    feature = features.MULTI_LAST_DIRECT_GET
    read = refused_or_works(nc, feature, lambda: js.direct_get_last_for_subjects("CML", ["cml.a", "cml.b"]))
    small = refused_or_works(nc, feature, lambda: js.direct_get_last_for_subjects("CML", ["cml.>"], max_messages=1))
    if has(feature):
        assert read is not None and small is not None
        assert {m.subject: m.data for m in read} == {"cml.a": b"3", "cml.b": b"5"}
        # Continued one message at a time: a 2.11 end of batch counts one too few (0 with one to go).
        assert [(m.subject, m.data) for m in small] == [("cml.a", b"3"), ("cml.c", b"4"), ("cml.b", b"5")]


def test_batched_direct_get_is_never_short(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    """2.10 ignores ``batch`` and answers one message: there the batch is read one get at a time, with the
    same answer, batch limit, max_bytes cut and end as from a server that batches."""
    js.add_stream(name="CBD", subjects=["cbd.>"], allow_direct=True)
    for i in range(8):
        js.publish(f"cbd.{i % 3}", b"x" * 100, headers={"H": "abc"} if i % 2 else None)
    middle = js.direct_get_batch("CBD", "cbd.>", max_messages=5, seq=3)
    assert [m.seq for m in middle] == [3, 4, 5, 6, 7] and middle.last_sequence == 7
    assert middle.num_pending == (1 if has(features.BATCHED_DIRECT_GET) else None)  # 2.10 cannot count
    rest = js.direct_get_batch("CBD", "cbd.>", max_messages=50, seq=6)
    assert [m.seq for m in rest] == [6, 7, 8] and rest.num_pending == 0
    assert [m.seq for m in js.direct_get_batch("CBD", "cbd.1", max_messages=10)] == [2, 5, 8]
    assert list(js.direct_get_batch("CBD", "cbd.none", max_messages=5)) == []
    # max_bytes as the server counts it (subject, stored headers, payload; the message that reaches it is
    # sent): 105 bytes, then 125 (a 20-byte header block of its own), 105, 125 ...
    cut = {limit: len(list(js.direct_get_batch("CBD", "cbd.>", max_messages=10, max_bytes=limit)))
           for limit in (1, 105, 106, 230, 231, 400, 10_000)}
    assert cut == {1: 1, 105: 1, 106: 2, 230: 2, 231: 3, 400: 4, 10_000: 8}
    js.add_stream(name="CBDX", subjects=["cbdx"])
    js.publish("cbdx", b"x")
    with pytest.raises(jsclient.DirectGetDisabledError):
        list(js.direct_get_batch("CBDX", "cbdx", max_messages=5))


def test_counting_for_the_spark_planner(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    """Exact counts from 2.11 on (whose message Nats-Num-Pending counts the message itself, unlike 2.12+);
    None from 2.10, which cannot count and is not asked."""
    js.add_stream(name="CCM", subjects=["ccm.>"], allow_direct=True)
    for i in range(8):
        js.publish(f"ccm.{i % 3}", b"x")
    sent = nc.stats()["out_msgs"]
    counts = [count_matching(js, "CCM", "ccm.>", seq) for seq in (1, 3, 8, 9)]
    counts += [count_matching(js, "CCM", "ccm.1", seq) for seq in (1, 3, 9)]
    if has(features.BATCHED_DIRECT_GET):
        assert counts == [8, 6, 1, 0, 3, 2, 0]
    else:
        assert counts == [None] * 7 and nc.stats()["out_msgs"] == sent


def test_object_store_reads_chunks_on_every_server(js: jsclient.JetStream) -> None:
    """Object reads ask for batches of chunks: one get per chunk from 2.10, every chunk either way."""
    store = js.create_object_store("compat")
    data = bytes(range(256)) * 200
    store.put("blob", io.BytesIO(data), chunk_size=1000)
    assert store.get("blob").read() == data


def test_bulk_reader_reads_every_message_once(server: NatsServer, js: jsclient.JetStream) -> None:
    """What the Spark source's tasks read interest and work-queue streams with."""
    from jsclient.jetstream.bulk import BulkReader

    js.add_stream(name="CBR", subjects=["cbr.>"], allow_direct=True)
    for i in range(300):
        js.publish_async(f"cbr.{i % 3}", b"%d" % i, headers={"I": str(i)} if i % 50 == 0 else None)
    js.publish_async_completed(timeout=30)
    reader = BulkReader(Options.build([server.url]))

    def read(subject: str, first: int, last: int, **kw: int) -> list[StoredMessage]:
        out: list[StoredMessage] = []
        for headers, payloads in reader.read("CBR", subject, first, last, timeout=10, **{"batch": 70, **kw}):
            out.extend(StoredMessage(Msg.make("", p, header=h)) for h, p in zip(headers, payloads, strict=True))
        return [m for m in out if m.seq <= last]

    try:
        assert [m.seq for m in read(">", 1, 300, max_bytes=1 << 20)] == list(range(1, 301))
        assert [m.seq for m in read(">", 1, 300, max_bytes=500)] == list(range(1, 301))
        assert [m.seq for m in read("cbr.1", 10, 200, max_bytes=1 << 20)] == [s for s in range(10, 201) if s % 3 == 2]
        assert read(">", 400, 900, max_bytes=1 << 20) == []
        first = read(">", 101, 101, max_bytes=1 << 20)[0]
        assert (first.subject, first.data, first.headers["I"]) == ("cbr.1", b"100", "100")
    finally:
        reader.close()


def test_kv_get_many_on_every_server(server: NatsServer, js: jsclient.JetStream) -> None:
    """One multi-subject get from 2.11, one get per key from 2.10: the same values."""
    import jsclient.spark

    kv = js.create_key_value("cmany", history=3)
    for i in range(5):
        kv.put(f"k{i}", b"v%d" % i)
    kv.put("k1", b"v1-new")
    kv.delete("k2")
    kv.purge("k3")
    opts = jsclient.spark.SparkOptions.parse({"servers": server.url})
    got = jsclient.spark.kv_get_many(opts, "cmany", ["k1", "nope", "k0", None, "k2", "k3", "k4", "k1"])
    assert got == [b"v1-new", None, b"v0", None, None, None, b"v4", b"v1-new"]
    with pytest.raises(jsclient.InvalidArgumentError):
        jsclient.spark.kv_get_many(opts, "cmany", ["k1", "bad key"])


# -- 2.12 ---------------------------------------------------------------------------------------------


def test_prioritized_policy(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    """2.11 has priority groups but not this policy (its server refuses it as invalid JSON)."""
    js.add_stream(name="CPP", subjects=["cpp"])
    made = refused_or_works(
        nc, features.PRIORITIZED,
        lambda: js.add_consumer("CPP", durable_name="p", priority_groups=["jobs"], priority_policy="prioritized"),
    )
    if made is not None:
        member = js.pull_subscribe("cpp", "p", group="jobs", priority=0)
        js.publish("cpp", b"1")
        assert [m.data for m in member.fetch(1, timeout=5)] == [b"1"]
        member.unsubscribe()


def test_counters(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    feature = features.COUNTERS
    direct = {"allow_direct": True}
    if refused_or_works(nc, feature, lambda: js.add_stream(name="CC", subjects=["cc.>"], allow_msg_counter=True,
                                                           **direct)) is None:
        js.add_stream(name="CC", subjects=["cc.>"], **direct)
    total = refused_or_works(nc, feature, lambda: js.counter_add("cc.a", 5))
    read = refused_or_works(nc, feature, lambda: js.counter_get("CC", "cc.a"))
    many = refused_or_works(nc, feature, lambda: js.counter_get_many("CC", ["cc.>"]))
    if has(feature):
        assert (total, read, many) == (5, 5, {"cc.a": 5})
    else:
        assert js.stream_info("CC").state.messages == 0


def test_atomic_batch(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    """An older server would store each message of a batch on its own: not atomic, so refused."""
    feature = features.ATOMIC_BATCH
    if refused_or_works(nc, feature, lambda: js.add_stream(name="CAB", subjects=["cab"], allow_atomic=True)) is None:
        js.add_stream(name="CAB", subjects=["cab"])
    ack = refused_or_works(nc, feature, lambda: js.publish_batch([("cab", b"1"), ("cab", b"2")]))
    batch = refused_or_works(nc, feature, lambda: js.atomic_batch())
    if has(feature):
        assert ack is not None and (ack.seq, ack.count) == (2, 2)
        assert batch is not None
        with batch as b:
            b.add("cab", b"3")
    assert js.stream_info("CAB").state.messages == (3 if has(feature) else 0)


def test_schedules(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    feature = features.SCHEDULES
    if refused_or_works(nc, feature, lambda: js.add_stream(name="CS", subjects=["cs.>"], allow_msg_schedules=True)) \
            is None:
        js.add_stream(name="CS", subjects=["cs.>"])
    ack = refused_or_works(
        nc, feature, lambda: js.publish("cs.s", b"x", schedule=_later(hours=1), schedule_target="cs.t")
    )
    assert (ack.seq if ack else 0) == (1 if has(feature) else 0)


def test_async_persist(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    made = refused_or_works(
        nc, features.ASYNC_PERSIST, lambda: js.add_stream(name="CAP", subjects=["cap"], persist_mode="async")
    )
    assert made is None or made.config.persist_mode == "async"


# -- 2.14 ---------------------------------------------------------------------------------------------


def test_fast_batch(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    feature = features.FAST_BATCH
    if refused_or_works(nc, feature, lambda: js.add_stream(name="CFB", subjects=["cfb"], allow_batched=True)) is None:
        js.add_stream(name="CFB", subjects=["cfb"])
    ack = refused_or_works(nc, feature, lambda: js.publish_stream([("cfb", b"1"), ("cfb", b"2")]))
    assert (ack.count if ack else 0) == (2 if has(feature) else 0)


@pytest.mark.parametrize(
    "schedule",
    [dt.timedelta(minutes=5), "@every 5m", "@hourly", "0 30 * * * *"],
)
def test_repeating_schedules(nc: jsclient.Connection, js: jsclient.JetStream, schedule: object) -> None:
    """2.12 takes only '@at' schedules (it answers 10189 'pattern is invalid' to the others)."""
    js.add_stream(name="CRS", subjects=["crs.>"], **({"allow_msg_schedules": True} if has(features.SCHEDULES) else {}))
    ack = refused_or_works(nc, features.REPEATING_SCHEDULES,
                           lambda: js.publish("crs.s", b"x", schedule=schedule, schedule_target="crs.t"))
    assert (ack.seq if ack else 0) == (1 if has(features.REPEATING_SCHEDULES) else 0)


def test_schedule_source(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    """2.12 takes Nats-Schedule-Source and ignores it: its schedule would publish its own body."""
    js.add_stream(name="CSS", subjects=["css.>"], allow_direct=True,
                  **({"allow_msg_schedules": True} if has(features.SCHEDULES) else {}))
    js.publish("css.src", b"sampled")
    ack = refused_or_works(nc, features.SCHEDULE_SOURCE, lambda: js.publish(
        "css.s", b"own-body", schedule=_later(seconds=1), schedule_target="css.t", schedule_source="css.src"
    ))
    if ack is None:
        assert js.stream_info("CSS").state.messages == 1
        return
    deadline = time.monotonic() + 15
    while js.stream_info("CSS").state.last_seq < 3:  # the schedule fired
        assert time.monotonic() < deadline, "the schedule did not fire"
        time.sleep(0.05)
    assert js.direct_get("CSS", last_by_subj="css.t").data == b"sampled"


def test_source_consumer(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    """2.10 and 2.11 drop a source's consumer (and read through one of their own); 2.12 refuses it."""
    js.add_stream(name="CSC", subjects=["csc"], retention="workqueue")
    if has(features.SOURCE_CONSUMER):
        js.add_consumer("CSC", durable_name="c", deliver_subject="csc.dlv", ack_policy="flow_control",
                        flow_control=True, idle_heartbeat=1.0, max_ack_pending=10)
    source = StreamSource(name="CSC", consumer=StreamConsumerSource(name="c", deliver_subject="csc.dlv"))
    made = refused_or_works(nc, features.SOURCE_CONSUMER, lambda: js.add_stream(name="CSCS", sources=[source]))
    assert made is None or made.config.sources == [source]
    assert js.stream_names() == (["CSC", "CSCS"] if made else ["CSC"])


def test_consumer_reset(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    js.add_stream(name="CR", subjects=["cr"])
    js.add_consumer("CR", durable_name="r")
    reset = refused_or_works(nc, features.CONSUMER_RESET, lambda: js.reset_consumer("CR", "r", seq=1))
    assert reset is None or reset.reset_seq == 1


def test_ack_flow_control(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    js.add_stream(name="CAF", subjects=["caf"])
    made = refused_or_works(
        nc, features.ACK_FLOW_CONTROL,
        lambda: js.add_consumer("CAF", durable_name="f", ack_policy="flow_control", deliver_subject="caf.dlv"),
    )
    assert made is None or made.config.ack_policy == "flow_control"


# -- whole seconds --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, option",
    [
        (lambda js, kv: js.publish("cws", b"x", ttl=1.5), "ttl"),
        (lambda js, kv: js.publish_async("cws", b"x", ttl=dt.timedelta(milliseconds=1500)), "ttl"),
        (lambda js, kv: kv.create("k", b"v", ttl=2.5), "ttl"),
        (lambda js, kv: kv.purge("k", ttl=1.25), "ttl"),
        (lambda js, kv: js.create_key_value("cws2", limit_marker_ttl=60.5), "limit_marker_ttl"),
        (lambda js, kv: js.publish("cws", b"x", schedule=dt.timedelta(seconds=1.5), schedule_target="t"),
         "a schedule interval"),
        (lambda js, kv: js.publish("cws", b"x", schedule="@hourly", schedule_target="t", schedule_ttl=3.5),
         "schedule_ttl"),
    ],
)
def test_a_fraction_of_a_second_is_named_before_sending(
    nc: jsclient.Connection, js: jsclient.JetStream, call: Callable[..., Any], option: str
) -> None:
    """The server keeps whole seconds only: 1.0 is one, 1.5 is refused on every release, before any other check."""
    kv = js.create_key_value("cws")
    js.add_stream(name="CWS", subjects=["cws"])
    sent = nc.stats()["out_msgs"]
    with pytest.raises(jsclient.InvalidArgumentError, match=f"^{option} must be whole seconds") as info:
        call(js, kv)
    assert "the server keeps no fraction" in str(info.value)
    assert nc.stats()["out_msgs"] == sent
    assert js.stream_info("CWS").state.messages == 0 and kv.status().values == 0


# -- the Spark source (real Spark: the slowest tests here) -------------------------------------------------


def _forget_connections(_: object) -> int:
    """In a Spark worker: close this module's server connections and forget they were ever opened."""
    from jsclient.spark import connections

    connections.close_all()
    connections.opened = 0
    return 0


@pytest.fixture
def workers(spark: Any) -> Iterator[Any]:
    """The shared SparkSession, its Python workers left as they were found: without connections to this
    module's server (which goes away), and counting none (tests/test_spark.py counts one per worker)."""
    from pyspark.sql.functions import udf

    yield spark
    # The SQL workers (which read sources and run UDFs) are taken in turn: many small tasks reach every one.
    spark.range(32, numPartitions=32).select(udf(_forget_connections, "int")("id")).collect()


def _fill(js: jsclient.JetStream, name: str, n: int) -> None:
    for i in range(n):
        js.publish_async(f"{name.lower()}.{i % 3}", b"%d" % i, headers={"Row": str(i)} if i % 2 else None)
    js.publish_async_completed(timeout=30)


def _read(spark: Any, server: NatsServer, stream: str, **options: Any) -> list[Any]:
    reader = spark.read.format("jetstream").option("servers", server.url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, value)
    return list(reader.load().collect())


def test_spark_reads_a_limits_stream_through_consumers(
    workers: Any, server: NatsServer, js: jsclient.JetStream
) -> None:
    js.add_stream(name="CSL", subjects=["csl.>"], allow_direct=True)
    _fill(js, "CSL", 600)
    rows = _read(workers, server, "CSL", minPartitions=3, batchSize=100)
    assert sorted(r.seq for r in rows) == list(range(1, 601))
    by_seq = {r.seq: r for r in rows}
    assert (by_seq[2].subject, bytes(by_seq[2].data), by_seq[2].headers) == ("csl.1", b"1", {"Row": ["1"]})


@pytest.mark.parametrize("retention", ["workqueue", "interest"])
def test_spark_reads_a_stream_a_consumer_would_disturb_by_direct_get(
    workers: Any, server: NatsServer, js: jsclient.JetStream, retention: str
) -> None:
    """Read by direct get (a consumer would count as interest, or be refused): batched from 2.11, one get per
    message from 2.10, where the planner cannot count (no expectation, no false data loss).  Every message
    once, and the stream as it was."""
    name = f"CS{retention[0].upper()}"
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"], allow_direct=True, retention=retention)
    if retention == "interest":
        js.add_consumer(name, durable_name="keep", ack_policy="explicit")  # so that the stream keeps them
    _fill(js, name, 600)
    rows = _read(workers, server, name, minPartitions=3, batchSize=100)
    assert sorted(r.seq for r in rows) == list(range(1, 601))
    by_seq = {r.seq: r for r in rows}
    assert (by_seq[2].subject, bytes(by_seq[2].data), by_seq[2].headers) == (f"{name.lower()}.1", b"1", {"Row": ["1"]})
    filtered = _read(workers, server, name, minPartitions=2, subjects=f"{name.lower()}.2", startingSequence=100)
    assert sorted(r.seq for r in filtered) == [s for s in range(100, 601) if s % 3 == 0]
    assert js.stream_info(name).state.messages == 600
    assert js.consumer_names(name) == (["keep"] if retention == "interest" else [])
