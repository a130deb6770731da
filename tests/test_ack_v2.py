"""The second form of ack subjects (``$JS.ACK.<domain>.<account hash>.<stream>...``), on a real server.

nats-server 2.14 sends it when started with ``feature_flags { js_ack_fc_v2: true }``,
the announced coming default.  Every workflow that reads delivery metadata
from the ack subject is run on such a server, and the metadata is checked
against what the stream itself says of each message.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

import jsclient
from jsclient.jetstream.metadata import MsgMetadata
from jsclient.server import NatsServer

pytestmark = [
    pytest.mark.server_behaviour("2.14", "no js_ack_fc_v2 feature flag before 2.14"),
    pytest.mark.compat,
]

V2 = "feature_flags {\n  js_ack_fc_v2: true\n}"
N = 20


@pytest.fixture(scope="module", params=[None, "hub"], ids=["no-domain", "domain"])
def v2_server(request: pytest.FixtureRequest) -> Iterator[NatsServer]:
    with NatsServer(config=V2, domain=request.param) as srv:
        yield srv


@pytest.fixture
def v2_js(v2_server: NatsServer) -> Iterator[jsclient.JetStream]:
    with jsclient.connect(v2_server.url) as nc:
        js = nc.jetstream(domain=v2_server.domain)
        js.add_stream(name="V2", subjects=["v2.>"], allow_direct=True)
        for i in range(N):
            js.publish(f"v2.{i % 3}", b"%d" % i)
        try:
            yield js
        finally:
            js.delete_stream("V2")


def check(js: jsclient.JetStream, msgs: list[jsclient.Msg], consumer: str | None, *, acked: bool = True) -> None:
    """Each message's metadata is the stream's own record of it, and its ack subject is the second form."""
    assert [int(m.data) for m in msgs] == list(range(len(msgs)))
    for i, m in enumerate(msgs):
        assert m.reply is not None and len(m.reply.split(".")) >= 11, m.reply
        meta: MsgMetadata = m.metadata
        stored = js.get_msg("V2", seq=meta.sequence.stream)
        assert (stored.subject, stored.data) == (m.subject, m.data)
        assert meta.sequence.stream == i + 1
        assert meta.stream == "V2"
        if consumer is not None:
            assert meta.consumer == consumer
        assert meta.num_delivered == 1
        assert meta.num_pending == N - i - 1 if len(msgs) == N else meta.num_pending >= 0
        assert meta.domain == js.domain
        assert abs(meta.timestamp - stored.time) < dt.timedelta(milliseconds=1)
        if acked:
            m.ack_sync(timeout=5)


def test_push_subscription(v2_js: jsclient.JetStream) -> None:
    sub = v2_js.subscribe("v2.>", durable="push", manual_ack=True)
    msgs = [sub.next_msg(timeout=5) for _ in range(N)]
    check(v2_js, msgs, "push")
    assert v2_js.consumer_info("V2", "push").ack_floor.stream_seq == N
    sub.unsubscribe()


def test_pull_subscription(v2_js: jsclient.JetStream) -> None:
    psub = v2_js.pull_subscribe("v2.>", durable="pull")
    msgs: list[jsclient.Msg] = []
    while len(msgs) < N:
        msgs += psub.fetch(max_messages=N - len(msgs), timeout=5)
    check(v2_js, msgs, "pull")
    assert v2_js.consumer_info("V2", "pull").ack_floor.stream_seq == N


def test_ordered_subscription(v2_js: jsclient.JetStream) -> None:
    osub = v2_js.subscribe("v2.>", ordered=True)
    msgs = [osub.next_msg(timeout=5) for _ in range(N)]
    check(v2_js, msgs, None, acked=False)
    osub.unsubscribe()


def test_handles(v2_js: jsclient.JetStream) -> None:
    stream = v2_js.stream("V2")
    consumer = stream.create_or_update_consumer(durable_name="handle", ack_policy="explicit")
    msgs = consumer.fetch(5, timeout=5)
    msgs.append(consumer.next_msg(timeout=5))
    with consumer.messages(max_messages=10) as it:
        for m in it:
            msgs.append(m)
            if len(msgs) == N:
                break
    check(v2_js, msgs, "handle")
    with stream.ordered_consumer() as replay:
        check(v2_js, replay.fetch(N, timeout=5), None, acked=False)


def test_spark_reader(spark: Any, v2_server: NatsServer, v2_js: jsclient.JetStream) -> None:
    """The source's bulk pull reads each row's sequence and time from the ack subject."""
    if v2_server.domain:
        pytest.skip("the source reads the connected server's own JetStream (it has no domain option)")
    reader = spark.read.format("jetstream").option("servers", v2_server.url).option("stream", "V2")
    rows = sorted(reader.option("minPartitions", 2).load().collect(), key=lambda r: r.seq)
    assert [r.seq for r in rows] == list(range(1, N + 1))
    for r in rows:
        stored = v2_js.get_msg("V2", seq=r.seq)
        assert (r.subject, bytes(r.data), r.stream) == (stored.subject, stored.data, "V2")
        assert abs(r.timestamp.astimezone(dt.UTC) - stored.time) < dt.timedelta(milliseconds=1)


def test_stream_info_carries_the_domain(v2_server: NatsServer) -> None:
    """Every field of the server's answer reaches StreamInfo (domain was dropped when the fields were listed)."""
    with jsclient.connect(v2_server.url) as nc:
        js = nc.jetstream(domain=v2_server.domain)
        js.add_stream(name="INFODOM", subjects=["infodom"])
        try:
            info = js.stream_info("INFODOM")
            assert info.domain == v2_server.domain and info.config.name == "INFODOM"
        finally:
            js.delete_stream("INFODOM")
