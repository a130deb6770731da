"""What docs/guides/errors.rst says of the tree, checked against jsclient's classes and a real server.

* JetStream refusals are ``JetStreamAPIError`` (the key-value ones too) with the server's ``code`` and
  ``err_code``, and every error a request ends in says its ``outcome``;
* a feature refused before sending says NOT_DELIVERED, the server's own refusal REFUSED;
* the page's tree and its list of errors that are also built-in exceptions are the code's;
* jsclient.server raises only jsclient errors.
"""

from __future__ import annotations

import builtins
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import jsclient
from jsclient import RequestOutcome
from jsclient.jetstream import api, features
from jsclient.server import NatsCluster, NatsServer
from tests import servers
from tests.proxy import FrameProxy

ERRORS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "errors.rst"


def exported_errors() -> dict[str, type[BaseException]]:
    return {
        name: obj for name in jsclient.__all__
        if isinstance(obj := getattr(jsclient, name), type) and issubclass(obj, BaseException)
    }


# -- 1. key-value refusals are JetStream API errors; misses are answered reads ------------------------------


def conditional_refusals(js: jsclient.JetStream) -> list[jsclient.WrongLastSequenceError]:
    """One refused expectation by each way a user can make one: js.publish, publish_async, kv.update,
    kv.create, kv.delete with ``last``."""
    js.create_stream(name="COND", subjects=["cond.>"])
    first = js.publish("cond.a", b"1").seq
    js.publish("cond.a", b"2")
    kv = js.create_key_value("condkv")
    rev = kv.put("k", b"1")
    kv.put("k", b"2")
    made: list[jsclient.WrongLastSequenceError] = []
    for attempt in (
        lambda: js.publish("cond.a", b"3", expected_last_subject_seq=first),
        lambda: js.publish_async("cond.a", b"3", expected_last_seq=first).result(10),
        lambda: kv.update("k", b"3", last=rev),
        lambda: kv.create("k", b"3"),
        lambda: kv.delete("k", last=rev),
    ):
        with pytest.raises(jsclient.WrongLastSequenceError) as refused:
            attempt()
        made.append(refused.value)
    return made


def test_a_conditional_refusal_is_refused_on_one_server_and_unknown_in_a_cluster(js: jsclient.JetStream) -> None:
    """docs/guarantees.rst: in a cluster a deposed leader can refuse what the new leader stores
    (tests/nemesis/test_defects.py makes it happen), so only a server outside any cluster gives a definite
    refusal.  Every way to make a conditional publish says so."""
    alone = conditional_refusals(js)
    assert [e.outcome for e in alone] == [RequestOutcome.REFUSED] * len(alone)
    with NatsCluster(3) as cluster, jsclient.connect(cluster.urls[0]) as nc:
        deadline = time.monotonic() + 30
        while True:
            try:
                nc.jetstream(timeout=5).account_info()
                break
            except (jsclient.JetStreamAPIError, jsclient.TimeoutError):  # the meta leader is still being elected
                assert time.monotonic() < deadline, "the cluster formed no JetStream meta leader"
                time.sleep(0.3)
        clustered = conditional_refusals(nc.jetstream(timeout=5))
    assert [type(e) for e in clustered] == [type(e) for e in alone]
    assert [e.outcome for e in clustered] == [RequestOutcome.UNKNOWN] * len(clustered)


def test_a_refused_kv_update_is_a_jetstream_api_error_with_the_servers_codes(js: jsclient.JetStream) -> None:
    kv = js.create_key_value("refusals")
    first = kv.put("k", b"1")
    kv.put("k", b"2")
    try:
        kv.update("k", b"3", last=first)
    except jsclient.JetStreamAPIError as exc:
        refused = exc
    else:
        pytest.fail("an update at a stale revision was stored")
    assert isinstance(refused, jsclient.KeyWrongRevisionError)
    assert isinstance(refused, jsclient.WrongLastSequenceError) and isinstance(refused, jsclient.KeyValueError)
    assert (refused.code, refused.err_code) == (400, 10071)
    assert refused.description == f"wrong last sequence: {first + 1}"
    assert refused.outcome is RequestOutcome.REFUSED and refused.failure is None and not refused.retriable
    assert str(refused) == f"key 'k' in bucket 'refusals' is not at revision {first}: wrong last sequence: {first + 1}"
    cause = refused.__cause__  # the server's own refusal, as js.publish raised it
    assert type(cause) is jsclient.WrongLastSequenceError
    assert (cause.code, cause.err_code, cause.description) == (400, 10071, refused.description)

    with pytest.raises(jsclient.KeyValueError) as deleting:  # the old way to catch it still works
        kv.delete("k", last=first)
    assert isinstance(deleting.value, jsclient.KeyWrongRevisionError)
    assert (deleting.value.code, deleting.value.err_code) == (400, 10071)
    assert deleting.value.outcome is RequestOutcome.REFUSED

    with pytest.raises(jsclient.JetStreamAPIError) as creating:
        kv.create("k", b"again")
    exists = creating.value
    assert isinstance(exists, jsclient.KeyExistsError) and isinstance(exists, jsclient.KeyValueError)
    assert not isinstance(exists, jsclient.KeyWrongRevisionError)
    assert (exists.code, exists.err_code, exists.description) == (400, 10071, f"wrong last sequence: {first + 1}")
    assert exists.outcome is RequestOutcome.REFUSED
    assert str(exists) == "key 'k' already exists in bucket 'refusals'"
    assert kv.get("k").value == b"2"  # none of them was applied


def test_kv_and_object_store_misses_are_answered_reads(js: jsclient.JetStream) -> None:
    """A read that found nothing got its answer: REFUSED (definite, nothing changed), not None."""
    kv = js.create_key_value("misses")
    kv.put("gone", b"x")
    kv.delete("gone")
    objects = js.create_object_store("misses")
    objects.put("a", b"a")
    objects.put("b", b"b")
    calls: list[tuple[Callable[[], object], type[jsclient.Error]]] = [
        (lambda: kv.get("never"), jsclient.KeyNotFoundError),
        (lambda: kv.get("gone"), jsclient.KeyDeletedError),
        (lambda: kv.history("never"), jsclient.KeyNotFoundError),
        (lambda: js.key_value("nobucket"), jsclient.BucketNotFoundError),
        (lambda: objects.get("never"), jsclient.ObjectNotFoundError),
        (lambda: objects.info("never"), jsclient.ObjectNotFoundError),
        (lambda: js.object_store("nostore"), jsclient.ObjectStoreNotFoundError),
    ]
    for call, kind in calls:
        with pytest.raises(kind) as info:
            call()
        assert info.value.outcome is RequestOutcome.REFUSED, kind
    # Found by a read before the write, which was therefore never sent.
    with pytest.raises(jsclient.ObjectExistsError) as renaming:
        objects.update_meta("a", new_name="b")
    assert renaming.value.outcome is RequestOutcome.NOT_DELIVERED
    assert objects.get("a").read() == b"a"


# -- 3. a feature refused before sending was not delivered -----------------------------------------------


def _as_2_10(frame: bytes) -> bytes:
    """The server's INFO without api_lvl and with a 2.10 release, as a 2.10 server sends it."""
    if not frame.startswith(b"INFO "):
        return frame
    info = json.loads(frame[5:])
    info.pop("api_lvl", None)
    info["version"] = "2.10.22"
    return b"INFO " + json.dumps(info).encode() + b"\r\n"


@pytest.fixture(params=["real 2.10 binary", "2.10 INFO through a proxy"])
def old_server_js(request: pytest.FixtureRequest) -> Iterator[tuple[jsclient.Connection, FrameProxy]]:
    """A connection to a 2.10 server: the real release when tests/servers.py fetched it, and (always) the
    bundled server announcing 2.10 (the proxy only rewrites INFO, and counts what the client sends)."""
    binary: str | None = None
    rewrite = None
    if request.param == "real 2.10 binary":
        found = servers.binary("2.10.26")
        if not found.is_file():
            pytest.skip("nats-server 2.10.26 not fetched (python -m tests.servers fetch)")
        binary = str(found)
    else:
        rewrite = _as_2_10
    with (
        NatsServer(binary=binary) as server,
        FrameProxy(server.host_port, rewrite) as proxy,
        jsclient.connect(proxy.url) as nc,
    ):
        yield nc, proxy


def test_a_feature_refused_before_sending_was_not_delivered(
    old_server_js: tuple[jsclient.Connection, FrameProxy],
) -> None:
    nc, proxy = old_server_js
    js = nc.jetstream()
    assert not features.supports(nc.server_info, features.MESSAGE_TTL)
    js.add_stream(name="OLD", subjects=["old.>"])
    nc.flush()
    sent, out_msgs = len(proxy.sent), nc.stats()["out_msgs"]
    for call in (
        lambda: js.publish("old.a", b"x", ttl=5),
        lambda: js.add_stream(name="TTL", subjects=["ttl.>"], allow_msg_ttl=True),
        lambda: js.create_key_value("ttlkv", limit_marker_ttl=60),
    ):
        with pytest.raises(jsclient.FeatureNotSupportedError) as info:
            call()
        assert info.value.outcome is RequestOutcome.NOT_DELIVERED
        assert (info.value.code, info.value.err_code) == (412, 10185)
    nc.flush()
    assert nc.stats()["out_msgs"] == out_msgs
    assert b"PUB " not in bytes(proxy.sent[sent:])  # nor HPUB: nothing but flush's PING went out
    assert js.publish("old.a", b"still fine").seq == 1


@pytest.mark.server_behaviour("2.12", "Nats-Required-Api-Level is checked from 2.12 on")
def test_the_servers_own_level_refusal_is_refused(nc: jsclient.Connection) -> None:
    """The same class raised from the server's 10185 answer: the request was delivered, and refused."""
    reply = nc.request("$JS.API.INFO", b"", timeout=5, headers={features.LEVEL_HEADER: "99"})
    with pytest.raises(jsclient.FeatureNotSupportedError) as info:
        api.check_error(reply.data)
    assert info.value.outcome is RequestOutcome.REFUSED and info.value.err_code == 10185


# -- 2. the page's tree and its built-in exceptions -------------------------------------------------------


def test_the_errors_page_names_every_error_that_is_also_a_builtin() -> None:
    """Each class that adds a built-in exception to the tree is named with it (its subclasses inherit it)."""
    adding = {
        name: [b.__name__ for b in cls.__bases__ if b.__module__ == "builtins" and b is not Exception]
        for name, cls in exported_errors().items()
    }
    adding = {name: bases for name, bases in adding.items() if bases}
    assert adding == {
        "TimeoutError": ["TimeoutError"], "InvalidArgumentError": ["ValueError"],
        "BadPayloadError": ["TypeError"], "JetStreamSubscribeError": ["ValueError"],
    }
    intro = ERRORS_PAGE.read_text().split(".. code-block::")[0]
    assert "Four of them" in intro
    for name, (builtin,) in adding.items():
        shown = "jsclient.TimeoutError" if name == "TimeoutError" else name
        assert re.search(rf"``{shown}``\s+(?:is\s+)?an?\s+``{builtin}``", intro), (name, builtin)
        assert issubclass(getattr(jsclient, name), getattr(builtins, builtin))


def _tree() -> dict[str, str]:
    """The page's tree as {class: parent}."""
    block = ERRORS_PAGE.read_text().split("The tree\n--------\n")[1].split("\nWhat to catch\n")[0]
    lines = [line for line in block.splitlines() if line.strip() and "code-block" not in line]
    parents: dict[str, str] = {}
    stack: list[str] = []  # the last class named at each depth
    column = -1  # where the names of the line before start
    root = 0  # where "Error" starts: the block's own indent
    for line in lines:
        text = line.strip()
        connector = max(line.find("├── "), line.find("└── "))
        if text == "Error":
            stack, column = ["Error"], line.index("E")
            root = column
            continue
        if connector >= 0:
            column = connector + 4
            depth = (connector - root) // 4 + 1
            names_part = line[column:]
        else:
            start = len(line) - len(line.lstrip("│ "))
            if start != column or not re.match(r"[A-Z]\w*Error\b", line[start:]):
                continue  # a description carried on to the next line
            depth = len(stack) - 1
            names_part = line[start:]
        names = re.findall(r"[A-Z]\w*Error\b", re.split(r"\s{2,}|\s\(", names_part.strip())[0])
        del stack[depth:]
        for name in names:
            parents[name] = stack[depth - 1]
        stack.append(names[-1])
    return parents


def test_the_errors_page_tree_is_the_code_tree() -> None:
    tree = _tree()
    errors = exported_errors()
    assert set(tree) | {"Error"} == set(errors)  # every exported error is on the page, once
    for name, parent in tree.items():
        assert getattr(jsclient, parent) in errors[name].__bases__, (name, parent)
    # What the page says beside the names.
    page = ERRORS_PAGE.read_text()
    for name, also in (("BatchInterruptedError", "TimeoutError"), ("KeyExistsError", "WrongLastSequenceError"),
                       ("KeyWrongRevisionError", "WrongLastSequenceError")):
        assert issubclass(errors[name], getattr(jsclient, also))
        assert re.search(rf"{name}\b.*\(also {also}\)", page), name


# -- 4. jsclient.server raises jsclient errors ---------------------------------------------------------------


def test_the_test_server_refuses_bad_arguments_with_invalid_argument_error() -> None:
    with pytest.raises(jsclient.InvalidArgumentError, match="go together") as info:
        NatsServer(websocket=True, websocket_cert_file="cert.pem")
    assert isinstance(info.value, ValueError)
    with pytest.raises(jsclient.InvalidArgumentError, match="at least 2 servers") as info:
        NatsCluster(1)
    assert isinstance(info.value, ValueError)
