"""Pull subscriptions (ADR-13) against a real nats-server."""

from __future__ import annotations

import json
import threading
import time

import pytest

import jsclient
from jsclient import errors
from jsclient.jetstream.api import ConsumerConfig
from jsclient.jetstream.pull import PullSubscription
from jsclient.server import NatsServer

from .proxy import FrameProxy, rewrite_status

pytestmark = pytest.mark.compat  # in the subset make test runs on every older server


@pytest.fixture
def js(js: jsclient.JetStream) -> jsclient.JetStream:
    """The shared context, with this module's stream."""
    js.add_stream(name="WORK", subjects=["work.>"])
    return js


def publish(js: jsclient.JetStream, n: int, subject: str = "work.item", size: int = 0) -> None:
    for i in range(n):
        js.publish_async(subject, (b"%d|" % i) + b"x" * size)
    js.publish_async_completed(timeout=60)


def test_empty_stream_fetch_returns_empty_after_timeout(js: jsclient.JetStream) -> None:
    psub = js.pull_subscribe("work.item", durable="w")
    start = time.monotonic()
    assert psub.fetch(10, timeout=1.0) == []
    assert 0.8 <= time.monotonic() - start < 3.0


def test_fetch_returns_what_is_available(js: jsclient.JetStream) -> None:
    publish(js, 5)
    psub = js.pull_subscribe("work.item", durable="w")
    msgs = psub.fetch(10, timeout=5)
    assert [m.data for m in msgs] == [b"%d|" % i for i in range(5)]
    for m in msgs:
        m.ack()


def test_two_batches_and_redelivery_after_ack_wait(js: jsclient.JetStream) -> None:
    publish(js, 20)
    psub = js.pull_subscribe("work.item", durable="w", config=ConsumerConfig(ack_wait=1.0))
    first = psub.fetch(10, timeout=5)
    second = psub.fetch(10, timeout=5)
    assert [m.metadata.sequence.stream for m in first + second] == list(range(1, 21))
    for m in first:
        m.ack()
    again = psub.fetch(10, timeout=5)  # the unacked second batch comes back after ack_wait
    assert sorted(m.metadata.sequence.stream for m in again) == list(range(11, 21))
    assert all(m.metadata.num_delivered == 2 for m in again)


def test_fetch_one_shortest_path(js: jsclient.JetStream) -> None:
    publish(js, 3)
    psub = js.pull_subscribe("work.item", durable="one")
    assert [psub.fetch(1)[0].data for _ in range(3)] == [b"0|", b"1|", b"2|"]


def test_max_bytes_stops_at_the_limit(js: jsclient.JetStream) -> None:
    publish(js, 10, size=1000)
    psub = js.pull_subscribe("work.item", durable="bytes")
    msgs = psub.fetch(10, timeout=3, max_bytes=3500)
    assert 1 <= len(msgs) <= 3
    assert sum(len(m.data) for m in msgs) <= 3500
    rest = psub.fetch(10, timeout=3)
    assert len(msgs) + len(rest) == 10


def test_max_waiting_second_concurrent_fetch_gets_409(js: jsclient.JetStream) -> None:
    js.add_consumer("WORK", durable_name="mw", ack_policy="explicit", max_waiting=1)
    first = js.pull_subscribe("work.item", durable="mw")
    second = js.pull_subscribe("work.item", durable="mw")
    results: list[object] = []
    th = threading.Thread(target=lambda: results.append(first.fetch(1, timeout=3)))
    th.start()
    time.sleep(0.5)
    with pytest.raises(errors.MaxWaitingExceededError):
        second.fetch(1, timeout=2)
    th.join(5)
    assert results == [[]]


def test_messages_reports_no_room_and_pulls_again(server: NatsServer) -> None:
    """manager.CONSUME: 409 Exceeded MaxWaiting is a warning for messages(), reported, then asked again."""
    seen: list[BaseException] = []
    with jsclient.connect(server.url, error_cb=seen.append) as nc:
        js = nc.jetstream()
        js.add_stream(name="ROOM", subjects=["room"])
        js.add_consumer("ROOM", durable_name="mw", ack_policy="explicit", max_waiting=1)
        first = js.pull_subscribe("room", durable="mw")
        second = js.pull_subscribe("room", durable="mw")
        holder = threading.Thread(target=lambda: first.fetch(1, timeout=2))  # holds the one waiting slot
        holder.start()
        deadline = time.monotonic() + 5
        while js.consumer_info("ROOM", "mw").num_waiting < 1 and time.monotonic() < deadline:
            time.sleep(0.02)  # the holder's waiting request is in
        stream = second.messages(max_messages=1, expires=5.0)
        threading.Timer(3.0, lambda: js.publish("room", b"late")).start()  # after the holder's request expired
        assert next(iter(stream)).data == b"late"
        stream.stop()
        holder.join(5)
        assert any(isinstance(e, errors.MaxWaitingExceededError) for e in seen)
        js.delete_stream("ROOM")


def test_consumer_deleted_mid_fetch_returns_what_arrived_then_raises(
    nc: jsclient.Connection, js: jsclient.JetStream
) -> None:
    publish(js, 3)
    psub = js.pull_subscribe("work.item", durable="del")
    psub.fetch(3, timeout=2)  # take the three; the next fetch will wait
    deleter = threading.Timer(0.5, lambda: nc.jetstream().delete_consumer("WORK", "del"))
    deleter.start()
    with pytest.raises(errors.ConsumerDeletedError):
        psub.fetch(5, timeout=5)
    deleter.join(5)  # its reply may come after the fetch ended: not after the connection closes


def three_in(js: jsclient.JetStream, name: str, subject: str) -> PullSubscription:
    """A stream holding three messages (0, 1, 2) and a durable pull subscription on it."""
    js.add_stream(name=name, subjects=[subject])
    for i in range(3):
        js.publish(subject, b"%d" % i)
    return js.pull_subscribe(subject, durable="d")


def test_messages_then_error_are_not_lost(server: NatsServer) -> None:
    """A proxy turns the status ending a partial no-wait batch into a 409 (a real server will not on demand).

    That status is a 404 from 2.11 on, and a 408 (with pending counts) from 2.10.
    """
    rewritten: list[bytes] = []

    def rewrite(frame: bytes) -> bytes:
        for end in (b"NATS/1.0 404 No Messages", b"NATS/1.0 408 Request Timeout"):
            if frame.startswith(b"HMSG") and end in frame and not rewritten:
                rewritten.append(frame)
                return rewrite_status(frame, end, b"NATS/1.0 409 Consumer Deleted")
        return frame

    with FrameProxy(server.host_port, rewrite) as proxy, jsclient.connect(proxy.url) as nc:
        js = nc.jetstream()
        psub = three_in(js, "LOST", "lost")
        got = psub.fetch(10, timeout=3)  # three arrive, then the (rewritten) error status
        assert [m.data for m in got] == [b"0", b"1", b"2"]
        assert rewritten, "the error status was never injected"
        with pytest.raises(errors.ConsumerDeletedError):  # kept for the next fetch, not dropped
            psub.fetch(10, timeout=1)
        assert psub.fetch(10, timeout=1) == []
        js.delete_stream("LOST")


def test_a_leader_change_ends_a_fetch_and_messages_pulls_again(server: NatsServer) -> None:
    """409 Leadership Change, decided once (manager.FETCH / CONSUME): the request ended, the consumer lives.

    A proxy turns each 404 and 408 into that status (a real server sends it only when a consumer's leader moves).
    """
    rewritten: list[bytes] = []

    def rewrite(frame: bytes) -> bytes:
        for status in (b"NATS/1.0 404 No Messages", b"NATS/1.0 408 Request Timeout"):
            if frame.startswith(b"HMSG") and status in frame:
                rewritten.append(frame)
                return rewrite_status(frame, status, b"NATS/1.0 409 Leadership Change")
        return frame

    with FrameProxy(server.host_port, rewrite) as proxy, jsclient.connect(proxy.url) as nc:
        js = nc.jetstream()
        psub = three_in(js, "LEAD", "lead")
        got = psub.fetch(10, timeout=2)
        assert [m.data for m in got] == [b"0", b"1", b"2"] and rewritten
        before = len(rewritten)
        assert psub.fetch(10, timeout=1.5) == []  # no error, now or later
        assert len(rewritten) > before
        stream = psub.messages(max_messages=5, expires=1.0)
        threading.Timer(2.5, lambda: js.publish("lead", b"late")).start()  # after more than one request ended
        first = next(iter(stream))
        assert first.data == b"late"
        stream.stop()
        assert len(rewritten) > before + 1, "messages() never saw a leader change"
        js.delete_stream("LEAD")


def test_protocol_no_wait_first_then_expires_is_remaining_minus_100ms(server: NatsServer) -> None:
    with FrameProxy(server.host_port) as proxy, jsclient.connect(proxy.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="PROTO", subjects=["proto"])
        psub = js.pull_subscribe("proto", durable="p")
        mark = len(proxy.sent)
        assert psub.fetch(5, timeout=1.5) == []
        wire = bytes(proxy.sent[mark:])
        bodies = []
        for line_end in range(len(wire)):
            if wire.startswith(b"PUB $JS.API.CONSUMER.MSG.NEXT.PROTO.p ", line_end):
                header_end = wire.index(b"\r\n", line_end)
                size = int(wire[line_end:header_end].split()[-1])
                bodies.append(json.loads(wire[header_end + 2 : header_end + 2 + size]))
        assert bodies[0] == {"batch": 5, "no_wait": True}
        assert bodies[1]["batch"] == 5 and "no_wait" not in bodies[1]
        assert (1.5 - 0.1 - 0.5) * 1e9 <= bodies[1]["expires"] <= (1.5 - 0.1) * 1e9
        js.delete_stream("PROTO")


def test_late_messages_are_kept_for_the_next_fetch(js: jsclient.JetStream) -> None:
    psub = js.pull_subscribe("work.item", durable="late")
    assert psub.fetch(5, timeout=0.3) == []  # the waiting request is short; nothing is lost either way
    publish(js, 4)
    got: list[bytes] = []
    deadline = time.monotonic() + 5
    while len(got) < 4 and time.monotonic() < deadline:
        got += [m.data for m in psub.fetch(4, timeout=1)]
    assert got == [b"%d|" % i for i in range(4)]


def test_heartbeat_validation_and_missed_heartbeats() -> None:
    with NatsServer() as server, jsclient.connect(server.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="HBP", subjects=["hbp"])
        psub = js.pull_subscribe("hbp", durable="h")
        with pytest.raises(jsclient.InvalidArgumentError, match="half the timeout"):
            psub.fetch(1, timeout=1.0, heartbeat=0.5)
        assert psub.fetch(1, timeout=1.5, heartbeat=0.2) == []  # heartbeats keep it healthy
        server.pause()
        try:
            with pytest.raises(errors.HeartbeatsMissedError):
                psub.fetch(1, timeout=3.0, heartbeat=0.2)
        finally:
            server.resume()


def test_messages_reports_missed_heartbeats_and_pulls_again() -> None:
    """The watchdog's alarm (manager.watch) really fires for messages(): a paused server is reported, then read on."""
    seen: list[BaseException] = []
    with NatsServer() as server, jsclient.connect(server.url, error_cb=seen.append) as nc:
        js = nc.jetstream()
        js.add_stream(name="HBM", subjects=["hbm"])
        psub = js.pull_subscribe("hbm", durable="h")
        stream = psub.messages(max_messages=10, expires=3.0, heartbeat=0.2)
        it = iter(stream)
        js.publish("hbm", b"1")
        assert next(it).data == b"1"
        server.pause()
        try:
            deadline = time.monotonic() + 5
            while not any(isinstance(e, errors.HeartbeatsMissedError) for e in seen) and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            server.resume()
        assert any(isinstance(e, errors.HeartbeatsMissedError) for e in seen)
        js.publish("hbm", b"2", timeout=5)
        assert next(it).data == b"2"
        stream.stop()


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"config": ConsumerConfig(idle_heartbeat=1.0)}, "idle_heartbeat"),
        ({"config": ConsumerConfig(flow_control=True)}, "flow_control"),
        ({"config": ConsumerConfig(deliver_subject="x")}, "deliver_subject"),
        ({"config": ConsumerConfig(ack_policy="none")}, "ack_policy"),
        ({"config": ConsumerConfig(ack_policy="all")}, "ack_policy"),
        ({"durable": "a.b"}, "durable"),
    ],
)
def test_option_checks(nc: jsclient.Connection, js: jsclient.JetStream, kwargs: dict, fragment: str) -> None:
    before = nc.stats()["out_msgs"]
    with pytest.raises(jsclient.InvalidArgumentError, match=fragment):
        js.pull_subscribe("work.item", **kwargs)
    assert nc.stats()["out_msgs"] == before


def test_fetch_argument_checks(js: jsclient.JetStream) -> None:
    psub = js.pull_subscribe("work.item", durable="args")
    cases = (({"max_messages": 0}, "max_messages"), ({"timeout": 0}, "timeout"), ({"max_bytes": -1}, "max_bytes"))
    for kwargs, fragment in cases:
        with pytest.raises(jsclient.InvalidArgumentError, match=fragment):
            psub.fetch(**kwargs)  # type: ignore[arg-type]


def test_push_consumer_is_refused_and_replaced_consumer_is_an_error(
    nc: jsclient.Connection, js: jsclient.JetStream
) -> None:
    js.add_consumer("WORK", durable_name="pushy", deliver_subject=nc.new_inbox())
    with pytest.raises(errors.JetStreamSubscribeError, match="push consumer"):
        js.pull_subscribe("work.item", durable="pushy")
    psub = js.pull_subscribe("work.item", durable="flip")
    js.delete_consumer("WORK", "flip")
    js.add_consumer("WORK", durable_name="flip", deliver_subject=nc.new_inbox())
    with pytest.raises(errors.ConsumerIsPushBasedError):
        psub.fetch(1, timeout=2)


def test_ephemeral_consumer_deleted_durable_kept(js: jsclient.JetStream) -> None:
    eph = js.pull_subscribe("work.item")
    dur = js.pull_subscribe("work.item", durable="keep")
    assert set(js.consumer_names("WORK")) == {eph.consumer, "keep"}
    eph.unsubscribe()
    dur.unsubscribe()
    assert js.consumer_names("WORK") == ["keep"]


def test_messages_200k_four_threads_one_durable(server: NatsServer) -> None:
    with jsclient.connect(server.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="BIG", subjects=["big"], storage="memory")
        for i in range(200_000):
            js.publish_async("big", b"%d" % i)
        js.publish_async_completed(timeout=120)
        js.add_consumer("BIG", durable_name="workers", ack_policy="explicit", max_ack_pending=20_000)
        seen: list[list[int]] = [[] for _ in range(4)]
        total = threading.Semaphore(0)
        streams = []

        def worker(i: int) -> None:
            conn = jsclient.connect(server.url)
            try:
                psub = conn.jetstream().pull_subscribe("big", durable="workers")
                stream = psub.messages(max_messages=500, expires=5.0)
                streams.append(stream)
                for msg in stream:
                    seen[i].append(int(msg.data))
                    msg.ack()
                    total.release()
            finally:
                conn.close()

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for _ in range(200_000):
            assert total.acquire(timeout=60)
        for stream in streams:
            stream.stop()
        for th in threads:
            th.join(30)
        every = sorted(x for part in seen for x in part)
        assert every == list(range(200_000))
        assert all(seen)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and js.consumer_info("BIG", "workers").num_ack_pending:
            time.sleep(0.1)
        info = js.consumer_info("BIG", "workers")
        assert info.num_ack_pending == 0 and info.ack_floor.stream_seq == 200_000
        assert info.num_redelivered == 0


def test_messages_survives_restart() -> None:
    with NatsServer() as server:
        nc = jsclient.connect(server.url, reconnect_time_wait=0.2)
        try:
            js = nc.jetstream()
            js.add_stream(name="SURV", subjects=["surv"])
            publish_surv = [js.publish("surv", b"%d" % i) for i in range(10)]
            assert len(publish_surv) == 10
            psub = js.pull_subscribe("surv", durable="s")
            stream = psub.messages(max_messages=5, expires=2.0)
            got = []
            it = iter(stream)
            for _ in range(10):
                m = next(it)
                got.append(int(m.data))
                m.ack()
            server.restart()
            for i in range(10, 15):
                js.publish("surv", b"%d" % i, timeout=10)
            for _ in range(5):
                m = next(it)
                got.append(int(m.data))
                m.ack()
            stream.stop()
            assert got == list(range(15))
        finally:
            nc.close()


def test_messages_stop_from_another_thread(js: jsclient.JetStream) -> None:
    psub = js.pull_subscribe("work.item", durable="stopper")
    stream = psub.messages(max_messages=10, expires=5.0)
    threading.Timer(0.3, stream.stop).start()
    assert list(stream) == []


def test_stop_ends_the_heartbeat_watch_without_another_next(server: NatsServer) -> None:
    """A stream stopped between messages is not iterated again: its watch must end in stop() itself
    (before the fix the watchdog reported missed heartbeats every 0.4 s once the last request expired)."""
    seen: list[BaseException] = []
    with jsclient.connect(server.url, error_cb=seen.append) as nc:
        js = nc.jetstream()
        js.add_stream(name="STOPHB", subjects=["stophb"])
        psub = js.pull_subscribe("stophb", durable="s")
        js.publish("stophb", b"1")
        stream = psub.messages(max_messages=5, expires=1.0, heartbeat=0.2)
        it = iter(stream)  # kept, as a caller that takes messages one by one keeps it
        msg = next(it)
        msg.ack()
        stream.stop()
        time.sleep(2.5)  # the request expires at 1 s; an armed watch would alarm at 1.4 s and after
        assert not [e for e in seen if isinstance(e, errors.HeartbeatsMissedError)]
        assert list(it) == []  # and the iterator is ended
        js.delete_stream("STOPHB")


def test_drain_hands_out_what_arrived_then_ends(js: jsclient.JetStream) -> None:
    """After drain(), fetch still returns what had arrived, then raises closed; the created consumer goes."""
    publish(js, 50)
    psub = js.pull_subscribe("work.item")
    stream = psub.messages(max_messages=100)
    first = next(iter(stream))
    first.ack()
    port = psub._inbox.port
    deadline = time.monotonic() + 10
    while port.pending_msgs < 49 and time.monotonic() < deadline:
        time.sleep(0.01)
    stream.stop()
    psub.drain()
    got = [first]
    while len(got) < 50:
        batch = psub.fetch(20, timeout=5)
        assert batch, f"fetch after drain returned nothing after {len(got)} messages"
        for m in batch:
            m.ack_sync()
        got += batch
    assert [m.metadata.sequence.stream for m in got] == list(range(1, 51))
    with pytest.raises(errors.SubscriptionClosedError):
        psub.fetch(1, timeout=1)
    with pytest.raises(errors.ConsumerNotFoundError):
        js.consumer_info("WORK", psub.consumer)
