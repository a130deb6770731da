"""The WSGI example under a real threaded WSGI server (waitress), hit by concurrent clients."""

from __future__ import annotations

import http.client
import importlib
import json
import threading
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from waitress.server import create_server

import jsclient
from jsclient.server import NatsServer


@pytest.fixture
def wsgi_url(server: NatsServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, int]]:
    monkeypatch.setenv("NATS_URL", server.url)
    module = importlib.import_module("examples.wsgi_app")
    module._conn = None
    httpd = create_server(module.app, host="127.0.0.1", port=0, threads=8)
    thread = threading.Thread(target=httpd.run, daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", httpd.effective_port
    finally:
        httpd.close()
        if module._conn is not None:
            module._conn.close()


def test_shared_connection_across_request_threads(server: NatsServer, wsgi_url: tuple[str, int]) -> None:
    """8 HTTP clients x 500 requests through waitress's 8 threads: every answer right, all on one connection."""
    with jsclient.connect(server.url) as responder:
        handled = Counter[bytes]()
        lock = threading.Lock()

        def echo(m: jsclient.Msg) -> None:
            with lock:
                handled[m.data] += 1
            m.respond(b"echo:" + m.data)

        responder.subscribe("svc.echo", callback=echo)
        responder.flush()
        failures: list[str] = []
        answered = Counter[int]()

        def client(c: int) -> None:
            conn = http.client.HTTPConnection(*wsgi_url, timeout=30)
            try:
                for i in range(500):
                    body = b"client-%d-request-%d" % (c, i)
                    conn.request("POST", "/", body=body)
                    resp = conn.getresponse()
                    data = resp.read()
                    if resp.status != 200 or data != b"echo:" + body:
                        failures.append(f"{resp.status} {data[:60]!r}")
                    else:
                        answered[c] += 1
            except Exception as exc:  # noqa: BLE001 - recorded: a broken client cannot pass as one that sent nothing
                failures.append(repr(exc))
            finally:
                conn.close()

        threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        assert not any(th.is_alive() for th in threads), "a client is still waiting"
        assert not failures, failures[:5]
        assert answered == {c: 500 for c in range(8)}
        assert len(handled) == 4000 and set(handled.values()) == {1}  # each request reached the service once
    conns = [c for c in connz(server)["connections"] if c.get("name") == "wsgi-example"]
    assert len(conns) == 1 and conns[0]["out_msgs"] >= 4000, conns  # the app's one shared connection


def connz(server: NatsServer) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.monitor_port}/connz", timeout=5) as reply:
        data: dict[str, Any] = json.load(reply)
    return data
