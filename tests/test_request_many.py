"""Request-many (ADR-47) against a real nats-server: scatter-gather, stall, max, sentinel, statuses."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

import jsclient
from jsclient.server import NatsServer


@pytest.fixture
def responders(server: NatsServer) -> Iterator[jsclient.Connection]:
    """Three services on ``svc.echo`` (each answers once), and a chunked one on ``svc.chunks``."""
    with jsclient.connect(server.url) as other:
        for i in range(3):
            other.subscribe("svc.echo", callback=lambda msg, i=i: msg.respond(b"%d:%s" % (i, msg.data)))

        def chunks(msg: jsclient.Msg) -> None:
            for part in (b"a", b"b", b"c", b""):  # the empty one is ADR-47's standard sentinel
                other.publish(msg.reply or "", part)

        other.subscribe("svc.chunks", callback=chunks)
        other.flush()
        yield other


def test_every_responder_answers(nc: jsclient.Connection, responders: jsclient.Connection) -> None:
    replies = nc.request_many("svc.echo", b"hi", timeout=1.0)
    assert sorted(m.data for m in replies) == [b"0:hi", b"1:hi", b"2:hi"]
    assert replies.closed and replies.count == 3  # the timeout ended it, quietly, and the interest went


def test_max_msgs_and_stall_end_early(nc: jsclient.Connection, responders: jsclient.Connection) -> None:
    two = list(nc.request_many("svc.echo", b"x", timeout=30.0, max_messages=2))
    assert len(two) == 2
    start = time.monotonic()
    stalled = list(nc.request_many("svc.echo", b"y", timeout=30.0, stall=0.3))
    assert len(stalled) == 3 and time.monotonic() - start < 20  # the stall, not the 30 s, ended it


def test_sentinels(nc: jsclient.Connection, responders: jsclient.Connection) -> None:
    assert [m.data for m in nc.request_many("svc.chunks", timeout=5.0, sentinel=True)] == [b"a", b"b", b"c"]
    until_b = nc.request_many("svc.chunks", timeout=5.0, sentinel=lambda m: m.data != b"b")
    assert [m.data for m in until_b] == [b"a"]
    assert until_b.closed


def test_stop_ends_the_interest(nc: jsclient.Connection, responders: jsclient.Connection) -> None:
    with nc.request_many("svc.echo", b"z", timeout=5.0) as replies:
        first = next(iter(replies))
        assert first.data.endswith(b":z")
    assert replies.closed
    assert nc.request("svc.echo", b"still", timeout=2).data.endswith(b":still")  # the connection is fine


def test_no_responders(nc: jsclient.Connection) -> None:
    with pytest.raises(jsclient.NoRespondersError):
        list(nc.request_many("svc.nobody", b"?", timeout=2.0))


def test_the_callers_own_time_does_not_count(nc: jsclient.Connection, responders: jsclient.Connection) -> None:
    """Only waiting counts against the total: a slow consumer of the replies still gets all three."""
    got = []
    for msg in nc.request_many("svc.echo", b"slow", timeout=0.6):
        got.append(msg)
        time.sleep(0.5)  # three of these are more than the timeout
    assert len(got) == 3


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"subject": "svc.*"}, "wildcard"),
        ({"timeout": 0}, "timeout=0 does not wait"),
        ({"stall": -1}, "stall must be"),
        ({"max_messages": 0}, "max_messages must be an int >= 1"),
        ({"sentinel": "empty"}, "sentinel must be True"),
        ({"payload": "text"}, "str"),
        ({"headers": {"bad name": "v"}}, "header"),
    ],
)
def test_bad_input_is_named_before_sending(nc: jsclient.Connection, kwargs: dict[str, object], fragment: str) -> None:
    call: dict[str, object] = {"subject": "svc.echo", "payload": b"", **kwargs}
    sent = nc.stats()["out_msgs"]
    subject, payload = call.pop("subject"), call.pop("payload")
    with pytest.raises(jsclient.Error, match=fragment):
        nc.request_many(subject, payload, **call)  # type: ignore[arg-type]
    assert nc.stats()["out_msgs"] == sent


def test_many_threads_at_once(nc: jsclient.Connection, responders: jsclient.Connection) -> None:
    counts: list[int] = []

    def gather() -> None:
        counts.append(len(list(nc.request_many("svc.echo", b"t", timeout=30.0, max_messages=3))))

    threads = [threading.Thread(target=gather) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert counts == [3] * 8
