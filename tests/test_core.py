"""Core pub/sub/request against a real nats-server."""

from __future__ import annotations

import concurrent.futures
import gc
import socket
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Iterator

import pytest

import jsclient
from jsclient.core.readside import ReadSide
from jsclient.server import NatsServer

from .conftest import ErrorLog, request_ended_by


def test_pub_sub_with_headers_roundtrip(nc: jsclient.Connection) -> None:
    sub = nc.subscribe("orders.*")
    nc.publish("orders.new", b"data", headers={"k": "v", "multi": ["1", "2"]})
    nc.publish("orders.plain", b"")
    msg = sub.next_msg(timeout=2)
    assert (msg.subject, msg.data, msg.reply) == ("orders.new", b"data", None)
    assert msg.headers["k"] == "v"
    assert msg.headers.get_all("multi") == ["1", "2"]
    plain = sub.next_msg(timeout=2)
    assert plain.data == b"" and len(plain.headers) == 0


def test_headers_object_and_reply_subject(nc: jsclient.Connection) -> None:
    sub = nc.subscribe("h.test")
    h = jsclient.Headers()
    h.add("X", "1")
    h.add("X", "2")
    nc.publish("h.test", b"p", reply="some.reply", headers=h)
    msg = sub.next_msg(timeout=2)
    assert msg.reply == "some.reply"
    assert msg.headers.get_all("X") == ["1", "2"]


def test_queue_group_distributes_each_message_once(nc: jsclient.Connection) -> None:
    members = [nc.subscribe("work", queue="workers") for _ in range(3)]
    nc.flush()
    for i in range(300):
        nc.publish("work", str(i).encode())
    nc.flush()
    seen: list[bytes] = []
    counts = []
    for sub in members:
        n = 0
        while True:
            try:
                seen.append(sub.next_msg(timeout=0.3).data)
                n += 1
            except jsclient.TimeoutError:
                break
        counts.append(n)
    assert sorted(seen) == sorted(str(i).encode() for i in range(300))
    assert all(c > 0 for c in counts), counts


def test_many_threads_requests_never_mismatch(server: NatsServer) -> None:
    """32 threads x 10,000 requests in total on one connection: each reply is the right one."""
    responder = jsclient.connect(server.url)
    requester = jsclient.connect(server.url)
    try:
        responder.subscribe("svc.echo", callback=lambda m: m.respond(m.data))
        responder.flush()
        mismatches: list[tuple[bytes, bytes]] = []
        failures: list[BaseException] = []

        def worker(t: int) -> None:
            try:
                for i in range(10_000 // 32 + (1 if t < 10_000 % 32 else 0)):
                    payload = f"{t}-{i}".encode()
                    reply = requester.request("svc.echo", payload, timeout=10)
                    if reply.data != payload:
                        mismatches.append((payload, reply.data))
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                failures.append(exc)

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(32)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        assert not failures, failures[:3]
        assert not mismatches, mismatches[:3]
        assert requester.stats()["in_msgs"] == 10_000
    finally:
        requester.close()
        responder.close()


def test_request_headers_and_respond_with_headers(nc: jsclient.Connection) -> None:
    def handler(m: jsclient.Msg) -> None:
        m.respond(m.data.upper(), headers={"Echo": m.headers["Q"]})

    nc.subscribe("svc.hdr", callback=handler)
    nc.flush()
    reply = nc.request("svc.hdr", b"abc", headers={"Q": "42"})
    assert reply.data == b"ABC" and reply.headers["Echo"] == "42"


def test_no_responders(nc: jsclient.Connection) -> None:
    with pytest.raises(jsclient.NoRespondersError, match=r"nobody\.home"):
        nc.request("nobody.home", b"x", timeout=2)
    assert nc.is_connected


def test_request_timeout_is_a_builtin_timeout(nc: jsclient.Connection) -> None:
    nc.subscribe("slow.svc")  # subscribed, never answers
    nc.flush()
    with pytest.raises(TimeoutError):
        nc.request("slow.svc", b"x", timeout=0.2)


def test_max_payload_rejected_before_sending(nc: jsclient.Connection) -> None:
    sub = nc.subscribe("big")
    limit = nc.max_payload
    assert limit == nc.server_info["max_payload"]
    with pytest.raises(jsclient.MaxPayloadError, match=str(limit)):
        nc.publish("big", b"x" * (limit + 1))
    with pytest.raises(jsclient.MaxPayloadError):
        nc.publish("big", b"x" * (limit - 10), headers={"k": "v" * 20})
    nc.publish("big", b"x" * limit)
    assert len(sub.next_msg(timeout=5).data) == limit
    assert nc.is_connected


@pytest.mark.parametrize("subject", ["", "has space", "a..b", "a.*", "a.>", ".a", "tab\tx"])
def test_invalid_subject_rejected_and_connection_healthy(nc: jsclient.Connection, subject: str) -> None:
    sub = nc.subscribe("healthy")
    with pytest.raises(jsclient.BadSubjectError):
        nc.publish(subject, b"x")
    nc.publish("healthy", b"still fine")
    assert sub.next_msg(timeout=2).data == b"still fine"


@pytest.mark.parametrize("payload", ["text", 5, None, ["list"]])
def test_non_bytes_payload_rejected(nc: jsclient.Connection, payload: object) -> None:
    with pytest.raises(jsclient.BadPayloadError):
        nc.publish("x", payload)  # type: ignore[arg-type]
    with pytest.raises(jsclient.BadPayloadError):
        nc.request("x", payload)  # type: ignore[arg-type]
    assert nc.stats()["out_msgs"] == 0


def test_bytes_like_payloads_accepted(nc: jsclient.Connection) -> None:
    sub = nc.subscribe("bl")
    nc.publish("bl", bytearray(b"ba"))
    nc.publish("bl", memoryview(b"mv"))
    assert [sub.next_msg(2).data for _ in range(2)] == [b"ba", b"mv"]


def test_bad_headers_rejected_before_sending(nc: jsclient.Connection) -> None:
    with pytest.raises(jsclient.BadHeaderError):
        nc.publish("x", b"", headers={"bad name": "v"})
    with pytest.raises(jsclient.BadHeaderError):
        nc.publish("x", b"", headers={"k": "a\r\nInjected: yes"})
    assert nc.stats()["out_msgs"] == 0 and nc.is_connected


def test_invalid_subscribe_arguments(nc: jsclient.Connection) -> None:
    with pytest.raises(jsclient.BadSubjectError):
        nc.subscribe("a.>.b")
    with pytest.raises(jsclient.BadSubjectError):
        nc.subscribe("ok", queue="has space")
    with pytest.raises(jsclient.InvalidArgumentError, match="max_messages"):
        nc.subscribe("ok", max_messages=0)
    with pytest.raises(jsclient.InvalidArgumentError, match="pending_msgs_limit"):
        nc.subscribe("ok", pending_msgs_limit=-1)
    with pytest.raises(jsclient.InvalidArgumentError, match="callback"):
        nc.subscribe("ok", callback="not callable")  # type: ignore[arg-type]
    with pytest.raises(jsclient.InvalidArgumentError, match="timeout"):
        nc.flush(timeout=0)


@pytest.mark.parametrize("timeout", [0, -1, -0.5, float("nan"), float("inf"), 10**400, "5", True, jsclient.DEFAULT])
def test_request_bad_timeout_rejected_before_sending(nc: jsclient.Connection, timeout: object) -> None:
    sub = nc.subscribe("svc.timeouts", callback=lambda m: m.respond(m.data))
    nc.flush()
    for call in (nc.request, nc.request_async):
        with pytest.raises(jsclient.InvalidArgumentError, match="timeout"):
            call("svc.timeouts", b"x", timeout=timeout)  # type: ignore[arg-type]
    assert nc.stats()["out_msgs"] == 0
    # Whole seconds as an int are a timeout too, and the connection is still fine.
    assert nc.request("svc.timeouts", b"a", timeout=5).data == b"a"
    assert nc.request_async("svc.timeouts", b"b", timeout=5).result(timeout=5).data == b"b"
    sub.unsubscribe()


def test_slow_consumer_drops_counts_and_reports(server: NatsServer, error_log: ErrorLog) -> None:
    nc = jsclient.connect(server.url, error_cb=error_log)
    try:
        sub = nc.subscribe("flood", pending_msgs_limit=100)
        nc.flush()
        for _ in range(1000):
            nc.publish("flood", b"x")
        nc.flush()
        err = error_log.wait_for(jsclient.SlowConsumerError)
        assert isinstance(err, jsclient.SlowConsumerError)
        assert err.subject == "flood" and err.dropped >= 1
        assert sub.pending_msgs == 100
        assert sub.dropped == 900 and sub.received == 1000
        # The reader thread was never blocked: the connection still works.
        other = nc.subscribe("after")
        nc.publish("after", b"ok")
        assert other.next_msg(timeout=2).data == b"ok"
    finally:
        nc.close()


def test_slow_consumer_by_bytes(server: NatsServer, error_log: ErrorLog) -> None:
    with jsclient.connect(server.url, error_cb=error_log) as nc:
        sub = nc.subscribe("bytes.flood", pending_bytes_limit=1000)
        for _ in range(50):
            nc.publish("bytes.flood", b"y" * 100)
        nc.flush()
        error_log.wait_for(jsclient.SlowConsumerError)
        assert sub.pending_msgs == 10 and sub.dropped == 40
        assert sub.pending_bytes == 1000


def test_next_msg_raises_slow_consumer_once_after_the_kept_messages_then_goes_on(
    server: NatsServer, error_log: ErrorLog
) -> None:
    """No drop is silent for a blocking reader (issue 59): ``next_msg`` hands out the messages kept before the
    drops, raises SlowConsumerError once where they were, then hands out the later messages; the next episode
    of drops is raised again.  The error callback hears of each episode as before."""
    with jsclient.connect(server.url, error_cb=error_log) as nc:
        sub = nc.subscribe("gap", pending_msgs_limit=10)
        nc.flush()

        def publish(numbers: range) -> None:
            for i in numbers:
                nc.publish("gap", b"%d" % i)
            nc.flush()  # its PONG comes after the deliveries: every one has arrived (kept or dropped)

        def take(n: int) -> list[int]:
            return [int(sub.next_msg(timeout=0).data) for _ in range(n)]

        publish(range(50))
        assert (sub.pending_msgs, sub.dropped) == (10, 40)  # the gap is no message
        assert take(10) == list(range(10))
        with pytest.raises(jsclient.SlowConsumerError) as raised:
            sub.next_msg(timeout=0)
        first = raised.value
        assert (first.subject, first.sid, first.dropped, first.missed) == ("gap", sub.sid, 40, 40)
        assert "40 message(s) dropped here" in str(first)
        publish(range(50, 55))
        assert take(5) == list(range(50, 55))  # once: no second error for the same drops
        with pytest.raises(jsclient.TimeoutError):
            sub.next_msg(timeout=0)

        publish(range(55, 75))  # a new episode: 10 kept, 10 dropped
        assert take(10) == list(range(55, 65))
        with pytest.raises(jsclient.SlowConsumerError) as raised:
            sub.next_msg(timeout=0)
        assert (raised.value.dropped, raised.value.missed) == (50, 10)
        publish(range(75, 76))
        assert take(1) == [75]
        assert (sub.received, sub.dropped) == (76, 50)

        # The error callback still hears of the drops: once per episode, not once per message dropped.
        deadline = time.monotonic() + 10
        while len(error_log.errors) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        reported = error_log.errors
        assert len(reported) == 2 and all(isinstance(e, jsclient.SlowConsumerError) for e in reported), reported
        assert all(e.missed is None and e.sid == sub.sid for e in reported)  # type: ignore[attr-defined]


def test_iterating_raises_slow_consumer_once_and_the_same_iterator_goes_on(server: NatsServer) -> None:
    """``for msg in sub`` raises the gap's SlowConsumerError after the kept messages; the iterator is not spent
    by it (as a generator would be) and goes on to the later messages and the subscription's end."""
    with jsclient.connect(server.url, error_cb=lambda _e: None) as nc:
        sub = nc.subscribe("gap.iter", pending_msgs_limit=5)
        nc.flush()
        for i in range(20):
            nc.publish("gap.iter", b"%d" % i)
        nc.flush()
        it = iter(sub)
        assert [int(next(it).data) for _ in range(5)] == list(range(5))
        # Ends by itself after 3 more (20 have arrived), so that nothing below can wait for ever.
        sub.unsubscribe(max_messages=23)
        for i in range(20, 23):
            nc.publish("gap.iter", b"%d" % i)
        nc.flush()
        with pytest.raises(jsclient.SlowConsumerError) as raised:
            next(it)
        assert (raised.value.dropped, raised.value.missed) == (15, 15)
        assert [int(msg.data) for msg in it] == [20, 21, 22]


def test_callbacks_keep_order_and_survive_exceptions(server: NatsServer, error_log: ErrorLog) -> None:
    with jsclient.connect(server.url, error_cb=error_log) as nc:
        got: list[int] = []
        done = threading.Event()

        def cb(m: jsclient.Msg) -> None:
            n = int(m.data)
            if n == 5:
                raise RuntimeError("boom in callback")
            got.append(n)
            if n == 999:
                done.set()

        nc.subscribe("ordered", callback=cb)
        for i in range(1000):
            nc.publish("ordered", str(i).encode())
        assert done.wait(10)
        assert got == [i for i in range(1000) if i != 5]
        err = error_log.wait_for(RuntimeError)
        assert "boom" in str(err)


def test_callback_runs_on_its_own_thread(nc: jsclient.Connection) -> None:
    names: list[str] = []
    done = threading.Event()
    nc.subscribe("which.thread", callback=lambda m: (names.append(threading.current_thread().name), done.set()))
    nc.publish("which.thread", b"")
    assert done.wait(5)
    assert names[0].startswith("jsclient-sub-")


def test_max_msgs_auto_unsubscribe(nc: jsclient.Connection) -> None:
    sub = nc.subscribe("limited", max_messages=3)
    for i in range(10):
        nc.publish("limited", str(i).encode())
    nc.flush()
    assert [m.data for m in sub] == [b"0", b"1", b"2"]
    with pytest.raises(jsclient.SubscriptionClosedError):
        sub.next_msg(timeout=0.1)


def test_unsubscribe_with_max_after_some(nc: jsclient.Connection) -> None:
    sub = nc.subscribe("later")
    nc.publish("later", b"1")
    nc.flush()
    assert sub.next_msg(2).data == b"1"
    sub.unsubscribe(max_messages=3)
    for i in range(2, 10):
        nc.publish("later", str(i).encode())
    nc.flush()
    assert [m.data for m in sub] == [b"2", b"3"]


def test_unsubscribe_stops_delivery(nc: jsclient.Connection) -> None:
    sub = nc.subscribe("gone")
    sub.unsubscribe()
    nc.publish("gone", b"x")
    nc.flush()
    with pytest.raises(jsclient.SubscriptionClosedError):
        sub.next_msg(timeout=0.2)
    sub.unsubscribe()  # idempotent


def test_iteration_ends_when_unsubscribed_from_another_thread(nc: jsclient.Connection) -> None:
    sub = nc.subscribe("iter")
    for i in range(3):
        nc.publish("iter", str(i).encode())
    nc.flush()
    got = []
    for msg in sub:
        got.append(msg.data)
        if len(got) == 3:
            threading.Timer(0.1, sub.unsubscribe).start()
    assert got == [b"0", b"1", b"2"]


def test_next_msg_timeout(nc: jsclient.Connection) -> None:
    sub = nc.subscribe("quiet")
    start = time.monotonic()
    with pytest.raises(jsclient.TimeoutError):
        sub.next_msg(timeout=0.2)
    assert time.monotonic() - start >= 0.19


def test_next_msg_refused_on_callback_subscription(nc: jsclient.Connection) -> None:
    sub = nc.subscribe("cbsub", callback=lambda m: None)
    with pytest.raises(jsclient.Error, match="callback"):
        sub.next_msg()


def test_drain_delivers_everything_published_before_it(server: NatsServer) -> None:
    received: list[bytes] = []
    sub_conn = jsclient.connect(server.url)
    pub_conn = jsclient.connect(server.url)
    sub = sub_conn.subscribe("drain.me", callback=lambda m: (time.sleep(0.0001), received.append(m.data)))
    sub_conn.flush()
    for i in range(5000):
        pub_conn.publish("drain.me", str(i).encode())
    pub_conn.drain()  # flushes every publish before closing
    assert pub_conn.is_closed
    sub_conn.flush()
    sub_conn.drain(timeout=30)
    assert sub_conn.is_closed and sub.is_closed
    assert received == [str(i).encode() for i in range(5000)]


def test_drain_with_next_msg_subscriber(server: NatsServer) -> None:
    nc = jsclient.connect(server.url)
    sub = nc.subscribe("drain.sync")
    for i in range(10):
        nc.publish("drain.sync", str(i).encode())
    nc.flush()
    taken = []
    consumer = threading.Thread(target=lambda: taken.extend(m.data for m in sub))
    consumer.start()
    nc.drain(timeout=10)
    consumer.join(5)
    assert taken == [str(i).encode() for i in range(10)]


def test_subscription_drain(nc: jsclient.Connection) -> None:
    got: list[bytes] = []
    sub = nc.subscribe("sd", callback=lambda m: got.append(m.data))
    for i in range(100):
        nc.publish("sd", b"%d" % i)
    sub.drain(timeout=10)
    assert got == [b"%d" % i for i in range(100)]
    nc.publish("sd", b"after")
    nc.flush()
    assert len(got) == 100 and nc.is_connected


def test_close_is_idempotent_and_closed_connection_raises(server: NatsServer) -> None:
    closed = threading.Event()
    nc = jsclient.connect(server.url, closed_cb=closed.set)
    sub = nc.subscribe("x")
    nc.close()
    nc.close()
    assert closed.wait(2)
    assert nc.is_closed
    with pytest.raises(jsclient.ConnectionClosedError):
        nc.publish("x", b"")
    with pytest.raises(jsclient.ConnectionClosedError):
        nc.subscribe("y")
    with pytest.raises(jsclient.ConnectionClosedError):
        nc.request("y", b"")
    with pytest.raises(jsclient.ConnectionClosedError):
        nc.flush()
    with pytest.raises(jsclient.ConnectionClosedError):
        sub.next_msg(timeout=1)


def test_close_wakes_a_blocked_next_msg(nc: jsclient.Connection) -> None:
    sub = nc.subscribe("blocked")
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            sub.next_msg(timeout=30)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    th = threading.Thread(target=wait)
    th.start()
    time.sleep(0.1)
    nc.close()
    th.join(5)
    assert not th.is_alive()
    assert isinstance(errors[0], jsclient.ConnectionClosedError)


def test_close_sends_what_was_published(server: NatsServer) -> None:
    with jsclient.connect(server.url) as receiver:
        sub = receiver.subscribe("last.words")
        receiver.flush()
        with jsclient.connect(server.url) as sender:
            for i in range(100):
                sender.publish("last.words", b"%d" % i)
        assert [sub.next_msg(2).data for _ in range(100)] == [b"%d" % i for i in range(100)]


def test_counters(nc: jsclient.Connection) -> None:
    sub = nc.subscribe("count")
    nc.publish("count", b"abc")
    nc.publish("count", b"de", headers={"k": "v"})
    sub.next_msg(2)
    sub.next_msg(2)
    stats = nc.stats()
    assert stats["out_msgs"] == 2 and stats["out_bytes"] == 5
    assert stats["in_msgs"] == 2 and stats["in_bytes"] == 5


def test_no_server_raises_no_servers_error() -> None:
    from jsclient.server import free_port

    with pytest.raises(jsclient.NoServersError, match=r"127\.0\.0\.1"):
        jsclient.connect(f"nats://127.0.0.1:{free_port()}", connect_timeout=0.5)


def test_unknown_and_invalid_options_rejected() -> None:
    with pytest.raises(jsclient.InvalidArgumentError, match="bogus"):
        jsclient.connect("nats://127.0.0.1:1", bogus=1)  # type: ignore[arg-type]
    with pytest.raises(jsclient.InvalidArgumentError, match="connect_timeout"):
        jsclient.connect("nats://127.0.0.1:1", connect_timeout=-1)
    with pytest.raises(jsclient.InvalidArgumentError, match="scheme"):
        jsclient.connect("http://127.0.0.1:1")
    for spin in (-0.001, 1.0, "fast", True):
        with pytest.raises(jsclient.InvalidArgumentError, match="spin_wait"):
            jsclient.connect("nats://127.0.0.1:1", spin_wait=spin)


def test_options_are_picklable_and_hide_secrets() -> None:
    import pickle

    opts = jsclient.Options.build("nats://u:secretpw@127.0.0.1:4222", user="u", password="hunter2")
    again = pickle.loads(pickle.dumps(opts))
    assert again == opts
    text = repr(opts)
    assert "hunter2" not in text and "secretpw" not in text


def test_dropped_connection_is_collected(server: NatsServer) -> None:
    before = {t.ident for t in threading.enumerate()}
    nc = jsclient.connect(server.url)
    nc.subscribe("x")
    ref = weakref.ref(nc)
    reader = next(t for t in threading.enumerate() if t.name == "jsclient-reader" and t.ident not in before)
    del nc
    gc.collect()
    assert ref() is None
    assert reader is not None
    reader.join(5)
    assert not reader.is_alive()


def test_threads_are_named_daemons(nc: jsclient.Connection) -> None:
    names = Counter(t.name for t in threading.enumerate() if t.name.startswith("jsclient-") and t.daemon)
    assert names["jsclient-reader"] >= 1 and names["jsclient-flusher"] >= 1


def test_request_async_many_in_flight(nc: jsclient.Connection) -> None:
    nc.subscribe("svc.async", callback=lambda m: m.respond(b"re:" + m.data))
    nc.flush()
    futures = [nc.request_async("svc.async", b"%d" % i, timeout=10) for i in range(2000)]
    assert [f.result(timeout=10).data for f in futures] == [b"re:%d" % i for i in range(2000)]


def test_request_async_leaves_even_when_nobody_calls_result(nc: jsclient.Connection) -> None:
    # Async requests may wait for the caller's result() to send them; nobody calls it here:
    # waves of requests, each waited on only through concurrent.futures.wait, must still go out.
    nc.subscribe("svc.nowait", callback=lambda m: m.respond(m.data))
    nc.flush()
    for wave in range(20):
        futures = [nc.request_async("svc.nowait", b"%d" % i, timeout=10) for i in range(wave % 4 + 1)]
        done, not_done = concurrent.futures.wait(futures, timeout=5)
        assert not not_done, f"wave {wave}: {len(not_done)} request(s) never left"
        assert sorted(f.result().data for f in done) == sorted(b"%d" % i for i in range(wave % 4 + 1))
    got: list[jsclient.Msg] = []
    arrived = threading.Event()
    nc.request_async("svc.nowait", b"cb", timeout=10).add_done_callback(
        lambda f: (got.append(f.result()), arrived.set())
    )
    assert arrived.wait(5) and got[0].data == b"cb"


def test_request_async_errors_resolve_every_future(nc: jsclient.Connection) -> None:
    nobody = nc.request_async("async.nobody", b"x", timeout=5)
    with pytest.raises(jsclient.NoRespondersError, match=r"async\.nobody"):
        nobody.result(timeout=5)
    nc.subscribe("async.silent")
    nc.flush()
    silent = nc.request_async("async.silent", b"x", timeout=0.2)
    with pytest.raises(jsclient.TimeoutError):
        silent.result(timeout=5)
    pending = nc.request_async("async.silent", b"x", timeout=30)
    nc.close()
    with pytest.raises(jsclient.ConnectionClosedError):
        pending.result(timeout=5)


def test_request_async_mixed_timeouts_expire_each_on_its_own(nc: jsclient.Connection) -> None:
    # The deadline sweeper looks at every request in flight: a short timeout behind long ones
    # still fires on time, the long ones stay pending, and answered ones never time out.
    nc.subscribe("async.mute")
    nc.subscribe("async.echo", callback=lambda m: m.respond(m.data))
    nc.flush()
    long_ones = [nc.request_async("async.mute", b"", timeout=30) for _ in range(50)]
    answered = [nc.request_async("async.echo", b"%d" % i, timeout=0.5) for i in range(50)]
    short_ones = [nc.request_async("async.mute", b"", timeout=0.3) for _ in range(50)]
    for fut in short_ones:  # a plain concurrent.futures TimeoutError here would mean the sweeper never ran
        with pytest.raises(jsclient.TimeoutError, match=r"async\.mute.*0\.3 s"):
            fut.result(timeout=10)
    assert [f.result(timeout=0).data for f in answered] == [b"%d" % i for i in range(50)]
    time.sleep(0.6)  # past every short deadline, twice
    assert not any(f.done() for f in long_ones)
    assert nc.request("async.echo", b"still fine", timeout=5).data == b"still fine"


def test_request_async_callbacks_never_run_on_the_reader(nc: jsclient.Connection) -> None:
    attached = threading.Event()

    def respond_when_attached(m: jsclient.Msg) -> None:
        attached.wait(5)
        m.respond(b"ok")

    nc.subscribe("svc.thread", callback=respond_when_attached)
    nc.flush()
    where: list[str] = []
    done = threading.Event()
    fut = nc.request_async("svc.thread", b"", timeout=5)
    fut.add_done_callback(lambda _: (where.append(threading.current_thread().name), done.set()))
    attached.set()
    assert done.wait(5)
    assert where == ["jsclient-events"]


# -- request() callers that read their own replies (jsclient.core.fastpath) -----------------------------------------
# A connection that only makes requests lets the thread blocked in request() read the socket itself, and its reader
# thread steps aside meanwhile.  These tests check that nothing else a connection does suffers from it.


def _echo_responder(server: NatsServer, subject: str) -> jsclient.Connection:
    responder = jsclient.connect(server.url)
    responder.subscribe(subject, callback=lambda m: m.respond(b"re:" + m.data))
    responder.flush()
    return responder


def test_requester_steps_the_reader_aside_and_back(server: NatsServer) -> None:
    # White-box on purpose: the parking itself is invisible through the API, and the tests below
    # only mean something if request() callers really do read for themselves.
    responder = _echo_responder(server, "svc.aside")
    try:
        with jsclient.connect(server.url) as nc:
            for i in range(50):
                assert nc.request("svc.aside", b"%d" % i).data == b"re:%d" % i
            side = nc._session.link.reading
            assert side is not None

            def until_parked() -> None:
                deadline = time.monotonic() + 5
                while not side.parked and time.monotonic() < deadline:
                    nc.request("svc.aside", b"again")
                assert side.parked, "the reader never left the socket to request() callers"

            until_parked()
            # Callers stop coming back: the reader takes the socket again by itself (for the server's PINGs).
            deadline = time.monotonic() + 5
            while side.parked and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not side.parked
            until_parked()
            nc.subscribe("aside.sub")  # a subscription needs the reader: it comes back and stays
            deadline = time.monotonic() + 5
            while side.parked and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not side.parked
    finally:
        responder.close()


def test_a_request_leaves_after_the_publishes_before_it(server: NatsServer) -> None:
    """A request() frame may go straight to the socket, but never ahead of what its thread published first.

    The responder sees both subjects on one subscription, in wire order, and answers with how many of the
    thread's publishes came before the request.  Publishes wait in the buffer for the flusher, so requests
    often find it full and must go behind them; from four threads the send lock is also often taken.
    """
    counts: Counter[str] = Counter()
    responder = jsclient.connect(server.url)

    def answer(msg: jsclient.Msg) -> None:
        _, kind, thread = msg.subject.split(".")
        if kind == "pub":
            counts[thread] += 1
        else:
            msg.respond(b"%d" % counts[thread])

    responder.subscribe("ord.>", callback=answer)
    responder.flush()
    wrong: list[tuple[int, int]] = []
    try:
        with jsclient.connect(server.url) as nc:

            def run(thread: int) -> None:
                for i in range(300):
                    nc.publish(f"ord.pub.{thread}", b"")
                    seen = int(nc.request(f"ord.req.{thread}", b"", timeout=10).data)
                    if seen != i + 1:
                        wrong.append((i + 1, seen))

            threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert not any(t.is_alive() for t in threads)
        assert not wrong, f"requests overtook publishes (expected, seen): {wrong[:5]}"
        assert sum(counts.values()) == 4 * 300
    finally:
        responder.close()


def test_a_request_whose_send_fails_goes_again_on_the_next_connection(server: NatsServer) -> None:
    """A request() frame that goes straight to the socket and fails there is not lost: it goes back to the
    buffer, leaves on the new connection, and its caller gets the one answer.

    White-box: the socket's sending side is shut under the client, so the frame's own send fails
    (EPIPE).  The reader is parked meanwhile (callers read their own replies), so the send is what
    finds the loss: the error callback's BrokenPipeError shows that path ran.
    """
    seen: Counter[bytes] = Counter()
    responder = jsclient.connect(server.url)

    def answer(msg: jsclient.Msg) -> None:
        seen[msg.data] += 1
        msg.respond(b"re:" + msg.data)

    responder.subscribe("svc.resend", callback=answer)
    responder.flush()
    errors = ErrorLog()
    back = threading.Event()
    try:
        with jsclient.connect(
            server.url, reconnect_time_wait=0.05, error_cb=errors, reconnected_cb=back.set
        ) as nc:
            side = nc._session.link.reading
            assert side is not None
            deadline = time.monotonic() + 5
            while not side.parked and time.monotonic() < deadline:
                nc.request("svc.resend", b"warm")
            assert side.parked
            nc.request("svc.resend", b"warm")  # read by this caller: the reader stays parked for its next look
            transport = nc._session.link.transport
            assert transport is not None and transport.sock is not None
            transport.sock.shutdown(socket.SHUT_WR)
            assert nc.request("svc.resend", b"after", timeout=10).data == b"re:after"
            assert back.wait(5)  # callbacks run on their own thread, maybe after the reply
            assert isinstance(errors.errors[0], BrokenPipeError), errors.errors
        assert seen[b"after"] == 1
    finally:
        responder.close()


def test_after_a_burst_of_requests_everything_else_still_arrives(server: NatsServer) -> None:
    responder = _echo_responder(server, "svc.burst")
    publisher = jsclient.connect(server.url)
    try:
        with jsclient.connect(server.url) as nc:
            for i in range(300):
                assert nc.request("svc.burst", b"%d" % i).data == b"re:%d" % i
            # No request() from here on: only the reader can deliver what follows.
            sub = nc.subscribe("burst.feed")
            nc.flush()
            for i in range(500):
                publisher.publish("burst.feed", b"%d" % i)
            publisher.flush()
            assert [sub.next_msg(timeout=5).data for _ in range(500)] == [b"%d" % i for i in range(500)]
            futures = [nc.request_async("svc.burst", b"a%d" % i, timeout=10) for i in range(50)]
            assert [f.result(timeout=10).data for f in futures] == [b"re:a%d" % i for i in range(50)]
            assert nc.stats()["in_msgs"] == 300 + 500 + 50
    finally:
        publisher.close()
        responder.close()


def test_requests_from_threads_beside_subscription_traffic(server: NatsServer) -> None:
    responder = _echo_responder(server, "svc.mixed")
    publisher = jsclient.connect(server.url)
    try:
        with jsclient.connect(server.url) as nc:
            sub = nc.subscribe("mixed.feed")
            nc.flush()
            failures: list[BaseException] = []

            def ask(t: int) -> None:
                try:
                    for i in range(300):
                        payload = b"%d-%d" % (t, i)
                        assert nc.request("svc.mixed", payload, timeout=10).data == b"re:" + payload
                except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                    failures.append(exc)

            threads = [threading.Thread(target=ask, args=(t,)) for t in range(8)]
            for th in threads:
                th.start()
            for i in range(3000):
                publisher.publish("mixed.feed", b"%d" % i)
            publisher.flush()
            got = [sub.next_msg(timeout=10).data for _ in range(3000)]
            for th in threads:
                th.join(60)
            assert not failures, failures[:3]
            assert got == [b"%d" % i for i in range(3000)]
    finally:
        publisher.close()
        responder.close()


def test_timeouts_and_late_replies_while_requests_read_for_themselves(server: NatsServer) -> None:
    responder = _echo_responder(server, "svc.fast")
    late = jsclient.connect(server.url)
    late.subscribe("svc.late", callback=lambda m: (time.sleep(0.3), m.respond(b"too late")))
    late.subscribe("svc.never")
    late.flush()
    try:
        with jsclient.connect(server.url) as nc:
            for i in range(20):
                assert nc.request("svc.fast", b"%d" % i).data == b"re:%d" % i
            with pytest.raises(jsclient.TimeoutError, match=r"svc\.never"):
                nc.request("svc.never", b"x", timeout=0.2)
            with pytest.raises(jsclient.TimeoutError, match=r"svc\.late"):
                nc.request("svc.late", b"x", timeout=0.1)
            # The late reply arrives during these and must not be taken for one of them.
            for i in range(100):
                assert nc.request("svc.fast", b"after%d" % i).data == b"re:after%d" % i
            nc.flush()
            assert nc.is_connected
    finally:
        late.close()
        responder.close()


def test_a_reused_waiter_is_not_answered_by_the_late_reply_of_its_last_use(server: NatsServer) -> None:
    """request() keeps the waiter of a request it gave up on for the next one: the late reply of the first
    arrives while the second waits on that same waiter, and must be dropped, not taken for the second's."""
    release = threading.Event()
    helper = jsclient.connect(server.url)

    def held(m: jsclient.Msg) -> None:
        release.wait(10)
        m.respond(b"late")

    def second(m: jsclient.Msg) -> None:
        release.set()  # the late reply goes out now, ahead of this one
        time.sleep(0.1)
        m.respond(b"second")

    helper.subscribe("svc.held", callback=held)
    helper.subscribe("svc.second", callback=second)
    responder = _echo_responder(server, "svc.warm")
    helper.flush()
    try:
        with jsclient.connect(server.url) as nc:
            for _ in range(20):
                nc.request("svc.warm", b"x")  # request() callers read their own replies from now on
            spare = nc._session.requests._spare  # white-box: which waiter a request uses is not visible
            with pytest.raises(jsclient.TimeoutError):
                nc.request("svc.held", b"x", timeout=0.2)
            assert len(spare) == 1
            given_up = spare[0]
            before = nc.stats()["in_msgs"]
            assert nc.request("svc.second", b"x", timeout=5).data == b"second"
            assert nc.stats()["in_msgs"] - before == 2  # the late reply did arrive, during the second request
            assert spare == [given_up]  # the second request waited on the first one's waiter
            assert nc.request("svc.warm", b"y").data == b"re:y"
    finally:
        helper.close()
        responder.close()


def test_close_from_another_thread_ends_a_waiting_request(server: NatsServer) -> None:
    responder = _echo_responder(server, "svc.warm")
    silent = jsclient.connect(server.url)
    silent.subscribe("svc.silent")
    silent.flush()
    try:
        nc = jsclient.connect(server.url)
        for _ in range(20):
            nc.request("svc.warm", b"x")  # from now on request() callers read their own replies
        error = request_ended_by(nc, "svc.silent", nc.close)
        assert isinstance(error, jsclient.ConnectionClosedError), error
    finally:
        silent.close()
        responder.close()


QuickAndSlow = tuple[jsclient.Connection, ReadSide, jsclient.Connection]


@pytest.fixture
def quick_and_slow(server: NatsServer) -> Iterator[QuickAndSlow]:
    """Responders on svc.quick ("re:" + data at once) and svc.slow ("slow:" + data after 100 ms each), and two
    requesters: one polling for up to 10 ms (the most spin_wait takes; with its read side), one that never
    polls (spin_wait=0).  The quick replies must come within the poll and the slow ones after it on a busy
    machine too (make test-stress), so the poll is the widest allowed and the slow replies ten times later."""
    fast = _echo_responder(server, "svc.quick")
    slow = jsclient.connect(server.url)
    slow.subscribe("svc.slow", callback=lambda m: (time.sleep(0.1), m.respond(b"slow:" + m.data)))
    slow.flush()
    try:
        with jsclient.connect(server.url, spin_wait=0.01) as nc, jsclient.connect(server.url, spin_wait=0) as calm:
            side = nc._session.link.reading
            assert side is not None
            yield nc, side, calm
    finally:
        slow.close()
        fast.close()


def test_spinning_backs_off_from_a_slow_responder_and_comes_back(quick_and_slow: QuickAndSlow) -> None:
    # White-box like the test above: how long a caller polls is invisible through the API.
    nc, side, calm = quick_and_slow
    deadline = time.monotonic() + 20
    i = 0
    while side.spin.misses < 2 and time.monotonic() < deadline:
        i += 1
        assert nc.request("svc.slow", b"%d" % i).data == b"slow:%d" % i
    assert side.spin.misses >= 2, "no request() caller ever polled for the slow replies"
    assert side.spin.skip >= 4
    while side.spin.misses and time.monotonic() < deadline:
        i += 1
        assert nc.request("svc.quick", b"%d" % i).data == b"re:%d" % i
    assert side.spin.misses == 0, "fast replies never brought polling back"
    for j in range(5):
        assert calm.request("svc.slow", b"%d" % j).data == b"slow:%d" % j
    assert calm._session.link.reading is not None and calm._session.link.reading.spin.misses == 0


def test_reader_polls_for_async_replies_backs_off_and_loses_none(quick_and_slow: QuickAndSlow) -> None:
    # White-box like the test above for how long the reader polls; through the API, every async reply
    # must arrive whether the reader polled for it, slept after a poll ran out, or sat polls out.
    nc, side, calm = quick_and_slow
    deadline = time.monotonic() + 20
    i = 0
    while side.spin.misses < 2 and time.monotonic() < deadline:
        futures = [nc.request_async("svc.slow", b"%d" % (i + k), timeout=5) for k in range(4)]
        assert [f.result(5).data for f in futures] == [b"slow:%d" % (i + k) for k in range(4)]
        i += 4
    assert side.spin.misses >= 2, "the reader never polled for async replies"
    assert side.spin.skip >= 1
    window: deque[tuple[int, concurrent.futures.Future[jsclient.Msg]]] = deque()
    while (side.spin.misses or window) and time.monotonic() < deadline:
        if len(window) >= 8 or (not side.spin.misses and window):
            k, fut = window.popleft()
            assert fut.result(5).data == b"re:%d" % k
        else:
            i += 1
            window.append((i, nc.request_async("svc.quick", b"%d" % i, timeout=5)))
    assert not window
    assert side.spin.misses == 0, "fast async replies never brought the reader's polling back"
    futures = [calm.request_async("svc.slow", b"%d" % k, timeout=5) for k in range(4)]
    assert [f.result(5).data for f in futures] == [b"slow:%d" % k for k in range(4)]
    calm_side = calm._session.link.reading
    assert calm_side is not None and calm_side.spin.misses == 0  # spin_wait=0: never polled


def test_backoff_doubles_to_its_cap_adds_jitter_and_stops() -> None:
    from jsclient.backoff import Backoff

    plain = Backoff(initial=0.05, maximum=1.0)
    assert [plain.delay(n) for n in range(1, 7)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0]
    jittery = Backoff(initial=0.05, maximum=0.1, jitter=0.5)
    assert all(0.1 <= jittery.delay(5) <= 0.6 for _ in range(50))
    tries: list[int] = []

    def failing() -> None:
        tries.append(1)
        raise jsclient.NoRespondersError("nobody")

    with pytest.raises(jsclient.NoRespondersError):  # the last error, not tenacity's RetryError
        Backoff(initial=0.001, maximum=0.002, attempts=3).retrying(on=(jsclient.NoRespondersError,))(failing)
    assert len(tries) == 3
    rounds = iter([False, False, True])
    Backoff(initial=0.001, maximum=0.002, within=5.0).retrying(until_true=True)(lambda: next(rounds))
    assert next(rounds, None) is None  # stopped at the first True
