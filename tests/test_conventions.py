"""The API conventions (docs/conventions.rst), checked on every public signature, and the old names' aliases.

One name per concept: ``timeout`` for how long a call may block (ADR-37's
``max_wait`` included), ``max_messages`` for how many messages a call asks
for, ``callback`` for a function called per message, ``next_msg`` for taking
one message.  No boolean flag is positional.  The old names keep working
for one minor version, each with a DeprecationWarning that names the new one.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jsclient

#: Old name -> the convention's name.
OLD_NAMES = {
    "batch": "max_messages", "max_msgs": "max_messages", "max_wait": "timeout", "cb": "callback", "data": "payload",
}
#: Where an old name is the right one: an object's content is not a message's payload.
KEPT = {("ObjectStore.put", "data")}


def public_callables() -> Iterator[tuple[str, Callable[..., Any]]]:
    """Every exported function and every public method (constructors too) of every exported class."""
    for name in jsclient.__all__:
        obj = getattr(jsclient, name)
        if inspect.isfunction(obj):
            yield name, obj
        elif isinstance(obj, type):
            for member_name, member in inspect.getmembers(obj, inspect.isfunction):
                if member_name.startswith("_") and member_name != "__init__":
                    continue
                if getattr(member, "__deprecated_alias_of__", None):
                    continue  # an old method name, kept as an alias
                yield f"{name}.{member_name}", member


def test_no_public_signature_uses_an_old_name() -> None:
    found = [
        f"{where}({param})"
        for where, func in public_callables()
        for param in inspect.signature(func).parameters
        if param in OLD_NAMES and not where.endswith("__init__") and (where, param) not in KEPT
    ]
    assert not found, f"old names in public signatures (use {OLD_NAMES}): {found}"


def test_no_boolean_flag_is_positional() -> None:
    found = []
    for where, func in public_callables():
        if where.endswith("__init__") and where != "Options.__init__":
            continue  # objects the library makes (Options is the one users build)
        for param in inspect.signature(func).parameters.values():
            positional = param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD)
            if positional and (param.annotation in ("bool", bool) or isinstance(param.default, bool)):
                found.append(f"{where}({param.name})")
    assert not found, f"boolean flags must be keyword-only: {found}"


def test_every_wait_is_named_timeout_in_seconds() -> None:
    """A call's own wait is ``timeout``: a float of seconds, None or DEFAULT, never an int-only or other-named wait."""
    for where, func in public_callables():
        for param in inspect.signature(func).parameters.values():
            if param.name == "timeout" and param.default is not inspect.Parameter.empty:
                default = param.default
                assert default is None or default is jsclient.DEFAULT or isinstance(default, float), (where, default)


@pytest.fixture
def consumer(js: jsclient.JetStream) -> jsclient.Consumer:
    stream = js.create_stream(name="CONV", subjects=["conv"], allow_direct=True)
    for i in range(4):
        js.publish("conv", b"%d" % i)
    return stream.create_consumer(durable_name="conv")


def test_old_keywords_still_work_and_warn_with_the_new_name(
    js: jsclient.JetStream, consumer: jsclient.Consumer
) -> None:
    with pytest.warns(DeprecationWarning, match=r"batch= is deprecated, write max_messages="):
        got = consumer.fetch(batch=2, timeout=5)
    assert [m.data for m in got] == [b"0", b"1"]
    with pytest.warns(DeprecationWarning, match=r"max_wait= is deprecated, write timeout="):
        assert [m.data for m in consumer.fetch(1, max_wait=5)] == [b"2"]
    with pytest.warns(DeprecationWarning, match=r"Consumer.next\(\) is deprecated, call next_msg\(\)"):
        assert consumer.next(timeout=5).data == b"3"
    psub = js.pull_subscribe("conv", "classic")
    with pytest.warns(DeprecationWarning, match=r"PullSubscription.fetch: batch= is deprecated"):
        assert len(psub.fetch(batch=4, timeout=5)) == 4
    with pytest.warns(DeprecationWarning, match=r"direct_get_batch: batch= is deprecated"):
        assert [m.seq for m in js.direct_get_batch("CONV", "conv", batch=2)] == [1, 2]
    seen: list[jsclient.Msg] = []
    with pytest.warns(DeprecationWarning, match=r"JetStream.subscribe: cb= is deprecated, write callback="):
        sub = js.subscribe("conv", cb=seen.append)
    sub.unsubscribe()
    nc = js.conn
    with pytest.warns(DeprecationWarning, match=r"Connection.subscribe: cb= is deprecated, write callback="):
        echo = nc.subscribe("conv.echo", cb=lambda m: m.respond(m.data))
    with pytest.warns(DeprecationWarning, match=r"Connection.subscribe: max_msgs= is deprecated"):
        two = nc.subscribe("conv.two", max_msgs=2)
    replier = nc.subscribe("conv.old", callback=lambda m: m.respond(data=b"old"))
    assert nc.request("conv.echo", b"hi", timeout=5).data == b"hi"
    with pytest.warns(DeprecationWarning, match=r"Msg.respond: data= is deprecated, write payload="):
        assert nc.request("conv.old", b"", timeout=5).data == b"old"  # warned on the callback's thread
    for i in range(3):
        nc.publish("conv.two", b"%d" % i)
    assert [two.next_msg(timeout=5).data for _ in range(2)] == [b"0", b"1"]
    with pytest.raises(jsclient.SubscriptionClosedError):
        two.next_msg(timeout=5)  # ended after two: the auto-unsubscribe took the old name's value
    with pytest.warns(DeprecationWarning, match=r"Subscription.unsubscribe: max_msgs= is deprecated"):
        echo.unsubscribe(max_msgs=5)
    replier.unsubscribe()


def test_giving_an_old_and_a_new_name_together_is_refused_before_sending(consumer: jsclient.Consumer) -> None:
    sent = consumer._js.conn.stats()["out_msgs"]
    with pytest.raises(jsclient.InvalidArgumentError, match=r"batch= is the old name of max_messages=: give"):
        consumer.fetch(batch=2, max_messages=2)
    assert consumer._js.conn.stats()["out_msgs"] == sent


def test_new_names_raise_no_warning(js: jsclient.JetStream, consumer: jsclient.Consumer) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(consumer.fetch(max_messages=2, timeout=5)) == 2
        assert consumer.next_msg(timeout=5).data == b"2"
        sub = js.subscribe("conv", callback=lambda m: None)
        sub.unsubscribe()
