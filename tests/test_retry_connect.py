"""retry_on_failed_connect (issue 24, part): the first connect keeps trying in the background."""

from __future__ import annotations

import threading

import pytest

import jsclient
from jsclient.server import NatsServer, free_port


def test_a_server_that_comes_up_later_is_connected_and_gets_what_was_buffered() -> None:
    port = free_port()
    up = threading.Event()
    errors: list[BaseException] = []
    nc = jsclient.connect(
        f"nats://127.0.0.1:{port}", retry_on_failed_connect=True, reconnect_time_wait=0.1,
        reconnected_cb=up.set, error_cb=errors.append,
    )
    try:
        assert not nc.is_connected  # returned at once, still trying
        sub = nc.subscribe("later.>")
        nc.publish("later.a", b"sent before the server was up")
        with NatsServer(port=port, jetstream=False):
            assert up.wait(15)
            assert nc.is_connected
            assert sub.next_msg(timeout=5).data == b"sent before the server was up"
            nc.subscribe("later.svc", callback=lambda m: m.respond(b"here"))
            assert nc.request("later.svc", b"", timeout=5).data == b"here"
    finally:
        nc.close()


def test_without_the_option_a_missing_server_is_an_error_at_once() -> None:
    with pytest.raises(jsclient.NoServersError, match="could not connect"):
        jsclient.connect(f"nats://127.0.0.1:{free_port()}")


def test_it_gives_up_after_the_last_round() -> None:
    closed = threading.Event()
    nc = jsclient.connect(
        f"nats://127.0.0.1:{free_port()}", retry_on_failed_connect=True, max_reconnect_attempts=2,
        reconnect_time_wait=0.05, closed_cb=closed.set,
    )
    assert closed.wait(15)
    assert nc.is_closed
    with pytest.raises(jsclient.ConnectionClosedError):
        nc.publish("x", b"")


def test_the_option_is_checked() -> None:
    with pytest.raises(jsclient.InvalidArgumentError, match="retry_on_failed_connect must be a bool"):
        jsclient.connect("nats://127.0.0.1:1", retry_on_failed_connect=1)  # type: ignore[arg-type]


def test_close_while_still_trying() -> None:
    nc = jsclient.connect(f"nats://127.0.0.1:{free_port()}", retry_on_failed_connect=True, reconnect_time_wait=0.05)
    nc.publish("x", b"buffered, never sent")
    nc.close()
    assert nc.is_closed
    with pytest.raises(jsclient.ConnectionClosedError):
        nc.flush(timeout=1)


def test_refused_credentials_are_still_an_error_at_once() -> None:
    with NatsServer(jetstream=False, config="authorization {\n  user: app\n  password: right\n}") as server:
        url = server.url.replace("nats://", "nats://app:wrong@")
        with pytest.raises(jsclient.AuthorizationError):
            jsclient.connect(url, retry_on_failed_connect=True)
