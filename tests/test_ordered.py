"""Ordered consumer (ADR-17) against a real server: order, exactly once, self-healing."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

import jsclient
from jsclient import errors
from jsclient.jetstream.api import ConsumerConfig
from jsclient.server import NatsServer

from .conftest import ErrorLog
from .proxy import FrameProxy

pytestmark = pytest.mark.compat  # in the subset make test runs on every older server


def fill(js: jsclient.JetStream, stream: str, subject: str, n: int, storage: str = "memory") -> None:
    js.add_stream(name=stream, subjects=[subject], storage=storage)
    for i in range(n):
        js.publish_async(subject, b"%d" % i)
    js.publish_async_completed(timeout=120)


def read_all(sub: object, n: int, timeout: float = 30.0) -> list[int]:
    out = []
    for _ in range(n):
        msg = sub.next_msg(timeout=timeout)  # type: ignore[attr-defined]
        out.append(int(msg.data))
    return out


def test_replay_100k_in_exact_order(js: jsclient.JetStream) -> None:
    fill(js, "REPLAY", "replay", 100_000)
    sub = js.subscribe("replay", ordered=True, pending_msgs_limit=200_000)
    assert read_all(sub, 100_000) == list(range(100_000))
    assert sub.last_stream_seq == 100_000 and sub.resets == 0
    with pytest.raises(jsclient.TimeoutError):
        sub.next_msg(timeout=0.2)
    sub.unsubscribe()


def test_consumer_deleted_mid_replay(js: jsclient.JetStream) -> None:
    fill(js, "DEL", "del", 1_000)
    sub = js.subscribe("del", ordered=True, idle_heartbeat=0.2)
    got = read_all(sub, 1_000)
    js.delete_consumer("DEL", sub.consumer)
    for i in range(1_000, 3_000):  # stored after the consumer went away
        js.publish_async("del", b"%d" % i)
    js.publish_async_completed(timeout=30)
    got += read_all(sub, 2_000)
    assert got == list(range(3_000))
    assert sub.resets >= 1
    assert sub.state["last_stream_seq"] == 3_000
    with pytest.raises(jsclient.TimeoutError):
        sub.next_msg(timeout=0.3)


def test_dropped_frame_is_healed(server: NatsServer) -> None:
    """The proxy drops the 500th delivery (a real server will not lose one on demand)."""
    count = {"n": 0}

    def drop_one(frame: bytes) -> bytes:
        if frame.startswith(b"MSG drop "):
            count["n"] += 1
            if count["n"] == 500:
                return b""
        return frame

    log = ErrorLog()
    with FrameProxy(server.host_port, drop_one) as proxy:
        nc = jsclient.connect(proxy.url, error_cb=log)
        try:
            js = nc.jetstream()
            fill(js, "DROP", "drop", 2_000)
            sub = js.subscribe("drop", ordered=True)
            assert read_all(sub, 2_000) == list(range(2_000))
            assert sub.resets == 1
            with pytest.raises(jsclient.TimeoutError):
                sub.next_msg(timeout=0.3)
            js.delete_stream("DROP")
        finally:
            nc.close()
    assert not any(isinstance(e, errors.MessageGapError) for e in log.errors)  # handled, not reported


def test_stream_deleted_is_a_clear_error(js: jsclient.JetStream) -> None:
    fill(js, "GONE", "gone", 10)
    sub = js.subscribe("gone", ordered=True, idle_heartbeat=0.1)
    assert read_all(sub, 10) == list(range(10))
    js.delete_stream("GONE")
    with pytest.raises(errors.StreamNotFoundError):
        sub.next_msg(timeout=10)


def test_callback_mode(js: jsclient.JetStream) -> None:
    fill(js, "CB", "cb", 1_000)
    got: list[int] = []
    done = threading.Event()

    def cb(msg: jsclient.Msg) -> None:
        got.append(int(msg.data))
        if len(got) == 1_000:
            done.set()

    sub = js.subscribe("cb", ordered=True, callback=cb, idle_heartbeat=0.2)
    assert done.wait(20)
    assert got == list(range(1_000))
    with pytest.raises(jsclient.Error, match="callback"):
        sub.next_msg()
    sub.unsubscribe()


def test_iteration_and_state(js: jsclient.JetStream) -> None:
    fill(js, "IT", "it.*", 0)
    for i in range(3):
        js.publish("it.a", b"%d" % i)
    sub = js.subscribe("it.a", ordered=True)
    seen = []
    for msg in sub:
        seen.append(int(msg.data))
        assert msg.metadata.num_delivered == 1
        msg.ack()  # ack policy none: sends nothing
        if len(seen) == 3:
            break
    assert seen == [0, 1, 2]
    state = sub.state
    assert state["last_stream_seq"] == 3 and state["last_consumer_seq"] == 3 and state["consumer"]
    info = js.consumer_info("IT", sub.consumer)
    assert info.config.ack_policy == "none" and info.config.max_deliver == 1
    assert info.config.flow_control is True and info.config.mem_storage is True
    assert info.config.idle_heartbeat == 5.0 and info.config.num_replicas in (0, 1)


def test_deliver_policy_kept_before_first_message(js: jsclient.JetStream) -> None:
    fill(js, "POL", "pol", 10)
    sub = js.subscribe("pol", ordered=True, config=ConsumerConfig(deliver_policy="last"))
    assert int(sub.next_msg(timeout=5).data) == 9


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"durable": "d"}, "durable"),
        ({"queue": "q"}, "queue"),
        ({"consumer": "c"}, "consumer"),
        ({"config": ConsumerConfig(durable_name="d")}, "durable_name"),
        ({"config": ConsumerConfig(deliver_subject="x")}, "deliver_subject"),
        ({"config": ConsumerConfig(ack_policy="explicit")}, "ack_policy"),
        ({"config": ConsumerConfig(max_deliver=3)}, "max_deliver"),
        ({"config": ConsumerConfig(flow_control=False)}, "flow_control"),
        ({"config": ConsumerConfig(mem_storage=False)}, "mem_storage"),
        ({"config": ConsumerConfig(num_replicas=1)}, "num_replicas"),
        ({"config": ConsumerConfig(max_waiting=1)}, "pull"),
        ({"manual_ack": True}, "manual_ack"),
    ],
)
def test_rejected_options(nc: jsclient.Connection, js: jsclient.JetStream, kwargs: dict, fragment: str) -> None:
    fill(js, "OPT", "opt", 0)
    before = nc.stats()["out_msgs"]
    with pytest.raises(jsclient.InvalidArgumentError, match=fragment):
        js.subscribe("opt", ordered=True, **kwargs)
    assert nc.stats()["out_msgs"] == before


def test_unsubscribe_deletes_consumer(js: jsclient.JetStream) -> None:
    fill(js, "UNS", "uns", 3)
    sub = js.subscribe("uns", ordered=True)
    read_all(sub, 3)
    sub.unsubscribe()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and js.consumer_names("UNS"):
        time.sleep(0.05)
    assert js.consumer_names("UNS") == []
    with pytest.raises(jsclient.SubscriptionClosedError):
        sub.next_msg(timeout=0.1)


def test_server_restart_mid_replay_file_storage() -> None:
    with NatsServer() as server:
        nc = jsclient.connect(server.url, reconnect_time_wait=0.2)
        try:
            js = nc.jetstream()
            fill(js, "FILE", "file.x", 5_000, storage="file")
            sub = js.subscribe("file.x", ordered=True, idle_heartbeat=0.5)
            got = read_all(sub, 1_000)
            server.restart()
            # Stored after the restart, once the stream is back: a publish that comes while the server recovers
            # it fails (its future says so), and the read below would wait for a message never stored.
            deadline = time.monotonic() + 60
            while True:
                try:
                    assert js.stream_info("FILE").state.messages == 5_000
                    break
                except (jsclient.TimeoutError, jsclient.NoRespondersError, jsclient.JetStreamNotEnabledError):
                    assert time.monotonic() < deadline, "the stream did not come back within 60 s"
                    time.sleep(0.05)
            futures = [js.publish_async("file.x", b"%d" % i, timeout=30) for i in range(5_000, 6_000)]
            assert [f.result(timeout=60).seq for f in futures] == list(range(5_001, 6_001))
            got += read_all(sub, 5_000, timeout=30)
            assert got == list(range(6_000))
            assert sub.resets >= 1
            with pytest.raises(jsclient.TimeoutError):
                sub.next_msg(timeout=0.5)
            sub.unsubscribe()
        finally:
            nc.close()


def test_next_msg_keeps_its_timeout_while_the_consumer_is_recreated() -> None:
    """The server is paused (SIGSTOP) for 8 s: heartbeats stop, the consumer must be recreated, and the API
    calls that do it wait for a server that does not answer.  Every next_msg(timeout=1) still returns or raises
    by its deadline (with slack for a shared machine: before, one call took the whole recreation, 12 s for a
    15 s pause); the recreation goes on in the background and every message comes once, in order."""
    import signal

    with NatsServer() as server, jsclient.connect(server.url) as nc:
        js = nc.jetstream(timeout=2)
        fill(js, "PAUSE", "pause.x", 50)
        osub = js.subscribe("pause.x", ordered=True, idle_heartbeat=0.5)
        got = [int(osub.next_msg(timeout=5).data) for _ in range(50)]
        assert server.proc is not None
        server.proc.send_signal(signal.SIGSTOP)
        try:
            longest = 0.0
            timeouts = 0
            paused_until = time.monotonic() + 8
            while time.monotonic() < paused_until:
                started = time.monotonic()
                with pytest.raises(jsclient.TimeoutError):
                    osub.next_msg(timeout=1.0)
                timeouts += 1
                longest = max(longest, time.monotonic() - started)
        finally:
            server.proc.send_signal(signal.SIGCONT)
        assert timeouts >= 4 and longest < 4.0, (timeouts, longest)
        for i in range(50, 80):
            js.publish("pause.x", b"%d" % i)
        deadline = time.monotonic() + 60
        while len(got) < 80 and time.monotonic() < deadline:
            with contextlib.suppress(jsclient.TimeoutError):
                got.append(int(osub.next_msg(timeout=1.0).data))
        assert got == list(range(80))
        assert osub.resets >= 1  # it really was recreated
        osub.unsubscribe()


def test_drain_hands_out_what_arrived_then_ends(js: jsclient.JetStream) -> None:
    """drain() waits while the taker takes what is queued, in order; only then does next_msg end."""
    fill(js, "DRAINO", "draino", 20)
    sub = js.subscribe("draino", ordered=True)
    first = sub.next_msg(timeout=10)
    deadline = time.monotonic() + 10
    while sub._channel.port.pending_msgs < 19 and time.monotonic() < deadline:
        time.sleep(0.01)
    drained: list[BaseException | None] = []

    def drain() -> None:
        try:
            sub.drain(timeout=20)
            drained.append(None)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            drained.append(exc)

    drainer = threading.Thread(target=drain)
    drainer.start()
    rest = [sub.next_msg(timeout=10).metadata.sequence.stream for _ in range(19)]
    assert [first.metadata.sequence.stream, *rest] == list(range(1, 21))
    with pytest.raises(errors.SubscriptionClosedError):
        sub.next_msg(timeout=5)
    drainer.join(20)
    assert drained == [None]
    assert sub.is_closed


def wait_dropped(sub: object, n: int) -> None:
    """Until the ordered subscription's current inbox has dropped ``n`` messages over its pending limit."""
    deadline = time.monotonic() + 30
    while sub._channel.port.dropped < n and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.01)
    assert sub._channel.port.dropped >= n  # type: ignore[attr-defined]


def test_overflowed_queue_is_healed_from_the_last_message_handed_out(js: jsclient.JetStream) -> None:
    """Messages dropped over the pending limit were accepted in order on arrival; the taker, at the gap, has the
    consumer recreated after the last message it handed out and discards what came after the gap."""
    fill(js, "OVER", "over", 300)
    sub = js.subscribe("over", ordered=True, pending_msgs_limit=20, idle_heartbeat=0.5)
    wait_dropped(sub, 280)  # nobody read: 20 kept, the rest dropped
    got = read_all(sub, 10, timeout=10)
    for i in range(300, 310):  # queued behind the gap marker, where 10 were taken
        js.publish("over", b"%d" % i)
    deadline = time.monotonic() + 30
    while sub._mm.stream_seq < 310 and time.monotonic() < deadline:  # accepted on arrival
        time.sleep(0.01)
    assert sub._channel.port.pending_msgs > 10  # some of them are queued after the gap
    got += read_all(sub, 300, timeout=10)
    assert got == list(range(310))
    assert sub.last_stream_seq == 310 and sub.resets >= 1
    with pytest.raises(jsclient.TimeoutError):
        sub.next_msg(timeout=0.3)
    sub.unsubscribe()


def test_overflowed_kv_watcher_sees_every_key_once(server: NatsServer) -> None:
    """A key-value watcher is an ordered subscription with the connection's pending limits: one that overflows
    while nobody reads still gives every current value once, in order, then the marker."""
    nc = jsclient.connect(server.url, pending_msgs_limit=20)
    try:
        kv = nc.jetstream().create_key_value("OVERKV")
        for i in range(300):
            kv.put(f"k.{i}", b"%d" % i)
        with kv.watch() as watcher:
            wait_dropped(watcher._sub, 200)
            entries = list(watcher.initial())
            assert [(e.key, e.value) for e in entries] == [(f"k.{i}", b"%d" % i) for i in range(300)]
            assert watcher._sub.resets >= 1
            kv.put("k.late", b"late")
            late = watcher.next(timeout=10)
            assert late is not None and late.key == "k.late"
        nc.jetstream().delete_key_value("OVERKV")
    finally:
        nc.close()


def test_reset_flagged_past_an_overflow_resumes_after_the_last_message_handed_out(js: jsclient.JetStream) -> None:
    """A reset flagged elsewhere (here what a reconnect runs) while only the gap marker is queued: the new
    consumer starts after the last message handed out, not after the last one accepted and then dropped."""
    fill(js, "OVERR", "overr", 300)
    sub = js.subscribe("overr", ordered=True, pending_msgs_limit=20)
    wait_dropped(sub, 280)
    got = read_all(sub, 20, timeout=10)
    sub._on_reconnect()
    got += read_all(sub, 280, timeout=10)
    assert got == list(range(300))
    sub.unsubscribe()
