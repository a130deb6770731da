"""Status classification (ADR-15 automatic status management), without a server."""

from __future__ import annotations

import pytest

from jsclient import errors
from jsclient.jetstream.status import Kind, Request, classify, reply_error
from jsclient.protocol import MsgEvent


def status_msg(line: bytes, headers: bytes = b"", reply: str | None = None, data: bytes = b"") -> MsgEvent:
    return MsgEvent("_INBOX.x.1", 1, reply, b"NATS/1.0 " + line + b"\r\n" + headers + b"\r\n", data)


def test_plain_message() -> None:
    assert classify(MsgEvent("orders.new", 1, "$JS.ACK.S.C.1.1.1.1.0", None, b"x")).kind is Kind.MESSAGE
    plain_headers = MsgEvent("orders.new", 1, None, b"NATS/1.0\r\nK: v\r\n\r\n", b"x")
    assert classify(plain_headers).kind is Kind.MESSAGE


def test_idle_heartbeat_with_sequences() -> None:
    s = classify(status_msg(b"100 Idle Heartbeat", b"Nats-Last-Consumer: 7\r\nNats-Last-Stream: 42\r\n"))
    assert (s.kind, s.code, s.last_consumer, s.last_stream, s.flow_control_subject) == (
        Kind.HEARTBEAT, 100, 7, 42, None,
    )


def test_stalled_heartbeat_carries_the_flow_control_subject() -> None:
    s = classify(status_msg(b"100 Idle Heartbeat", b"Nats-Consumer-Stalled: $JS.FC.S.C.abc\r\n"))
    assert s.kind is Kind.HEARTBEAT and s.flow_control_subject == "$JS.FC.S.C.abc"


def test_flow_control_request_is_answered_on_its_reply() -> None:
    s = classify(status_msg(b"100 FlowControl Request", reply="$JS.FC.S.C.xyz"))
    assert s.kind is Kind.FLOW_CONTROL and s.flow_control_subject == "$JS.FC.S.C.xyz"


@pytest.mark.parametrize(
    "line, kind",
    [
        (b"404 No Messages", Kind.NO_MESSAGES),
        (b"408 Request Timeout", Kind.REQUEST_TIMEOUT),
        (b"204 EOB", Kind.END_OF_BATCH),
        (b"408 Interest Expired", Kind.REQUEST_TIMEOUT),
        (b"409 Message Size Exceeds MaxBytes", Kind.MAX_BYTES),
        (b"409 Batch Completed", Kind.BATCH_COMPLETED),
        (b"423 Nats-Wrong-Pin-Id", Kind.WRONG_PIN),
        (b"409 Leadership Change", Kind.REQUEST_LOST),
        (b"409 Server Shutdown", Kind.REQUEST_LOST),
        (b"409 Exceeded MaxWaiting", Kind.BUSY),
        (b"503", Kind.BUSY),
        (b"409 Consumer Deleted", Kind.CONSUMER_DELETED),
        (b"409 Consumer is push based", Kind.ERROR),
        (b"409 Exceeded MaxRequestBatch of 10", Kind.ERROR),
        (b"400 Bad Request", Kind.ERROR),
        (b"499 Something New", Kind.ERROR),
    ],
)
def test_pull_and_error_statuses(line: bytes, kind: Kind) -> None:
    s = classify(status_msg(line, b"Nats-Pending-Messages: 3\r\nNats-Pending-Bytes: 120\r\n"))
    assert s.kind is kind
    assert (s.pending_msgs, s.pending_bytes) == (3, 120)


@pytest.mark.parametrize(
    "line, error",
    [
        (b"409 Consumer Deleted", errors.ConsumerDeletedError),
        (b"409 Consumer is push based", errors.ConsumerIsPushBasedError),
        (b"409 Exceeded MaxWaiting", errors.MaxWaitingExceededError),
        (b"409 Exceeded MaxRequestBatch of 10", errors.MaxRequestBatchExceededError),
        (b"409 Exceeded MaxRequestExpires of 1s", errors.MaxRequestExpiresExceededError),
        (b"409 Exceeded MaxRequestMaxBytes of 100", errors.MaxBytesExceededError),
        (b"409 Leadership Change", errors.LeadershipChangeError),
        (b"409 Server Shutdown", errors.ServerShutdownError),
        (b"503", errors.NoRespondersStatusError),
    ],
)
def test_error_statuses_map_to_specific_errors(line: bytes, error: type) -> None:
    exc = reply_error(classify(status_msg(line)), Request.CONSUME, "C")
    assert type(exc) is error and isinstance(exc, errors.JetStreamStatusError)


def test_unknown_status_keeps_code_and_description() -> None:
    exc = reply_error(classify(status_msg(b"499 Something New")), Request.CONSUME, "C")
    assert type(exc) is errors.JetStreamStatusError
    assert (exc.code, exc.description) == (499, "Something New")


@pytest.mark.parametrize(
    ("request_kind", "line", "error"),
    [
        (Request.DIRECT_GET, b"404 Message Not Found", errors.MessageNotFoundError),
        (Request.DIRECT_GET, b"408 Bad Request", errors.BadRequestError),
        (Request.DIRECT_GET, b"413 Too Many Subjects", errors.TooManySubjectsError),
        (Request.DIRECT_GET, b"503", errors.NoRespondersError),  # explained by direct.no_direct with a JetStream
        (Request.DIRECT_GET, b"499 Something New", errors.JetStreamAPIError),
        (Request.PUBLISH, b"503", errors.NoStreamResponseError),
        (Request.PUBLISH, b"499 Something New", errors.JetStreamAPIError),
        (Request.CONSUME, b"503", errors.NoRespondersStatusError),
    ],
)
def test_one_status_means_what_its_request_makes_it(request_kind: Request, line: bytes, error: type) -> None:
    """The one status → error mapping: the same code is another error to a direct get, a publish, a consumer."""
    exc = reply_error(classify(status_msg(line)), request_kind, "S")
    assert type(exc) is error
    assert "S" in str(exc) or request_kind is Request.CONSUME or type(exc) is errors.MessageNotFoundError
