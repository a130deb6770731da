"""Message-path tracing (ADR-41, ``nc.trace_message``) against real servers.

One server: the ingress and the egress to a subscriber, with and without delivery; no interest; a subject
mapping; a stream's store; a publish permission violation, typed; compressed reports.  A cluster of three,
with the publisher, the subscriber and the stream's leader each on a server of its own: every hop's report
is gathered and tied to the egress that led there, and a server that does not report leaves the path
incomplete, returned by the timeout.  A 2.10 server: refused before anything is sent.  Bad arguments:
refused before anything is sent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

import jsclient
from jsclient import ConnectionKind, MessageTrace, RequestOutcome
from jsclient.server import NatsCluster, NatsServer
from tests import servers
from tests.conftest import ErrorLog
from tests.proxy import FrameProxy

T = TypeVar("T")

#: Far above what a trace takes on a loaded machine: the calls below end on their own, this bounds a failure.
GENEROUS = 30.0


def ended(call: Callable[[], T], within: float = 60.0) -> T:
    """``call()`` on a thread of its own; fails when it is still running after ``within`` seconds."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as exc:  # noqa: BLE001 - raised again below
            failure.append(exc)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(within)
    assert not th.is_alive(), f"{call!r} still running after {within} s"
    if failure:
        raise failure[0]
    return result[0]


@pytest.fixture
def receiver(server: NatsServer) -> Iterator[jsclient.Connection]:
    """A second client, named, whose subscriptions the traces reach."""
    with jsclient.connect(server.url, name="receiver") as conn:
        yield conn


def first_after(nc: jsclient.Connection, sub: jsclient.Subscription, subject: str) -> bytes:
    """Publish a marker after the trace and return the first message ``sub`` gets: the marker itself when the
    traced message was not delivered (both took the same way, so a delivered one would come first)."""
    nc.publish(subject, b"after")
    nc.flush()
    return sub.next_msg(timeout=GENEROUS).data


# -- one server ------------------------------------------------------------------------------------------


@pytest.mark.needs_server("2.11")
def test_a_delivered_message_is_traced_from_its_client_to_the_subscriber(
    nc: jsclient.Connection, receiver: jsclient.Connection
) -> None:
    sub = receiver.subscribe("trace.one")
    receiver.flush()
    trace = nc.trace_message("trace.one", b"hi", headers={"K": "v"}, deliver=True, timeout=GENEROUS)
    assert isinstance(trace, MessageTrace)
    assert trace.complete and trace.missing == () and trace.deliver is True
    (report,) = trace.reports
    assert report is trace.origin and report.hop == "" and report.hops == 0
    assert report.server.name == nc.server_info["server_name"] and report.server.version == str(nc.server_version)
    ingress = report.ingress
    assert ingress is not None
    assert (ingress.kind, ingress.cid, ingress.name, ingress.account, ingress.subject, ingress.error) == (
        ConnectionKind.CLIENT, nc.server_info["client_id"], "test", "$G", "trace.one", ""
    )
    (egress,) = report.egresses
    assert (egress.kind, egress.cid, egress.name, egress.subscription, egress.queue, egress.error, egress.hop) == (
        ConnectionKind.CLIENT, receiver.server_info["client_id"], "receiver", "trace.one", "", "", ""
    )
    assert trace.deliveries == (egress,) and trace.stores == () and trace.errors == ()
    assert report.headers["K"] == ["v"] and report.headers["Nats-Trace-Dest"][0].startswith("_INBOX.")
    assert "Nats-Trace-Only" not in report.headers
    assert trace.after(egress) is None
    got = sub.next_msg(timeout=GENEROUS)
    assert (got.data, got.headers["K"]) == (b"hi", "v")
    text = str(trace)
    assert "message on 'trace.one' (delivered): complete, 1 server" in text
    assert "from client 'test'" in text and "to client 'receiver'" in text and "subscription trace.one" in text
    data = trace.to_dict()
    assert data["complete"] is True and data["reports"][0]["events"][0]["type"] == "in"
    assert data["reports"][0]["events"][1]["sub"] == "trace.one"


@pytest.mark.needs_server("2.11")
def test_a_message_traced_only_reaches_no_subscriber_yet_its_egress_is_reported(
    nc: jsclient.Connection, receiver: jsclient.Connection
) -> None:
    sub = receiver.subscribe("trace.only", queue="workers")
    receiver.flush()
    trace = nc.trace_message("trace.only", b"not for you", timeout=GENEROUS)  # deliver=False by default
    assert trace.complete and trace.deliver is False
    (egress,) = trace.deliveries
    assert (egress.cid, egress.subscription, egress.queue) == (
        receiver.server_info["client_id"], "trace.only", "workers"
    )
    assert trace.reports[0].headers["Nats-Trace-Only"] == ["true"]
    assert "(traced only, not delivered)" in str(trace) and "queue workers" in str(trace)
    assert first_after(nc, sub, "trace.only") == b"after"


@pytest.mark.needs_server("2.11")
def test_a_subject_nobody_takes_is_a_complete_path_of_no_interest(nc: jsclient.Connection) -> None:
    trace = nc.trace_message("trace.nobody", timeout=GENEROUS)
    assert trace.complete
    assert trace.reports[0].egresses == () and trace.deliveries == () and trace.errors == ()
    assert "no interest: no subscription or stream takes trace.nobody" in str(trace)


@pytest.mark.needs_server("2.11")
def test_the_reports_come_gzip_compressed_when_asked_and_are_read(
    nc: jsclient.Connection, receiver: jsclient.Connection
) -> None:
    receiver.subscribe("trace.gzip")
    receiver.flush()
    trace = nc.trace_message("trace.gzip", headers={"Accept-Encoding": "gzip"}, timeout=GENEROUS)
    assert trace.complete and len(trace.deliveries) == 1


@pytest.mark.needs_server("2.11")
def test_a_subject_mapping_is_reported_and_the_message_goes_on_as_mapped() -> None:
    config = 'mappings = { "trace.map.in": "trace.map.out" }'
    with NatsServer(jetstream=False, config=config) as server, jsclient.connect(server.url) as nc:
        sub = nc.subscribe("trace.map.out")
        trace = nc.trace_message("trace.map.in", b"m", deliver=True, timeout=GENEROUS)
        assert trace.complete
        origin = trace.origin
        assert origin is not None and origin.ingress is not None and origin.ingress.subject == "trace.map.in"
        (mapping,) = origin.subject_mappings
        assert mapping.mapped_to == "trace.map.out"
        (egress,) = origin.egresses
        assert egress.subscription == "trace.map.out"
        assert "mapped to trace.map.out" in str(trace)
        got = sub.next_msg(timeout=GENEROUS)
        assert (got.subject, got.data) == ("trace.map.out", b"m")


@pytest.mark.needs_server("2.11")
def test_a_stream_reports_what_it_stores_and_stores_nothing_of_a_message_traced_only(
    nc: jsclient.Connection, js: jsclient.JetStream
) -> None:
    js.add_stream(name="TRACED", subjects=["trace.js.>"])
    stored = nc.trace_message("trace.js.a", b"1", deliver=True, timeout=GENEROUS)
    assert stored.complete
    (event,) = stored.stores
    assert (event.stream, event.subject, event.no_interest, event.error) == ("TRACED", "trace.js.a", False, "")
    assert stored.origin is not None and stored.origin.jetstream == event
    assert "stream TRACED: stored as trace.js.a" in str(stored)
    assert js.stream_info("TRACED").state.messages == 1

    checked = nc.trace_message("trace.js.b", b"2", timeout=GENEROUS)
    (event,) = checked.stores
    assert (event.stream, event.subject, event.error) == ("TRACED", "trace.js.b", "")
    assert "stream TRACED: would store as trace.js.b" in str(checked)
    assert js.stream_info("TRACED").state.messages == 1
    assert js.get_msg("TRACED", last_by_subj="trace.js.a").data == b"1"


@pytest.mark.needs_server("2.11")
def test_a_publish_permission_violation_is_a_typed_error_of_the_ingress(error_log: ErrorLog) -> None:
    config = """authorization {
  users = [ { user: "limited", password: "pw", permissions: { publish: { deny: ["trace.secret.>"] } } } ]
}"""
    with (
        NatsServer(jetstream=False, config=config) as server,
        jsclient.connect(server.url, user="limited", password="pw", error_cb=error_log) as nc,
    ):
        listener = jsclient.connect(server.url, user="limited", password="pw")
        try:
            listener.subscribe("trace.secret.>")
            listener.flush()
            trace = nc.trace_message("trace.secret.x", b"s", deliver=True, timeout=GENEROUS)
            assert trace.complete
            origin = trace.origin
            assert origin is not None and origin.ingress is not None
            assert origin.egresses == () and trace.deliveries == ()
            (problem,) = trace.errors
            assert problem.event is origin.ingress and problem.server == origin.server.name
            assert problem.text == origin.ingress.error == 'Permissions Violation for Publish to "trace.secret.x"'
            assert "error: Permissions Violation for Publish" in str(trace)
            assert "no interest" not in str(trace)
            error_log.wait_for(jsclient.AuthorizationError)  # said on the connection too, which goes on
            nc.flush()
        finally:
            listener.close()


# -- a cluster -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[NatsCluster]:
    with NatsCluster(3) as found:
        yield found


def ready(cluster: NatsCluster) -> tuple[int, int, int]:
    """The TRACED stream (R3) on ``cluster``, and the servers of its leader, of the publisher and of the
    subscriber: each a different one."""
    with jsclient.connect(cluster.urls[0]) as nc:
        js = nc.jetstream(timeout=5)
        deadline = time.monotonic() + GENEROUS
        while True:
            try:
                js.account_info()
                break
            except (jsclient.JetStreamAPIError, jsclient.TimeoutError):  # the meta leader is still being elected
                assert time.monotonic() < deadline, "the cluster formed no JetStream meta leader"
                time.sleep(0.2)
        if "TRACED" not in js.stream_names():
            js.add_stream(name="TRACED", subjects=["trace.cluster.>"], num_replicas=3)
        leader = None
        while leader is None:
            info = js.stream_info("TRACED").cluster
            leader = info.leader if info is not None else None
            if leader is None:
                assert time.monotonic() < deadline, "the stream has no leader"
                time.sleep(0.1)
    names = [srv.name for srv in cluster.servers]
    at = names.index(leader)
    publisher, subscriber = [i for i in range(3) if i != at]
    return at, publisher, subscriber


def interest_reached(pub: jsclient.Connection, sub_conn: jsclient.Connection) -> None:
    """Return once ``pub``'s server knows every subscription ``sub_conn`` made so far: a probe subscribed
    after them answers (one route connection carries an account's interest, in order)."""
    probe = f"trace.probe.{sub_conn.new_inbox()}"
    sub_conn.subscribe(probe, callback=lambda m: m.respond(b"here"))
    sub_conn.flush()
    deadline = time.monotonic() + GENEROUS
    while True:
        try:
            pub.request(probe, timeout=5)
            return
        except jsclient.NoRespondersError:
            assert time.monotonic() < deadline, "the probe's interest never reached the publisher's server"
            time.sleep(0.05)


@pytest.mark.needs_server("2.11")
def test_every_hop_of_a_cluster_and_its_stream_is_gathered_and_tied_to_its_egress(cluster: NatsCluster) -> None:
    leader, p, s = ready(cluster)
    names = [srv.name for srv in cluster.servers]
    with (
        jsclient.connect(cluster.urls[p], name="publisher") as pub,
        jsclient.connect(cluster.urls[s], name="subscriber") as sub_conn,
    ):
        js = pub.jetstream(timeout=GENEROUS)
        base = js.publish("trace.cluster.warmup", b"w").seq  # the leader's interest has reached the publisher's server
        sub = sub_conn.subscribe("trace.cluster.>")
        interest_reached(pub, sub_conn)

        for deliver in (True, False):
            # No limit on the wait: the call returns because the path is complete, not because time ran out.
            trace = ended(lambda d=deliver: pub.trace_message("trace.cluster.a", b"c", deliver=d, timeout=None))
            assert trace.complete and trace.missing == ()
            assert len(trace.reports) == 3 and {r.server.name for r in trace.reports} == set(names)

            origin = trace.origin
            assert origin is not None and origin.server.name == names[p] and origin.hop == "" and origin.hops == 2
            assert origin.ingress is not None
            assert (origin.ingress.kind, origin.ingress.cid, origin.ingress.name) == (
                ConnectionKind.CLIENT, pub.server_info["client_id"], "publisher"
            )
            assert origin.jetstream is None
            routes = {e.name: e for e in origin.egresses}
            assert set(routes) == {names[s], names[leader]} and len(origin.egresses) == 2
            assert all(e.kind is ConnectionKind.ROUTER and not e.error for e in routes.values())
            assert sorted(e.hop for e in routes.values()) == ["1", "2"]

            at_subscriber = trace.after(routes[names[s]])
            assert at_subscriber is not None and at_subscriber.server.name == names[s]
            assert at_subscriber.hop == routes[names[s]].hop and at_subscriber.hops == 0
            assert at_subscriber.ingress is not None
            assert (at_subscriber.ingress.kind, at_subscriber.ingress.name, at_subscriber.ingress.subject) == (
                ConnectionKind.ROUTER, names[p], "trace.cluster.a"
            )
            (to_client,) = at_subscriber.egresses
            assert (to_client.kind, to_client.cid, to_client.name, to_client.subscription) == (
                ConnectionKind.CLIENT, sub_conn.server_info["client_id"], "subscriber", "trace.cluster.>"
            )
            assert at_subscriber.jetstream is None and trace.deliveries == (to_client,)

            at_leader = trace.after(routes[names[leader]])
            assert at_leader is not None and at_leader.server.name == names[leader]
            assert at_leader.hop == routes[names[leader]].hop
            assert at_leader.ingress is not None and at_leader.ingress.kind is ConnectionKind.ROUTER
            assert at_leader.egresses == ()
            stored = at_leader.jetstream
            assert stored is not None and trace.stores == (stored,)
            assert (stored.stream, stored.subject, stored.error) == ("TRACED", "trace.cluster.a", "")
            assert trace.errors == ()

            text = str(trace)
            assert f"[hop {routes[names[s]].hop}]" in text and f"[hop {routes[names[leader]].hop}]" in text
            assert "subscription trace.cluster.>" in text

            if deliver:
                got = sub.next_msg(timeout=GENEROUS)
                assert (got.subject, got.data) == ("trace.cluster.a", b"c")
                assert js.stream_info("TRACED").state.last_seq == base + 1
            else:
                # A marker after it, by the same routes: the next the stream stores and the subscriber gets.
                assert js.publish("trace.cluster.b", b"after").seq == base + 2
                assert sub.next_msg(timeout=GENEROUS).data == b"after"


@pytest.mark.needs_server("2.11")
def test_a_server_that_does_not_report_leaves_the_path_incomplete_by_the_timeout(cluster: NatsCluster) -> None:
    leader, p, s = ready(cluster)
    names = [srv.name for srv in cluster.servers]
    with jsclient.connect(cluster.urls[p]) as pub, jsclient.connect(cluster.urls[s]) as sub_conn:
        sub_conn.subscribe("trace.cluster.>")
        interest_reached(pub, sub_conn)
        cluster.servers[s].pause()  # it takes the message over its route, and answers nothing
        try:
            trace = pub.trace_message("trace.cluster.c", timeout=1.0)
        finally:
            cluster.servers[s].resume()
    assert not trace.complete
    origin = trace.origin
    assert origin is not None
    (to_paused,) = [e for e in origin.egresses if e.name == names[s]]
    assert trace.missing == (to_paused.hop,) and trace.after(to_paused) is None
    assert {r.server.name for r in trace.reports} == {names[p], names[leader]}  # the others did report
    text = str(trace)
    assert f"incomplete: no report from hop {to_paused.hop}" in text and "(no report came from there)" in text


# -- refusals before sending -----------------------------------------------------------------------------


def test_a_server_before_2_11_is_refused_before_anything_is_sent() -> None:
    """A 2.10 server would ignore the tracing headers and deliver the message (Nats-Trace-Only too)."""
    binary = servers.binary("2.10.26")
    if not binary.is_file():
        pytest.skip("nats-server 2.10.26 not fetched (python -m tests.servers fetch)")
    with (
        NatsServer(binary=str(binary), jetstream=False) as server,
        FrameProxy(server.host_port) as proxy,
        jsclient.connect(proxy.url) as nc,
        jsclient.connect(server.url) as receiver,
    ):
        sub = receiver.subscribe("trace.old")
        receiver.flush()
        nc.flush()
        mark, out_msgs = len(proxy.sent), nc.stats()["out_msgs"]
        for deliver in (False, True):
            with pytest.raises(jsclient.FeatureNotSupportedError) as refused:
                nc.trace_message("trace.old", b"x", deliver=deliver, timeout=GENEROUS)
            assert refused.value.outcome is RequestOutcome.NOT_DELIVERED
            assert "message tracing needs nats-server 2.11 or newer; the connected server is 2.10.26" in str(
                refused.value
            )
        nc.flush()
        assert nc.stats()["out_msgs"] == out_msgs and nc.num_subscriptions == 0
        assert b"SUB " not in bytes(proxy.sent[mark:]) and b"PUB " not in bytes(proxy.sent[mark:])  # nor HPUB
        assert first_after(nc, sub, "trace.old") == b"after"


@pytest.mark.parametrize(
    ("arguments", "error", "words"),
    [
        ({"subject": "trace.*"}, jsclient.BadSubjectError, "wildcard"),
        ({"payload": "text"}, jsclient.BadPayloadError, "not str"),
        ({"headers": {"Nats-Trace-Dest": "elsewhere"}}, jsclient.InvalidArgumentError, "sets the tracing headers"),
        ({"headers": {"nats-trace-only": "false"}}, jsclient.InvalidArgumentError, "sets the tracing headers"),
        ({"headers": {"Nats-Trace-Hop": "1"}}, jsclient.InvalidArgumentError, "sets the tracing headers"),
        ({"headers": {"Accept-Encoding": "snappy"}}, jsclient.InvalidArgumentError, "snappy"),
        ({"headers": {"Bad Name": "v"}}, jsclient.BadHeaderError, "Bad Name"),
        ({"deliver": "yes"}, jsclient.InvalidArgumentError, "deliver must be True or False"),
        ({"timeout": 0}, jsclient.InvalidArgumentError, "timeout=0"),
        ({"timeout": -1.0}, jsclient.InvalidArgumentError, "timeout"),
        ({"payload": b"x" * (1024 * 1024)}, jsclient.MaxPayloadError, "tracing headers included"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_sent(
    server: NatsServer, arguments: dict[str, object], error: type[Exception], words: str
) -> None:
    with FrameProxy(server.host_port) as proxy, jsclient.connect(proxy.url) as nc:
        nc.flush()
        mark = len(proxy.sent)
        call: dict[str, object] = {"subject": "trace.bad", **arguments}
        with pytest.raises(error, match=words):
            nc.trace_message(**call)  # type: ignore[arg-type]  # the wrong types are the point
        nc.flush()
        assert bytes(proxy.sent[mark:]).count(b"\r\n") == 1 and bytes(proxy.sent[mark:]).startswith(b"PING")
