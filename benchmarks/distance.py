"""The rows with the server at a distance, one measurement per process:
``python -m benchmarks.distance <client> distance_<work>_<where> <url> <n>``.

The runner gives the URL of a delay proxy in front of the shared server
(:mod:`benchmarks.delay_proxy`), or the server's own for the ``direct`` row.
The work is the client-speed row of the same name, done the same way, on
each client's same path (:mod:`benchmarks.clients` for request/reply,
:mod:`benchmarks.js_clients` for the rest); ``fetch_ack_<B>`` fetches B
messages at a time.  ``jsclient-spin0`` is jsclient connected with
``spin_wait=0``: it never polls the socket before it sleeps.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from benchmarks import clients, js_clients
from benchmarks.clients import run_main
from benchmarks.common import Figure
from benchmarks.report import SPIN0

#: The work that benchmarks.clients measures; benchmarks.js_clients measures the rest.
CORE = ("request", "request_concurrent")


def work(row: str) -> str:
    """``distance_fetch_ack_10_1ms`` -> ``fetch_ack_10``."""
    return row.removeprefix("distance_").rpartition("_")[0]


def measure(client: str, row: str, url: str, n: int) -> Figure:
    what = work(row)
    core = what in CORE
    if client == SPIN0:
        return (clients.jsclient_row if core else js_clients.jsclient_row)(what, url, n, spin_wait=0)
    return (clients.CLIENTS if core else js_clients.CLIENTS)[client](what, url, n)


CLIENTS: dict[str, Callable[[str, str, int], Figure]] = {
    name: partial(measure, name) for name in ("jsclient", SPIN0, "nats-py", "nats-py-sync", "natsio", "raw")
}

if __name__ == "__main__":
    run_main(CLIENTS)
