"""The WSGI example under a real threaded WSGI server (waitress), hit by concurrent clients."""

from __future__ import annotations

import http.client
import importlib
import threading
from collections.abc import Iterator

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
    with jsclient.connect(server.url) as responder:
        responder.subscribe("svc.echo", callback=lambda m: m.respond(b"echo:" + m.data))
        responder.flush()
        failures: list[str] = []

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
            finally:
                conn.close()

        threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        assert not failures, failures[:5]
