"""Services (ADR-32): endpoints answering requests on worker threads, with discovery and stats.

Each endpoint is a subscription of its own, with a subscription's bounded
queue: ``pending_msgs_limit`` / ``pending_bytes_limit`` (per endpoint, or the
service's for all its endpoints; the connection's defaults otherwise), so a
slow handler cannot make requests pile up without limit.

Threads:

* the connection's **reader thread** queues each request on its endpoint's
  subscription; when that queue is full it drops the request (its caller
  times out), counts it (``Endpoint.dropped``) and reports a
  :class:`~jsclient.SlowConsumerError` to the connection's error callback,
  once per episode, as for any subscription.  It never waits and never runs
  service code;
* each endpoint's **dispatcher thread** (its subscription's) takes requests
  in order and waits for a free worker (``_slots``, one per worker) before it
  hands the next one over, so requests wait in the bounded queue, not in the
  pool's (which never holds more than the free workers take at once).  It
  holds at most one request while it waits;
* the pool's ``workers`` **worker threads** run the handlers, shared by all
  the service's endpoints;
* the discovery subscriptions' threads answer ``$SRV.PING|INFO|STATS`` (for
  all services, by name, and by name and id).

Locks: ``_lock`` guards the endpoint list and every endpoint's counters;
nothing is called while it is held.  ``_slots`` counts the free workers.

A handler that raises answers its caller with a service error (500 and the
exception's text), never with silence, and is counted in the stats; when
there is nobody to answer (a request without a reply subject) or the answer
cannot go out, the error is counted all the same and reported to the
connection's error callback.  A dropped
request is counted as an error in the stats too, one each in ``num_errors``
with the slow consumer's text as ``last_error`` (nats.go counts them there
as well), so monitoring sees requests lost; ``num_requests`` and the
processing times count handled requests only.
``stop()`` drains: no new request is taken, the ones taken are finished and
answered, then discovery ends.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from .checks import whole
from .deprecation import renamed_keywords
from .errors import ConnectionClosedError, Error, InvalidArgumentError, SlowConsumerError, TimeoutError
from .headers import Headers, HeadersInput
from .payload import as_bytes
from .protocol import check_queue_name, check_subscribe_subject
from .subscription import Relay
from .timeouts import DEFAULT, Timeout, answer_limit

if TYPE_CHECKING:
    from .connection import Connection
    from .message import Msg
    from .subscription import Subscription

#: The headers of a service error (ADR-32).
ERROR_HEADER = "Nats-Service-Error"
ERROR_CODE_HEADER = "Nats-Service-Error-Code"
DEFAULT_QUEUE_GROUP = "q"
PING_TYPE = "io.nats.micro.v1.ping_response"
INFO_TYPE = "io.nats.micro.v1.info_response"
STATS_TYPE = "io.nats.micro.v1.stats_response"
VERBS = ("PING", "INFO", "STATS")

_NAME = re.compile(r"[A-Za-z0-9_-]+")
# semver.org's suggested expression.
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)

Handler = Callable[["Request"], None]


class ErrorAnswer(NamedTuple):
    """The service error a handler answered with (ADR-32), as the endpoint's stats report it."""

    code: str
    description: str


class Request:
    """One request to an endpoint, given to its handler on a worker thread.

    ``error_answer`` is internal, not part of the public API: the service
    reads it after the handler returned, to count the error in its stats.

    Every call may raise:
        BadPayloadError: A payload that is not bytes-like.
        ConnectionClosedError: The connection is closed, or draining and no longer takes messages.
        ReconnectBufferFullError: While reconnecting, the answer does not fit in ``reconnect_buf_size``.
        ForkedConnectionError: Called in a process forked from the one that connected (unless
            ``reconnect_after_fork``).
    """

    __slots__ = ("_msg", "error_answer")

    def __init__(self, msg: Msg) -> None:
        """Made by the service for each request; not called directly.

        Args:
            msg: The request as received.

        Raises:
            : Nothing.
        """
        self._msg = msg
        self.error_answer: ErrorAnswer | None = None

    @property
    def subject(self) -> str:
        """The subject the request was sent to."""
        return self._msg.subject

    @property
    def data(self) -> bytes:
        """The request's body."""
        return self._msg.data

    @property
    def headers(self) -> Headers:
        """The request's headers (empty when it had none)."""
        return self._msg.headers

    @property
    def reply(self) -> str | None:
        """The subject the answer goes to, or None if the caller expects none."""
        return self._msg.reply

    @renamed_keywords(data="payload")
    def respond(self, payload: bytes = b"", headers: HeadersInput | None = None) -> None:
        """Answer the request.

        Args:
            payload: The answer's body (bytes-like).
            headers: A mapping of names to a value or a list of values, or a :class:`jsclient.Headers`.

        Raises:
            InvalidArgumentError: The request has no reply subject, a bad header (BadHeaderError), or an
                answer over the server's max_payload (MaxPayloadError); nothing is sent.
        """
        self._msg.respond(payload, headers=headers)

    @renamed_keywords(data="payload")
    def respond_error(
        self, code: int, description: str, payload: bytes = b"", headers: HeadersInput | None = None
    ) -> None:
        """Answer with a service error: ``Nats-Service-Error-Code`` and ``Nats-Service-Error`` (ADR-32).

        The service counts it as an error in its stats.

        Args:
            code: The error's code (an int; HTTP-like, e.g. 400 or 500).
            description: The error's text, one line.
            payload: A body to send with it (bytes-like).
            headers: More headers to send with it, as for :meth:`respond`.

        Raises:
            InvalidArgumentError: ``code`` is not an int, ``description`` is not one line of text, the request
                has no reply subject, a bad header (BadHeaderError), or an answer over the server's
                max_payload (MaxPayloadError); nothing is sent.
        """
        if isinstance(code, bool) or not isinstance(code, int):
            raise InvalidArgumentError(f"a service error code must be an int, not {code!r}")
        if not isinstance(description, str) or "\r" in description or "\n" in description:
            raise InvalidArgumentError(f"a service error description must be one line of text, not {description!r}")
        error = Headers(headers) if headers is not None else Headers()
        error[ERROR_CODE_HEADER] = str(code)
        error[ERROR_HEADER] = description
        self.error_answer = ErrorAnswer(str(code), description)
        self._msg.respond(as_bytes(payload), headers=error)


@dataclass
class _Stats:
    requests: int = 0
    errors: int = 0  # handler errors and dropped requests
    processing_ns: int = 0
    last_error: str = ""
    drops_seen: int = 0  # the subscription's ``dropped`` when last counted into ``errors``


@dataclass
class Endpoint:
    """An endpoint of a service (read-only for users: its stats come from ``Service.stats()``).

    Attributes:
        name: The endpoint's name.
        subject: The subject it listens on, the group's prefix included.
        queue_group: The queue group its instances share; ``""`` for none.
        metadata: What discovery reports for it.
        handler: The function that answers its requests.
        stats: Internal: its counters, read through ``Service.stats()``.
        sub: Internal: the subscription its requests arrive on (None until it is subscribed).
    """

    name: str
    subject: str
    queue_group: str
    metadata: dict[str, str]
    handler: Handler
    stats: _Stats = field(default_factory=_Stats)
    sub: Subscription | None = None

    # The endpoint's queue is its subscription's: these read its counts.
    @property
    def pending_msgs(self) -> int:
        """Requests queued for a worker, at most ``pending_msgs_limit`` (and one in the dispatcher's hand)."""
        return self.sub.pending_msgs if self.sub is not None else 0

    @property
    def pending_bytes(self) -> int:
        """Payload bytes queued for a worker (at most ``pending_bytes_limit``)."""
        return self.sub.pending_bytes if self.sub is not None else 0

    @property
    def dropped(self) -> int:
        """Requests dropped because the queue was full, since the endpoint started (``reset()`` keeps it)."""
        return self.sub.dropped if self.sub is not None else 0


def _check_name(what: str, name: Any) -> str:
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise InvalidArgumentError(f"{what} must be letters, digits, '-' and '_', not {name!r}")
    return name


def _check_metadata(metadata: Any) -> dict[str, str]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise InvalidArgumentError(f"metadata must map str to str, not {metadata!r}")
    return dict(metadata)


def _check_limit(name: str, value: Any) -> int | None:
    """A pending limit; None takes the default (the service's, else the connection's)."""
    return None if value is None else whole(name, value)


def _check_queue(queue_group: Any) -> str:
    """A queue group; "" subscribes without one."""
    if not isinstance(queue_group, str):
        raise InvalidArgumentError(f"queue_group must be a str ('' for none), not {queue_group!r}")
    if queue_group:
        check_queue_name(queue_group)
    return queue_group


class Group:
    """A subject prefix for endpoints (ADR-32 groups), with its own default queue group.

    Every call may raise:
        InvalidArgumentError: An argument its Args do not allow; raised before anything is sent.
        ConnectionClosedError: The connection is closed or draining.
        ForkedConnectionError: Called in a process forked from the one that connected (unless
            ``reconnect_after_fork``).
    """

    def __init__(self, service: Service, prefix: str, queue_group: str) -> None:
        """Made by :meth:`Service.add_group` (or :meth:`Group.add_group`), which checks the arguments.

        Args:
            service: The service its endpoints belong to.
            prefix: The subject prefix of its endpoints (``""`` for the service itself).
            queue_group: The default queue group of its endpoints (``""``: none).

        Raises:
            : Nothing.
        """
        self._service = service
        self.prefix = prefix
        self.queue_group = queue_group

    def add_endpoint(
        self,
        name: str,
        handler: Handler,
        *,
        subject: str | None = None,
        queue_group: str | None = None,
        metadata: Mapping[str, str] | None = None,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
    ) -> Endpoint:
        """An endpoint on ``<prefix>.<subject or name>``.

        Args:
            name: The endpoint's name (letters, digits, ``-`` and ``_``), as discovery reports it.
            handler: Called with each :class:`Request`, on one of the service's worker threads; an exception
                it raises answers the caller with a 500 service error.
            subject: The subject to listen on (wildcards allowed), below the group's prefix; left out, ``name``.
            queue_group: The queue group the endpoint's instances share (``""``: none, every instance gets
                every request); left out, the group's or service's.
            metadata: Names mapped to str values, reported by discovery.
            pending_msgs_limit: Requests that may wait for a worker; beyond it a request is dropped and
                reported as a slow consumer.  Left out, the service's, else the connection's.
            pending_bytes_limit: The same bound in payload bytes.

        Returns:
            The endpoint, subscribed: the server has its interest once ``nc.flush()`` returns, which a
            caller on another connection may need first.

        Raises:
            InvalidArgumentError: A bad name, subject (BadSubjectError), queue group, metadata or limit, a
                handler that is not callable, or a stopped service; nothing is subscribed.
        """
        _check_name("endpoint name", name)
        local = name if subject is None else subject
        full = f"{self.prefix}.{local}" if self.prefix else local
        queue = self.queue_group if queue_group is None else _check_queue(queue_group)
        # The service is the root group (no prefix): it adds the endpoint on the full subject.
        return self._service.add_endpoint(
            name, handler, subject=full, queue_group=queue, metadata=metadata,
            pending_msgs_limit=pending_msgs_limit, pending_bytes_limit=pending_bytes_limit,
        )

    def add_group(self, name: str, *, queue_group: str | None = None) -> Group:
        """A group below this one: ``<prefix>.<name>``.

        Args:
            name: The group's subject tokens below this one's (no ``>``).
            queue_group: The default queue group of its endpoints; left out, this group's.

        Returns:
            The group.

        Raises:
            InvalidArgumentError: A bad name (BadSubjectError) or queue group.
        """
        queue = self.queue_group if queue_group is None else _check_queue(queue_group)
        return Group(self._service, _group_prefix(self.prefix, name), queue)


def _group_prefix(parent: str, name: Any) -> str:
    if not isinstance(name, str) or not name or ">" in name.split("."):
        raise InvalidArgumentError(f"a group name must be a subject without '>', not {name!r}")
    prefix = f"{parent}.{name}" if parent else name
    check_subscribe_subject(prefix, "group")
    return prefix


class Service(Group):
    """One running service instance, and the root group of its endpoints.  Create it with :func:`add_service`.

    Every call may raise:
        InvalidArgumentError: An argument its Args do not allow; raised before anything is sent.
        ConnectionClosedError: The connection is closed or draining.
        ForkedConnectionError: Called in a process forked from the one that connected (unless
            ``reconnect_after_fork``).
    """

    def __init__(
        self,
        nc: Connection,
        *,
        name: str,
        version: str,
        description: str,
        metadata: dict[str, str],
        queue_group: str,
        workers: int,
        stats_handler: Callable[[Endpoint], Any] | None,
        pending_limits: tuple[int | None, int | None],
    ) -> None:
        """Made by :func:`add_service`, which checks the arguments; not called directly.

        Subscribes the discovery subjects (``$SRV.PING``, ``$SRV.INFO``, ``$SRV.STATS``) at once.

        Args:
            nc: The connection the service runs on.
            name: The service's name.
            version: Its semantic version.
            description: What it does, for discovery.
            metadata: What discovery reports for it.
            queue_group: The default queue group of its endpoints (``""``: none).
            workers: How many worker threads run the handlers.
            stats_handler: Called with an endpoint for the ``data`` of its stats, or None.
            pending_limits: The endpoints' default pending limits (messages, bytes); None for the connection's.
        """
        super().__init__(self, "", queue_group)
        self._nc = nc
        self.name = name
        self.version = version
        self.description = description
        self.metadata = metadata
        self.id = uuid.uuid4().hex
        self._stats_handler = stats_handler
        self._pending_limits = pending_limits  # the endpoints' defaults (msgs, bytes); None: the connection's
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"jsclient-svc-{name}")
        # A request is handed to the pool only when a worker is free for it: the rest wait, bounded,
        # in their endpoint's subscription.
        self._slots = threading.Semaphore(workers)
        self._workers = workers
        self._lock = threading.Lock()
        self._endpoints: list[Endpoint] = []  # guarded by _lock
        self._started = dt.datetime.now(dt.UTC)
        self._stopped = threading.Event()
        self._discovery: list[Subscription] = []
        for verb in VERBS:
            answer = self._answer(verb)
            for subject in (f"$SRV.{verb}", f"$SRV.{verb}.{name}", f"$SRV.{verb}.{name}.{self.id}"):
                self._discovery.append(nc.subscribe(subject, callback=answer))

    def __repr__(self) -> str:
        return f"<Service {self.name} {self.version} id={self.id}>"

    # -- endpoints (add_endpoint and add_group: a service is its own root group) ----------
    def add_endpoint(
        self,
        name: str,
        handler: Handler,
        *,
        subject: str | None = None,
        queue_group: str | None = None,
        metadata: Mapping[str, str] | None = None,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
    ) -> Endpoint:
        """An endpoint on ``<subject or name>`` (a group's endpoints come here with their full subject).

        ``pending_msgs_limit`` / ``pending_bytes_limit`` bound the requests
        waiting for a worker, as a subscription's pending limits do (the
        service's, else the connection's, by default); beyond them a request
        is dropped and reported as a slow consumer.

        Args:
            name: The endpoint's name (letters, digits, ``-`` and ``_``), as discovery reports it.
            handler: Called with each :class:`Request`, on one of the service's worker threads; an exception
                it raises answers the caller with a 500 service error.
            subject: The subject to listen on (wildcards allowed); left out, ``name``.
            queue_group: The queue group the endpoint's instances share (``""``: none, every instance gets
                every request); left out, the group's or service's.
            metadata: Names mapped to str values, reported by discovery.
            pending_msgs_limit: Requests that may wait for a worker; beyond it a request is dropped and
                reported as a slow consumer.  Left out, the service's, else the connection's.
            pending_bytes_limit: The same bound in payload bytes.

        Returns:
            The endpoint, subscribed: the server has its interest once ``nc.flush()`` returns, which a
            caller on another connection may need first.

        Raises:
            InvalidArgumentError: A bad name, subject (BadSubjectError), queue group, metadata or limit, a
                handler that is not callable, or a stopped service; nothing is subscribed.
        """
        _check_name("endpoint name", name)
        if subject is None:
            subject = name
        queue = self.queue_group if queue_group is None else _check_queue(queue_group)
        checked = _check_metadata(metadata)
        msgs_limit = _check_limit("pending_msgs_limit", pending_msgs_limit)
        bytes_limit = _check_limit("pending_bytes_limit", pending_bytes_limit)
        if not callable(handler):
            raise InvalidArgumentError(f"handler must be callable, not {handler!r}")
        check_subscribe_subject(subject, "endpoint subject")
        if self._stopped.is_set():
            raise InvalidArgumentError(f"service {self.name} is stopped")
        endpoint = Endpoint(name, subject, queue, checked, handler)
        default_msgs, default_bytes = self._pending_limits
        endpoint.sub = self._nc.subscribe(
            subject, queue or None,
            callback=Relay(
                self._hand_over(endpoint, handler),
                lambda hook: self._hand_over(endpoint, hook.handler(self, endpoint, handler)),
            ),
            pending_msgs_limit=default_msgs if msgs_limit is None else msgs_limit,
            pending_bytes_limit=default_bytes if bytes_limit is None else bytes_limit,
        )
        with self._lock:
            self._endpoints.append(endpoint)
        return endpoint

    def _hand_over(self, endpoint: Endpoint, handler: Handler) -> Callable[[Msg], None]:
        """The endpoint's subscription callback, which hands each request to a worker that runs ``handler``.

        A :class:`~jsclient.subscription.Relay`'s: in a round the dispatch seam observes, ``handler`` is what the
        seam wrapped the endpoint's handler in.
        """
        slots = self._slots

        def hand_over(msg: Msg) -> None:
            """The subscription's thread: wait for a free worker, so that requests wait in the bounded queue."""
            slots.acquire()
            try:
                self._pool.submit(self._handle, endpoint, handler, msg)
            except RuntimeError:  # the pool is shut: stop() gave up on this request (its drain ran out of time)
                slots.release()
                with self._lock:
                    endpoint.stats.errors += 1
                    endpoint.stats.last_error = "503:the service stopped before handling it"
            except BaseException:
                slots.release()
                raise

        return hand_over

    def _handle(self, endpoint: Endpoint, handler: Handler, msg: Msg) -> None:
        """A worker thread: the handler, timed; an exception answers the caller with a 500."""
        request = Request(msg)
        started = time.perf_counter_ns()
        try:
            handler(request)
        except Exception as exc:  # noqa: BLE001 - user code: answered and counted, never silent
            description = f"{type(exc).__name__}: {exc}".replace("\r", " ").replace("\n", " ")
            try:
                request.respond_error(500, description)
            except Error as unsent:  # no reply subject, or the answer could not go out: counted and reported
                request.error_answer = ErrorAnswer("500", description)
                self._nc.core.report_error(unsent)
        finally:
            self._slots.release()  # whatever happened: the dispatchers wait for it
        elapsed = time.perf_counter_ns() - started
        with self._lock:
            _count_drops(endpoint)  # first: the drops came before this error, if it is one
            stats = endpoint.stats
            stats.requests += 1
            stats.processing_ns += elapsed
            answered = request.error_answer
            if answered is not None:
                stats.errors += 1
                stats.last_error = f"{answered.code}:{answered.description}"

    # -- discovery ---------------------------------------------------------------------
    def _answer(self, verb: str) -> Callable[[Msg], None]:
        def answer(msg: Msg) -> None:
            body = self.ping() if verb == "PING" else self.info() if verb == "INFO" else self.stats()
            msg.respond(json.dumps(body).encode())

        return answer

    def _base(self, kind: str) -> dict[str, Any]:
        return {"type": kind, "name": self.name, "id": self.id, "version": self.version, "metadata": self.metadata}

    def ping(self) -> dict[str, Any]:
        """What the service answers on ``$SRV.PING`` (ADR-32).

        Returns:
            Its type, name, id, version and metadata.

        Raises:
            : Nothing.
        """
        return self._base(PING_TYPE)

    def info(self) -> dict[str, Any]:
        """What the service answers on ``$SRV.INFO`` (ADR-32).

        Returns:
            As :meth:`ping`, with its description and its endpoints (name, subject, queue group, metadata).

        Raises:
            : Nothing.
        """
        with self._lock:
            endpoints = [
                {"name": e.name, "subject": e.subject, "queue_group": e.queue_group, "metadata": e.metadata}
                for e in self._endpoints
            ]
        return {**self._base(INFO_TYPE), "description": self.description, "endpoints": endpoints}

    def stats(self) -> dict[str, Any]:
        """What the service answers on ``$SRV.STATS`` (ADR-32).

        Dropped requests count as errors (see the module's docstring).

        Returns:
            As :meth:`ping`, with when it started and, per endpoint, its request and error counts, last
            error, processing times (nanoseconds) and the ``stats_handler``'s ``data``.

        Raises:
            Exception: Whatever ``stats_handler`` raises, unchanged.
        """
        with self._lock:
            for e in self._endpoints:
                _count_drops(e)
            endpoints = [(e, _Stats(e.stats.requests, e.stats.errors, e.stats.processing_ns, e.stats.last_error))
                         for e in self._endpoints]
        rows = []
        for endpoint, s in endpoints:
            data = self._stats_handler(endpoint) if self._stats_handler is not None else None
            rows.append({
                "name": endpoint.name, "subject": endpoint.subject, "queue_group": endpoint.queue_group,
                "num_requests": s.requests, "num_errors": s.errors, "last_error": s.last_error,
                "processing_time": s.processing_ns,
                "average_processing_time": s.processing_ns // s.requests if s.requests else 0,
                "data": data,
            })
        started = self._started.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return {**self._base(STATS_TYPE), "endpoints": rows, "started": started}

    def reset(self) -> None:
        """Zero every endpoint's counters (``Endpoint.dropped``, the subscription's count, goes on).

        Raises:
            : Nothing.
        """
        with self._lock:
            for endpoint in self._endpoints:
                endpoint.stats = _Stats(drops_seen=endpoint.dropped)

    # -- ending --------------------------------------------------------------------------
    def stop(self, timeout: Timeout = DEFAULT) -> None:
        """Drain: take no new request, finish and answer the ones taken, then leave discovery.

        ``timeout`` bounds each endpoint's drain, and then the wait for the handlers still running; it
        defaults to the connection's ``drain_timeout``.  When it runs out the service stops all the same:
        it leaves discovery, the requests still queued are dropped unhandled (counted as errors; their
        callers time out), and a handler still running finishes on its own.

        Args:
            timeout: Seconds each endpoint's drain, and then the running handlers, may take; ``None``, no
                limit; ``0`` is refused (see :doc:`/conventions`).

        Raises:
            TimeoutError: An endpoint still had requests queued, the server did not confirm its end, or a
                handler was still running, when ``timeout`` ran out.
            ConnectionLostError: The link broke before the server confirmed an endpoint's end.
            ConnectionClosedError: The connection closed while an endpoint was being drained.
        """
        limit = answer_limit(timeout, self._nc.options.drain_timeout)
        if self._stopped.is_set():
            return
        self._stopped.set()
        with self._lock:
            subs = [e.sub for e in self._endpoints if e.sub is not None]
        failed: list[Error] = []
        for sub in subs:
            try:
                sub.drain(limit)  # its queued requests reach the pool first
            except Error as exc:  # the other endpoints and discovery still end; the first error is raised after
                failed.append(exc)
                with contextlib.suppress(Error):
                    sub.unsubscribe()  # what it still holds is not handed over
        self._pool.shutdown(wait=False)
        if not self._workers_idle(limit):
            failed.append(TimeoutError(f"service {self.name}: a handler was still running after {limit} s"))
        for sub in self._discovery:
            if not sub.is_closed:
                with contextlib.suppress(ConnectionClosedError):  # a closed connection has left discovery
                    sub.unsubscribe()
        if failed:
            raise failed[0]

    def _workers_idle(self, limit: float) -> bool:
        """Whether every worker is free within ``limit`` seconds (a running handler holds a slot)."""
        deadline = time.monotonic() + limit
        taken = 0
        try:
            while taken < self._workers:
                if not self._slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    return False
                taken += 1
            return True
        finally:
            for _ in range(taken):
                self._slots.release()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopped.is_set()

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _count_drops(endpoint: Endpoint) -> None:
    """Count the requests dropped since last time as errors (under the service's ``_lock``)."""
    sub, stats = endpoint.sub, endpoint.stats
    if sub is None:
        return
    dropped = sub.dropped  # the reader thread's count: read once
    if dropped > stats.drops_seen:
        stats.errors += dropped - stats.drops_seen
        stats.drops_seen = dropped
        stats.last_error = str(SlowConsumerError(sub.subject, sub.sid, dropped))


def add_service(
    nc: Connection,
    *,
    name: str,
    version: str,
    description: str = "",
    metadata: Mapping[str, str] | None = None,
    queue_group: str = DEFAULT_QUEUE_GROUP,
    workers: int = 4,
    stats_handler: Callable[[Endpoint], Any] | None = None,
    pending_msgs_limit: int | None = None,
    pending_bytes_limit: int | None = None,
) -> Service:
    """Start a service (ADR-32): discoverable at once; add endpoints to it.

    The pending limits are its endpoints' defaults (see ``add_endpoint``).

    Args:
        nc: The connection to run on.
        name: The service's name (letters, digits, ``-`` and ``_``); instances of one service share it.
        version: Its semantic version (``1.0.0``).
        description: What it does, for discovery.
        metadata: Names mapped to str values, for discovery.
        queue_group: The default queue group of its endpoints, so that the instances share the requests
            (``""``: none, every instance gets every request).
        workers: How many threads run the handlers, shared by all its endpoints.
        stats_handler: Called with an :class:`Endpoint` when stats are asked for; what it returns
            (JSON-serialisable) is that endpoint's ``data``.
        pending_msgs_limit: Requests that may wait for a worker, per endpoint, unless the endpoint says
            otherwise; left out, the connection's.
        pending_bytes_limit: The same bound in payload bytes.

    Returns:
        The running service.

    Raises:
        InvalidArgumentError: A bad name, version, description, metadata, queue group, ``workers``,
            ``stats_handler`` or limit; nothing is subscribed.
        ConnectionClosedError: The connection is closed or draining.
        ForkedConnectionError: Called in a process forked from the one that connected (unless
            ``reconnect_after_fork``).
    """
    _check_name("service name", name)
    if not isinstance(version, str) or _SEMVER.fullmatch(version) is None:
        raise InvalidArgumentError(f"version must be a semantic version like 1.0.0, not {version!r}")
    if not isinstance(description, str):
        raise InvalidArgumentError(f"description must be a str, not {description!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidArgumentError(f"workers must be an int >= 1, not {workers!r}")
    if stats_handler is not None and not callable(stats_handler):
        raise InvalidArgumentError(f"stats_handler must be callable, not {stats_handler!r}")
    limits = (_check_limit("pending_msgs_limit", pending_msgs_limit),
              _check_limit("pending_bytes_limit", pending_bytes_limit))
    return Service(
        nc, name=name, version=version, description=description, metadata=_check_metadata(metadata),
        queue_group=_check_queue(queue_group), workers=workers, stats_handler=stats_handler,
        pending_limits=limits,
    )


__all__ = ["Endpoint", "Group", "Request", "Service", "add_service"]
