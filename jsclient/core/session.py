"""The session: one process's life of a connection, and the pieces it is made of.

A :class:`Session` composes the writer (:mod:`.writer`), the reader
(:mod:`.reader`), the router (:mod:`.router`), the request mux
(:mod:`.requests`), the subscriptions (:mod:`.subs`), the server pool
(:mod:`.pool`), the events thread (:mod:`.events`) and a timer
(:mod:`jsclient.scheduler`), and runs the connection's lifecycle: the
handshake (:mod:`jsclient.handshake`), connection loss, reconnect with
backoff, resubscription, stale-connection PINGs, lame duck mode, drain and
close, each state change an event of the table in :mod:`.state`.  It is
the internal interface (:class:`jsclient.core.iface.CoreAPI`) that
JetStream, messages and subscriptions use: the request and subscription
calls are those of its parts, bound as its own (no wrapper frame), and the
few publishing ones are here.  A forked child gets a new Session
(:mod:`.fork`).

Threads running here:

* callers (publish, flush, drain, close);
* ``jsclient-reader`` (through the router: PONGs, INFO, -ERR; a lost link);
* ``jsclient-flusher``, or a caller sending inline (a failed send:
  :meth:`Session.decide_loss`, then what it returns, once ``send_lock`` is
  released);
* ``jsclient-timer``: :meth:`Session.ping_tick` and the request sweep;
* ``jsclient-reconnect``: exists while a lost connection is being restored:
  it dials the pool with backoff (in the order :mod:`.pool` gives, the
  user's ``server_selector`` run there), resubscribes, then sends what was
  buffered.

Locks, what they guard and their order: :mod:`jsclient.core`.  Here, the
state moves only by :func:`.state.apply`, under the writer's
``write_lock``; a loss is decided under ``write_lock`` once per transport
generation and acted on with no writer lock held.  ``_hooks`` is a dict
changed by one call at a time (atomic).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import queue
import ssl
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tenacity import RetryError

from .. import observe
from ..auth import CredentialCallbacks
from ..backoff import Backoff
from ..errors import (
    AuthorizationError,
    ConnectionClosedError,
    ConnectionLostError,
    Error,
    ForkedConnectionError,
    InvalidArgumentError,
    NoServersError,
    ProtocolError,
    RequestFailure,
    RequestOutcome,
    ServerError,
    StaleConnectionError,
    SubscriptionClosedError,
    TimeoutError,
    TLSError,
)
from ..handshake import open_link
from ..observe import DisconnectReason, reason_of
from ..options import Options, mask_url
from ..protocol import PONG, Parser, PubEncoder, encode_unsub
from ..scheduler import Scheduler
from . import fork
from .events import EventQueue, start_events
from .pool import ServerPool, ServerSelector
from .publish import Publisher
from .reader import Reader
from .requests import Requests, fail_pending
from .router import Router
from .state import Event, Link, State, Waiter, allowed, apply
from .subs import Subscriptions
from .writer import AfterLoss, Writer

if TYPE_CHECKING:
    from ..message import Msg
    from ..transport import Transport
    from .iface import SessionOwner

__all__ = ["Callbacks", "ErrorCallback", "EventCallback", "ServerSelector", "Session"]

log = logging.getLogger("jsclient")

ErrorCallback = Callable[[Exception], None]
EventCallback = Callable[[], None]


class Callbacks:
    """The user's callbacks, shared by every session of a connection.

    The event callbacks run on the events thread; ``selector`` runs on the
    reconnect thread, which waits for its answer.
    """

    __slots__ = ("closed", "disconnected", "error", "reconnected", "selector")

    def __init__(
        self,
        error: ErrorCallback | None,
        closed: EventCallback | None,
        disconnected: EventCallback | None,
        reconnected: EventCallback | None,
        selector: ServerSelector | None = None,
    ) -> None:
        self.error = error
        self.closed = closed
        self.disconnected = disconnected
        self.reconnected = reconnected
        self.selector = selector


class Session:
    """One process's connection machinery (see the module docstring)."""

    def __init__(
        self,
        conn: SessionOwner,
        options: Options,
        *,
        callbacks: Callbacks,
        pool: list[str],
        encoder: PubEncoder,
        tls_context: ssl.SSLContext | None,
        credentials: CredentialCallbacks | None = None,
        forked_from: int | None = None,
    ) -> None:
        self.conn = conn
        self._credentials = credentials
        self.options = options
        self.callbacks = callbacks
        self.servers = ServerPool(pool, self.report_error)
        self.pool, self.pool_lock = pool, self.servers.lock  # the connection lists the pool under its lock
        self.encoder = encoder
        self._tls_context = tls_context
        self.pid = os.getpid()
        #: Set in a forked child: this session refuses everything (see .fork).
        self.forked_from = forked_from
        self.events: EventQueue = queue.SimpleQueue()
        self.timers = Scheduler()
        self._watchdog: Scheduler | None = None
        self.link = Link(threading.Event())
        self.writer = Writer(options, self.link, self.decide_loss, self.refusal)
        self.router = Router(self, conn)
        self.reader = Reader(
            self.link, self.router, lost=self.connection_lost, report_error=self.report_error, spin=options.spin_wait
        )
        publisher = Publisher(encoder, self.writer, self.reader, self.refusal)
        self.subscriptions = Subscriptions(
            conn,
            router=self.router,
            writer=self.writer,
            reader=self.reader,
            encoder=encoder,
            flush=publisher.flush,
            refusal=self.refusal,
        )
        self.requests = Requests(
            router=self.router,
            writer=self.writer,
            reader=self.reader,
            encoder=encoder,
            timers=self.timers,
            events=self.events,
            inbox_prefix=options.inbox_prefix,
            subscribe_inbox=self.subscriptions.subscribe_inbox,
            core=self,
        )
        # CoreAPI and the connection's calls, bound here, not wrapped: kv.get calls request on every read and
        # a publish with headers calls publish_message, so nothing stands between those callers and the parts.
        self.request = self.requests.request
        self.request_async = self.requests.request_async
        self.publish_message = publisher.publish_message
        self.publish_control = publisher.publish_control
        self.flush = publisher.flush
        self.send_pending = self.writer.send_pending
        self.subscribe = self.subscriptions.subscribe
        self.unsubscribe = self.subscriptions.unsubscribe
        self.drain_subscription = self.subscriptions.drain_subscription
        self.stop_receiving = self.subscriptions.stop_receiving
        self.user_subscriptions = self.subscriptions.user_subscriptions
        self._hooks: dict[int, Callable[[], None]] = {}
        self._hook_ids = itertools.count(1)
        self.reconnects = 0
        self.pings_out = 0
        self.info: dict[str, Any] = {}
        self.connected_url: str | None = None
        self.last_error: Exception | None = None
        #: What closed the connection (for the errors of requests refused afterwards).
        self.closed_by = RequestFailure.CLOSED
        self._threads: list[threading.Thread] = []  # reader(s), flusher, reconnect: joined by close()
        self.closed_event = threading.Event()
        if forked_from is not None:
            with self.writer.write_lock:
                apply(self.writer, Event.FORKED)
        # The finalizer holds the link, timer and queue, not the session: collected without close(), it
        # ends the socket and the threads.
        self._finalizer = weakref.finalize(self, _finalize, self.link, self.timers, self.events)

    # -- connecting --------------------------------------------------------------
    def connect(self) -> None:
        """The first connection: try each server once; auth errors are final at once."""
        errors: list[str] = []
        for url in self.servers.copy():
            try:
                link = self._open(url)
                break
            except (ServerError, TLSError):
                raise  # credentials or certificates: retrying another server will not help
            except (OSError, ProtocolError, TimeoutError) as exc:
                errors.append(f"{mask_url(url)}: {exc}")
        else:
            failure = NoServersError("could not connect to any server: " + "; ".join(errors))
            if not (self.options.retry_on_failed_connect and self.options.allow_reconnect):
                raise failure
            self._connect_later(failure)
            return
        start_events(self.events)
        self._activate(link, url)
        self._keep(self.writer.start_flusher())
        fork.track(self.conn)
        self._schedule_ping()

    def _connect_later(self, failure: NoServersError) -> None:
        """retry_on_failed_connect: start as if the link had just been lost; the reconnect loop goes on trying."""
        start_events(self.events)
        w = self.writer
        with w.write_lock:
            apply(w, Event.CONNECT_FAILED)
        self.last_error = failure
        log.debug("jsclient: %s; retrying in the background", failure)
        self._keep(w.start_flusher())
        fork.track(self.conn)
        self._schedule_ping()
        thread = threading.Thread(target=self._reconnect_loop, name="jsclient-reconnect", daemon=True)
        thread.start()
        self._keep(thread)

    def _keep(self, thread: threading.Thread) -> None:
        """Remember a thread for close() to join; ended ones are let go (one reader per reconnect)."""
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]

    def _schedule_ping(self) -> None:
        # Only a weak reference sits in the timer heap, so a dropped connection can go.
        self.timers.call_later(self.options.ping_interval, functools.partial(_ping_main, weakref.ref(self)))

    def _open(self, url: str) -> tuple[Transport, Parser, list[Any]]:
        on_info = functools.partial(self.apply_info, url=url)
        return open_link(url, self.options, self._tls_context, on_info, self._credentials)

    def _activate(self, link: tuple[Transport, Parser, list[Any]], url: str) -> None:
        """Make a handshaken transport current: resubscribe, send the buffer, start its reader."""
        transport, parser, rest = link
        w = self.writer
        then = None
        with w.send_lock:
            with w.write_lock:
                closed = w.state is State.CLOSED
                if not closed:
                    reconnect = w.state is State.RECONNECTING
                    apply(w, Event.RECONNECT if reconnect else Event.CONNECT)
                    self.link.transport = transport
                    self.link.gen += 1
                    gen = self.link.gen
                    frames = self.subscriptions.resubscribe_frames() if reconnect else b""
                    data = frames + w.buf
                    w.buf = bytearray()
                    w.unsent_requests = 0
                    w.pings = 0
                    self.pings_out = 0
                    self.connected_url = url
            if not closed and data:
                then = w.sendall(data, 0)
        if closed:
            transport.close()  # closed while it was dialled
            return
        if then is not None:
            then()  # it failed at once: acted on with send_lock released
        if rest:
            self.router.route(rest)
        self._keep(self.reader.start(transport, parser, gen))
        self.link.kick.set()

    def apply_info(self, info: dict[str, Any], url: str | None = None) -> None:
        """Take a server's INFO; ``url`` is the one it came through (default: the connected one)."""
        self.info = info
        max_payload = info.get("max_payload")
        if isinstance(max_payload, int) and max_payload > 0:
            self.encoder.set_max_payload(max_payload)
        urls = info.get("connect_urls")
        if urls and not self.options.ignore_discovered_servers:
            self.servers.discover(urls, url or self.connected_url, shuffle=not self.options.no_randomize)

    def set_servers(self, options: Options) -> None:
        """Replace the pool with ``options.servers`` (checked by the caller); the link stays as it is.

        The next reconnect round dials the new pool; servers a cluster
        announces join it again unless ``ignore_discovered_servers``.
        """
        self.servers.replace(options.servers, shuffle=not options.no_randomize)
        self.options = options

    # -- what the router hands on (RouterSink) -----------------------------------
    def answer_ping(self) -> None:
        with contextlib.suppress(ConnectionClosedError):
            self.writer.append(PONG)

    def pong(self) -> None:
        self.pings_out = 0
        waiter = self.writer.pong_arrived()
        if waiter is not None:
            waiter.fill()

    def info_update(self, data: dict[str, Any]) -> None:
        self.apply_info(data)
        if data.get("ldm") and len(self.pool) > 1 and self.writer.state is State.CONNECTED:
            # The server announced it is leaving: move to another one before it drops us.
            log.info("jsclient: server entered lame duck mode; reconnecting elsewhere")
            self.connection_lost(
                ConnectionResetError("server entered lame duck mode"), self.link.gen, reason=DisconnectReason.LAME_DUCK
            )

    def server_error(self, err: ServerError) -> None:
        self.last_error = err
        self.report_error(err)

    def report_error(self, exc: Exception) -> None:
        """Hand an error to the error callback on the events thread."""
        cb = self.callbacks.error
        if cb is None:
            log.warning("jsclient: %s", exc)
            return
        self.events.put(lambda: cb(exc))

    def late_reply(self, msg: Msg) -> None:
        """Logged at DEBUG on the events thread: the reader only checks the level."""
        if log.isEnabledFor(logging.DEBUG):
            self.events.put(lambda: log.debug(
                "jsclient: a reply came for a request that had already ended: %s %r %r",
                msg.subject, msg.header, msg.data[:300],
            ))

    # -- loss and reconnect ----------------------------------------------------------
    def force_reconnect(self) -> None:
        """Drop the link and reconnect as after a loss (the user asked; nothing is reported as an error)."""
        if not self.options.allow_reconnect:
            raise InvalidArgumentError("force_reconnect needs allow_reconnect=True")
        asked = ConnectionLostError("reconnect asked for by force_reconnect()")
        self.connection_lost(asked, self.link.gen, report=False, reason=DisconnectReason.FORCED)

    def connection_lost(
        self, exc: Exception, gen: int, *, report: bool = True, reason: DisconnectReason | None = None
    ) -> None:
        """The transport of generation ``gen`` failed (reader, ping timer, lame duck, force_reconnect).

        Reconnects when allowed, else closes.  Acts once per generation.
        """
        then = self.decide_loss(exc, gen, report=report, reason=reason)
        if then is not None:
            then()

    def decide_loss(
        self, exc: Exception, gen: int, *, report: bool = True, reason: DisconnectReason | None = None
    ) -> AfterLoss | None:
        """What the failure of generation ``gen``'s transport means, decided under ``write_lock``.

        Returns what is then to be done (close, or reconnect), for the
        caller to run holding no lock of the writer: the writer calls this
        holding ``send_lock``, and closing never runs under it (the lock
        order: :mod:`jsclient.core`).  None: closed, or this generation's
        loss was already taken.  The transport is let go of at once, so no
        other thread sends on it meanwhile.  ``reason`` is why, for an
        observer (:mod:`jsclient.observe`); left out, ``exc`` says.
        """
        w = self.writer
        link = self.link
        with w.write_lock:
            if w.state is State.CLOSED or gen != link.gen or link.transport is None:
                return None
            if self.last_error is None or not isinstance(self.last_error, ServerError):
                self.last_error = exc
            reconnect = self.options.allow_reconnect and allowed(w.state, Event.LOST)
            transport, link.transport = link.transport, None
            link.reading = None
            self.requests.lost_at = time.monotonic()
            self.requests.losses += 1
            orphans: list[Waiter | None] = []
            if reconnect:
                apply(w, Event.LOST)
                # PINGs that already left will get no PONG; those still buffered will.
                sent = len(w.pongs) - w.pings
                orphans = [w.pongs.popleft() for _ in range(max(0, sent))]
        return functools.partial(
            self._after_loss, transport, exc, orphans=orphans, reconnect=reconnect, report=report,
            reason=reason or reason_of(exc),
        )

    def _after_loss(
        self, transport: Transport, exc: Exception, *, orphans: list[Waiter | None], reconnect: bool, report: bool,
        reason: DisconnectReason,
    ) -> None:
        """A loss decided by :meth:`decide_loss`: close, or start reconnecting (no lock of the writer held).

        An observer of losses (:data:`jsclient.observe.listener`) is told on the events thread, as the
        thread running this may be the reader.
        """
        transport.shutdown()
        transport.close()
        listener = observe.listener
        if listener is not None:
            self.events.put(functools.partial(listener.disconnected, reason))
        if not reconnect:
            self.close(error=exc, cause=RequestFailure.CONNECTION_LOST)
            return
        lost = ConnectionLostError(f"connection lost before the server answered: {exc}")
        for waiter in orphans:
            if waiter is not None:
                waiter.fill(error=lost)
        if report:
            self.report_error(exc)
        if self.callbacks.disconnected is not None:
            self.events.put(self.callbacks.disconnected)
        thread = threading.Thread(target=self._reconnect_loop, name="jsclient-reconnect", daemon=True)
        thread.start()
        self._keep(thread)

    def _reconnect_loop(self) -> None:
        """Dial the pool with backoff and jitter until a server takes us, or give up and close."""
        opts = self.options
        policy = Backoff.for_reconnect(opts)
        try:
            policy.retrying(until_true=True)(self._reconnect_round)
        except RetryError:
            self.close(
                error=NoServersError(f"could not reconnect after {policy.attempts} rounds over the server pool"),
                cause=RequestFailure.CONNECTION_LOST,
            )

    def _reconnect_round(self) -> bool:
        """One pass over the pool (the server just lost goes last, the selector's choice first).

        True when connected or closed.
        """
        if self.now() is not State.RECONNECTING:
            return True
        order = self.servers.round(self.connected_url, self.callbacks.selector)
        auth_failures = 0
        for url in order:
            if self.now() is not State.RECONNECTING:
                return True
            try:
                link = self._open(url)
            except AuthorizationError as exc:
                auth_failures += 1
                self.last_error = exc
                self.report_error(exc)
                continue
            except (OSError, ProtocolError, TimeoutError, ServerError, TLSError) as exc:
                log.debug("jsclient: reconnect to %s failed: %s", mask_url(url), exc)
                continue
            except Error as exc:
                # Our side of the handshake (a credentials file gone, a callback's bad answer): say so, and go
                # on trying, as it may be put right; the loop must not end with the connection left reconnecting.
                self.last_error = exc
                self.report_error(exc)
                continue
            self._activate(link, url)
            if self.now() is not State.CONNECTED:
                return True
            self.reconnects += 1
            if self.callbacks.reconnected is not None:
                self.events.put(self.callbacks.reconnected)
            for hook in list(self._hooks.values()):
                hook()
            return True
        if auth_failures == len(order):
            # Every server rejects our credentials: retrying would only storm them.
            self.close(
                error=self.last_error or AuthorizationError("authorization violation"),
                cause=RequestFailure.CONNECTION_LOST,
            )
            return True
        return False

    def now(self) -> State:
        """The state as of now (other threads change it; a call keeps type checkers from assuming)."""
        return self.writer.state

    def ping_tick(self) -> None:
        """Timer thread: PING the server; too many unanswered PINGs means the link is stale."""
        state = self.writer.state
        if state is State.CLOSED:
            return
        if state is State.CONNECTED:
            if self.pings_out >= self.options.max_outstanding_pings:
                self.connection_lost(
                    StaleConnectionError(f"stale connection: {self.pings_out} PINGs without a PONG"), self.link.gen
                )
            else:
                self.pings_out += 1
                self.writer.queue_ping(None)
        self._schedule_ping()

    # -- refusing -----------------------------------------------------------------
    def refusal(self) -> Error:
        """Why a message or call is refused now (nothing was sent: NOT_DELIVERED)."""
        if self.forked_from is not None:
            return ForkedConnectionError(
                f"this connection was made in process {self.forked_from}; a forked child ({os.getpid()}) cannot "
                "use it: connect again in the child, or pass reconnect_after_fork=True"
            )
        draining = self.writer.state is State.DRAINING_PUBS
        return ConnectionClosedError(
            self.closed_reason(), failure=RequestFailure.DRAINED if draining else self.closed_by
        )

    def closed_reason(self) -> str:
        if self.writer.state is State.DRAINING_PUBS:
            return "connection is draining and takes no new messages"
        if self.closed_by is RequestFailure.DRAINED:
            return "connection closed by drain()"
        if self.last_error is not None:
            return f"connection closed: {self.last_error}"
        return "connection closed"

    # -- the rest of CoreAPI (its request, publish and subscription calls are bound in __init__) --------
    @property
    def watchdog(self) -> Scheduler:
        """The heartbeat watchdog's scheduler (its own thread, started on first use)."""
        with self.router.sub_lock:
            if self._watchdog is None:
                self._watchdog = Scheduler("jsclient-watchdog")
            return self._watchdog

    def add_reconnect_hook(self, hook: Callable[[], None]) -> int:
        key = next(self._hook_ids)
        self._hooks[key] = hook
        return key

    def remove_reconnect_hook(self, key: int) -> None:
        self._hooks.pop(key, None)

    # -- ending ------------------------------------------------------------------
    def drain(self, timeout: float) -> None:
        """Stop every subscription, deliver what they hold, send what is buffered, close."""
        deadline = time.monotonic() + timeout
        w = self.writer
        with w.write_lock:
            if not allowed(w.state, Event.DRAIN):
                if w.state is State.CLOSED:
                    raise ConnectionClosedError(self.closed_reason())
                if w.state is State.RECONNECTING:
                    raise ConnectionClosedError("connection is reconnecting; drain once it is connected, or close it")
                raise ConnectionClosedError("connection is already draining")
            apply(w, Event.DRAIN)
        failure: Exception | None = None
        try:
            subs = self.user_subscriptions()
            for sub in subs:
                w.append(encode_unsub(sub.sid), subscription=True)
            self.flush(max(0.001, deadline - time.monotonic()))
            for sub in subs:
                self.subscriptions.remove(sub, SubscriptionClosedError, discard=False)
            for sub in subs:
                if not sub._wait_drained(deadline):
                    failure = TimeoutError(
                        f"drain: subscription on {sub.subject!r} still had {sub.pending_msgs} "
                        f"message(s) after {timeout} s"
                    )
                    break
            with w.write_lock:
                if w.state is State.DRAINING_SUBS:  # else closed meanwhile
                    apply(w, Event.SUBS_DRAINED)
            self.flush(max(0.001, deadline - time.monotonic()))
        except Error as exc:
            failure = exc
        self.close(cause=RequestFailure.DRAINED)
        if failure is not None:
            self.report_error(failure)
            raise failure

    def close(self, error: Exception | None = None, *, cause: RequestFailure = RequestFailure.CLOSED) -> None:
        """End the connection; ``error`` is why, when it was not asked for, and ``cause`` what requests
        still waiting (and those refused from now on) give as their reason."""
        w = self.writer
        with w.write_lock:
            if w.state is State.CLOSED:
                return
            was_connected = w.state is not State.CONNECTING
            apply(w, Event.CLOSE)
            self.closed_by = cause
            pongs = list(w.pongs)
            w.pongs.clear()
        if error is None and was_connected:
            w.send_last()  # best effort: what publish() accepted should leave
        self.link.shutdown()
        reason = self.closed_reason()
        closed = ConnectionClosedError(reason, outcome=RequestOutcome.UNKNOWN, failure=cause)
        for waiter in pongs:
            if waiter is not None:
                waiter.fill(error=closed)
        self.timers.close()
        if self._watchdog is not None:
            self._watchdog.close()
        self.requests.fail_waiting(cause, reason)
        subs, pending = self.router.take_all()
        fail_pending(pending, closed)  # listed while the ones before were failed
        for sub in subs:
            sub._mark_closed(ConnectionClosedError, discard=False)
        if error is not None:
            self.report_error(error)
        fork.untrack(self.conn)
        if self.callbacks.closed is not None:
            self.events.put(self.callbacks.closed)
        self.events.put(None)  # the events thread ends after the callbacks before it
        self.closed_event.set()
        if error is None:
            # A user's close(): let the threads finish.  (On a lost connection
            # this may run on one of them, possibly holding the send lock.)
            current = threading.current_thread()
            for thread in self._threads:
                if thread is not current and thread.is_alive():
                    thread.join(2.0)

    def disown(self) -> None:
        """In a forked child, the only thread: let go of everything without a lock or a byte sent."""
        self._finalizer.detach()
        self.link.disown()
        for sub in list(self.router.subs.values()):
            sub._after_fork()

    def stats(self) -> dict[str, int]:
        return {
            "in_msgs": self.router.in_msgs,
            "in_bytes": self.router.in_bytes,
            "out_msgs": self.writer.out_msgs,
            "out_bytes": self.writer.out_bytes,
            "late_replies": self.router.late_replies,
        }


def _finalize(link: Link, timers: Scheduler, events: EventQueue) -> None:
    """A session was collected without close(): end its socket, its timer and its events thread."""
    link.shutdown()
    timers.close()
    events.put(None)  # after the callbacks already queued


def _ping_main(ref: weakref.ReferenceType[Session]) -> None:
    session = ref()
    if session is not None:
        session.ping_tick()
