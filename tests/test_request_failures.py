"""Why a request failed: every error it ends in says whether the responder may have acted on it
(``outcome``, a RequestOutcome) and what ended it (``failure``, a RequestFailure), against a real nats-server.

A "silent" subscriber receives requests and never answers, so a test can prove a request got there
before it ends it; waits are generous deadlines, never timing assertions.
"""

from __future__ import annotations

import builtins
import pickle
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future

import pytest

import jsclient
from jsclient import RequestFailure, RequestOutcome
from jsclient.server import NatsServer

from .conftest import ErrorLog


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=False) as srv:
        yield srv


@pytest.fixture
def silent(server: NatsServer) -> Iterator[jsclient.Subscription]:
    """A subscriber on ``svc.silent`` (its own connection) that takes every request and answers none."""
    with jsclient.connect(server.url) as conn:
        sub = conn.subscribe("svc.silent")
        conn.flush()
        yield sub


class Lifecycle:
    """The connection callbacks, waitable."""

    def __init__(self) -> None:
        self.disconnected = threading.Event()
        self.reconnected = threading.Event()
        self.closed = threading.Event()

    def kwargs(self) -> dict[str, Callable[[], None]]:
        return {
            "disconnected_cb": self.disconnected.set,
            "reconnected_cb": self.reconnected.set,
            "closed_cb": self.closed.set,
        }


def ended_by(
    nc: jsclient.Connection,
    sub: jsclient.Subscription,
    payload: bytes,
    end: Callable[[], object],
    *,
    timeout: float = 30,
    ahead: int = 0,
) -> BaseException:
    """Send a request on a thread; once ``sub`` has received it (and the ``ahead`` requests sent before it),
    call ``end``; what the request raised."""
    outcome: list[BaseException] = []

    def ask() -> None:
        try:
            nc.request("svc.silent", payload, timeout=timeout)
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            outcome.append(exc)

    th = threading.Thread(target=ask)
    th.start()
    received = {sub.next_msg(timeout=10).data for _ in range(ahead + 1)}
    assert payload in received  # it got there: the responder could have acted on it
    end()
    th.join(timeout / 2 + 5)
    assert not th.is_alive(), f"the request went on waiting after {end!r}"
    assert outcome, "the request returned a reply nobody sent"
    return outcome[0]


def async_ended_by(
    nc: jsclient.Connection, sub: jsclient.Subscription, payload: bytes, end: Callable[[], object], timeout: float = 30
) -> BaseException:
    """ended_by for request_async: the exception its future resolves with."""
    fut: Future[jsclient.Msg] = nc.request_async("svc.silent", payload, timeout=timeout)
    assert sub.next_msg(timeout=10).data == payload
    end()
    error = fut.exception(timeout=15)
    assert error is not None
    return error


def assert_failed(error: BaseException, kind: type, outcome: RequestOutcome, failure: RequestFailure) -> None:
    assert isinstance(error, kind), repr(error)
    assert isinstance(error, jsclient.Error)
    assert error.outcome is outcome, (error, error.outcome)
    assert error.failure is failure, (error, error.failure)


# -- answered by the server: a timeout, no responders ----------------------------------------------------------


def test_a_timeout_is_unknown_and_the_responder_did_get_the_request(
    server: NatsServer, silent: jsclient.Subscription
) -> None:
    with jsclient.connect(server.url) as nc:
        with pytest.raises(jsclient.TimeoutError) as info:
            nc.request("svc.silent", b"sync", timeout=0.3)
        assert isinstance(info.value, builtins.TimeoutError)  # still caught as the built-in
        assert_failed(info.value, jsclient.TimeoutError, RequestOutcome.UNKNOWN, RequestFailure.TIMED_OUT)
        assert silent.next_msg(timeout=5).data == b"sync"  # it was processed as far as the client can know

        error = nc.request_async("svc.silent", b"async", timeout=0.3).exception(timeout=10)
        assert error is not None
        assert_failed(error, jsclient.TimeoutError, RequestOutcome.UNKNOWN, RequestFailure.TIMED_OUT)
        assert silent.next_msg(timeout=5).data == b"async"


def test_no_responders_is_definitely_not_delivered(server: NatsServer) -> None:
    with jsclient.connect(server.url) as nc:
        with pytest.raises(jsclient.NoRespondersError) as info:
            nc.request("svc.nobody", b"x", timeout=5)
        assert_failed(
            info.value, jsclient.NoRespondersError, RequestOutcome.NOT_DELIVERED, RequestFailure.NO_RESPONDERS
        )
        error = nc.request_async("svc.nobody", b"x", timeout=5).exception(timeout=10)
        assert error is not None
        assert_failed(error, jsclient.NoRespondersError, RequestOutcome.NOT_DELIVERED, RequestFailure.NO_RESPONDERS)


# -- ended by the client: drain() and close() -------------------------------------------------------------------


@pytest.mark.parametrize(
    "how, failure", [("drain", RequestFailure.DRAINED), ("close", RequestFailure.CLOSED)], ids=["drain", "close"]
)
def test_a_request_in_flight_says_whether_drain_or_close_ended_it(
    server: NatsServer, silent: jsclient.Subscription, how: str, failure: RequestFailure
) -> None:
    nc = jsclient.connect(server.url)
    try:
        error = ended_by(nc, silent, b"in flight", getattr(nc, how))
        assert_failed(error, jsclient.ConnectionClosedError, RequestOutcome.UNKNOWN, failure)
    finally:
        nc.close()
    nc = jsclient.connect(server.url)
    try:
        error = async_ended_by(nc, silent, b"async in flight", getattr(nc, how))
        assert_failed(error, jsclient.ConnectionClosedError, RequestOutcome.UNKNOWN, failure)
        # Once closed, a request is refused before anything is sent: definite.
        sent = nc.stats()["out_msgs"]
        with pytest.raises(jsclient.ConnectionClosedError) as info:
            nc.request("svc.silent", b"too late", timeout=5)
        assert_failed(info.value, jsclient.ConnectionClosedError, RequestOutcome.NOT_DELIVERED, failure)
        with pytest.raises(jsclient.ConnectionClosedError) as info:
            nc.request_async("svc.silent", b"too late", timeout=5)
        assert_failed(info.value, jsclient.ConnectionClosedError, RequestOutcome.NOT_DELIVERED, failure)
        assert nc.stats()["out_msgs"] == sent
    finally:
        nc.close()


def test_request_many_cut_by_close_is_unknown(server: NatsServer, silent: jsclient.Subscription) -> None:
    nc = jsclient.connect(server.url)
    try:
        replies = nc.request_many("svc.silent", b"many", timeout=30)
        outcome: list[BaseException] = []

        def consume() -> None:
            try:
                list(replies)
            except BaseException as exc:  # noqa: BLE001 - checked below
                outcome.append(exc)

        th = threading.Thread(target=consume)
        th.start()
        assert silent.next_msg(timeout=10).data == b"many"
        nc.close()
        th.join(10)
        assert not th.is_alive() and outcome
        assert_failed(outcome[0], jsclient.ConnectionClosedError, RequestOutcome.UNKNOWN, RequestFailure.CLOSED)
    finally:
        nc.close()


# -- ended by the link --------------------------------------------------------------------------------------------


def test_a_link_lost_without_reconnect_ends_requests_as_connection_lost() -> None:
    with NatsServer(jetstream=False) as server, jsclient.connect(server.url) as responder:
        sub = responder.subscribe("svc.silent")
        responder.flush()
        nc = jsclient.connect(server.url, allow_reconnect=False)
        try:
            error = ended_by(nc, sub, b"sent", server.kill)
            assert_failed(error, jsclient.ConnectionClosedError, RequestOutcome.UNKNOWN, RequestFailure.CONNECTION_LOST)
            with pytest.raises(jsclient.ConnectionClosedError) as info:
                nc.request("svc.silent", b"after", timeout=5)
            assert_failed(
                info.value, jsclient.ConnectionClosedError, RequestOutcome.NOT_DELIVERED, RequestFailure.CONNECTION_LOST
            )
        finally:
            nc.close()


def test_a_timeout_after_the_link_broke_says_the_connection_was_lost(
    server: NatsServer, silent: jsclient.Subscription
) -> None:
    events = Lifecycle()
    with jsclient.connect(server.url, reconnect_time_wait=0.05, **events.kwargs()) as nc:
        fut = nc.request_async("svc.silent", b"async", timeout=3)
        error = ended_by(nc, silent, b"sync", nc.force_reconnect, timeout=3, ahead=1)
        assert_failed(error, jsclient.TimeoutError, RequestOutcome.UNKNOWN, RequestFailure.CONNECTION_LOST)
        assert isinstance(error, builtins.TimeoutError)
        async_error = fut.exception(timeout=15)
        assert async_error is not None
        assert_failed(async_error, jsclient.TimeoutError, RequestOutcome.UNKNOWN, RequestFailure.CONNECTION_LOST)
        assert events.reconnected.wait(15)
        # A request made after the reconnect that times out is a plain timeout again.
        with pytest.raises(jsclient.TimeoutError) as info:
            nc.request("svc.silent", b"later", timeout=0.3)
        assert_failed(info.value, jsclient.TimeoutError, RequestOutcome.UNKNOWN, RequestFailure.TIMED_OUT)


def test_requests_queued_while_reconnecting_were_not_delivered_when_it_closes() -> None:
    """One request left before the link broke (UNKNOWN); those queued while reconnecting never left (definite)."""
    events = Lifecycle()
    with NatsServer(jetstream=False) as server, jsclient.connect(server.url) as responder:
        sub = responder.subscribe("svc.silent")
        responder.flush()
        nc = jsclient.connect(
            server.url, reconnect_time_wait=0.05, max_reconnect_attempts=-1, **events.kwargs()
        )
        try:
            before = nc.request_async("svc.silent", b"before", timeout=60)
            assert sub.next_msg(timeout=10).data == b"before"
            server.kill()
            assert events.disconnected.wait(15)
            queued = nc.request_async("svc.silent", b"queued", timeout=60)
            outcome: list[BaseException] = []

            def ask() -> None:
                try:
                    nc.request("svc.silent", b"queued sync", timeout=60)
                except BaseException as exc:  # noqa: BLE001 - checked below
                    outcome.append(exc)

            th = threading.Thread(target=ask)
            th.start()
            deadline_wait(lambda: nc.stats()["out_msgs"] >= 3)  # both queued in the reconnect buffer
            nc.close()
            th.join(10)
            assert not th.is_alive()
            for error in (before.exception(timeout=10), queued.exception(timeout=10), outcome[0]):
                assert error is not None
            assert_failed(
                before.exception(), jsclient.ConnectionClosedError, RequestOutcome.UNKNOWN, RequestFailure.CLOSED
            )
            queued_error = queued.exception()
            assert queued_error is not None
            assert_failed(
                queued_error, jsclient.ConnectionClosedError, RequestOutcome.NOT_DELIVERED, RequestFailure.CLOSED
            )
            assert_failed(
                outcome[0], jsclient.ConnectionClosedError, RequestOutcome.NOT_DELIVERED, RequestFailure.CLOSED
            )
        finally:
            nc.close()


def test_a_request_queued_while_reconnecting_in_vain_was_not_delivered(error_log: ErrorLog) -> None:
    events = Lifecycle()
    queued = threading.Event()

    def selector(pool: list[str], lost: str | None) -> str:
        queued.wait(15)  # the reconnect rounds start once the request is queued
        return pool[0]

    with NatsServer(jetstream=False) as server:
        nc = jsclient.connect(
            server.url, reconnect_time_wait=0.05, max_reconnect_attempts=2, error_cb=error_log,
            server_selector=selector, **events.kwargs()
        )
        try:
            nc.flush()
            server.kill()
            assert events.disconnected.wait(15)
            fut = nc.request_async("svc.silent", b"queued", timeout=60)
            queued.set()
            assert events.closed.wait(30)  # the reconnect rounds ran out
            error = fut.exception(timeout=10)
            assert error is not None
            assert_failed(
                error, jsclient.ConnectionClosedError, RequestOutcome.NOT_DELIVERED, RequestFailure.CONNECTION_LOST
            )
        finally:
            nc.close()


def test_a_request_that_does_not_fit_the_reconnect_buffer() -> None:
    events = Lifecycle()
    with NatsServer(jetstream=False) as server:
        nc = jsclient.connect(
            server.url, reconnect_buf_size=1024, reconnect_time_wait=0.05, max_reconnect_attempts=-1, **events.kwargs()
        )
        try:
            nc.flush()
            server.kill()
            assert events.disconnected.wait(15)
            with pytest.raises(jsclient.ReconnectBufferFullError) as info:
                nc.request("svc.silent", b"x" * 4096, timeout=5)
            assert_failed(
                info.value, jsclient.ReconnectBufferFullError, RequestOutcome.NOT_DELIVERED, RequestFailure.BUFFER_FULL
            )
            with pytest.raises(jsclient.ReconnectBufferFullError) as info:
                nc.request_async("svc.silent", b"x" * 4096, timeout=5)
            assert info.value.outcome is RequestOutcome.NOT_DELIVERED
        finally:
            nc.close()


# -- refused before sending ---------------------------------------------------------------------------------------


def test_requests_the_client_refuses_were_not_delivered(server: NatsServer) -> None:
    with jsclient.connect(server.url) as nc:
        nc.flush()
        sent = nc.stats()["out_msgs"]
        for call, kind in (
            (lambda: nc.request("bad subject", b"x"), jsclient.BadSubjectError),
            (lambda: nc.request("svc.x", "text"), jsclient.BadPayloadError),
            (lambda: nc.request("svc.x", b"x" * (nc.max_payload + 1)), jsclient.MaxPayloadError),
            (lambda: nc.request_async("svc.x.>", b"x"), jsclient.BadSubjectError),
        ):
            with pytest.raises(kind) as info:
                call()
            assert_failed(info.value, kind, RequestOutcome.NOT_DELIVERED, RequestFailure.INVALID_ARGUMENT)
        assert nc.stats()["out_msgs"] == sent


def test_the_outcome_is_typed_and_survives_pickling() -> None:
    error = jsclient.ConnectionClosedError(
        "closed", outcome=RequestOutcome.UNKNOWN, failure=RequestFailure.DRAINED
    )
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is jsclient.ConnectionClosedError
    assert copy.outcome is RequestOutcome.UNKNOWN and copy.failure is RequestFailure.DRAINED
    assert str(copy) == "closed"
    timeout = pickle.loads(pickle.dumps(jsclient.TimeoutError("late", failure=RequestFailure.CONNECTION_LOST)))
    assert timeout.outcome is RequestOutcome.UNKNOWN and timeout.failure is RequestFailure.CONNECTION_LOST
    # Class defaults: what each error means when nothing more is known.
    assert jsclient.ConnectionClosedError("x").outcome is RequestOutcome.NOT_DELIVERED
    assert jsclient.ConnectionLostError("x").failure is RequestFailure.CONNECTION_LOST
    assert jsclient.BatchInterruptedError("x").outcome is RequestOutcome.UNKNOWN
    assert jsclient.ProtocolError("x").outcome is None  # no request ends in it
    assert jsclient.WrongLastSequenceError(400, 10071, "x").outcome is RequestOutcome.REFUSED
    assert jsclient.errors.api_error(409, 10158, "in process").outcome is RequestOutcome.UNKNOWN
    assert {m.name for m in RequestOutcome} == {"UNKNOWN", "NOT_DELIVERED", "REFUSED"}


def deadline_wait(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    done = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if predicate():
            return
        done.wait(0.01)
    raise AssertionError("condition not reached within the deadline")
