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


def test_input_gaps_are_named_before_anything_is_sent(server: NatsServer, tmp_path: object) -> None:
    """Calls that used to slip through: each raises a jsclient.Error naming the problem; nothing reaches the
    server; the connection stays usable."""
    with jsclient.connect(server.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="GAPS", subjects=["gaps.>"])
        sub = nc.subscribe("gaps.x")
        nc.flush()
        sent = nc.stats()["out_msgs"]
        with pytest.raises(jsclient.BadHeaderError, match="mapping of names to values"):
            nc.publish("gaps.x", b"1", headers="k: v")  # type: ignore[arg-type]
        with pytest.raises(jsclient.BadSubjectError, match="filter_subject"):
            js.add_consumer("GAPS", durable_name="d", filter_subject="a b")
        with pytest.raises(jsclient.BadSubjectError, match="filter_subjects"):
            js.add_consumer("GAPS", durable_name="d", filter_subjects=["gaps.a", "gaps.>.x"])
        for bad in (-1, float("nan"), "1"):
            with pytest.raises(jsclient.InvalidArgumentError, match="timeout"):
                sub.next_msg(timeout=bad)  # type: ignore[arg-type]
        assert nc.stats()["out_msgs"] == sent and nc.is_connected
        assert js.consumer_names("GAPS") == []
        nc.publish("gaps.x", b"fine")
        assert sub.next_msg(timeout=2).data == b"fine"
    for url in ("http://127.0.0.1:4222", "wsx://example.test:443"):
        with pytest.raises(jsclient.InvalidArgumentError, match="scheme must be one of nats, tls, ws, wss"):
            jsclient.connect(url)
    missing = f"{tmp_path}/nowhere.creds"
    with pytest.raises(jsclient.InvalidArgumentError, match=r"cannot read creds file .*nowhere\.creds"):
        jsclient.connect(server.url, creds_file=missing, allow_reconnect=False)  # the server asks for no nonce


#: Exceptions that never reach a user: each is caught inside the package (or is a jsclient bug).
INTERNAL = {
    "jsclient.jetstream.channel.Woken": "wakes a taker; the consumption engine turns it into a WOKEN verdict",
    "jsclient.core.state.TransitionError": "a state-machine bug in jsclient, not something to catch",
    "jsclient.subscription._AtGap": "a take reaching a gap marker; the take turns it into SlowConsumerError or passes",
    "jsclient.subscription.GapPassed": "a take with Gaps.SIGNAL passing a gap marker; the channel turns it into a "
                                       "DROPPED verdict",
}


def test_every_exception_the_package_defines_is_one_tree_exported_whole() -> None:
    import importlib
    import inspect
    import pkgutil

    found = {}
    for info in pkgutil.walk_packages(jsclient.__path__, "jsclient."):
        if info.name.endswith("__main__"):
            continue  # runs the command
        if info.name.startswith("jsclient.spark"):
            pytest.importorskip("pyspark")
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[f"{info.name}.{name}"] = obj
    public = {key: cls for key, cls in found.items() if key not in INTERNAL}
    assert set(INTERNAL) <= set(found)
    for key, cls in public.items():
        assert key.startswith("jsclient.errors."), f"{key} is defined outside jsclient.errors"
        assert issubclass(cls, jsclient.Error), f"{key} is not a jsclient.Error"
        assert getattr(jsclient, cls.__name__, None) is cls and cls.__name__ in jsclient.__all__, key


def test_a_status_that_ends_a_pull_says_whether_the_request_was_carried_out() -> None:
    """A 503 reached no consumer (not delivered); any other status is the server ending the request."""
    assert jsclient.NoRespondersStatusError(503, "No Responders").outcome is jsclient.RequestOutcome.NOT_DELIVERED
    for cls in (jsclient.JetStreamStatusError, jsclient.ConsumerDeletedError, jsclient.MaxWaitingExceededError):
        assert cls(409, "x").outcome is jsclient.RequestOutcome.REFUSED
