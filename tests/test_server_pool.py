"""The servers a connection knows: the release it talks to, the pool it reconnects from, and who picks.

Against real nats-server processes on loopback (the release matrix's binaries for the version test);
waits are generous deadlines, never timing assertions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

import jsclient
from jsclient import ServerVersion
from jsclient.server import NatsCluster, NatsServer, binary_version

from . import servers
from .conftest import ErrorLog

#: Where `make servers` puts each release's binary.


def wait_until(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached within the deadline"
        time.sleep(0.01)


def roundtrip(nc: jsclient.Connection, subject: str) -> None:
    sub = nc.subscribe(subject)
    nc.publish(subject, b"here")
    assert sub.next_msg(timeout=5).data == b"here"
    sub.unsubscribe()


# -- server_version ---------------------------------------------------------------------------------------------


def release_binary(version: str) -> str:
    try:
        return servers.release_binary(version)
    except FileNotFoundError as exc:
        pytest.fail(str(exc))


@pytest.mark.parametrize("version", ["2.10.26", "2.15.1"])
def test_server_version_is_the_connected_release(version: str) -> None:
    path = release_binary(version)
    binary = binary_version(path)
    with NatsServer(jetstream=False, binary=path) as server, jsclient.connect(server.url) as nc:
        found = nc.server_version
        assert isinstance(found, ServerVersion)
        assert found == binary
        assert (found.major, found.minor, found.patch, found.prerelease) == (*map(int, version.split(".")), None)
        assert str(found) == version == nc.server_info["version"]
        assert found >= (2, 10) and found < (3,)
        assert (found >= (2, 11)) is (version != "2.10.26")


def test_server_version_orders_releases_and_pre_releases() -> None:
    parse = ServerVersion.parse
    ordered = ["2.9.25", "2.10.0-beta.1", "2.10.0-RC.2", "2.10.0-RC.10", "2.10.0", "2.10.26", "2.12.0-RC.1", "2.12.0"]
    versions = [parse(text) for text in ordered]
    assert sorted(reversed(versions)) == versions
    assert [str(v) for v in versions] == ordered
    rc = parse("v2.12.0-RC.1")
    assert rc == ServerVersion(2, 12, 0, "RC.1") and hash(rc) == hash(ServerVersion(2, 12, 0, "RC.1"))
    assert rc < (2, 12) and rc > (2, 11, 99) and rc != parse("2.12.0")
    assert parse("2.15.1") <= (2, 15, 1) <= parse("2.15.1")
    assert parse("2.11.0+build.5") == parse("2.11.0")
    for bad in ("", "2.15", "two.15.1", "2.15.1 beta", "-1.0.0"):
        with pytest.raises(jsclient.InvalidArgumentError, match="not a nats-server version"):
            parse(bad)
    with pytest.raises(TypeError):
        assert rc < "2.12"  # type: ignore[operator]


# -- the reconnect server selector -------------------------------------------------------------------------------


@pytest.fixture
def trio() -> Iterator[list[NatsServer]]:
    """Three standalone servers (no cluster: nothing is discovered, the pool is what the test gives)."""
    servers = [NatsServer(jetstream=False) for _ in range(3)]
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.stop()


class Reconnects:
    def __init__(self) -> None:
        self.count = 0
        self.cond = threading.Condition()

    def __call__(self) -> None:
        with self.cond:
            self.count += 1
            self.cond.notify_all()

    def wait(self, n: int = 1, timeout: float = 15.0) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.count >= n, timeout), f"{self.count} reconnects, not {n}"


def test_the_selector_decides_where_a_reconnect_goes(trio: list[NatsServer]) -> None:
    a, b, c = trio
    seen: list[tuple[list[str], str | None, str]] = []

    def selector(pool: list[str], lost: str | None) -> str:
        seen.append((pool, lost, threading.current_thread().name))
        return c.url  # the default order would try b first: it follows a in the pool

    reconnected = Reconnects()
    with jsclient.connect(
        [a.url, b.url, c.url], no_randomize=True, server_selector=selector, reconnect_time_wait=0.05,
        reconnected_cb=reconnected,
    ) as nc:
        assert nc.connected_url == a.url and not seen  # the first connect goes in order, without it
        a.kill()
        reconnected.wait()
        assert nc.connected_url == c.url
        assert seen[0] == ([b.url, c.url, a.url], a.url, "jsclient-reconnect")  # the lost one is last
        roundtrip(nc, "selected")


@pytest.mark.parametrize(
    "answer, says",
    [
        (RuntimeError("no region left"), "server_selector raised RuntimeError"),
        ("nats://127.0.0.1:1", "server_selector returned 'nats://127.0.0.1:1', which is not in the server pool"),
        (None, "server_selector returned a NoneType, which is not in the server pool"),
    ],
    ids=["raises", "unknown-url", "not-a-url"],
)
def test_a_failing_selector_is_reported_and_the_default_order_goes_on(
    trio: list[NatsServer], error_log: ErrorLog, answer: object, says: str
) -> None:
    a, b, c = trio

    def selector(pool: list[str], lost: str | None) -> str:
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]

    reconnected = Reconnects()
    with jsclient.connect(
        [a.url, b.url, c.url], no_randomize=True, server_selector=selector, reconnect_time_wait=0.05,
        reconnected_cb=reconnected, error_cb=error_log,
    ) as nc:
        a.kill()
        reconnected.wait()
        assert nc.connected_url == b.url  # the default order: the server after the lost one
        error = error_log.wait_for(jsclient.ServerSelectorError)
        assert says in str(error)
        assert "trying the servers in the default order" in str(error)
        if isinstance(answer, Exception):
            assert error.__cause__ is answer
            assert "no region left" not in str(error)  # its text may carry a URL's password: not repeated
        roundtrip(nc, "default.order")


def test_the_selector_may_answer_a_url_in_short_form(trio: list[NatsServer]) -> None:
    a, b, c = trio
    reconnected = Reconnects()
    with jsclient.connect(
        [a.url, b.url, c.url], no_randomize=True, reconnect_time_wait=0.05, reconnected_cb=reconnected,
        server_selector=lambda pool, lost: f"127.0.0.1:{c.port}",
    ) as nc:
        a.kill()
        reconnected.wait()
        assert nc.connected_url == c.url


def test_the_selector_must_be_callable() -> None:
    with pytest.raises(jsclient.InvalidArgumentError, match="server_selector must be callable"):
        jsclient.connect("nats://127.0.0.1:1", server_selector="nats://127.0.0.1:4222")  # type: ignore[arg-type]


# -- set_servers ----------------------------------------------------------------------------------------------------


def test_set_servers_keeps_the_link_and_the_next_reconnect_dials_the_new_pool(trio: list[NatsServer]) -> None:
    a, b, _ = trio
    reconnected = Reconnects()
    with jsclient.connect(a.url, reconnect_time_wait=0.05, reconnected_cb=reconnected) as nc, jsclient.connect(
        b.url
    ) as on_b:
        sub = nc.subscribe("moved")
        nc.set_servers([b.url])
        assert nc.is_connected and nc.connected_url == a.url  # still on a
        assert nc.servers == [b.url] and nc.options.servers == (b.url,)
        roundtrip(nc, "still.on.a")
        a.kill()  # a would come first again without set_servers: it is the only server given
        reconnected.wait()
        assert nc.connected_url == b.url
        nc.flush()
        on_b.publish("moved", b"to b")
        assert sub.next_msg(timeout=5).data == b"to b"  # the subscription came along


@pytest.mark.parametrize(
    "servers, says",
    [
        ([], "servers must be a URL or a non-empty list of URLs"),
        (["nats://127.0.0.1:notaport"], "has a bad port"),
        (["ftp://127.0.0.1:4222"], "scheme must be one of"),
        ([42], "server URL must be a non-empty str"),
        (["nats://127.0.0.1:4222", "ws://127.0.0.1:8080"], "mixes ws:// or wss:// URLs"),
        (["ws://127.0.0.1:8080"], "cannot move a connection between WebSocket"),
        ({"nats://127.0.0.1:4222"}, "servers must be a URL or a non-empty list of URLs"),
    ],
)
def test_set_servers_checks_everything_before_it_changes_anything(
    trio: list[NatsServer], servers: object, says: str
) -> None:
    a = trio[0]
    with jsclient.connect(a.url) as nc:
        with pytest.raises(jsclient.InvalidArgumentError, match=says):
            nc.set_servers(servers)  # type: ignore[arg-type]
        assert nc.servers == [a.url] and nc.options.servers == (a.url,)
        assert nc.is_connected
    with pytest.raises(jsclient.ConnectionClosedError):
        nc.set_servers([a.url])


def test_set_servers_takes_one_url_and_fills_in_the_port(trio: list[NatsServer]) -> None:
    a, b, _ = trio
    with jsclient.connect(a.url) as nc:
        nc.set_servers(f"127.0.0.1:{b.port}")
        assert nc.servers == [b.url]


# -- discovered servers -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ignore", [False, True], ids=["discovered", "ignored"])
def test_discovered_servers_join_the_pool_unless_ignored_also_after_set_servers(ignore: bool) -> None:
    with NatsCluster(3, jetstream=False) as cluster:
        urls = cluster.urls
        reconnected = Reconnects()
        with jsclient.connect(
            urls[0], ignore_discovered_servers=ignore, reconnect_time_wait=0.05, reconnected_cb=reconnected
        ) as nc:
            # The cluster announces all three once its routes are up.
            wait_until(lambda: len(nc.server_info.get("connect_urls") or []) == 3)
            if ignore:
                assert nc.servers == [urls[0]]
            else:
                wait_until(lambda: sorted(nc.servers) == sorted(urls))
            nc.set_servers([urls[1]])
            assert nc.servers == [urls[1]]  # the discovered ones went with the old pool
            nc.force_reconnect()
            reconnected.wait()
            assert nc.connected_url == urls[1]
            assert len(nc.server_info["connect_urls"]) == 3  # announced again by the new server
            if ignore:
                assert nc.servers == [urls[1]]
            else:
                assert nc.servers[0] == urls[1] and sorted(nc.servers) == sorted(urls)


def test_a_programs_seeded_random_sequence_is_left_alone() -> None:
    """Reconnect jitter, retry jitter and the order of servers draw from the client's own source: a program
    that seeded the global generator (a simulation, a test) gets the same numbers with the client at work."""
    import random

    from jsclient.backoff import Backoff
    from jsclient.core.pool import ServerPool

    random.seed(1234)
    want = [random.random() for _ in range(5)]
    random.seed(1234)
    backoff = Backoff(initial=0.001, maximum=0.002, jitter=0.001, attempts=3)
    assert 0.001 <= backoff.delay(1) <= 0.002
    tries = []
    for attempt in backoff.retrying(on=(ValueError,)):
        with attempt:
            tries.append(1)
            if len(tries) < 3:
                raise ValueError("again")  # two waits, each with its jitter
    urls = [f"nats://127.0.0.1:{port}" for port in range(1, 9)]
    with pytest.raises(jsclient.NoServersError):  # nobody listens there: the servers shuffled, then refused
        jsclient.Connection(urls, connect_timeout=1)
    pool = ServerPool(list(urls), lambda exc: None)
    pool.replace(urls, shuffle=True)
    pool.discover([f"127.0.0.1:{port}" for port in range(20, 28)], urls[0], shuffle=True)
    assert [random.random() for _ in range(5)] == want
