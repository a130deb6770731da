"""One timeout convention (docs/conventions.rst, "Timeouts"), walked over every public call that takes one.

Omitted: the call's default (the JetStream context's for JetStream calls).
``None``: no limit.  ``0``: do not wait: a take answers from what is already
there; a call that needs the server's answer refuses it before sending.
Anything else must be a finite number of seconds > 0.

The "no limit" and "the context's default" checks need an answer that comes
late, which a real server will not give on demand.  A relay gives it: a
plain subscriber that forwards each request to the real server and passes
the real answer back after a delay (``Relay``).
"""

from __future__ import annotations

import inspect
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jsclient
from jsclient import micro
from jsclient.server import NatsServer
from jsclient.timeouts import NO_LIMIT, answer_limit, take_limit

from .test_conventions import public_callables

pytestmark = pytest.mark.compat

#: Calls that need the server's answer: omitted is the default, None no limit, 0 refused before sending.
ANSWER = {
    "AtomicBatch.__init__", "Connection.drain", "Connection.flush", "Connection.jetstream", "Connection.request",
    "Connection.request_async", "Connection.request_many", "Connection.rtt", "Connection.trace_message",
    "Consumer.fetch", "Consumer.next_msg",
    "JetStream.__init__", "JetStream.add_consumer", "JetStream.atomic_batch", "JetStream.consumer_info",
    "JetStream.counter_add",
    "JetStream.counter_get", "JetStream.counter_get_many", "JetStream.direct_get", "JetStream.direct_get_batch",
    "JetStream.direct_get_last_for_subjects", "JetStream.get_msg", "JetStream.publish", "JetStream.publish_async",
    "JetStream.publish_batch", "JetStream.publish_stream", "Msg.ack_sync", "ObjectStore.get", "ObjectStore.get_bytes",
    "ObjectStore.get_file", "ObjectStore.put", "OrderedConsumer.fetch", "OrderedConsumer.next_msg",
    "OrderedSubscription.drain", "PullSubscription.drain", "PullSubscription.fetch", "PushSubscription.drain",
    "Service.stop", "Subscription.drain",
}
#: Takes and local waits: omitted is the default, None no limit, 0 answers from what is there now.
TAKE = {
    "ConsumeContext.drain", "ConsumeContext.stop", "ConsumeContext.wait", "Connection.wait_closed",
    "JetStream.publish_async_completed", "KeyWatcher.next", "ObjectWatcher.next", "OrderedSubscription.next_msg",
    "PushSubscription.next_msg", "Subscription.next_msg",
}
#: Internal plumbing on exported types: given seconds already resolved by the public call above them.
RESOLVED = {
    "Counters.add", "Counters.get", "Counters.get_many", "DirectBatch.__init__", "ObjectReader.__init__",
    "Replies.__init__", "Subscription.stop_receiving", "Subscription.take",
}

BAD = [-1, -0.5, float("nan"), float("inf"), 10**400, "5", True, b"1"]


def test_every_call_with_a_timeout_is_in_one_family() -> None:
    found = {where for where, func in public_callables() if "timeout" in inspect.signature(func).parameters}
    assert found - (ANSWER | TAKE | RESOLVED) == set(), "a new call with a timeout: put it in its family"
    assert (ANSWER | TAKE | RESOLVED) - found == set(), "a family names a call that has no timeout any more"


def test_defaults_say_what_omitted_means() -> None:
    for where, func in public_callables():
        param = inspect.signature(func).parameters.get("timeout")
        if param is None or where in RESOLVED:
            continue
        default = param.default
        if where in ANSWER:
            assert default is jsclient.DEFAULT or (isinstance(default, float) and default > 0), (where, default)
        else:
            assert default is None or (isinstance(default, float) and default > 0), (where, default)


def test_the_rules_themselves() -> None:
    # Server-free: what each family makes of every kind of value.
    assert answer_limit(2) == 2.0 and answer_limit(0.5) == 0.5
    assert answer_limit(None) == NO_LIMIT and answer_limit(jsclient.DEFAULT, 7.0) == 7.0
    assert NO_LIMIT < threading.TIMEOUT_MAX  # every lock and condition takes it
    assert take_limit(None) is None and take_limit(0) == 0.0 and take_limit(1) == 1.0
    with pytest.raises(jsclient.InvalidArgumentError, match="timeout=0 does not wait"):
        answer_limit(0)
    with pytest.raises(jsclient.InvalidArgumentError, match="None is no limit"):
        answer_limit(float("inf"))
    with pytest.raises(jsclient.InvalidArgumentError, match="timeout"):
        answer_limit(jsclient.DEFAULT)  # a call with a number in its signature has no DEFAULT
    for bad in BAD:
        for rule in (answer_limit, take_limit):
            with pytest.raises(jsclient.InvalidArgumentError, match="timeout"):
                rule(bad)


class Relay:
    """Answers requests on ``late.<subject>`` as the real server answers ``<subject>``, ``delay`` s late.

    ``late.api.<rest>`` goes to ``$JS.API.<rest>``, so a JetStream context
    with ``prefix="late.api"`` is served late.  ``seen`` counts requests.
    """

    def __init__(self, server: NatsServer, delay: float) -> None:
        self.delay = delay
        self.seen = 0
        self._nc = jsclient.connect(server.url, name="relay")
        self._sub = self._nc.subscribe("late.>", callback=self._forward)
        self._nc.flush()

    def _forward(self, msg: jsclient.Msg) -> None:
        self.seen += 1
        rest = msg.subject.removeprefix("late.")
        target = "$JS.API." + rest.removeprefix("api.") if rest.startswith("api.") else rest
        answer = self._nc.request(target, msg.data, timeout=10, headers=msg.headers or None)
        time.sleep(self.delay)
        msg.respond(answer.data, headers=answer.headers or None)

    def close(self) -> None:
        self._nc.close()


@pytest.fixture
def relay(server: NatsServer) -> Iterator[Relay]:
    r = Relay(server, delay=0.5)
    yield r
    r.close()


@pytest.fixture
def late(js: jsclient.JetStream) -> None:
    js.add_stream(name="LATE", subjects=["to.>"], allow_direct=True)
    js.publish("to.a", b"first")
    js.add_consumer("LATE", durable_name="C")


#: JetStream calls served by the relay, each given ``timeout`` as keywords (none: omitted).
LATE_CALLS: dict[str, Callable[[jsclient.JetStream, dict[str, Any]], object]] = {
    "publish": lambda js, t: js.publish("late.to.a", b"x", **t),
    "publish_async": lambda js, t: js.publish_async("late.to.a", b"x", **t).result(timeout=30),
    "consumer_info": lambda js, t: js.consumer_info("LATE", "C", **t),
    "add_consumer": lambda js, t: js.add_consumer("LATE", durable_name="D", **t),
    "direct_get by seq": lambda js, t: js.direct_get("LATE", 1, **t),
    "direct_get last": lambda js, t: js.direct_get("LATE", last_by_subj="to.a", **t),
    "get_msg": lambda js, t: js.get_msg("LATE", 1, **t),
}


@pytest.mark.parametrize("call", list(LATE_CALLS))
def test_a_jetstream_call_left_without_timeout_takes_the_context_default(
    nc: jsclient.Connection, late: None, relay: Relay, call: str
) -> None:
    js = nc.jetstream(prefix="late.api", timeout=0.1)  # the relay answers after 0.5 s
    with pytest.raises(jsclient.TimeoutError):
        LATE_CALLS[call](js, {})


@pytest.mark.parametrize("call", list(LATE_CALLS))
def test_a_jetstream_call_with_timeout_none_has_no_limit(
    nc: jsclient.Connection, late: None, relay: Relay, call: str
) -> None:
    js = nc.jetstream(prefix="late.api", timeout=0.1)
    assert LATE_CALLS[call](js, {"timeout": None}) is not None  # answered after the context's 0.1 s


def test_a_context_made_with_timeout_none_has_no_limit(nc: jsclient.Connection, late: None, relay: Relay) -> None:
    js = nc.jetstream(prefix="late.api", timeout=None)
    assert js.stream_info("LATE").config.name == "LATE"  # a call with no timeout of its own
    assert js.consumer_info("LATE", "C").name == "C"


def test_core_request_with_timeout_none_outlives_the_default(nc: jsclient.Connection, server: NatsServer) -> None:
    slow = Relay(server, delay=2.5)  # past request's default of 2.0 s
    try:
        echo = nc.subscribe("echo", callback=lambda m: m.respond(m.data))
        nc.flush()
        assert nc.request("late.echo", b"hi", timeout=None).data == b"hi"
        assert nc.request_async("late.echo", b"again", timeout=None).result(timeout=30).data == b"again"
        echo.unsubscribe()
    finally:
        slow.close()


def test_a_pull_with_timeout_none_waits_for_the_message(js: jsclient.JetStream) -> None:
    js.add_stream(name="PULLNONE", subjects=["pn.>"])
    psub = js.pull_subscribe("pn.>", "w")
    consumer = js.stream("PULLNONE").create_or_update_consumer(durable_name="h")
    pulls = js.conn.subscribe("$JS.API.CONSUMER.MSG.NEXT.PULLNONE.w")  # a copy of each pull request
    js.conn.flush()
    threading.Timer(0.5, js.publish, ("pn.a", b"late")).start()
    got = psub.fetch(1, timeout=None)
    assert [m.data for m in got] == [b"late"]
    asked = [json.loads(pulls.next_msg(timeout=5).data) for _ in range(2)]  # the no-wait look, then the wait
    assert asked[0].get("no_wait") and asked[1]["expires"] > 3600 * 10**9  # not the 5 s default: no limit
    assert consumer.next_msg(timeout=None).data == b"late"
    got[0].ack_sync(timeout=None)


@pytest.fixture
def everything(nc: jsclient.Connection, js: jsclient.JetStream) -> Iterator[dict[str, Any]]:
    """One of each object whose calls take a timeout."""
    js.add_stream(name="ZERO", subjects=["zero.>"], allow_direct=True)
    js.publish("zero.a", b"1")
    stream = js.stream("ZERO")
    psub = js.pull_subscribe("zero.>", "zero-pull")
    msg = psub.fetch(1, timeout=5)[0]
    objects = js.create_object_store("zero-files")
    objects.put("a", b"x")
    svc = micro.add_service(nc, name="zero", version="1.0.0")
    made = {
        "stream": stream, "consumer": stream.create_or_update_consumer(durable_name="zero-h"),
        "ordered": stream.ordered_consumer(), "psub": psub, "msg": msg, "objects": objects, "svc": svc,
        "push": js.subscribe("zero.>"), "osub": js.subscribe("zero.>", ordered=True), "sub": nc.subscribe("zero.x"),
    }
    yield made
    svc.stop()


#: Every ANSWER call, given ``timeout=0``.
ZERO: dict[str, Callable[[jsclient.Connection, jsclient.JetStream, dict[str, Any]], object]] = {
    "AtomicBatch.__init__": lambda nc, js, o: jsclient.AtomicBatch(js, timeout=0),
    "Connection.drain": lambda nc, js, o: nc.drain(timeout=0),
    "Connection.flush": lambda nc, js, o: nc.flush(timeout=0),
    "Connection.jetstream": lambda nc, js, o: nc.jetstream(timeout=0),
    "Connection.request": lambda nc, js, o: nc.request("zero.a", b"", timeout=0),
    "Connection.request_async": lambda nc, js, o: nc.request_async("zero.a", b"", timeout=0),
    "Connection.request_many": lambda nc, js, o: nc.request_many("zero.a", b"", timeout=0),
    "Connection.trace_message": lambda nc, js, o: nc.trace_message("zero.a", b"", timeout=0),
    "Connection.rtt": lambda nc, js, o: nc.rtt(timeout=0),
    "Consumer.fetch": lambda nc, js, o: o["consumer"].fetch(1, timeout=0),
    "Consumer.next_msg": lambda nc, js, o: o["consumer"].next_msg(timeout=0),
    "JetStream.__init__": lambda nc, js, o: jsclient.JetStream(nc, timeout=0),
    "JetStream.add_consumer": lambda nc, js, o: js.add_consumer("ZERO", durable_name="zero-new", timeout=0),
    "JetStream.atomic_batch": lambda nc, js, o: js.atomic_batch(timeout=0),
    "JetStream.consumer_info": lambda nc, js, o: js.consumer_info("ZERO", "zero-pull", timeout=0),
    "JetStream.counter_add": lambda nc, js, o: js.counter_add("zero.c", 1, timeout=0),
    "JetStream.counter_get": lambda nc, js, o: js.counter_get("ZERO", "zero.c", timeout=0),
    "JetStream.counter_get_many": lambda nc, js, o: js.counter_get_many("ZERO", ["zero.c"], timeout=0),
    "JetStream.direct_get": lambda nc, js, o: js.direct_get("ZERO", 1, timeout=0),
    "JetStream.direct_get_batch": lambda nc, js, o: js.direct_get_batch("ZERO", timeout=0),
    "JetStream.direct_get_last_for_subjects": lambda nc, js, o: js.direct_get_last_for_subjects(
        "ZERO", ["zero.a"], timeout=0
    ),
    "JetStream.get_msg": lambda nc, js, o: js.get_msg("ZERO", 1, timeout=0),
    "JetStream.publish": lambda nc, js, o: js.publish("zero.a", b"", timeout=0),
    "JetStream.publish_async": lambda nc, js, o: js.publish_async("zero.a", b"", timeout=0),
    "JetStream.publish_batch": lambda nc, js, o: js.publish_batch([("zero.a", b"")], timeout=0),
    "JetStream.publish_stream": lambda nc, js, o: js.publish_stream([("zero.a", b"")], timeout=0),
    "Msg.ack_sync": lambda nc, js, o: o["msg"].ack_sync(timeout=0),
    "ObjectStore.get": lambda nc, js, o: o["objects"].get("a", timeout=0),
    "ObjectStore.get_bytes": lambda nc, js, o: o["objects"].get_bytes("a", timeout=0),
    "ObjectStore.get_file": lambda nc, js, o: o["objects"].get_file("a", "/nonexistent/never-written", timeout=0),
    "ObjectStore.put": lambda nc, js, o: o["objects"].put("b", b"y", timeout=0),
    "OrderedConsumer.fetch": lambda nc, js, o: o["ordered"].fetch(1, timeout=0),
    "OrderedConsumer.next_msg": lambda nc, js, o: o["ordered"].next_msg(timeout=0),
    "OrderedSubscription.drain": lambda nc, js, o: o["osub"].drain(timeout=0),
    "PullSubscription.drain": lambda nc, js, o: o["psub"].drain(timeout=0),
    "PullSubscription.fetch": lambda nc, js, o: o["psub"].fetch(1, timeout=0),
    "PushSubscription.drain": lambda nc, js, o: o["push"].drain(timeout=0),
    "Service.stop": lambda nc, js, o: o["svc"].stop(timeout=0),
    "Subscription.drain": lambda nc, js, o: o["sub"].drain(timeout=0),
}


def test_zero_is_refused_before_sending_by_every_call_that_needs_an_answer(
    nc: jsclient.Connection, js: jsclient.JetStream, everything: dict[str, Any]
) -> None:
    assert set(ZERO) == ANSWER
    nc.flush()
    for where, call in ZERO.items():
        before = nc.stats()["out_msgs"]
        with pytest.raises(jsclient.InvalidArgumentError, match="timeout=0 does not wait"):
            call(nc, js, everything)
        nc.flush()
        assert nc.stats()["out_msgs"] == before, f"{where} sent something"
    # Nothing was stopped or drained by a refused call, and the connection is healthy.
    assert not everything["svc"].stopped and not everything["sub"].is_closed and nc.is_connected
    nc.publish("zero.x", b"still")
    assert everything["sub"].next_msg(timeout=5).data == b"still"


def taken_without_waiting(sub: Any) -> jsclient.Msg:
    """``next_msg(timeout=0)`` until the message has arrived (each call looks once and raises at once)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return sub.next_msg(timeout=0)  # type: ignore[no-any-return]
        except jsclient.TimeoutError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def test_a_take_with_zero_answers_from_what_is_queued(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    js.add_stream(name="TAKE", subjects=["take.>"])
    kv = js.create_key_value("take-kv")
    subs: dict[str, Any] = {
        "core": nc.subscribe("take.a"), "push": js.subscribe("take.a"), "ordered": js.subscribe("take.a", ordered=True),
    }
    for sub in subs.values():
        with pytest.raises(jsclient.TimeoutError):
            sub.next_msg(timeout=0)  # nothing queued
    js.publish("take.a", b"1")
    for name, sub in subs.items():
        assert taken_without_waiting(sub).data == b"1", name
    watcher = kv.watch("k")
    assert watcher.next(timeout=5) is None  # the end of the (no) initial values
    with pytest.raises(jsclient.TimeoutError):
        watcher.next(timeout=0)
    js.publish_async_completed(timeout=0)  # none pending: returns at once
    assert not nc.wait_closed(timeout=0)


def test_every_take_refuses_a_bad_timeout(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    js.add_stream(name="BADTAKE", subjects=["bt.>"])
    kv = js.create_key_value("bt-kv")
    consumer = js.stream("BADTAKE").create_or_update_consumer(durable_name="bt")
    context = consumer.consume(lambda m: m.ack())  # no message comes: it sends one pull and waits (30 s)
    deadline = time.monotonic() + 10
    while consumer.info().num_waiting == 0 and time.monotonic() < deadline:
        time.sleep(0.01)  # the pull is out before the count below is taken
    takes: dict[str, Callable[[Any], object]] = {
        "core next_msg": nc.subscribe("bt.a").next_msg,
        "push next_msg": js.subscribe("bt.a").next_msg,
        "ordered next_msg": js.subscribe("bt.a", ordered=True).next_msg,
        "watcher next": kv.watch("k").next,
        "publish_async_completed": js.publish_async_completed,
        "wait_closed": nc.wait_closed,
        "consume wait": context.wait,
    }
    before = nc.stats()["out_msgs"]
    for name, take in takes.items():
        for bad in BAD:
            with pytest.raises(jsclient.InvalidArgumentError, match="timeout"):
                take(bad)
                pytest.fail(f"{name} took timeout={bad!r}")
    assert nc.stats()["out_msgs"] == before and nc.is_connected
    context.stop(timeout=None)
    assert context.wait(timeout=0)


def test_drain_with_timeout_none_waits_for_the_handler(server: NatsServer) -> None:
    # A drain's default is the drain_timeout option; None is no limit, so a handler slower than it still finishes.
    with jsclient.connect(server.url, drain_timeout=0.2) as nc:
        done: list[bytes] = []

        def slow(msg: jsclient.Msg) -> None:
            time.sleep(0.6)
            done.append(msg.data)

        sub = nc.subscribe("drain.none", callback=slow)
        nc.publish("drain.none", b"1")
        nc.flush()
        sub.drain(timeout=None)
        assert done == [b"1"]
