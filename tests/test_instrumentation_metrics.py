"""jsclient.instrumentation's own metrics (jsclient.instrumentation.metrics), against real nats-servers.

Observable instruments read the counters the connections keep (every live connection, made before
instrument() or after); counters count the rare events jsclient.observe tells.  Each test reads its
metric through the SDK's in-memory reader (tests/otelkit.py) and fails without that instrument.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jsclient
from jsclient import errors, observe
from jsclient.instrumentation import JsclientInstrumentor
from jsclient.instrumentation.metrics import (
    API_STATUS_CODE,
    CLIENT_ID,
    CONSUMER_KIND,
    DIRECTION,
    DISCONNECT_REASON,
    ERROR_CODE,
    GROUP,
    SID,
    TEMPLATE,
    client_id,
)
from jsclient.server import NatsServer

from .otelkit import Otel

pytestmark = pytest.mark.timeout(90)


def eventually(check: Callable[[], bool], within: float = 10.0) -> bool:
    """Whether ``check`` came true within ``within`` seconds (a wait for another thread, not a timing check)."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def own_server() -> Iterator[NatsServer]:
    """A server of this test's own, to restart or pause."""
    with NatsServer() as server:
        yield server


# -- connections -------------------------------------------------------------------------------


def test_a_connection_made_before_instrument_reports_its_traffic_and_reconnects(server: NatsServer) -> None:
    with jsclient.connect(server.url) as nc:
        sub = nc.subscribe("traffic")
        nc.flush()
        for i in range(5):
            nc.publish("traffic", b"x" * i)
        for _ in range(5):
            sub.next_msg(timeout=5)
        with Otel() as otel:
            nc.force_reconnect()
            assert eventually(lambda: nc.reconnects == 1 and nc.is_connected)
            nc.flush()
            me = {CLIENT_ID: client_id(nc)}
            stats = nc.stats()
            assert otel.total("jsclient.connection.messages", **me, **{DIRECTION: "transmit"}) == stats["out_msgs"] == 5
            assert otel.total("jsclient.connection.messages", **me, **{DIRECTION: "receive"}) == stats["in_msgs"] == 5
            assert otel.total("jsclient.connection.bytes", **me, **{DIRECTION: "transmit"}) == stats["out_bytes"] == 10
            assert otel.total("jsclient.connection.bytes", **me, **{DIRECTION: "receive"}) == stats["in_bytes"] == 10
            assert otel.total("jsclient.connection.reconnects", **me) == 1
            assert eventually(lambda: otel.total("jsclient.connection.disconnects") == 1)
            assert otel.total("jsclient.connection.disconnects", **{DISCONNECT_REASON: "forced"}) == 1


def test_each_connection_is_a_series_of_its_own(server: NatsServer, otel: Otel) -> None:
    with jsclient.connect(server.url) as one, jsclient.connect(server.url) as two:
        for _ in range(3):
            one.publish("nobody", b"abc")
        two.publish("nobody", b"")
        one.flush()
        two.flush()
        assert client_id(one) != client_id(two) and client_id(one) == client_id(one)
        sent = "jsclient.connection.messages"
        assert otel.total(sent, **{CLIENT_ID: client_id(one), DIRECTION: "transmit"}) == 3
        assert otel.total(sent, **{CLIENT_ID: client_id(two), DIRECTION: "transmit"}) == 1


def test_a_restarted_server_is_a_disconnect_it_closed_then_a_reconnect(own_server: NatsServer, otel: Otel) -> None:
    with jsclient.connect(own_server.url, reconnect_time_wait=0.1) as nc:
        own_server.restart()
        assert eventually(lambda: nc.reconnects == 1 and nc.is_connected, within=30)
        assert otel.total("jsclient.connection.reconnects", **{CLIENT_ID: client_id(nc)}) == 1
        assert eventually(lambda: otel.total("jsclient.connection.disconnects") == 1)
        assert otel.total("jsclient.connection.disconnects", **{DISCONNECT_REASON: "server_closed"}) == 1


def test_unanswered_pings_are_a_stale_connection(own_server: NatsServer, otel: Otel) -> None:
    with jsclient.connect(own_server.url, ping_interval=0.1, max_outstanding_pings=2, reconnect_time_wait=0.1) as nc:
        own_server.pause()
        try:
            assert eventually(lambda: otel.total("jsclient.connection.disconnects") >= 1)
        finally:
            own_server.resume()
        assert otel.total("jsclient.connection.disconnects", **{DISCONNECT_REASON: "stale_connection"}) >= 1
        assert eventually(lambda: nc.is_connected, within=30)


def test_live_connections_lists_a_connection_from_connect_to_close(server: NatsServer) -> None:
    nc = jsclient.connect(server.url)
    try:
        assert nc in jsclient.live_connections()
        sub = nc.subscribe("listed")
        assert nc.subscriptions == [sub] and nc.num_subscriptions == 1
    finally:
        nc.close()
    assert nc not in jsclient.live_connections()
    assert nc.subscriptions == []


# -- subscriptions ---------------------------------------------------------------------------


def test_a_slow_consumers_drops_and_queue_are_read_per_subscription(nc: jsclient.Connection, otel: Otel) -> None:
    slow = nc.subscribe("slow.*", queue="workers", pending_msgs_limit=3)
    other = nc.subscribe("other")
    nc.flush()
    for i in range(10):
        nc.publish(f"slow.{i}", b"12345")
    nc.publish("other", b"1")
    nc.flush()
    assert eventually(lambda: slow.dropped == 7 and other.pending_msgs == 1)
    mine = {CLIENT_ID: client_id(nc), TEMPLATE: "slow.*", SID: slow.sid, GROUP: "workers"}
    assert otel.total("jsclient.subscription.dropped", **mine) == 7
    assert otel.total("jsclient.subscription.pending.messages", **mine) == 3
    assert otel.total("jsclient.subscription.pending.bytes", **mine) == 15
    theirs = {CLIENT_ID: client_id(nc), TEMPLATE: "other", SID: other.sid}
    assert otel.total("jsclient.subscription.dropped", **theirs) == 0
    assert otel.total("jsclient.subscription.pending.messages", **theirs) == 1
    assert [p for p in otel.points("jsclient.subscription.pending.messages") if p.attributes == theirs], "no group"
    slow.next_msg(timeout=5)
    assert otel.total("jsclient.subscription.pending.messages", **mine) == 2
    slow.unsubscribe()
    assert otel.total("jsclient.subscription.dropped", **mine) == 0  # gone with its subscription


# -- JetStream ----------------------------------------------------------------------------------


def test_the_publish_async_window_in_flight(nc: jsclient.Connection, otel: Otel) -> None:
    """A plain subscriber stands in for the stream: the acks come when it answers, not before."""
    held: list[jsclient.Msg] = []
    got = threading.Semaphore(0)
    nc.subscribe("fake.stream", callback=lambda m: (held.append(m), got.release()))
    nc.flush()
    js = nc.jetstream()
    futures = [js.publish_async("fake.stream", b"x", timeout=30) for _ in range(3)]
    for _ in range(3):
        assert got.acquire(timeout=5)
    in_flight = "jsclient.jetstream.publish_async.in_flight"
    assert otel.total(in_flight, **{CLIENT_ID: client_id(nc)}) == 3 == js.publish_async_pending
    for seq, msg in enumerate(held, 1):
        msg.respond(json.dumps({"stream": "FAKE", "seq": seq}).encode())
    assert [f.result(timeout=5).seq for f in futures] == [1, 2, 3]
    js.publish_async_completed(timeout=5)
    assert otel.total(in_flight, **{CLIENT_ID: client_id(nc)}) == 0


def test_jetstream_api_errors_are_counted_by_their_codes(js: jsclient.JetStream, otel: Otel) -> None:
    with pytest.raises(errors.StreamNotFoundError):
        js.stream_info("NOPE")
    with pytest.raises(errors.StreamNotFoundError):
        js.delete_stream("NOPE")
    js.add_stream(name="ERRS", subjects=["errs"])
    with pytest.raises(errors.JetStreamAPIError) as refused:
        js.add_stream(name="ERRS2", subjects=["errs"])  # overlaps ERRS
    errs = "jsclient.jetstream.api.errors"
    assert otel.total(errs, **{API_STATUS_CODE: 404, ERROR_CODE: 10059}) == 2
    code, err_code = refused.value.code, refused.value.err_code
    assert otel.total(errs, **{API_STATUS_CODE: code, ERROR_CODE: err_code}) == 1
    assert otel.total(errs) == 3


def test_a_heartbeat_alarm_is_counted_by_the_kind_of_reader(own_server: NatsServer, otel: Otel) -> None:
    with jsclient.connect(own_server.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="HB", subjects=["hb.>"])
        psub = js.pull_subscribe("hb.pull", durable="puller")
        push = js.subscribe("hb.push", idle_heartbeat=0.1)
        assert psub.fetch(1, timeout=1.0, heartbeat=0.2) == []  # heartbeats flowing: no alarm
        assert otel.total("jsclient.jetstream.heartbeat.alarms") == 0
        own_server.pause()
        try:
            with pytest.raises(errors.HeartbeatsMissedError):
                psub.fetch(1, timeout=3.0, heartbeat=0.2)
            with pytest.raises(errors.HeartbeatsMissedError):
                push.next_msg(timeout=5)
        finally:
            own_server.resume()
        alarms = "jsclient.jetstream.heartbeat.alarms"
        assert otel.total(alarms, **{CONSUMER_KIND: "pull"}) == 1
        assert otel.total(alarms, **{CONSUMER_KIND: "push"}) >= 1


def test_an_ordered_subscriptions_reset_is_counted(js: jsclient.JetStream, otel: Otel) -> None:
    js.add_stream(name="ORDR", subjects=["ordr"])
    for i in range(10):
        js.publish("ordr", b"%d" % i)
    sub = js.subscribe("ordr", ordered=True, idle_heartbeat=0.2)
    got = [int(sub.next_msg(timeout=5).data) for _ in range(10)]
    assert otel.total("jsclient.jetstream.ordered.resets") == 0
    js.delete_consumer("ORDR", sub.consumer)  # heartbeats stop: the consumer is recreated
    for i in range(10, 20):
        js.publish("ordr", b"%d" % i)
    got += [int(sub.next_msg(timeout=10).data) for _ in range(10)]
    assert got == list(range(20)) and sub.resets >= 1
    assert otel.total("jsclient.jetstream.ordered.resets", **{CONSUMER_KIND: "ordered_push"}) >= 1
    assert otel.total("jsclient.jetstream.heartbeat.alarms", **{CONSUMER_KIND: "ordered_push"}) >= 1
    sub.unsubscribe()


def test_an_ordered_consumers_reset_is_counted(js: jsclient.JetStream, otel: Otel) -> None:
    stream = js.create_stream(name="ORDP", subjects=["ordp"])
    for i in range(10):
        js.publish("ordp", b"%d" % i)
    oc = stream.ordered_consumer()
    got = [m.data for m in oc.fetch(5, timeout=5)]
    (name,) = stream.consumer_names()
    stream.delete_consumer(name)
    while len(got) < 10:
        got += [m.data for m in oc.fetch(10 - len(got), timeout=2)]
    assert got == [b"%d" % i for i in range(10)] and oc.generation == 2
    assert otel.total("jsclient.jetstream.ordered.resets", **{CONSUMER_KIND: "ordered_pull"}) == 1
    oc.close()


# -- on and off -----------------------------------------------------------------------------------


def test_uninstrument_stops_the_reads_and_the_counts(js: jsclient.JetStream, nc: jsclient.Connection) -> None:
    nc.subscribe("quiet")
    nc.flush()
    with Otel() as otel:
        assert observe.listener is not None
        assert otel.points("jsclient.connection.bytes") and otel.points("jsclient.subscription.pending.messages")
    assert observe.listener is None
    with pytest.raises(errors.StreamNotFoundError):
        js.stream_info("NOPE")
    off = ("jsclient.connection.bytes", "jsclient.subscription.pending.messages", "jsclient.jetstream.api.errors")
    for name in off:
        assert otel.points(name) == [], name
    # On again with the same provider: the SDK hands back the same instruments, with their first callbacks.
    JsclientInstrumentor().instrument(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    try:
        assert otel.points("jsclient.connection.bytes")
        with pytest.raises(errors.StreamNotFoundError):
            js.stream_info("NOPE")
        assert otel.total("jsclient.jetstream.api.errors", **{ERROR_CODE: 10059}) == 1
    finally:
        JsclientInstrumentor().uninstrument()


class _Recorder:
    """Forwards to the installed listener, recording each call."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> None:
            self.calls.append(name)
            getattr(self.inner, name)(*args)

        return call


def test_ordinary_deliveries_never_reach_the_listener(
    js: jsclient.JetStream, nc: jsclient.Connection, otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    js.add_stream(name="QUIET", subjects=["quiet.js"])
    core = nc.subscribe("quiet.core")
    push = js.subscribe("quiet.js", idle_heartbeat=0.5)
    psub = js.pull_subscribe("quiet.js", durable="q")  # looks the durable up first: an API error (not found)
    nc.flush()
    recorder = _Recorder(observe.listener)
    monkeypatch.setattr(observe, "listener", recorder)
    for i in range(500):
        nc.publish("quiet.core", b"%d" % i)
        js.publish_async("quiet.js", b"%d" % i)
    js.publish_async_completed(timeout=10)
    for _ in range(500):
        core.next_msg(timeout=5)
        push.next_msg(timeout=5).ack()
    taken = 0
    while taken < 500:
        batch = psub.fetch(100, timeout=5, heartbeat=0.5)
        for msg in batch:
            msg.ack()
        taken += len(batch)
    nc.flush()
    assert recorder.calls == []
    with pytest.raises(errors.StreamNotFoundError):  # the recorder does record an event
        js.stream_info("NOPE")
    assert recorder.calls == ["api_error"]
