"""LinkedCluster: N nats-servers whose every route, and every client that wants it, goes through a Link.

A :class:`jsclient.server.NatsCluster` (NatsServer processes with a
``cluster`` block each, started, stopped and used as a context manager the
same way) whose members it builds itself: server i's ``routes`` name one Link per
peer j (``route_links[i, j]``, forwarding to j's real cluster port).  A route
between i and j is dialled by either side, so cutting i off from j takes
both ``(i, j)`` and ``(j, i)``: :meth:`isolate` does it for all of a member's.

Two kinds of gossip would otherwise bypass the links:

* routes: a server told of a peer it has no route to dials the peer's
  advertised cluster address.  Every member advertises a loopback port that
  is bound but never listens (``dead``), so such a dial is refused and only
  the configured routes (through links) connect.
* clients: ``no_advertise`` keeps the other servers' client URLs out of the
  INFO clients get (clients connect with ``ignore_discovered_servers`` too).
"""

from __future__ import annotations

import json
import socket
import urllib.request

from jsclient.server import NatsCluster, NatsServer, free_port

from .link import DOWN, UP, Link


class LinkedCluster(NatsCluster):
    """A cluster on loopback whose routes pass through links; ``client_links[i]`` leads to server i."""

    def __init__(
        self, size: int = 3, *, name: str = "nemesis", config: str = "", frames: bool = False
    ) -> None:
        """``frames``: the route links cut what passes into route frames (see :meth:`withhold_raft`); the
        routes are then uncompressed, so that the frames can be read."""
        # NatsCluster.__init__ would build members routed to each other directly: these are built here instead.
        self.size = size
        self.name = name
        cluster_ports = [free_port() for _ in range(size)]
        self._dead = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._dead.bind(("127.0.0.1", 0))  # bound, never listening: a dial to it is refused
        dead = self._dead.getsockname()[1]
        self.route_links: dict[tuple[int, int], Link] = {}
        self.servers: list[NatsServer] = []
        self.client_links: list[Link] = []
        uncompressed = "  compression: off\n" if frames else ""
        try:
            for i in range(size):
                for j in range(size):
                    if i != j:
                        self.route_links[i, j] = Link(
                            ("127.0.0.1", cluster_ports[j]), name=f"route-{i}-{j}", routes=frames
                        )
            for i, cport in enumerate(cluster_ports):
                routes = ", ".join(self.route_links[i, j].route_url for j in range(size) if j != i)
                block = (
                    f"cluster {{\n  name: {name}\n  listen: 127.0.0.1:{cport}\n"
                    f'  advertise: "127.0.0.1:{dead}"\n  no_advertise: true\n  routes: [{routes}]\n'
                    f"{uncompressed}}}\n{config}"
                )
                self.servers.append(NatsServer(config=block, name=f"{name}-{i}"))
            self.client_links = [Link(srv.host_port, name=f"client-{i}") for i, srv in enumerate(self.servers)]
        except BaseException:
            self.stop()
            raise

    @property
    def links(self) -> list[Link]:
        return [*self.route_links.values(), *self.client_links]

    @property
    def client_urls(self) -> list[str]:
        """Client URLs through the client links."""
        return [link.url for link in self.client_links]

    def index(self, server_name: str) -> int:
        """The member a JetStream server name (a stream's leader, say) belongs to."""
        return [srv.name for srv in self.servers].index(server_name)

    def routes_of(self, member: int) -> list[Link]:
        """Every route link that carries member's traffic, whichever side dialled."""
        return [link for (i, j), link in self.route_links.items() if member in (i, j)]

    def isolate(self, member: int) -> None:
        """Partition ``member`` from every peer (half-open routes); clients still reach it."""
        for link in self.routes_of(member):
            link.blackhole()

    def one_way(self, src: int, dst: int) -> None:
        """Between ``src`` and ``dst``, route bytes pass from ``src`` to ``dst`` only (an asymmetric partition):
        on the route ``src`` dialled they go up, on the one ``dst`` dialled down."""
        self.route_links[src, dst].one_way(UP)
        self.route_links[dst, src].one_way(DOWN)

    def withhold_raft(self, src: int, dst: int) -> None:
        """From ``src`` to ``dst``, Raft's route frames (votes, appends, heartbeats: ``$NRG.``) wait until
        heal(); everything else passes both ways.  ``dst`` hears ``src``'s interest, never its term.
        Needs ``frames=True``."""
        self.route_links[src, dst].withhold(UP, "$NRG.")
        self.route_links[dst, src].withhold(DOWN, "$NRG.")

    def heal(self) -> None:
        for link in self.links:
            link.heal()

    def route_count(self, member: int) -> int:
        """How many routes ``member`` reports (its /routez), -1 when it does not answer."""
        url = f"http://127.0.0.1:{self.servers[member].monitor_port}/routez"
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                return int(json.load(reply)["num_routes"])
        except (OSError, ValueError, KeyError):
            return -1

    def route_interest(self, member: int) -> set[tuple[str, str]]:
        """(peer's server name, subject) of every subscription ``member`` knows its routes for (its /routez)."""
        url = f"http://127.0.0.1:{self.servers[member].monitor_port}/routez?subs=1"
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                routes = json.load(reply)["routes"] or []
        except (OSError, ValueError, KeyError):
            return set()
        return {(r.get("remote_name", ""), sub) for r in routes for sub in r.get("subscriptions_list") or []}

    def stop(self) -> None:
        """The servers (as NatsCluster does), then every link."""
        super().stop()
        for link in self.links:
            link.close()
        self._dead.close()

    def __enter__(self) -> LinkedCluster:
        super().__enter__()
        return self
