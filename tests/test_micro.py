"""Services (ADR-32) against a real nats-server, and with nats-py's services both ways."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import nats
import nats.micro
import nats.micro.service as nats_service
import pytest

import jsclient
from jsclient import micro
from jsclient.server import NatsServer

from .conftest import ErrorLog

# The fields ADR-32 gives each discovery answer, and their JSON types.
BASE = {"type": str, "name": str, "id": str, "version": str, "metadata": dict}
INFO = {**BASE, "description": str, "endpoints": list}
INFO_ENDPOINT = {"name": str, "subject": str, "queue_group": str, "metadata": dict}
STATS = {**BASE, "endpoints": list, "started": str}
STATS_ENDPOINT = {
    "name": str, "subject": str, "queue_group": str, "num_requests": int, "num_errors": int, "last_error": str,
    "processing_time": int, "average_processing_time": int,
}


def _conforms(body: dict[str, Any], schema: dict[str, type]) -> None:
    for key, kind in schema.items():
        assert isinstance(body.get(key), kind), f"{key}: {body.get(key)!r} is not a {kind.__name__}"


def _settle(check: Any) -> None:
    deadline = time.monotonic() + 10
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert check()


def _echo(request: micro.Request) -> None:
    request.respond(b"echo:" + request.data)


def _fail(request: micro.Request) -> None:
    raise ValueError("no such order")


def test_endpoints_groups_and_errors(nc: jsclient.Connection) -> None:
    with micro.add_service(nc, name="orders", version="1.2.3", description="d", metadata={"zone": "a"}) as svc:
        svc.add_endpoint("echo", _echo, metadata={"kind": "test"})
        v1 = svc.add_group("orders").add_group("v1")
        v1.add_endpoint("get", _fail)
        v1.add_endpoint("refuse", lambda r: r.respond_error(404, "not here", b"body"), subject="no")
        assert nc.request("echo", b"x", timeout=5).data == b"echo:x"
        failed = nc.request("orders.v1.get", b"1", timeout=5)
        assert failed.headers[micro.ERROR_CODE_HEADER] == "500"
        assert failed.headers[micro.ERROR_HEADER] == "ValueError: no such order"
        refused = nc.request("orders.v1.no", b"", timeout=5)
        assert (refused.headers[micro.ERROR_CODE_HEADER], refused.data) == ("404", b"body")
        # A worker counts a request once its handler has returned, a moment after the answer left.
        _settle(lambda: sum(e["num_requests"] for e in svc.stats()["endpoints"]) == 3)
        stats = {e["name"]: e for e in svc.stats()["endpoints"]}
        assert (stats["echo"]["num_requests"], stats["echo"]["num_errors"]) == (1, 0)
        assert (stats["get"]["num_errors"], stats["get"]["last_error"]) == (1, "500:ValueError: no such order")
        assert stats["refuse"]["subject"] == "orders.v1.no" and stats["refuse"]["last_error"] == "404:not here"
        svc.reset()
        assert all(e["num_requests"] == 0 for e in svc.stats()["endpoints"])


def test_discovery_answers_follow_the_schemas(nc: jsclient.Connection) -> None:
    seen: list[micro.Endpoint] = []
    with (
        micro.add_service(nc, name="alpha", version="1.0.0", stats_handler=lambda e: seen.append(e) or {"n": 1}) as a,
        micro.add_service(nc, name="beta", version="2.0.0-rc.1+build.5") as b,
    ):
        a.add_endpoint("work", _echo)
        nc.request("work", b"", timeout=5)
        _settle(lambda: a.stats()["endpoints"][0]["num_requests"] == 1)
        pings = [json.loads(m.data) for m in nc.request_many("$SRV.PING", timeout=1.0)]
        assert sorted(p["name"] for p in pings) == ["alpha", "beta"]
        for p in pings:
            _conforms(p, BASE)
            assert p["type"] == micro.PING_TYPE
        info = json.loads(nc.request("$SRV.INFO.alpha", timeout=5).data)
        _conforms(info, INFO)
        _conforms(info["endpoints"][0], INFO_ENDPOINT)
        assert info["endpoints"][0]["queue_group"] == "q"
        stats = json.loads(nc.request(f"$SRV.STATS.alpha.{a.id}", timeout=5).data)
        _conforms(stats, STATS)
        _conforms(stats["endpoints"][0], STATS_ENDPOINT)
        assert stats["endpoints"][0]["num_requests"] == 1 and stats["endpoints"][0]["data"] == {"n": 1}
        # nats-py reads every answer with its own models.
        nats_service.ServicePing.from_dict(pings[0])
        nats_service.ServiceInfo.from_dict(info)
        nats_service.ServiceStats.from_dict(stats)
        assert json.loads(nc.request(f"$SRV.PING.beta.{b.id}", timeout=5).data)["version"] == "2.0.0-rc.1+build.5"


def test_handlers_run_on_worker_threads_and_stop_drains(nc: jsclient.Connection) -> None:
    running = 0
    most = 0
    lock = threading.Lock()

    def slow(request: micro.Request) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.3)
        with lock:
            running -= 1
        request.respond(threading.current_thread().name.encode())

    svc = micro.add_service(nc, name="slow", version="0.1.0", workers=4)
    svc.add_endpoint("slow", slow)
    futures = [nc.request_async("slow", b"", timeout=30) for _ in range(8)]
    time.sleep(0.1)
    svc.stop()  # drains: every request taken is answered
    answers = [f.result(timeout=30).data for f in futures]
    assert len(answers) == 8 and all(a.startswith(b"jsclient-svc-slow") for a in answers)
    assert most >= 2  # handlers ran side by side
    assert svc.stopped
    with pytest.raises(jsclient.NoRespondersError):
        nc.request("$SRV.PING.slow", timeout=2)
    with pytest.raises(jsclient.InvalidArgumentError, match="stopped"):
        svc.add_endpoint("late", _echo)


@pytest.mark.parametrize(
    "limit, on", [("pending_msgs_limit", "endpoint"), ("pending_bytes_limit", "service")]
)
def test_a_blocked_endpoint_queues_up_to_its_limit_drops_the_rest_as_a_slow_consumer_and_recovers(
    server: NatsServer, error_log: ErrorLog, limit: str, on: str
) -> None:
    """Requests wait for a worker in the endpoint's bounded queue; the overflow is dropped, reported and counted.

    The limit is the endpoint's own, or the service's default for its endpoints.
    """
    workers, queued, flood, size = 2, 5, 60, 100
    bound = queued if limit == "pending_msgs_limit" else queued * size  # every payload is ``size`` bytes
    limits: dict[str, Any] = {limit: bound}
    release = threading.Event()
    entered = 0
    lock = threading.Lock()

    def blocked(request: micro.Request) -> None:
        nonlocal entered
        with lock:
            entered += 1
        release.wait(30)
        request.respond(b"ok")

    with (
        jsclient.connect(server.url, error_cb=error_log) as nc,
        jsclient.connect(server.url) as caller,
        micro.add_service(
            nc, name="blocked", version="1.0.0", workers=workers, **(limits if on == "service" else {})
        ) as svc,
    ):
        try:
            endpoint = svc.add_endpoint("work", blocked, subject="blocked.work", **(limits if on == "endpoint" else {}))
            nc.flush()  # the server has the endpoint's subscription before the other connection floods it
            assert endpoint.sub is not None
            sub = endpoint.sub
            inbox = caller.new_inbox()
            answers = caller.subscribe(f"{inbox}.*")
            most = 0
            flooding = True

            def level() -> int:
                return endpoint.pending_msgs if limit == "pending_msgs_limit" else endpoint.pending_bytes

            def watch() -> None:  # the queue's high-water mark while the flood arrives
                nonlocal most
                while flooding:
                    most = max(most, level())
                    time.sleep(0.0005)

            watcher = threading.Thread(target=watch)
            watcher.start()
            try:
                for i in range(flood):
                    # One at a time, as from many callers: the service has each before the next is sent,
                    # so only the bound (not a burst read at once) makes requests wait and drop.
                    caller.publish("blocked.work", b"x" * size, reply=f"{inbox}.{i}")
                    caller.flush()
                    _settle(lambda: sub.received == i + 1)  # noqa: B023 - called at once
                _settle(lambda: entered == workers)  # every worker holds one
            finally:
                flooding = False
                watcher.join()
            most = max(most, level())  # and at rest, the flood over
            dropped = endpoint.dropped
            # Taken: one per worker, one in the dispatcher's hand, the queue's worth; the rest dropped.
            assert dropped >= flood - (workers + 1 + queued)
            assert 0 < most <= bound
            slow = error_log.wait_for(jsclient.SlowConsumerError)
            assert isinstance(slow, jsclient.SlowConsumerError)
            assert slow.subject == "blocked.work" and 1 <= slow.dropped <= dropped
            assert all(isinstance(e, jsclient.SlowConsumerError) for e in error_log.errors)
            row = svc.stats()["endpoints"][0]
            assert (row["num_requests"], row["num_errors"]) == (0, dropped)
            assert "slow consumer on subject 'blocked.work'" in row["last_error"]

            release.set()
            # Every request taken is answered, no dropped one is...
            _settle(lambda: answers.pending_msgs == flood - dropped)
            # ... and the service goes on answering.
            for _ in range(10):
                assert caller.request("blocked.work", b"x" * size, timeout=5).data == b"ok"
            _settle(lambda: svc.stats()["endpoints"][0]["num_requests"] == flood - dropped + 10)
            assert answers.pending_msgs == flood - dropped
            assert (endpoint.dropped, endpoint.pending_msgs, svc.stats()["endpoints"][0]["num_errors"]) == (
                dropped, 0, dropped
            )
            svc.reset()  # the stats start again; the endpoint's count of drops goes on
            assert svc.stats()["endpoints"][0]["num_errors"] == 0 and endpoint.dropped == dropped
        finally:
            release.set()  # a failed test leaves no handler waiting


def test_queue_groups(nc: jsclient.Connection) -> None:
    with (
        micro.add_service(nc, name="qs", version="1.0.0") as one,
        micro.add_service(nc, name="qs", version="1.0.0") as two,
    ):
        one.add_endpoint("q", _echo)
        two.add_endpoint("q", _echo)
        one.add_endpoint("all", _echo, queue_group="")
        two.add_endpoint("all", _echo, queue_group="")
        assert len(list(nc.request_many("q", b"", timeout=0.5))) == 1  # the default group "q": one answers
        assert len(list(nc.request_many("all", b"", timeout=0.5))) == 2  # no group: both answer


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"name": "bad name"}, "service name must be"),
        ({"version": "1.0"}, "semantic version"),
        ({"metadata": {"k": 1}}, "metadata must map str to str"),
        ({"workers": 0}, "workers must be an int >= 1"),
        ({"queue_group": "bad group"}, "queue"),
        ({"pending_msgs_limit": 0}, "pending_msgs_limit must be an int >= 1"),
        ({"pending_bytes_limit": "1"}, "pending_bytes_limit must be an int >= 1"),
    ],
)
def test_bad_service_options(nc: jsclient.Connection, kwargs: dict[str, Any], fragment: str) -> None:
    options: dict[str, Any] = {"name": "ok", "version": "1.0.0", **kwargs}
    with pytest.raises(jsclient.InvalidArgumentError, match=fragment):
        micro.add_service(nc, **options)
    with pytest.raises(jsclient.NoRespondersError):  # refused before it subscribed to discovery
        nc.request("$SRV.PING.ok", timeout=2)


def test_bad_endpoint_options(nc: jsclient.Connection) -> None:
    with micro.add_service(nc, name="opts", version="1.0.0") as svc:
        for call, fragment in (
            (lambda: svc.add_endpoint("bad name", _echo), "endpoint name"),
            (lambda: svc.add_endpoint("e", _echo, subject="a..b"), "subject"),
            (lambda: svc.add_endpoint("e", "not callable"), "handler must be callable"),  # type: ignore[arg-type]
            (lambda: svc.add_group("a.>"), "group name"),
            (lambda: svc.add_endpoint("e", _echo, pending_msgs_limit=0), "pending_msgs_limit must be an int >= 1"),
            (lambda: svc.add_group("g").add_endpoint("e", _echo, pending_bytes_limit=True), "pending_bytes_limit"),
        ):
            with pytest.raises(jsclient.InvalidArgumentError, match=fragment):
                call()  # type: ignore[no-untyped-call]
        for subject in ("e", "g.e"):  # refused before subscribing
            with pytest.raises(jsclient.NoRespondersError):
                nc.request(subject, b"", timeout=2)
        svc.add_endpoint("codes", lambda r: r.respond_error("E1", "x"))  # type: ignore[arg-type]
        answer = nc.request("codes", b"", timeout=5)  # the bad code is the handler's error: a 500, not silence
        assert answer.headers[micro.ERROR_CODE_HEADER] == "500"
        assert "must be an int" in answer.headers[micro.ERROR_HEADER]
        assert svc.info()["endpoints"] == [
            {"name": "codes", "subject": "codes", "queue_group": "q", "metadata": {}}
        ]


def test_nats_py_calls_and_discovers_a_jsclient_service(server: NatsServer) -> None:
    with jsclient.connect(server.url) as nc, micro.add_service(nc, name="jssvc", version="1.0.0") as svc:
        svc.add_endpoint("echo", _echo, subject="js.echo")
        svc.add_endpoint("fail", _fail, subject="js.fail")
        nc.flush()  # another connection asks next: the server must have the endpoints' interest first

        async def peer() -> tuple[bytes, dict[str, str] | None, Any]:
            pnc = await nats.connect(server.url)
            ok = await pnc.request("js.echo", b"py", timeout=5)
            bad = await pnc.request("js.fail", b"", timeout=5)
            raw = await pnc.request("$SRV.INFO.jssvc", timeout=5)
            info = nats_service.ServiceInfo.from_dict(json.loads(raw.data))
            await pnc.close()
            return ok.data, bad.headers, info

        data, headers, info = asyncio.run(peer())
        assert data == b"echo:py"
        assert headers is not None and headers[micro.ERROR_CODE_HEADER] == "500"
        assert info.id == svc.id and sorted(e.subject for e in info.endpoints) == ["js.echo", "js.fail"]


def test_jsclient_calls_and_discovers_a_nats_py_service(server: NatsServer) -> None:
    ready, done = threading.Event(), threading.Event()

    async def serve() -> None:
        pnc = await nats.connect(server.url)
        service = await nats.micro.add_service(pnc, name="pysvc", version="3.1.4")

        async def handler(request: Any) -> None:
            if request.data == b"bad":
                await request.respond_error("418", "teapot")
            else:
                await request.respond(b"py:" + request.data)

        await service.add_endpoint(name="py", handler=handler, subject="py.echo")
        ready.set()
        while not done.is_set():
            await asyncio.sleep(0.05)
        await service.stop()
        await pnc.close()

    thread = threading.Thread(target=lambda: asyncio.run(serve()))
    thread.start()
    try:
        assert ready.wait(10)
        with jsclient.connect(server.url) as nc:
            found = [json.loads(m.data) for m in nc.request_many("$SRV.INFO.pysvc", timeout=1.0)]
            assert [f["version"] for f in found] == ["3.1.4"]
            assert found[0]["endpoints"][0]["subject"] == "py.echo"
            assert nc.request("py.echo", b"hi", timeout=5).data == b"py:hi"
            error = nc.request("py.echo", b"bad", timeout=5)
            assert (error.headers[micro.ERROR_CODE_HEADER], error.headers[micro.ERROR_HEADER]) == ("418", "teapot")
    finally:
        done.set()
        thread.join(10)


def test_a_handler_error_with_nobody_to_answer_is_counted_and_reported(server: NatsServer) -> None:
    """A published request (no reply subject) whose handler raises: counted in the stats, and reported."""
    log = ErrorLog()
    with jsclient.connect(server.url, error_cb=log) as nc:
        svc = micro.add_service(nc, name="fails", version="1.0.0")

        def broken(request: micro.Request) -> None:
            raise RuntimeError("boom")

        svc.add_endpoint("broken", broken)
        nc.publish("broken", b"fire and forget")
        reported = log.wait_for(jsclient.InvalidArgumentError)
        assert "no reply subject" in str(reported)
        _settle(lambda: svc.stats()["endpoints"][0]["num_errors"] == 1)
        stats = svc.stats()["endpoints"][0]
        assert stats["num_requests"] == 1 and stats["last_error"] == "500:RuntimeError: boom"
        svc.stop()


def test_stop_ends_discovery_even_when_a_drain_times_out(server: NatsServer) -> None:
    """A handler stuck past stop's timeout: stop raises by its timeout and the service has still left discovery;
    the requests it gave up on are counted, and nothing else reaches the error callback."""
    log = ErrorLog()
    started, release = threading.Event(), threading.Event()

    def stuck(request: micro.Request) -> None:
        started.set()
        release.wait(30)
        request.respond(b"late")

    with jsclient.connect(server.url, error_cb=log) as nc:
        svc = micro.add_service(nc, name="stuck", version="1.0.0", workers=1)
        endpoint = svc.add_endpoint("stuck", stuck)
        futures = [nc.request_async("stuck", b"", timeout=5) for _ in range(3)]
        assert started.wait(10)  # one runs; one waits in the dispatcher's hand, one in the queue
        _settle(lambda: endpoint.pending_msgs == 1)
        with pytest.raises(jsclient.TimeoutError):
            svc.stop(timeout=0.3)
        try:
            assert svc.stopped
            with pytest.raises(jsclient.NoRespondersError):
                nc.request("$SRV.PING.stuck", timeout=2)  # left discovery although the drain failed
        finally:
            release.set()  # the stuck handler may finish now
        assert futures[0].result(timeout=30).data == b"late"  # the request being handled is answered
        for queued in futures[1:]:  # the drain gave up on these: dropped unhandled, their callers time out
            assert isinstance(queued.exception(timeout=30), jsclient.TimeoutError)
        assert not [e for e in log.errors if not isinstance(e, jsclient.SlowConsumerError)], log.errors


def test_respond_takes_payload_and_warns_on_the_old_name(nc: jsclient.Connection) -> None:
    svc = micro.add_service(nc, name="names", version="1.0.0")
    svc.add_endpoint("new", lambda r: r.respond(payload=b"new"))
    with pytest.warns(DeprecationWarning, match=r"data= is deprecated, write payload="):
        svc.add_endpoint("old", lambda r: r.respond(data=b"old"))  # type: ignore[call-arg]
        assert nc.request("old", b"", timeout=5).data == b"old"
    assert nc.request("new", b"", timeout=5).data == b"new"
    svc.stop()
