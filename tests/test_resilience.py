"""Connection resilience against real nats-server processes: restarts, failover, stale links, forks.

Each test bounds its own waiting; the fake servers below exist only to produce
what a real server will not (garbage bytes, a frame cut in half) and say so.
"""

from __future__ import annotations

import builtins
import concurrent.futures
import contextlib
import multiprocessing
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

import jsclient
from jsclient.server import NatsCluster, NatsServer, free_port

from .conftest import ErrorLog, request_ended_by


class Events:
    """Counts disconnected/reconnected callbacks and lets a test wait for them."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.disconnected = 0
        self.reconnected = 0

    def on_disconnected(self) -> None:
        with self.cond:
            self.disconnected += 1
            self.cond.notify_all()

    def on_reconnected(self) -> None:
        with self.cond:
            self.reconnected += 1
            self.cond.notify_all()

    def wait(self, predicate: Callable[[], bool], timeout: float = 15.0) -> None:
        with self.cond:
            assert self.cond.wait_for(predicate, timeout), (self.disconnected, self.reconnected)


def connect(url: str | list[str], events: Events | None = None, **kw: object) -> jsclient.Connection:
    ev = events or Events()
    options = {"reconnect_time_wait": 0.2, "max_reconnect_attempts": 100, **kw}
    return jsclient.connect(
        url,
        disconnected_cb=ev.on_disconnected,
        reconnected_cb=ev.on_reconnected,
        **options,  # type: ignore[arg-type]
    )


def test_restart_buffered_publishes_arrive_exactly_once() -> None:
    events = Events()
    with NatsServer(jetstream=False) as server:
        nc = connect(server.url, events)
        try:
            sub = nc.subscribe("resume")
            for i in range(100):
                nc.publish("resume", b"%d" % i)
            nc.flush()
            server.kill()
            events.wait(lambda: events.disconnected == 1)
            assert nc.state is jsclient.State.RECONNECTING
            for i in range(100, 300):
                nc.publish("resume", b"%d" % i)  # buffered while disconnected
            server.start()
            events.wait(lambda: events.reconnected == 1)
            nc.flush(timeout=5)
            got = []
            while True:
                try:
                    got.append(int(sub.next_msg(timeout=0.5).data))
                except jsclient.TimeoutError:
                    break
            assert got == list(range(300))
            assert nc.reconnects == 1
        finally:
            nc.close()


def test_subscriber_on_other_connection_resumes_after_restart() -> None:
    sub_events, pub_events = Events(), Events()
    with NatsServer(jetstream=False) as server:
        subscriber = connect(server.url, sub_events)
        publisher = connect(server.url, pub_events)
        try:
            sub = subscriber.subscribe("both")
            subscriber.flush()
            server.restart()
            sub_events.wait(lambda: sub_events.reconnected == 1)
            pub_events.wait(lambda: pub_events.reconnected == 1)
            subscriber.flush()
            for i in range(50):
                publisher.publish("both", b"%d" % i)
            publisher.flush()
            assert [int(sub.next_msg(timeout=5).data) for _ in range(50)] == list(range(50))
        finally:
            subscriber.close()
            publisher.close()


def test_reconnect_buffer_limit_raises_and_loses_nothing_silently() -> None:
    events = Events()
    with NatsServer(jetstream=False) as server:
        nc = connect(server.url, events, reconnect_buf_size=10_000, reconnect_time_wait=5.0)
        try:
            server.kill()
            events.wait(lambda: events.disconnected == 1)
            accepted = 0
            with pytest.raises(jsclient.ReconnectBufferFullError, match="reconnect buffer"):
                for _ in range(1000):
                    nc.publish("overflow", b"x" * 100)
                    accepted += 1
            assert 0 < accepted < 100
            assert nc.stats()["out_msgs"] == accepted
        finally:
            nc.close()


def test_request_while_disconnected_waits_within_its_timeout() -> None:
    events = Events()
    with NatsServer(jetstream=False) as server:
        # One connection both answers and asks: resubscription goes out before the buffered request.
        nc = connect(server.url, events)
        try:
            nc.subscribe("svc.resilient", callback=lambda m: m.respond(b"ok:" + m.data))
            nc.flush()
            server.kill()
            events.wait(lambda: events.disconnected == 1)
            result: list[object] = []
            th = threading.Thread(target=lambda: result.append(nc.request("svc.resilient", b"1", timeout=10)))
            th.start()
            time.sleep(0.3)
            server.start()
            th.join(15)
            assert isinstance(result[0], jsclient.Msg) and result[0].data == b"ok:1"
            server.kill()
            with pytest.raises(jsclient.TimeoutError):
                nc.request("svc.resilient", b"2", timeout=0.5)
        finally:
            nc.close()


def test_cluster_failover_to_another_node() -> None:
    events = Events()
    with NatsCluster(3, jetstream=False) as cluster:
        nc = connect(cluster.urls[0], events, no_randomize=True)
        other = jsclient.connect(cluster.urls[2])
        try:
            deadline = time.monotonic() + 10
            while len(nc._pool) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)  # discovery through INFO connect_urls
            sub = nc.subscribe("failover")
            nc.flush()
            started = time.monotonic()
            cluster.servers[0].kill()
            events.wait(lambda: events.reconnected == 1, timeout=10)
            assert time.monotonic() - started < 10
            assert nc.connected_url in (cluster.urls[1], cluster.urls[2])
            nc.flush()
            time.sleep(0.2)  # interest propagates over the routes
            other.publish("failover", b"after")
            other.flush()
            assert sub.next_msg(timeout=5).data == b"after"
        finally:
            nc.close()
            other.close()


def test_stale_connection_detected_when_server_paused() -> None:
    events = Events()
    log = ErrorLog()
    with NatsServer(jetstream=False) as server:
        nc = connect(
            server.url, events, ping_interval=0.2, max_outstanding_pings=2, connect_timeout=0.5
        )
        nc._callbacks.error = log
        try:
            sub = nc.subscribe("stale")
            nc.flush()
            server.pause()
            try:
                # Stale within ping_interval x (max_outstanding_pings + 1), plus slack for a shared machine.
                events.wait(lambda: events.disconnected == 1, timeout=0.2 * 3 + 3)
                log.wait_for(jsclient.StaleConnectionError, timeout=2)
                nc.publish("stale", b"buffered")  # while disconnected: kept, sent after the resubscription
            finally:
                server.resume()
            events.wait(lambda: events.reconnected == 1, timeout=15)
            nc.publish("stale", b"back")
            assert [sub.next_msg(timeout=5).data for _ in range(2)] == [b"buffered", b"back"]
            with pytest.raises(jsclient.TimeoutError):
                sub.next_msg(timeout=0.5)  # delivered once
        finally:
            nc.close()


@contextlib.contextmanager
def fake_server(behaviour: Callable[[socket.socket], None]) -> Iterator[str]:
    """A scripted server speaking just enough NATS to reach the point of failure."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b'INFO {"server_id":"fake","max_payload":1048576,"headers":true}\r\n')
                buf = b""
                with contextlib.suppress(OSError):
                    while b"PING\r\n" not in buf:
                        buf += conn.recv(4096)
                    conn.sendall(b"PONG\r\n")
                    behaviour(conn)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"nats://127.0.0.1:{port}"
    finally:
        stop.set()
        listener.close()


@pytest.mark.parametrize(
    "behaviour",
    [
        lambda conn: (time.sleep(0.1), conn.sendall(b"GARBAGE \x00\xff nonsense\r\n"), time.sleep(0.5)),
        lambda conn: (time.sleep(0.1), conn.sendall(b"MSG fake.sub 1 100\r\nonly part of the"), time.sleep(0.1)),
    ],
    ids=["garbage", "closed-mid-frame"],
)
def test_broken_server_is_reported_and_client_moves_on(behaviour: Callable[[socket.socket], None]) -> None:
    events = Events()
    log = ErrorLog()
    with fake_server(behaviour) as fake_url, NatsServer(jetstream=False) as real:
        nc = connect([fake_url, real.url], events, no_randomize=True)
        nc._callbacks.error = log
        try:
            assert nc.connected_url == fake_url
            events.wait(lambda: events.reconnected >= 1, timeout=10)
            sub = nc.subscribe("after.fault")
            nc.publish("after.fault", b"ok")
            assert sub.next_msg(timeout=5).data == b"ok"
            assert any(isinstance(e, (jsclient.ProtocolError, ConnectionError)) for e in log.errors), log.errors
        finally:
            nc.close()


def test_all_servers_rejecting_credentials_close_without_a_storm() -> None:
    events = Events()
    config = 'authorization { user: "alice", password: "right" }'
    with NatsServer(jetstream=False, config=config) as server:
        closed = threading.Event()
        nc = jsclient.connect(
            server.url, user="alice", password="right", closed_cb=closed.set,
            disconnected_cb=events.on_disconnected, reconnect_time_wait=0.1,
        )
        server.extra_config = 'authorization { user: "alice", password: "changed" }'
        server.restart()
        assert closed.wait(10)
        assert isinstance(nc.last_error, jsclient.AuthorizationError)
        assert "right" not in str(nc.last_error) and "changed" not in repr(nc)


def test_64_threads_x_500_requests() -> None:
    with NatsServer(jetstream=False) as server:
        responder = jsclient.connect(server.url)
        requester = jsclient.connect(server.url)
        try:
            responder.subscribe("svc.many", callback=lambda m: m.respond(m.data))
            responder.flush()
            bad: list[object] = []
            answered = Counter[int]()

            def worker(t: int) -> None:
                for i in range(500):
                    payload = b"%d:%d" % (t, i)
                    try:
                        if requester.request("svc.many", payload, timeout=15).data != payload:
                            bad.append(payload)
                        else:
                            answered[t] += 1
                    except BaseException as exc:  # noqa: BLE001 - any error, recorded: none is lost on a thread
                        bad.append(exc)

            threads = [threading.Thread(target=worker, args=(t,)) for t in range(64)]
            for th in threads:
                th.start()
            for th in threads:
                th.join(120)
            assert not any(th.is_alive() for th in threads), "a request thread is still waiting"
            assert not bad, bad[:5]
            assert answered == {t: 500 for t in range(64)}  # every thread made all its requests
            assert requester.stats()["in_msgs"] == 64 * 500 and responder.stats()["in_msgs"] == 64 * 500
        finally:
            requester.close()
            responder.close()


def test_16_publisher_threads_never_interleave_frames() -> None:
    with NatsServer(jetstream=False) as server:
        receiver = jsclient.connect(server.url)
        sender = jsclient.connect(server.url)
        try:
            sub = receiver.subscribe("interleave.*", pending_msgs_limit=100_000, pending_bytes_limit=1 << 30)
            receiver.flush()

            def publisher(t: int) -> None:
                for i in range(2000):
                    body = (b"%02d-%05d|" % (t, i)) * (1 + i % 50)
                    sender.publish(f"interleave.{t}", body, headers={"T": str(t)} if i % 3 == 0 else None)

            threads = [threading.Thread(target=publisher, args=(t,)) for t in range(16)]
            for th in threads:
                th.start()
            for th in threads:
                th.join(60)
            sender.flush(10)
            seen: dict[int, list[int]] = {t: [] for t in range(16)}
            for _ in range(16 * 2000):
                msg = sub.next_msg(timeout=10)
                t = int(msg.subject.split(".")[1])
                first = msg.data.split(b"|", 1)[0]
                tt, i = (int(x) for x in first.split(b"-"))
                assert tt == t
                assert msg.data == (b"%02d-%05d|" % (t, i)) * (1 + i % 50)
                assert (msg.headers.get("T") == str(t)) == (i % 3 == 0)
                seen[t].append(i)
            assert all(seen[t] == list(range(2000)) for t in range(16))
        finally:
            sender.close()
            receiver.close()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_flooded_subscriber_keeps_memory_bounded() -> None:
    log = ErrorLog()
    with NatsServer(jetstream=False) as server:
        receiver = jsclient.connect(server.url, error_cb=log)
        sender = jsclient.connect(server.url)
        try:
            limit = 8 * 1024 * 1024
            sub = receiver.subscribe("flood.big", pending_bytes_limit=limit, pending_msgs_limit=1_000_000)
            receiver.flush()
            payload = b"z" * 65536
            before = _rss_bytes()
            for _ in range(3000):  # about 200 MB, nobody reading
                sender.publish("flood.big", payload)
            sender.flush(30)
            receiver.flush(30)
            grown = _rss_bytes() - before
            assert sub.pending_bytes <= limit
            assert sub.dropped > 0 and sub.dropped + sub.pending_msgs == sub.received
            assert grown < 4 * limit + 32 * 1024 * 1024, f"RSS grew by {grown / 1e6:.0f} MB"
            log.wait_for(jsclient.SlowConsumerError)
        finally:
            sender.close()
            receiver.close()


def _child_uses_parent_connection(nc: jsclient.Connection, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    try:
        nc.publish("fork.test", b"from child")
        queue.put("published")
    except jsclient.ForkedConnectionError as exc:
        queue.put(f"error: {exc}")


def test_fork_child_gets_clear_error_parent_keeps_working() -> None:
    with NatsServer(jetstream=False) as server:
        nc = jsclient.connect(server.url)
        try:
            sub = nc.subscribe("fork.test")
            nc.flush()
            ctx = multiprocessing.get_context("fork")
            q = ctx.Queue()
            proc = ctx.Process(target=_child_uses_parent_connection, args=(nc, q))
            proc.start()
            outcome = q.get(timeout=20)
            proc.join(20)
            assert outcome.startswith("error:") and "forked child" in outcome
            nc.publish("fork.test", b"from parent")
            assert sub.next_msg(timeout=5).data == b"from parent"
            with pytest.raises(jsclient.TimeoutError):
                sub.next_msg(timeout=0.3)  # the child never wrote into our socket
        finally:
            nc.close()


def test_fork_with_reconnect_after_fork_gets_a_fresh_connection() -> None:
    with NatsServer(jetstream=False) as server:
        nc = jsclient.connect(server.url, reconnect_after_fork=True)
        watcher = jsclient.connect(server.url)
        try:
            sub = watcher.subscribe("fork.fresh")
            watcher.flush()
            nc.publish("fork.fresh", b"parent before")
            nc.flush()
            pid = os.fork()
            if pid == 0:  # child: must not touch the parent's socket; gets its own
                code = 1
                try:
                    nc.publish("fork.fresh", b"child")
                    nc.flush(timeout=5)
                    nc.close()
                    code = 0
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert os.WEXITSTATUS(status) == 0
            nc.publish("fork.fresh", b"parent after")
            nc.flush()
            got = sorted(sub.next_msg(timeout=5).data for _ in range(3))
            assert got == [b"child", b"parent after", b"parent before"]
        finally:
            nc.close()
            watcher.close()


def test_connect_to_nothing_lists_every_server() -> None:
    urls = [f"nats://127.0.0.1:{free_port()}", f"nats://127.0.0.1:{free_port()}"]
    with pytest.raises(jsclient.NoServersError) as info:
        jsclient.connect(urls, connect_timeout=0.5)
    assert all(u.split("//")[1] in str(info.value) for u in urls)


def test_lame_duck_mode_moves_the_client_before_the_server_leaves() -> None:
    import signal

    events = Events()
    config = "lame_duck_grace_period: 1s\nlame_duck_duration: 30s"
    with NatsCluster(3, jetstream=False, config=config) as cluster:
        nc = connect(cluster.urls[0], events, no_randomize=True)
        try:
            deadline = time.monotonic() + 10
            while len(nc._pool) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            sub = nc.subscribe("ldm.check")
            nc.flush()
            leaving = cluster.servers[0]
            assert leaving.proc is not None
            leaving.proc.send_signal(signal.SIGUSR2)  # what `nats-server --signal ldm` sends
            events.wait(lambda: events.reconnected == 1, timeout=10)
            assert leaving.running, "the client moved only after the server had gone"
            assert nc.connected_url in (cluster.urls[1], cluster.urls[2])
            nc.flush()
            time.sleep(0.2)
            with jsclient.connect(cluster.urls[2]) as other:
                other.publish("ldm.check", b"still here")
            assert sub.next_msg(timeout=5).data == b"still here"
        finally:
            nc.close()


# -- faults while a request() caller reads its own reply (connection._ReadSide) ---------------------------------------


def test_request_loop_survives_a_restart() -> None:
    events = Events()
    with NatsServer(jetstream=False) as server:
        responder = connect(server.url)
        responder.subscribe("svc.loop", callback=lambda m: m.respond(b"re:" + m.data))
        responder.flush()
        nc = connect(server.url, events)
        try:
            restarted = threading.Event()
            answered_before = answered_after = 0
            wrong: list[tuple[bytes, bytes]] = []
            i = 0
            deadline = time.monotonic() + 30
            while answered_after < 200 and time.monotonic() < deadline:
                i += 1
                payload = b"%d" % i
                try:
                    reply = nc.request("svc.loop", payload, timeout=1)
                except (jsclient.TimeoutError, jsclient.NoRespondersError, jsclient.ConnectionLostError):
                    continue  # asked while the server was away (or before the responder was back)
                if reply.data != b"re:" + payload:
                    wrong.append((payload, reply.data))
                if restarted.is_set():
                    answered_after += 1
                else:
                    answered_before += 1
                    if answered_before == 200:
                        server.restart()
                        restarted.set()
            assert not wrong, wrong[:3]
            assert answered_before == 200 and answered_after == 200, (answered_before, answered_after)
            assert events.reconnected >= 1
        finally:
            nc.close()
            responder.close()


def test_async_requests_out_across_a_restart_all_resolve() -> None:
    # While async requests are out the reader polls the socket before it sleeps (_poll_before_recv); the
    # server leaving mid-poll must end in a reconnect, with every future resolved and no reply misrouted.
    events = Events()
    with NatsServer(jetstream=False) as server:
        responder = connect(server.url)
        responder.subscribe("svc.paced", callback=lambda m: (time.sleep(0.002), m.respond(b"re:" + m.data)))
        responder.flush()
        nc = connect(server.url, events)
        try:
            futures = [nc.request_async("svc.paced", b"%d" % i, timeout=2) for i in range(300)]
            assert futures[9].result(timeout=5).data == b"re:9"  # answers are coming in, the rest are out
            server.restart()
            not_done = concurrent.futures.wait(futures, timeout=15).not_done
            assert not not_done, f"{len(not_done)} futures never resolved"
            answered = 0
            for i, fut in enumerate(futures):
                error = fut.exception()
                if error is None:
                    assert fut.result().data == b"re:%d" % i
                    answered += 1
                else:
                    assert isinstance(error, jsclient.TimeoutError), error  # sent before the restart, lost with it
            assert answered >= 10, answered  # the ones before the restart, and any the responder sent after it
            events.wait(lambda: events.reconnected >= 1)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:  # until the responder is back too
                try:
                    after = nc.request_async("svc.paced", b"after", timeout=1).result(timeout=5)
                except (jsclient.TimeoutError, jsclient.NoRespondersError):
                    continue
                assert after.data == b"re:after"
                break
            else:
                pytest.fail("no async request was answered after the restart")
        finally:
            nc.close()
            responder.close()


def test_server_gone_while_a_request_reads_its_reply() -> None:
    with NatsServer(jetstream=False) as server:
        responder = jsclient.connect(server.url)
        responder.subscribe("svc.warm", callback=lambda m: m.respond(b"ok"))
        responder.subscribe("svc.silent")
        responder.flush()
        nc = jsclient.connect(server.url, allow_reconnect=False)
        try:
            for _ in range(20):
                assert nc.request("svc.warm", b"x").data == b"ok"
            error = request_ended_by(nc, "svc.silent", server.kill)
            assert isinstance(error, jsclient.ConnectionClosedError), error
            assert nc.is_closed
        finally:
            nc.close()
            responder.close()


def _answer_once_then_garbage(conn: socket.socket) -> None:
    """Fake server: answers the first request like a responder would, then sends bytes no server sends."""
    buf = b""
    answered = False
    sid = b"1"
    while True:
        data = conn.recv(65536)
        if not data:
            return
        buf += data
        while b"\r\n" in buf:
            line, _, buf = buf.partition(b"\r\n")
            parts = line.split()
            if parts[:1] == [b"SUB"]:
                sid = parts[-1]
            elif parts[:1] == [b"PUB"]:
                _, rest = buf[: int(parts[-1]) + 2], buf[int(parts[-1]) + 2 :]
                buf = rest
                if not answered:
                    conn.sendall(b"MSG %s %s 2\r\nok\r\n" % (parts[2], sid))
                    answered = True
                else:
                    conn.sendall(b"MSG \x00\xff garbage\r\n")
                    time.sleep(0.5)
                    return


def test_garbage_while_a_request_reads_its_reply_is_reported() -> None:
    log = ErrorLog()
    with fake_server(_answer_once_then_garbage) as url:
        nc = jsclient.connect(url, allow_reconnect=False, error_cb=log)
        try:
            assert nc.request("svc.fake", b"1", timeout=5).data == b"ok"
            with pytest.raises(jsclient.ConnectionClosedError):
                nc.request("svc.fake", b"2", timeout=30)
            log.wait_for(jsclient.ProtocolError)
            assert nc.is_closed
        finally:
            nc.close()


def test_a_child_forked_while_async_requests_are_out_times_its_own_out() -> None:
    """The parent's deadline sweep is running at the fork (20 async requests out to a silent subscriber); the
    child's own request_async must still time out by its deadline, and request() too (issue: the child inherited
    the sweep's running flag but not its timer thread, so its futures never expired)."""
    with NatsServer(jetstream=False) as server:
        nc = jsclient.connect(server.url, reconnect_after_fork=True)
        try:
            nc.subscribe("silent")  # a subscriber that never answers: no 503, the requests wait
            nc.flush()
            futures = [nc.request_async("silent", b"%d" % i, timeout=30) for i in range(20)]
            nc.flush()
            for attempt in range(5):
                pid = os.fork()
                if pid == 0:
                    code = 3
                    try:
                        started = time.monotonic()
                        fut = nc.request_async("silent", b"child", timeout=0.5)
                        try:
                            fut.result(timeout=5)
                            code = 4  # answered: impossible
                        except jsclient.TimeoutError:
                            code = 0 if time.monotonic() - started < 3 else 5
                        except builtins.TimeoutError:
                            code = 6  # the future itself never resolved: the defect
                        with contextlib.suppress(jsclient.TimeoutError):
                            nc.request("silent", b"child sync", timeout=0.3)
                        nc.close()
                    finally:
                        os._exit(code)
                _, status = os.waitpid(pid, 0)
                assert os.WEXITSTATUS(status) == 0, f"fork {attempt}: child exit {os.WEXITSTATUS(status)}"
            assert not any(f.done() for f in futures)  # the parent's requests are still its own, still waiting
        finally:
            nc.close()


def test_a_responder_answering_many_requests_keeps_bounded_state() -> None:
    """Every request has its own reply subject; answering 3 x the cache bound must not keep one entry each
    (the respond path remembered every subject it had validated, without bound)."""
    from jsclient.protocol import PREFIX_CACHE_MAX as _PREFIX_CACHE_MAX

    with NatsServer(jetstream=False) as server, jsclient.connect(server.url) as responder, jsclient.connect(
        server.url
    ) as requester:
        responder.subscribe(
            "echo", callback=lambda m: m.respond(m.data, headers={"Seen": "1"} if len(m.data) % 2 else None)
        )
        responder.flush()
        futures = [requester.request_async("echo", b"%d" % i, timeout=30) for i in range(3 * _PREFIX_CACHE_MAX)]
        assert all(f.result(timeout=60).data == b"%d" % i for i, f in enumerate(futures))
        assert len(responder._encoder.lines) <= _PREFIX_CACHE_MAX


def test_dropped_connections_are_collected_and_their_threads_and_sockets_end() -> None:
    """Ten connections dropped without close(), half with a callback subscription, all having run a future
    (the docs: "a connection dropped without close() is collected and its threads end").  In a child process, so
    that its thread and descriptor counts are its own."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    with NatsServer(jetstream=False) as server:
        done = subprocess.run(
            [sys.executable, str(Path(__file__).parent / "gc_child.py"), server.url],
            capture_output=True, text=True, timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["peak"] >= result["threads"] + 40  # the connections really ran their threads
        assert result["left"] == [], result
        assert result["threads_after"] <= result["threads"] and result["fds_after"] <= result["fds"], result


def test_batch_ids_are_short_unique_and_new_in_a_forked_child() -> None:
    # Each member carries its batch's id, so ids are short; a child forked mid-run must not repeat the ids its
    # parent goes on to make (the same id from two processes at once would mix two batches on the server).
    from jsclient.jetstream.batch import check_batch_id, new_batch_id

    made = [new_batch_id() for _ in range(10_000)]
    assert len(set(made)) == len(made)
    assert all(len(bid) <= 24 and check_batch_id(bid) for bid in made)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write_end, " ".join(new_batch_id() for _ in range(3)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    theirs = os.read(read_end, 4096).decode().split()
    os.close(read_end)
    os.waitpid(pid, 0)
    ours = [new_batch_id() for _ in range(3)]
    assert len(theirs) == 3 and not set(theirs) & set(ours + made), (theirs, ours)
