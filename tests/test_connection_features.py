"""Connection features of other clients (issue 24, part): rtt, force_reconnect (TLS handshake first: test_security)."""

from __future__ import annotations

import threading

import pytest

import jsclient
from jsclient.server import NatsServer


def test_rtt(nc: jsclient.Connection) -> None:
    rtt = nc.rtt()
    assert isinstance(rtt, float) and 0 < rtt < 2
    nc.close()
    with pytest.raises(jsclient.ConnectionClosedError):
        nc.rtt()


def test_force_reconnect_keeps_everything(server: NatsServer) -> None:
    events: list[str] = []
    errors: list[BaseException] = []
    reconnected = threading.Event()

    def on_reconnect() -> None:
        events.append("reconnected")
        reconnected.set()

    with jsclient.connect(
        server.url, disconnected_cb=lambda: events.append("disconnected"), reconnected_cb=on_reconnect,
        error_cb=errors.append,
    ) as nc:
        sub = nc.subscribe("force.>")
        nc.subscribe("force.svc", callback=lambda m: m.respond(b"up"))
        nc.flush()
        server_id = nc.server_info["client_id"]
        nc.force_reconnect()
        nc.publish("force.a", b"queued while reconnecting")  # buffered, sent once reconnected
        assert reconnected.wait(10)
        assert sub.next_msg(timeout=5).data == b"queued while reconnecting"
        assert nc.request("force.svc", b"", timeout=5).data == b"up"  # subscriptions came back
        assert events == ["disconnected", "reconnected"] and errors == []  # asked for: not an error
        assert nc.server_info["client_id"] != server_id  # a new connection on the server
    with jsclient.connect(server.url, allow_reconnect=False) as fixed:
        with pytest.raises(jsclient.InvalidArgumentError, match="allow_reconnect"):
            fixed.force_reconnect()
        assert fixed.rtt() > 0  # still connected


def test_tls_handshake_first_must_be_a_bool() -> None:
    with pytest.raises(jsclient.InvalidArgumentError, match="tls_handshake_first must be a bool"):
        jsclient.connect("nats://127.0.0.1:1", tls_handshake_first="yes")  # type: ignore[arg-type]
