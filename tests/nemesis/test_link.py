"""The nemesis's own tools do what they claim: links pass, delay, black-hole (half-open), reset and heal;
a linked cluster's routes all go through its links.  A fault that silently does nothing would make every
nemesis run pass."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

import jsclient
from jsclient.server import NatsServer
from tests.nemesis.cluster import LinkedCluster
from tests.nemesis.history import Resources, leftovers
from tests.nemesis.link import DOWN, UP, Link
from tests.proxy import listen_loopback
from tests.test_resilience import Events, connect


class Echo:
    """A loopback echo server that remembers how each of its connections ended."""

    def __init__(self) -> None:
        self.listener = listen_loopback()
        self.address = self.listener.getsockname()
        self.ends: list[str] = []
        self.accepted = 0
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="echo", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            self._conns.append(conn)
            threading.Thread(target=self._echo, args=(conn,), name="echo-conn", daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        try:
            while data := conn.recv(65536):
                conn.sendall(data)
            self.ends.append("eof")
        except ConnectionResetError:
            self.ends.append("reset")
        except OSError:
            self.ends.append("closed")
        finally:
            conn.close()

    def close(self) -> None:
        self.listener.close()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()


@pytest.fixture
def echo() -> Iterator[Echo]:
    server = Echo()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def link(echo: Echo) -> Iterator[Link]:
    with Link(echo.address, name="test") as made:
        yield made


def dial(link: Link) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", link.port), timeout=5)
    return sock


def roundtrip(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = sock.recv(65536)
        assert chunk, "the link closed the connection"
        got += chunk
    return got


def test_pass_forwards_both_ways_and_much_data_in_order(link: Link) -> None:
    with dial(link) as sock:
        assert roundtrip(sock, b"hello") == b"hello"
        big = bytes(range(256)) * 20000  # 5 MB: more than the link buffers, so it pushes back and resumes
        assert roundtrip(sock, big) == big
    assert link.stats["up"] == link.stats["down"] == 5 + len(big)


def test_delay_adds_its_latency_each_way(link: Link) -> None:
    """A lower bound only (the link never delivers early); how much later it is, a busy machine decides."""
    with dial(link) as sock:
        roundtrip(sock, b"warm")
        link.delay(0.2)
        started = time.monotonic()
        assert roundtrip(sock, b"x" * 1000) == b"x" * 1000
        assert time.monotonic() - started >= 0.4  # 0.2 s up, 0.2 s down
        link.heal()
        assert roundtrip(sock, b"after") == b"after"


def test_blackhole_moves_nothing_and_closes_nothing_until_healed(link: Link, echo: Echo) -> None:
    with dial(link) as sock:
        roundtrip(sock, b"before")
        link.blackhole()
        sent_up = link.stats["up"]
        sock.sendall(b"into the hole")
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):  # neither data nor an end of stream: the connection is half-open
            sock.recv(100)
        assert link.stats["up"] == sent_up and echo.ends == []
        link.heal()
        sock.settimeout(5)
        assert sock.recv(100) == b"into the hole"  # what waited arrives, on the same connection
        assert roundtrip(sock, b"again") == b"again"


def test_one_way_passes_bytes_up_only_and_the_way_back_waits_until_healed(link: Link, echo: Echo) -> None:
    """Up passes (the echo server gets the bytes), down holds (its echo waits in the link), heal lets it out."""
    with dial(link) as sock:
        roundtrip(sock, b"before")
        link.one_way(UP)
        sock.sendall(b"one way")
        deadline = time.monotonic() + 10
        while link.stats["up"] < len(b"before") + len(b"one way") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert link.stats["up"] == len(b"before") + len(b"one way")  # upstream has it
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):  # its echo is held
            sock.recv(100)
        assert link.stats["down"] == len(b"before")
        link.heal()
        sock.settimeout(5)
        assert sock.recv(100) == b"one way"
        link.one_way(DOWN)  # the other way: nothing goes up
        sock.sendall(b"held")
        with pytest.raises(TimeoutError):
            sock.settimeout(0.5)
            sock.recv(100)
        link.heal()
        sock.settimeout(5)
        assert sock.recv(100) == b"held"


def test_a_connection_opened_in_a_blackhole_is_held_then_connected_on_heal(link: Link, echo: Echo) -> None:
    link.blackhole()
    with dial(link) as sock:
        sock.sendall(b"early")
        time.sleep(0.3)
        assert echo.accepted == 0 and link.connections == 1
        link.heal()
        sock.settimeout(5)
        assert sock.recv(100) == b"early"


def test_reset_sends_rst_to_both_ends_and_new_connections_still_pass(link: Link, echo: Echo) -> None:
    with dial(link) as sock:
        roundtrip(sock, b"before")
        link.reset()
        with pytest.raises(ConnectionResetError):
            sock.recv(100)
    deadline = time.monotonic() + 5
    while not echo.ends and time.monotonic() < deadline:
        time.sleep(0.01)
    assert echo.ends == ["reset"]
    with dial(link) as sock:
        assert roundtrip(sock, b"after") == b"after"


def refused_with_rst(link: Link) -> None:
    """A dial to ``link`` is reset: on loopback the RST can beat connect()'s return, or come just after it."""
    with pytest.raises(ConnectionResetError), dial(link) as sock:
        sock.recv(100)


def test_over_the_cap_or_to_a_dead_upstream_a_client_gets_rst(echo: Echo) -> None:
    with Link(echo.address, name="capped", max_connections=1) as capped, dial(capped) as first:
        assert roundtrip(first, b"ok") == b"ok"
        refused_with_rst(capped)
        assert capped.stats["refused"] == 1
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))  # bound, not listening: refused
    with dead, Link(dead.getsockname(), name="dead") as nowhere:
        refused_with_rst(nowhere)


def test_a_closed_link_leaves_no_thread_or_descriptor(echo: Echo) -> None:
    baseline = Resources.now()
    made = Link(echo.address, name="leak-check")
    socks = [dial(made) for _ in range(5)]
    for sock in socks:
        roundtrip(sock, b"x")
    made.blackhole()
    made.close()
    for sock in socks:
        sock.close()
    assert leftovers(baseline, extra_fds=0) is None


def test_a_client_behind_a_blackholed_link_times_out_notices_and_comes_back() -> None:
    """The half-open case end to end: a request ends by its timeout with an UNKNOWN outcome, pings notice the
    silence, the client reconnects (through the link again) once it heals."""
    events = Events()
    with NatsServer(jetstream=False) as server, Link(server.host_port, name="client") as link:
        nc = connect(link.url, events, ping_interval=0.5, max_outstanding_pings=2, max_reconnect_attempts=-1,
                     connect_timeout=1.0)
        try:
            nc.subscribe("echo", callback=lambda m: m.respond(m.data))
            assert nc.request("echo", b"1", timeout=2).data == b"1"
            link.blackhole()
            with pytest.raises(jsclient.TimeoutError) as caught:
                nc.request("echo", b"2", timeout=1)
            assert caught.value.outcome is jsclient.RequestOutcome.UNKNOWN
            events.wait(lambda: events.disconnected >= 1, timeout=15)
            link.heal()
            events.wait(lambda: events.reconnected >= 1, timeout=15)
            assert nc.request("echo", b"3", timeout=5).data == b"3"
        finally:
            nc.close()


def test_every_route_of_a_linked_cluster_goes_through_its_links_and_comes_back_after_a_reset() -> None:
    """Each route has two ends (one in each server's /routez) and one connection, which must be in a link: a
    route that bypassed the links would leave more ends than twice the links' connections, for good."""
    with LinkedCluster(3, name="linkcheck") as cluster:
        def settled() -> tuple[list[int], int]:
            deadline = time.monotonic() + 30
            last: tuple[list[int], int] = ([], 0)
            while time.monotonic() < deadline:  # a duplicate route being dropped is briefly in both counts
                now = ([cluster.route_count(i) for i in range(3)],
                       sum(link.connections for link in cluster.route_links.values()))
                if now == last and min(now[0]) > 0 and len(set(now[0])) == 1 and sum(now[0]) == 2 * now[1]:
                    return now
                last = now
                time.sleep(0.5)
            raise AssertionError(f"routes (per member, carried by links) did not settle: {last}")

        counts, carried = settled()
        assert carried > 0 and all(link.connections == 0 for link in cluster.client_links)
        for link in cluster.routes_of(0):
            link.reset()
        assert sum(link.stats["reset"] for link in cluster.routes_of(0)) > 0
        assert settled() == (counts, carried)
