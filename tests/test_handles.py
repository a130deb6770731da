"""ADR-37's stream and consumer handles against a real nats-server."""

from __future__ import annotations

import threading
import time

import msgspec
import pytest

import jsclient
from jsclient.errors import (
    ConsumerDeletedError,
    ConsumerNotFoundError,
    InvalidArgumentError,
    StreamNotFoundError,
)
from jsclient.jetstream.api import StreamInfo
from jsclient.server import NatsServer

from .conftest import ErrorLog
from .proxy import FrameProxy

pytestmark = pytest.mark.compat  # in the subset make test runs on every older server


def publish(js: jsclient.JetStream, n: int, subject: str = "ord.new") -> None:
    for i in range(n):
        js.publish(subject, b"%d" % i)


class PullSnoop:
    """Watches the pull requests a client sends (a plain subscriber on the API subject gets a copy)."""

    def __init__(self, nc: jsclient.Connection, stream: str, consumer: str) -> None:
        self._sub = nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}")
        nc.flush()

    @property
    def requests(self) -> list[dict[str, object]]:
        """Every request seen so far (each copy is read once; call once, after the reading is done)."""
        return self.taken(quiet=0.5)

    def taken(self, *, quiet: float) -> list[dict[str, object]]:
        """The requests seen since the last read, until ``quiet`` seconds pass without one (0: those queued)."""
        seen = []
        while True:
            try:
                seen.append(msgspec.json.decode(self._sub.next_msg(timeout=quiet).data))
            except jsclient.TimeoutError:
                return seen


def test_stream_handle(js: jsclient.JetStream) -> None:
    with pytest.raises(StreamNotFoundError):
        js.stream("ORD")
    stream = js.create_stream(name="ORD", subjects=["ord.>"])
    assert stream.name == "ORD" and stream.cached_info.config.subjects == ["ord.>"]
    publish(js, 3)
    assert js.stream("ORD").info().state.messages == 3
    assert stream.get_msg(2).data == b"1"
    assert stream.get_msg(last_by_subj="ord.new").seq == 3
    assert stream.delete_msg(1)
    assert stream.purge(keep=1) == 1
    assert stream.info().state.messages == 1
    changed = js.create_or_update_stream(name="ORD", subjects=["ord.>"], description="now described")
    assert changed.cached_info.config.description == "now described"
    assert isinstance(js.update_stream(name="ORD", subjects=["ord.>"]), StreamInfo)  # unchanged: info
    assert js.create_or_update_stream(name="FRESH", subjects=["fresh.>"]).name == "FRESH"
    with pytest.raises(ConsumerNotFoundError):
        stream.consumer("nobody")
    created = stream.create_consumer(durable_name="worker")
    assert created.name == "worker" and stream.consumer_names() == ["worker"]
    updated = stream.create_or_update_consumer(durable_name="worker", description="pulls")
    assert updated.info().config.description == "pulls"
    assert js.consumer("ORD", "worker").cached_info.config.description == "pulls"
    assert stream.delete_consumer("worker") and stream.consumer_names() == []


@pytest.fixture
def consumer(js: jsclient.JetStream) -> jsclient.jetstream.handles.Consumer:
    return js.create_stream(name="ORD", subjects=["ord.>"]).create_consumer(durable_name="c", ack_wait=30.0)


def test_fetch_next_and_fetch_no_wait(js: jsclient.JetStream, consumer: jsclient.jetstream.handles.Consumer) -> None:
    publish(js, 10)
    assert [m.data for m in consumer.fetch(5)] == [b"%d" % i for i in range(5)]
    rest = consumer.fetch(10, timeout=1)  # what came by max_wait: the five left
    assert [m.data for m in rest] == [b"%d" % i for i in range(5, 10)]
    for m in rest:
        m.ack()
    assert consumer.fetch(3, timeout=0.3) == []  # empty only after max_wait
    assert consumer.fetch_no_wait(3) == []
    publish(js, 2)
    assert [m.data for m in consumer.fetch_no_wait(5)] == [b"0", b"1"]
    publish(js, 1)
    assert consumer.next_msg(timeout=2).data == b"0"
    with pytest.raises(jsclient.TimeoutError):
        consumer.next_msg(timeout=0.3)


def test_handles_hold_no_subscription_between_calls(
    nc: jsclient.Connection, js: jsclient.JetStream, consumer: jsclient.jetstream.handles.Consumer
) -> None:
    """A handle made per request (a WSGI view) and dropped leaves nothing behind on the connection."""
    before = nc.num_subscriptions
    publish(js, 30)
    for _ in range(10):
        handle = js.consumer("ORD", "c")
        for m in [*handle.fetch(2, timeout=2), handle.next_msg(timeout=2)]:
            m.ack()
    assert nc.num_subscriptions == before
    with js.stream("ORD").ordered_consumer() as oc:
        assert [m.data for m in oc.fetch(30, timeout=2)] == [b"%d" % i for i in range(30)]
        assert nc.num_subscriptions == before
    assert js.stream("ORD").consumer_names() == ["c"]  # the ordered consumer's own is deleted


def test_messages_keep_the_buffer_between_threshold_and_max(
    nc: jsclient.Connection, js: jsclient.JetStream, consumer: jsclient.jetstream.handles.Consumer
) -> None:
    publish(js, 100)
    snoop = PullSnoop(nc, "ORD", "c")
    got = []
    with consumer.messages(max_messages=10, threshold_messages=4) as it:
        for msg in it:
            got.append(msg.data)
            msg.ack()
            if len(got) == 100:
                break
    assert got == [b"%d" % i for i in range(100)]
    requests = snoop.requests
    batches = [r["batch"] for r in requests]
    assert batches[0] == 10 and len(batches) > 10, batches  # refilled many times ...
    assert all(b <= 10 for b in batches)  # type: ignore[operator]  # ... never beyond the buffer
    assert all(r.get("idle_heartbeat") for r in requests)  # consume always asks for heartbeats


def test_messages_bounded_by_bytes(
    nc: jsclient.Connection, js: jsclient.JetStream, consumer: jsclient.jetstream.handles.Consumer
) -> None:
    publish(js, 200, "ord.big")
    snoop = PullSnoop(nc, "ORD", "c")
    with consumer.messages(max_bytes=4096) as it:
        for i, msg in enumerate(it):
            msg.ack()
            if i == 199:
                break
    requests = snoop.requests
    assert len(requests) > 2, requests
    assert all(r["batch"] == 1_000_000 and 0 < r["max_bytes"] <= 4096 for r in requests)  # type: ignore[operator]


def test_consume_runs_the_callback_reports_its_errors_and_drains(
    js: jsclient.JetStream, consumer: jsclient.jetstream.handles.Consumer
) -> None:
    publish(js, 200)
    seen: list[bytes] = []
    log = ErrorLog()
    done = threading.Event()

    def handle(msg: jsclient.Msg) -> None:
        seen.append(msg.data)
        msg.ack()
        if msg.data == b"7":
            raise ValueError("seven is unlucky")
        if len(seen) == 200:
            done.set()

    ctx = consumer.consume(handle, max_messages=50, error_cb=log)
    assert done.wait(20)
    ctx.drain()
    assert ctx.closed and ctx.error is None
    assert seen == [b"%d" % i for i in range(200)]
    assert any(isinstance(e, ValueError) and "unlucky" in str(e) for e in log.errors)


def test_consume_ends_when_its_consumer_is_deleted(
    js: jsclient.JetStream, consumer: jsclient.jetstream.handles.Consumer
) -> None:
    log = ErrorLog()
    ctx = consumer.consume(lambda m: m.ack(), expires=2.0, error_cb=log)
    time.sleep(0.3)  # a pull request is waiting at the server
    consumer.delete()
    assert ctx.wait(10)
    assert isinstance(ctx.error, ConsumerDeletedError), ctx.error
    log.wait_for(ConsumerDeletedError)


def test_ordered_consumer_recreates_itself_after_a_deleted_consumer(js: jsclient.JetStream) -> None:
    stream = js.create_stream(name="ORD", subjects=["ord.>"])
    publish(js, 50)
    oc = stream.ordered_consumer()
    got = [oc.next_msg(timeout=5).data for _ in range(5)] + [m.data for m in oc.fetch(15, timeout=5)]
    (name,) = stream.consumer_names()
    stream.delete_consumer(name)  # from outside: the handle must carry on at message 20
    while len(got) < 50:
        got += [m.data for m in oc.fetch(50 - len(got), timeout=2)]
    assert got == [b"%d" % i for i in range(50)]
    assert oc.generation == 2 and stream.consumer_names() != [name]
    publish(js, 10)
    seen = []
    for msg in oc.messages(max_messages=4):
        seen.append(msg.data)
        if len(seen) == 3:
            for other in stream.consumer_names():
                stream.delete_consumer(other)
        if len(seen) == 10:
            break
    oc.close()
    assert seen == [b"%d" % i for i in range(10)]
    assert oc.generation == 3
    assert stream.consumer_names() == []


def test_handle_options_are_checked_before_any_request(
    nc: jsclient.Connection, js: jsclient.JetStream, consumer: jsclient.jetstream.handles.Consumer
) -> None:
    sent = nc.stats()["out_msgs"]
    for kwargs, words in [
        ({"max_messages": 10, "max_bytes": 100}, "mutually exclusive"),
        ({"max_messages": 10, "threshold_messages": 11}, "cannot exceed"),
        ({"max_bytes": 100, "threshold_bytes": 200}, "cannot exceed"),
        ({"max_bytes": 100, "threshold_messages": 2}, "goes with max_messages"),
        ({"expires": 0.5}, "at least 1 s"),
        ({"max_messages": 0}, "max_messages"),
    ]:
        with pytest.raises(InvalidArgumentError, match=words):
            consumer.messages(**kwargs)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match=words):
            consumer.consume(lambda m: None, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="callable"):
        consumer.consume("not a function")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="opt_start_seq needs"):
        js.stream("ORD").ordered_consumer(opt_start_seq=5)
    assert nc.stats()["out_msgs"] == sent - 0 + 1  # js.stream's one STREAM.INFO, nothing else
    with pytest.raises(InvalidArgumentError, match="push consumer"):
        js.stream("ORD").create_consumer(durable_name="p", deliver_subject="somewhere")


def test_drain_hands_out_what_arrived_and_strands_nothing(
    js: jsclient.JetStream, consumer: jsclient.jetstream.handles.Consumer
) -> None:
    publish(js, 100)
    handed = []
    it = consumer.messages(max_messages=20)
    for msg in it:
        handed.append(msg.data)
        msg.ack()
        if len(handed) == 5:
            time.sleep(0.3)  # the rest of the first pull's 20 arrive
            it.drain()
    assert handed == [b"%d" % i for i in range(20)]  # 5 before the drain, the 15 buffered after it
    # Acks are published without waiting and the server applies them on its own time: look until they land.
    deadline = time.monotonic() + 10
    while (info := consumer.info()).num_ack_pending and time.monotonic() < deadline:
        time.sleep(0.05)
    assert info.num_ack_pending == 0 and info.num_pending == 80  # none delivered and left behind


def test_a_missed_delivery_recreates_the_ordered_consumer_at_the_next_message(server: NatsServer) -> None:
    """The proxy drops the 50th delivery (a real server will not lose one on demand): the consumer sequence
    skips, and the pull-based ordered consumer starts another consumer after the last message handed out."""
    seen = {"n": 0}

    def drop_one(frame: bytes) -> bytes:
        if frame.startswith(b"MSG hord "):
            seen["n"] += 1
            if seen["n"] == 50:
                return b""
        return frame

    with FrameProxy(server.host_port, drop_one) as proxy:
        nc = jsclient.connect(proxy.url)
        try:
            js = nc.jetstream()
            js.add_stream(name="HORD", subjects=["hord"])
            for i in range(200):
                js.publish_async("hord", b"%d" % i)
            js.publish_async_completed(timeout=60)
            oc = js.stream("HORD").ordered_consumer()
            got = []
            for msg in oc.messages(max_messages=20):
                got.append(int(msg.data))
                if len(got) == 200:
                    break
            assert got == list(range(200))
            assert seen["n"] > 200 and oc.generation == 2  # the drop happened, and cost one recreation
            oc.close()
            js.delete_stream("HORD")
        finally:
            nc.close()


def test_consume_reports_heartbeat_silence_and_pulls_again() -> None:
    """A paused server: consume() reports HeartbeatsMissedError, then asks again and gets what comes next."""
    log = ErrorLog()
    with NatsServer() as own:
        nc = jsclient.connect(own.url, error_cb=log)
        try:
            js = nc.jetstream()
            js.add_stream(name="HBC", subjects=["hbc"])
            consumer = js.stream("HBC").create_consumer(durable_name="c")
            got: list[bytes] = []
            arrived = threading.Event()

            def on_msg(msg: jsclient.Msg) -> None:
                got.append(msg.data)
                msg.ack()
                arrived.set()

            snoop = PullSnoop(nc, "HBC", "c")
            ctx = consumer.consume(on_msg, expires=2.0, heartbeat=0.3)
            assert snoop.requests  # the pull is out (each read takes what was seen since the last)
            own.pause()
            try:
                log.wait_for(jsclient.HeartbeatsMissedError, timeout=10)
                snoop.taken(quiet=0)  # what came before the silence (a paused server relays nothing more)
            finally:
                own.resume()
            js.publish("hbc", b"after the silence")
            assert arrived.wait(15), log.errors
            assert got == [b"after the silence"] and ctx.error is None
            ctx.stop()
            assert snoop.requests  # asked again after the silence, not only served by the old pull
        finally:
            nc.close()


def test_stop_ends_messages_at_once(js: jsclient.JetStream) -> None:
    """stop() wakes an iteration blocked on a pull that expires only in 30 s."""
    js.add_stream(name="STOPNOW", subjects=["stopnow"])
    consumer = js.stream("STOPNOW").create_consumer(durable_name="c")
    messages = consumer.messages(expires=30.0)
    ended = threading.Event()

    def iterate() -> None:
        for _ in messages:
            pass
        ended.set()

    reader = threading.Thread(target=iterate)
    reader.start()
    time.sleep(0.3)  # blocked in the pull
    messages.stop()
    reader.join(10)  # far less than the 30 s the pull would wait
    assert ended.is_set() and not reader.is_alive()


def test_a_consumer_made_without_an_ack_policy_acks_explicitly(js: jsclient.JetStream) -> None:
    """Every way to make a consumer without naming ack_policy gets explicit acks (the server alone would pick
    none): an unacked message comes again."""
    stream = js.create_stream(name="ACKDEF", subjects=["ackdef"])
    made = [
        stream.create_consumer(name="c1", ack_wait=0.5),
        stream.create_or_update_consumer(durable_name="c2", ack_wait=0.5),
        stream.consumer(js.add_consumer("ACKDEF", name="c3", ack_wait=0.5).name),
    ]
    js.publish("ackdef", b"once")
    for consumer in made:
        assert consumer.info().config.ack_policy == jsclient.AckPolicy.EXPLICIT
        first = consumer.next_msg(timeout=2)
        again = consumer.next_msg(timeout=5)  # not acked: redelivered after ack_wait
        assert (first.data, again.data) == (b"once", b"once")
        assert again.metadata.num_delivered == 2


#: How late past its timeout a call may return on a busy machine before it counts as not keeping it (as the
#: nemesis's deadline checker allows).  A call that waits out another request's timeout is late by that much.
DEADLINE_SLACK = 2.0


def test_an_ordered_fetch_keeps_its_timeout_through_a_reset_and_a_creation() -> None:
    """Seen by the nemesis (seed 90001): an ordered consumer's fetch(50, timeout=2.0) returned after 4.001 s,
    its consumer reset in the middle.  Here the server never answers this user's consumer deletes and
    creations (a denied publish goes nowhere, as requests do while a stream's leader is away), and the
    context's timeout is 10 s.  A fetch whose consumer is deleted from outside while it waits must return by
    its own timeout, not wait for its delete of the old consumer; a fetch that must create a consumer spends
    its own timeout on that, not the context's.  Before the fix the first took over 10 s, the second 13 s."""
    deny = '"$JS.API.CONSUMER.DELETE.>", "$JS.API.CONSUMER.CREATE.>"'
    config = (
        "authorization { users: [\n  { user: admin, password: a }\n"
        "  { user: reader, password: r, permissions: { publish: { deny: [\"$JS.API.CONSUMER.DELETE.>\"] } } }\n"
        f"  {{ user: blocked, password: b, permissions: {{ publish: {{ deny: [{deny}] }} }} }}\n] }}"
    )
    with (
        NatsServer(config=config) as server,
        jsclient.connect(server.url, user="admin", password="a") as admin,
        jsclient.connect(server.url, user="reader", password="r", error_cb=lambda exc: None) as reader,
        jsclient.connect(server.url, user="blocked", password="b", error_cb=lambda exc: None) as blocked,
    ):
        ajs = admin.jetstream()
        stream = ajs.create_stream(name="DL", subjects=["dl.>"])
        ajs.publish("dl.1", b"x")
        oc = reader.jetstream(timeout=10).stream("DL").ordered_consumer()
        assert [m.data for m in oc.fetch(1, timeout=5)] == [b"x"]
        (name,) = stream.consumer_names()
        out: dict[str, object] = {}

        def fetch() -> None:
            start = time.monotonic()
            out["got"] = oc.fetch(10, timeout=3.0)
            out["took"] = time.monotonic() - start

        taker = threading.Thread(target=fetch)
        taker.start()
        until = time.monotonic() + 10
        while stream.consumer(name).info().num_waiting == 0 and time.monotonic() < until:
            time.sleep(0.01)  # until the fetch's pull waits on the server
        stream.delete_consumer(name)  # the pull ends (409): the ordered consumer resets mid-fetch
        taker.join(30)
        assert out["got"] == []
        assert isinstance(out["took"], float) and out["took"] < 3.0 + DEADLINE_SLACK, out

        never = blocked.jetstream(timeout=10).stream("DL").ordered_consumer()
        start = time.monotonic()
        with pytest.raises(jsclient.TimeoutError):
            never.fetch(1, timeout=1.0)
        assert time.monotonic() - start < 1.0 + DEADLINE_SLACK
