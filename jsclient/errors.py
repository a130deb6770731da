"""The one exception tree of jsclient.

Every error the library raises derives from :class:`Error`.  Errors that mean
"timed out" also derive from the built-in :class:`TimeoutError`, and errors
about bad arguments also derive from :class:`ValueError` or :class:`TypeError`,
so callers can catch them the way they already catch standard errors.

Every error a request can end in says how far the request got
(``outcome``, a :class:`RequestOutcome`) and why it ended (``failure``, a
:class:`RequestFailure`), so a caller can tell a request that is safe to
send again (NOT_DELIVERED) from one the responder may have acted on
(UNKNOWN).  Each class has a default; where one class covers both cases
(a connection closed before or after the request left), the raising code
sets the instance's own.

No threads or locks here: these are plain value objects.
"""

from __future__ import annotations

import builtins
import enum
from typing import Any


class RequestOutcome(enum.Enum):
    """How far a failed request got: whether the responder may have acted on it."""

    #: It may have been processed; it left (or may still leave) for the server, and no answer came back.
    UNKNOWN = "unknown"
    #: Definitely not processed; refused before sending, or the server found no responder for it.
    NOT_DELIVERED = "not_delivered"
    #: Definitely not applied; the responder answered with an error (a JetStream API error), or a read found
    #: nothing (a key, bucket or object that does not exist).
    REFUSED = "refused"


class RequestFailure(enum.Enum):
    """Why a request ended without a reply."""

    #: No reply within the timeout.
    TIMED_OUT = "timed_out"
    #: The server answered that nobody is subscribed (status 503).
    NO_RESPONDERS = "no_responders"
    #: The link broke; the request waited through a reconnect in vain, or the connection closed after it broke.
    CONNECTION_LOST = "connection_lost"
    #: ``drain()`` ended the connection (or was under way and took no new messages).
    DRAINED = "drained"
    #: ``close()`` ended the connection, or it was closed already.
    CLOSED = "closed"
    #: While reconnecting, the request did not fit in the reconnect buffer.
    BUFFER_FULL = "buffer_full"
    #: A subject, payload or header the client refuses; nothing was sent.
    INVALID_ARGUMENT = "invalid_argument"


class Error(Exception):
    """Base of every jsclient error.

    ``outcome`` and ``failure`` tell how a request that ended in this error
    went (see :class:`RequestOutcome`, :class:`RequestFailure`); they are
    None on errors no request ends in.  Passed as keywords, they replace the
    class's defaults for this instance.
    """

    outcome: RequestOutcome | None = None
    failure: RequestFailure | None = None

    def __init__(
        self, *args: object, outcome: RequestOutcome | None = None, failure: RequestFailure | None = None
    ) -> None:
        super().__init__(*args)
        if outcome is not None:
            self.outcome = outcome
        if failure is not None:
            self.failure = failure


class TimeoutError(Error, builtins.TimeoutError):
    """An operation did not complete within its timeout."""

    outcome = RequestOutcome.UNKNOWN
    failure = RequestFailure.TIMED_OUT


class InvalidArgumentError(Error, ValueError):
    """A caller passed a value the library refuses before sending anything."""

    outcome = RequestOutcome.NOT_DELIVERED
    failure = RequestFailure.INVALID_ARGUMENT


class UsageError(InvalidArgumentError):
    """A mistake in the ``jsclient`` command line itself (the command prints its usage)."""


class ServerNotFoundError(Error):
    """No nats-server binary could be found (:mod:`jsclient.server`)."""


class BadSubjectError(InvalidArgumentError):
    """A subject is empty, contains whitespace or empty tokens, or misuses wildcards."""


class BadPayloadError(Error, TypeError):
    """A payload is not bytes-like (for example a str)."""

    outcome = RequestOutcome.NOT_DELIVERED
    failure = RequestFailure.INVALID_ARGUMENT


class BadHeaderError(InvalidArgumentError):
    """A header name or value cannot be encoded in a NATS/1.0 header block."""


class MaxPayloadError(InvalidArgumentError):
    """A message is larger than the server's max_payload."""


class ConnectionClosedError(Error):
    """The connection is closed (or draining) and cannot be used for this.

    By default the request was refused before sending (NOT_DELIVERED); one
    that was already out when the connection ended says UNKNOWN, and
    ``failure`` says what ended it: CLOSED, DRAINED or CONNECTION_LOST.
    """

    outcome = RequestOutcome.NOT_DELIVERED
    failure = RequestFailure.CLOSED


class ForkedConnectionError(ConnectionClosedError):
    """The connection was made in the parent process; a forked child cannot use its socket."""


class ConnectionLostError(Error):
    """The connection broke before the server confirmed the operation (it is reconnecting)."""

    outcome = RequestOutcome.UNKNOWN
    failure = RequestFailure.CONNECTION_LOST


class ReconnectBufferFullError(Error):
    """While reconnecting, publishes are kept up to ``reconnect_buf_size`` bytes; this one did not fit."""

    outcome = RequestOutcome.NOT_DELIVERED
    failure = RequestFailure.BUFFER_FULL


class SubscriptionClosedError(Error):
    """The subscription was unsubscribed, drained or reached max_msgs, and is empty."""


class NoServersError(Error):
    """No server in the pool could be reached."""


class ServerSelectorError(Error):
    """The ``server_selector`` callback raised (its exception is the ``__cause__``) or returned a URL
    not in the pool; reported to the error callback, and that reconnect round keeps the default order."""


class TLSError(Error):
    """TLS could not be set up: certificate verification (e.g. hostname mismatch) or the handshake failed."""


class NoRespondersError(Error):
    """A request reached no subscriber (the server answered with status 503)."""

    outcome = RequestOutcome.NOT_DELIVERED
    failure = RequestFailure.NO_RESPONDERS


class ProtocolError(Error):
    """The peer sent bytes that are not valid NATS protocol."""


class ServerError(Error):
    """The server reported an error with ``-ERR``; ``text`` is its message."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class AuthorizationError(ServerError):
    """The server rejected the credentials or a permission was violated."""


class StaleConnectionError(ServerError):
    """The server closed the connection as stale (it missed our PONGs)."""


class MaxPayloadServerError(ServerError):
    """The server refused a message as larger than its max_payload."""


class SlowConsumerError(Error):
    """A subscription's pending limits were exceeded and messages were dropped.

    Reported through the connection's error callback, once per episode of
    drops.  A subscription without a callback also raises it from
    ``next_msg`` (and iteration), once per episode, where the drops are: after
    the messages kept before them; the subscription goes on.  ``dropped``
    counts the messages dropped for this subscription so far; ``missed``, in
    the one ``next_msg`` raised, those dropped since it last raised one (None
    in the error callback's).
    """

    def __init__(self, subject: str, sid: int, dropped: int, *, missed: int | None = None) -> None:
        here = "" if missed is None else f"{missed} message(s) dropped here, "
        super().__init__(
            f"slow consumer on subject {subject!r} (sid {sid}): "
            f"{here}{dropped} message(s) dropped so far"
        )
        self.subject = subject
        self.sid = sid
        self.dropped = dropped
        self.missed = missed


def server_error(text: str) -> ServerError:
    """Map the text of a ``-ERR`` line to the most specific error class."""
    lowered = text.lower()
    if "authorization" in lowered or "permissions violation" in lowered or "authentication" in lowered:
        return AuthorizationError(text)
    if "stale connection" in lowered:
        return StaleConnectionError(text)
    if "maximum payload" in lowered:
        return MaxPayloadServerError(text)
    return ServerError(text)


class BadAckSubjectError(InvalidArgumentError):
    """A reply subject is not a JetStream ack subject ($JS.ACK...) of a known form."""


# -- JetStream ---------------------------------------------------------------


class JetStreamError(Error):
    """Base of JetStream errors."""


class DataLossError(JetStreamError):
    """The stream no longer holds messages a Spark query still needs (its ``failOnDataLoss`` option)."""


class JetStreamAPIError(JetStreamError):
    """The JetStream API answered with an error.

    ``code`` is the HTTP-like status, ``err_code`` the server's specific code
    (see the server's errors.json), ``description`` its text.  ``retriable``
    tells retry policies whether trying again may succeed.  ``outcome``,
    given, replaces the class's (REFUSED) for this instance.
    """

    retriable = False
    outcome = RequestOutcome.REFUSED

    def __init__(
        self, code: int = 0, err_code: int = 0, description: str = "", *, outcome: RequestOutcome | None = None
    ) -> None:
        super().__init__(f"{description} (status {code}, err_code {err_code})", outcome=outcome)
        self.code = code
        self.err_code = err_code
        self.description = description


class JetStreamNotEnabledError(JetStreamAPIError):
    """JetStream is not enabled on the server or for this account."""


class JetStreamUnavailableError(JetStreamAPIError):
    """JetStream is temporarily unavailable (leader election, insufficient resources)."""

    retriable = True


class BadRequestError(JetStreamAPIError):
    """The server rejected the request as malformed."""


class StreamNotFoundError(JetStreamAPIError):
    """No such stream."""


class StreamNameInUseError(JetStreamAPIError):
    """A stream of that name exists with a different configuration."""


class StreamSubjectOverlapError(JetStreamAPIError):
    """The subjects overlap with an existing stream's."""


class StreamMismatchError(JetStreamAPIError):
    """The expected stream does not match the one that stored the message."""


class WrongLastSequenceError(JetStreamAPIError):
    """A publish expectation on the last (subject) sequence failed.

    ``outcome`` is REFUSED from a server outside any cluster, and UNKNOWN
    from one in a cluster: there, during a leader change, the deposed leader
    can refuse a publish that the new leader stores (docs/guarantees.rst).
    """


class MsgIdInProcessError(JetStreamAPIError):
    """A publish with this ``msg_id`` is still being processed (an earlier try is in flight).

    That earlier try may yet be stored, so the outcome is UNKNOWN: send
    again later with the same ``msg_id``, and the dedupe window settles it.
    """

    retriable = True
    outcome = RequestOutcome.UNKNOWN


class WrongLastMsgIdError(JetStreamAPIError):
    """A publish expectation on the last message id failed."""


class MessageNotFoundError(JetStreamAPIError):
    """No message matched (get_msg, direct get)."""


class ConsumerNotFoundError(JetStreamAPIError):
    """No such consumer."""


class ConsumerNameInUseError(JetStreamAPIError):
    """A consumer of that name is already in use."""


class ConsumerAlreadyExistsError(JetStreamAPIError):
    """Create-only: the consumer exists with a different configuration."""


class ConsumerDoesNotExistError(JetStreamAPIError):
    """Update-only: the consumer does not exist."""


class MaximumStreamsError(JetStreamAPIError):
    """The account's stream limit is reached."""


class MaximumConsumersError(JetStreamAPIError):
    """The stream's or account's consumer limit is reached."""


class TooManySubjectsError(JetStreamAPIError):
    """413: a multi-subject direct get matched more subjects than the server allows."""


class DirectGetDisabledError(JetStreamAPIError):
    """The stream's allow_direct is off, so nothing answers a direct get."""


class BatchPublishError(JetStreamAPIError):
    """An atomic batch (ADR-50) was refused or abandoned: none of its messages were stored."""


class BatchNotEnabledError(BatchPublishError):
    """The stream does not take atomic batches (create it with allow_atomic=True)."""


class BatchIncompleteError(BatchPublishError):
    """The server abandoned the batch (a message was lost, or it sat idle over 10 s); nothing was stored.

    Retriable: the same messages may be sent again as a new batch.
    """

    retriable = True


class BatchInterruptedError(ConnectionLostError, TimeoutError):
    """The connection broke during an atomic batch and no answer to its commit came within the timeout.

    The server abandons a batch it did not receive whole, so nothing of it
    is stored, unless its commit got through before the break: then all of
    it is.  Read the stream before sending it again (jsclient sends no part of it twice).
    """


class BatchTooLargeError(BatchPublishError):
    """The batch has more messages than the server allows (1,000 unless the server is configured otherwise)."""


class BatchTooManyInflightError(BatchPublishError):
    """The stream (50) or server (1,000) has too many batches open; retriable."""

    retriable = True


class BatchDuplicateMsgIdError(BatchPublishError):
    """A message of the batch has a Nats-Msg-Id the stream already holds; the whole batch was refused."""


class FeatureNotSupportedError(JetStreamAPIError):
    """The server is too old for a JetStream feature (ADR-44 API levels).

    Raised before sending when the connected server's API level is below
    the feature's: then its ``outcome`` is NOT_DELIVERED (nothing was sent).
    Also mapped from the server's own 10185 answer (a request carrying
    ``Nats-Required-Api-Level`` reached an older JetStream server), or raised
    when an older server misread a request: then REFUSED (a server
    answered, and applied nothing).
    """

    def __init__(
        self, code: int = 412, err_code: int = 10185, description: str = "", *, outcome: RequestOutcome | None = None
    ) -> None:
        super().__init__(code, err_code, description or "JetStream minimum api level required", outcome=outcome)


class MessageTTLError(JetStreamAPIError):
    """A per-message TTL the stream refused: TTLs are off on it (10166) or the value is invalid (10165)."""


class CounterError(JetStreamAPIError):
    """A counter increment the stream refused (counters off, increment missing or invalid, counter broken)."""


class ScheduleError(JetStreamAPIError):
    """A message schedule the stream refused (schedules off, or a pattern, target or header it does not allow)."""


class FastBatchError(BatchPublishError):
    """A fast-ingest batch (``gaps="fail"``) ended before all its messages were stored.

    ``ack`` is the batch's final ack when the server sent one (the first
    ``ack.count`` messages are stored, in order), ``sent`` how many messages
    went out, ``gaps`` the (first lost, next received) batch sequences and
    ``errors`` the (batch sequence, error) the server reported.
    """

    def __init__(
        self,
        description: str,
        *,
        ack: Any = None,
        sent: int = 0,
        gaps: list[tuple[int, int]] | None = None,
        errors: list[tuple[int, JetStreamAPIError]] | None = None,
    ) -> None:
        first = errors[0][1] if errors else None
        super().__init__(first.code if first else 0, first.err_code if first else 0, description)
        self.ack = ack
        self.sent = sent
        self.gaps = gaps or []
        self.errors = errors or []


class NoStreamResponseError(JetStreamError):
    """A JetStream publish reached no stream (no stream listens on the subject)."""

    outcome = RequestOutcome.NOT_DELIVERED
    failure = RequestFailure.NO_RESPONDERS


API_ERRORS: dict[int, type[JetStreamAPIError]] = {
    10003: BadRequestError,
    10008: JetStreamUnavailableError,
    10023: JetStreamUnavailableError,
    10039: JetStreamNotEnabledError,
    10076: JetStreamNotEnabledError,
    10059: StreamNotFoundError,
    10058: StreamNameInUseError,
    10065: StreamSubjectOverlapError,
    10060: StreamMismatchError,
    10071: WrongLastSequenceError,
    10164: WrongLastSequenceError,
    10070: WrongLastMsgIdError,
    10158: MsgIdInProcessError,
    10037: MessageNotFoundError,
    10014: ConsumerNotFoundError,
    10013: ConsumerNameInUseError,
    10148: ConsumerAlreadyExistsError,
    10149: ConsumerDoesNotExistError,
    10027: MaximumStreamsError,
    10026: MaximumConsumersError,
    10174: BatchNotEnabledError,
    10175: BatchPublishError,  # sequence missing
    10176: BatchIncompleteError,
    10177: BatchPublishError,  # unsupported header (Nats-Expected-Last-Msg-Id)
    10179: BatchPublishError,  # id over 64 characters
    10199: BatchTooLargeError,
    10200: BatchPublishError,  # commit header neither 1 nor eob
    10201: BatchDuplicateMsgIdError,
    10210: BatchTooManyInflightError,
    10205: BatchNotEnabledError,  # fast-ingest batches off on the stream
    10206: BatchPublishError,  # fast-ingest reply pattern invalid
    10207: BatchPublishError,  # fast-ingest id invalid
    10208: BatchPublishError,  # fast-ingest id unknown (abandoned after 10 s of silence)
    10211: BatchTooManyInflightError,
    10185: FeatureNotSupportedError,
    10165: MessageTTLError,
    10166: MessageTTLError,
    10168: CounterError,
    10169: CounterError,
    10170: CounterError,
    10171: CounterError,
    10172: CounterError,
    **dict.fromkeys((10188, 10189, 10190, 10191, 10192, 10203, 10212, 10223), ScheduleError),
}


def api_error(code: int, err_code: int, description: str) -> JetStreamAPIError:
    """The most specific error class for a JetStream API error (unknown codes keep the base)."""
    cls = API_ERRORS.get(err_code)
    if cls is None:
        cls = JetStreamUnavailableError if code == 503 else JetStreamAPIError
    return cls(code, err_code, description)


# -- JetStream statuses and subscriptions --------------------------------------


class JetStreamStatusError(JetStreamError):
    """The server sent an error status to a subscription (409, 503, or one we do not know).

    Its ``outcome`` is REFUSED: the server ended the request (a pull) with
    this status; what it delivered before is delivered.
    """

    outcome = RequestOutcome.REFUSED

    def __init__(self, code: int, description: str) -> None:
        super().__init__(f"JetStream status {code}: {description}")
        self.code = code
        self.description = description


class ConsumerDeletedError(JetStreamStatusError):
    """409 Consumer Deleted: the consumer went away under the subscription."""


class ConsumerIsPushBasedError(JetStreamStatusError):
    """409 Consumer is push based: a pull request reached a push consumer."""


class MaxWaitingExceededError(JetStreamStatusError):
    """409 Exceeded MaxWaiting: too many pull requests are waiting on this consumer."""


class MaxRequestBatchExceededError(JetStreamStatusError):
    """409 Exceeded MaxRequestBatch: the pull batch is over the consumer's max_batch."""


class MaxRequestExpiresExceededError(JetStreamStatusError):
    """409 Exceeded MaxRequestExpires: the pull expiry is over the consumer's max_expires."""


class MaxBytesExceededError(JetStreamStatusError):
    """409 Exceeded MaxRequestMaxBytes: the pull max_bytes is over the consumer's max_bytes."""


class LeadershipChangeError(JetStreamStatusError):
    """409 Leadership Change: the consumer moved; pull again."""


class ServerShutdownError(JetStreamStatusError):
    """409 Server Shutdown."""


class NoRespondersStatusError(JetStreamStatusError):
    """503 delivered to a subscription: nothing answered (for example a flow-control reply)."""

    outcome = RequestOutcome.NOT_DELIVERED


class HeartbeatsMissedError(JetStreamError):
    """No message or heartbeat arrived within the heartbeat alarm time."""


class MessageGapError(JetStreamError):
    """The consumer sequence skipped: ``expected`` was next, ``received`` arrived."""

    def __init__(self, expected: int, received: int, consumer: str = "") -> None:
        where = f" on consumer {consumer!r}" if consumer else ""
        super().__init__(f"message gap{where}: expected consumer sequence {expected}, received {received}")
        self.expected = expected
        self.received = received
        self.consumer = consumer


class JetStreamSubscribeError(JetStreamError, ValueError):
    """A subscription cannot bind to the consumer as asked (the text says which check failed).

    Raised before subscribing or creating anything, so ``outcome`` is NOT_DELIVERED.
    """

    outcome = RequestOutcome.NOT_DELIVERED


# -- key-value -----------------------------------------------------------------


class KeyValueError(JetStreamError):
    """Base of key-value errors."""


class BucketNotFoundError(KeyValueError):
    """No bucket of that name.

    The server answered that the bucket's stream does not exist, so ``outcome`` is REFUSED: a definite
    answer, and nothing was changed.
    """

    outcome = RequestOutcome.REFUSED


class KeyNotFoundError(KeyValueError):
    """The key has no value (never set, or deleted/purged).

    The read was answered, with nothing (or a delete marker), so ``outcome`` is REFUSED: a definite
    answer, and nothing was changed.
    """

    outcome = RequestOutcome.REFUSED


class KeyDeletedError(KeyNotFoundError):
    """The key's last entry is a delete or purge marker."""

    def __init__(self, message: str, entry: Any) -> None:
        super().__init__(message)
        #: The delete or purge marker (a KeyValueEntry).
        self.entry = entry


class KeyExistsError(KeyValueError, WrongLastSequenceError):
    """create(): the key already has a value.

    The stream refused the write (it expected the key to have no revision), so this is also a
    :class:`WrongLastSequenceError`, a :class:`JetStreamAPIError`: ``code``, ``err_code`` and
    ``description`` are the server's refusal, ``outcome`` is the refusal's (REFUSED, or UNKNOWN in a
    cluster) and ``__cause__`` is the refusal itself.  ``str()`` is ``message``.
    """

    def __init__(
        self, message: str, *, code: int = 400, err_code: int = 10071, description: str = "",
        outcome: RequestOutcome | None = None,
    ) -> None:
        super().__init__(code, err_code, description or message, outcome=outcome)
        self.args = (message,)


class KeyWrongRevisionError(KeyValueError, WrongLastSequenceError):
    """update() (or delete/purge with ``last``): the key's revision is not the one given.

    The stream refused the write, so this is also a :class:`WrongLastSequenceError`, a
    :class:`JetStreamAPIError`: ``code``, ``err_code`` and ``description`` are the server's refusal,
    ``outcome`` is the refusal's (REFUSED, or UNKNOWN in a cluster) and ``__cause__`` is the refusal
    itself.  ``str()`` is ``message``.
    """

    def __init__(
        self, message: str, *, code: int = 400, err_code: int = 10071, description: str = "",
        outcome: RequestOutcome | None = None,
    ) -> None:
        super().__init__(code, err_code, description or message, outcome=outcome)
        self.args = (message,)


# -- object store ----------------------------------------------------------------


class ObjectStoreError(JetStreamError):
    """Base of object store errors."""


class ObjectStoreNotFoundError(ObjectStoreError):
    """No object store (bucket) of that name.

    The server answered that the bucket's stream does not exist, so ``outcome`` is REFUSED: a definite
    answer, and nothing was changed.
    """

    outcome = RequestOutcome.REFUSED


class ObjectNotFoundError(ObjectStoreError):
    """No such object (never stored, or deleted), or its chunks went while it was being read.

    The read was answered, with nothing, so ``outcome`` is REFUSED: a definite answer, and nothing was
    changed.
    """

    outcome = RequestOutcome.REFUSED


class ObjectExistsError(ObjectStoreError):
    """A rename or a link would replace an object that exists.

    Found by reading before writing: the write was not sent, so ``outcome`` is NOT_DELIVERED.
    """

    outcome = RequestOutcome.NOT_DELIVERED


class DigestMismatchError(ObjectStoreError):
    """The bytes read do not match the object's size or SHA-256 digest: they are not returned as good."""
