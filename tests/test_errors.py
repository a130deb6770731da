"""The exception tree and the mapping of server -ERR texts."""

from __future__ import annotations

import builtins

import pytest

import jsclient
from jsclient.errors import server_error
from jsclient.server import NatsServer


@pytest.mark.parametrize(
    "text, kind",
    [
        ("Authorization Violation", jsclient.AuthorizationError),
        ("Permissions Violation for Publish to foo", jsclient.AuthorizationError),
        ("User Authentication Expired", jsclient.AuthorizationError),
        ("Stale Connection", jsclient.StaleConnectionError),
        ("Maximum Payload Violation", jsclient.MaxPayloadServerError),
        ("Unknown Protocol Operation", jsclient.ServerError),
    ],
)
def test_err_texts_map_to_specific_errors(text: str, kind: type) -> None:
    err = server_error(text)
    assert type(err) is kind
    assert err.text == text and text in str(err)


def test_tree() -> None:
    assert issubclass(jsclient.TimeoutError, builtins.TimeoutError)
    assert issubclass(jsclient.TimeoutError, jsclient.Error)
    assert issubclass(jsclient.BadSubjectError, ValueError)
    assert issubclass(jsclient.BadPayloadError, TypeError)
    for name in jsclient.__all__:
        obj = getattr(jsclient, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, jsclient.Error), name


def test_wrong_password_raises_authorization_error_at_once() -> None:
    config = 'authorization { user: "alice", password: "s3cret" }'
    with NatsServer(config=config, jetstream=False) as server:
        with jsclient.connect(server.url, user="alice", password="s3cret") as nc:
            assert nc.is_connected
        url_with_creds = server.url.replace("nats://", "nats://alice:s3cret@")
        with jsclient.connect(url_with_creds) as nc:
            assert nc.is_connected
        with pytest.raises(jsclient.AuthorizationError) as info:
            jsclient.connect(server.url, user="alice", password="wrong-pw")
        assert "wrong-pw" not in str(info.value)


def test_token_auth() -> None:
    with NatsServer(config='authorization { token: "t0ken" }', jetstream=False) as server:
        with jsclient.connect(server.url, token="t0ken") as nc:
            assert nc.is_connected
        with pytest.raises(jsclient.AuthorizationError):
            jsclient.connect(server.url, token="nope")
