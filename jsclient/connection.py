"""Connection: the public face of a NATS connection.

The machinery lives in :mod:`jsclient.core`, one module per responsibility;
a Connection holds one :class:`~jsclient.core.session.Session` (per process:
a forked child gets a new one) and the pieces that outlive it (options,
callbacks, the server pool, the frame encoder's caches).  Where things run:

===========================  ==============================================
``jsclient-reader``          :mod:`jsclient.core.reader` (routing: :mod:`jsclient.core.router`)
a caller reading its reply   :mod:`jsclient.core.fastpath`
``jsclient-flusher``         :mod:`jsclient.core.writer`
``jsclient-events``          :mod:`jsclient.core.events`
``jsclient-timer``           :mod:`jsclient.scheduler` (pings, request deadlines)
``jsclient-reconnect``       :mod:`jsclient.core.session`
after ``os.fork()``          :mod:`jsclient.core.fork`
===========================  ==============================================

Locks: every lock of a connection, what it guards and the order they nest
in are written once, in :mod:`jsclient.core`; ``_reopen_lock`` here (a
forked child reconnecting) is one of them, taken with nothing held.

This module runs on the caller's thread only.  Its hot paths (publish,
request) bind the current session's methods at install time, so a publish
is one dict lookup and one append.
"""

from __future__ import annotations

import itertools
import secrets
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from types import TracebackType
from typing import TYPE_CHECKING, Any, Never

from .auth import CredentialCallbacks
from .backoff import SPREAD
from .checks import whole
from .contexts import NatsContext, load_context
from .core import fork
from .core.iface import CoreAPI
from .core.session import Callbacks, ErrorCallback, EventCallback, ServerSelector, Session
from .core.state import State
from .deprecation import renamed_keywords
from .errors import ConnectionClosedError, InvalidArgumentError
from .headers import HeadersInput
from .message import Msg
from .msgtrace import MessageTrace, trace_message
from .options import CREDENTIALS, OPTION_DEFAULTS, Options, given_options, mask_url, refuse_unknown
from .payload import as_bytes as _as_bytes
from .protocol import PubEncoder, check_queue_name, check_subscribe_subject
from .release import ServerVersion, announced
from .replies import Replies, Sentinel, request_many
from .subscription import MsgCallback, Subscription
from .timeouts import DEFAULT, Timeout, answer_limit, take_limit

if TYPE_CHECKING:
    from .jetstream.context import JetStream

__all__ = ["Connection", "ErrorCallback", "EventCallback", "ServerSelector", "State", "connect", "live_connections"]


def connect(
    servers: str | list[str] | tuple[str, ...] | None = None,
    *,
    options: Options | None = None,
    context: str | bool | None = None,
    name: str | None = OPTION_DEFAULTS.name,
    user: str | None = OPTION_DEFAULTS.user,
    password: str | None = OPTION_DEFAULTS.password,
    token: str | None = OPTION_DEFAULTS.token,
    verbose: bool = OPTION_DEFAULTS.verbose,
    pedantic: bool = OPTION_DEFAULTS.pedantic,
    echo: bool = OPTION_DEFAULTS.echo,
    connect_timeout: float = OPTION_DEFAULTS.connect_timeout,
    pending_msgs_limit: int = OPTION_DEFAULTS.pending_msgs_limit,
    pending_bytes_limit: int = OPTION_DEFAULTS.pending_bytes_limit,
    max_pending_size: int = OPTION_DEFAULTS.max_pending_size,
    inbox_prefix: str = OPTION_DEFAULTS.inbox_prefix,
    drain_timeout: float = OPTION_DEFAULTS.drain_timeout,
    allow_reconnect: bool = OPTION_DEFAULTS.allow_reconnect,
    max_reconnect_attempts: int = OPTION_DEFAULTS.max_reconnect_attempts,
    reconnect_time_wait: float = OPTION_DEFAULTS.reconnect_time_wait,
    reconnect_jitter: float = OPTION_DEFAULTS.reconnect_jitter,
    retry_on_failed_connect: bool = OPTION_DEFAULTS.retry_on_failed_connect,
    reconnect_buf_size: int = OPTION_DEFAULTS.reconnect_buf_size,
    no_randomize: bool = OPTION_DEFAULTS.no_randomize,
    ignore_discovered_servers: bool = OPTION_DEFAULTS.ignore_discovered_servers,
    ping_interval: float = OPTION_DEFAULTS.ping_interval,
    max_outstanding_pings: int = OPTION_DEFAULTS.max_outstanding_pings,
    spin_wait: float = OPTION_DEFAULTS.spin_wait,
    reconnect_after_fork: bool = OPTION_DEFAULTS.reconnect_after_fork,
    nkey_seed: str | Callable[[], str] | None = OPTION_DEFAULTS.nkey_seed,
    creds_file: str | None = OPTION_DEFAULTS.creds_file,
    user_credentials: str | Callable[[], str] | None = OPTION_DEFAULTS.user_credentials,
    tls: bool = OPTION_DEFAULTS.tls,
    tls_ca_file: str | None = OPTION_DEFAULTS.tls_ca_file,
    tls_cert_file: str | None = OPTION_DEFAULTS.tls_cert_file,
    tls_key_file: str | None = OPTION_DEFAULTS.tls_key_file,
    tls_hostname: str | None = OPTION_DEFAULTS.tls_hostname,
    tls_handshake_first: bool = OPTION_DEFAULTS.tls_handshake_first,
    ws_headers: tuple[tuple[str, str], ...] | list[tuple[str, str]] | dict[str, str] = OPTION_DEFAULTS.ws_headers,
    ws_compression: bool = OPTION_DEFAULTS.ws_compression,
    error_cb: ErrorCallback | None = None,
    closed_cb: EventCallback | None = None,
    disconnected_cb: EventCallback | None = None,
    reconnected_cb: EventCallback | None = None,
    tls_context: ssl.SSLContext | None = None,
    user_jwt_cb: Callable[[], str] | None = None,
    signature_cb: Callable[[bytes], bytes] | None = None,
    server_selector: ServerSelector | None = None,
    **unknown: Never,
) -> Connection:
    """Open a connection: the keywords are the fields of :class:`jsclient.Options`, plus what Options
    cannot hold because it pickles (callbacks, an ``ssl.SSLContext``, callable credentials).

    A keyword not given keeps the value of ``options=`` (else Options' default), so keywords beside
    ``options=`` override its fields; each field is described under :class:`jsclient.Options`.  Written
    out, not ``**kwargs``, so that type checkers and IDEs know every name and type.

    ``context`` takes the servers, credentials, TLS files, inbox prefix and JetStream domain or API
    prefix from a NATS CLI context (ADR-21, :doc:`/guides/configuration`): its values replace those of
    ``options=``, and the keywords given beside it replace the context's (a credentials keyword all
    its credentials).  It is read, and refused if jsclient cannot honour it, before anything connects.

    ``error_cb``, ``closed_cb``, ``disconnected_cb`` and ``reconnected_cb`` run on the connection's
    events thread.  ``tls_context`` is used for TLS.  ``user_credentials`` and ``nkey_seed`` may also be
    callables, and ``user_jwt_cb`` with ``signature_cb`` sign the server's nonce: each is called again at
    every reconnect, so a rotated secret is picked up.  ``server_selector(pool, lost_url)`` picks the
    server each reconnect round tries first (it runs on the reconnect thread, which waits for it).

    Args:
        servers: A URL or a list of URLs (``nats://``, ``tls://``, ``ws://`` or ``wss://``, not mixing
            WebSocket and the others; a bare ``host:port`` is ``nats://``); a URL may carry ``user:password@``
            or ``token@``.  Left out, those of ``options``, else ``nats://127.0.0.1:4222``.
        options: An :class:`jsclient.Options` to start from; the keywords given beside it replace its fields.
        context: A NATS CLI context's name, ``True`` for the selected one (``nats context select``), or
            the path of a context's ``.json`` file; None (or False), no context.
        error_cb: Called with each error met on the connection's own threads, which no call raises to you (a
            server ``-ERR``, a lost link, a slow consumer, an exception in a subscription callback).  Without
            one they are logged as warnings on the ``jsclient`` logger.
        closed_cb: Called once the connection is closed, whatever closed it.
        disconnected_cb: Called when the link is lost and reconnecting begins.
        reconnected_cb: Called each time a reconnect succeeds (also when ``retry_on_failed_connect``'s
            first connection comes up).
        tls_context: The ``ssl.SSLContext`` for TLS, instead of one made from ``tls_ca_file``,
            ``tls_cert_file`` and ``tls_key_file``; giving one turns TLS on for every URL.
        user_jwt_cb: Returns the user JWT (a str), asked at every connect; goes with ``signature_cb``.
        signature_cb: Signs the server's nonce (bytes) with the user's nkey and returns the raw signature
            (bytes); goes with ``user_jwt_cb``.
        server_selector: Returns the URL of ``pool`` (the URLs in the order the round would try them) to
            try first; ``lost_url`` is the server just lost.  One that raises, or answers with a URL not in
            the pool, is reported to ``error_cb`` as a ServerSelectorError, and that round keeps its
            default order.

    Returns:
        The connected Connection.  With ``retry_on_failed_connect``, it may still be trying to connect
        (publishes are buffered meanwhile).

    Raises:
        InvalidArgumentError: A bad option or argument (named), an unknown keyword, a callback that is not
            callable, two kinds of credentials or ``user_jwt_cb`` without ``signature_cb``, a NATS context
            that is missing or unreadable, sets something jsclient cannot honour or names a file that does
            not exist (the message names its file and the key), raised before connecting; or a credentials
            or nkey seed file that cannot be read, found while connecting.
        NoServersError: No server in the pool could be reached (not with ``retry_on_failed_connect``,
            which keeps trying in the background instead).
        AuthorizationError: The server refused the credentials, or a credentials callback failed or
            returned something unusable.
        ServerError: The server refused the connection with another ``-ERR``.
        TLSError: TLS could not be set up (certificate verification or the handshake failed).
        Error: A ``ws://`` or ``wss://`` URL while wsproto (the ``websocket`` extra) is not installed.
    """
    arguments = dict(locals())  # the same parameters (tests/test_connect_keywords.py keeps them so)
    return Connection(**arguments.pop("unknown"), **arguments)


def _options_and_credentials(
    servers: str | list[str] | tuple[str, ...] | Options | None,
    options: Options | None,
    arguments: dict[str, Any],
    jwt: Callable[[], str] | None,
    signature: Callable[[bytes], bytes] | None,
    nats_context: NatsContext | None,
) -> tuple[Options, CredentialCallbacks | None]:
    """Connection's arguments as Options, and apart from them the callable credentials (Options pickles).

    ``arguments`` holds the option keywords by name (``Connection.__init__``'s ``locals()``).  Every
    check runs here, before anything is sent.  Layers, each replacing the one before: Options'
    defaults, ``options=``, the NATS context, the keywords given.
    """
    if isinstance(servers, Options):  # Connection(options, ...), as before the keywords
        if options is not None:
            raise InvalidArgumentError("give the Options once: as the first argument or as options=")
        servers, options = None, servers
    given = {name: arguments[name] for name in vars(OPTION_DEFAULTS) if name != "servers"}
    callables = {name: given[name] for name in ("user_credentials", "nkey_seed") if callable(given[name])}
    given.update(dict.fromkeys(callables))  # a callable replaces the str form an options= may hold
    for name, cb in (("user_jwt_cb", jwt), ("signature_cb", signature)):
        if cb is not None and not callable(cb):
            raise InvalidArgumentError(f"{name} must be callable")
    if (jwt is None) != (signature is None):
        raise InvalidArgumentError("user_jwt_cb and signature_cb go together")
    if nats_context is not None:
        extra = {"servers": servers, "user_jwt_cb": jwt, "tls_context": arguments.get("tls_context")}
        names = {*given_options(given), *(name for name, value in extra.items() if value is not None)}
        options = Options.build(options=options, **nats_context.options(given=names))
    built = Options.build(servers, options=options, **given)
    kinds = [*callables, *(["user_jwt_cb"] if jwt else [])]
    kinds += [name for name in CREDENTIALS if getattr(built, name)]
    if len(kinds) > 1:
        raise InvalidArgumentError(f"use one kind of credentials, not {' and '.join(sorted(kinds))}")
    if not (callables or jwt):
        return built, None
    creds, seed = callables.get("user_credentials"), callables.get("nkey_seed")
    return built, CredentialCallbacks(creds=creds, seed=seed, jwt=jwt, signature=signature)


class Connection:
    """A NATS connection.  Create it with :func:`jsclient.connect` (making one connects).

    ``Connection(...)`` takes the same arguments as :func:`jsclient.connect`; ``servers`` may also be an
    Options, as ``options=``.

    Args:
        servers: As for :func:`jsclient.connect`, or an :class:`jsclient.Options` (then ``options`` must be
            left out).
        options: As for :func:`jsclient.connect`.
        context: As for :func:`jsclient.connect`.
        error_cb: As for :func:`jsclient.connect`.
        closed_cb: As for :func:`jsclient.connect`.
        disconnected_cb: As for :func:`jsclient.connect`.
        reconnected_cb: As for :func:`jsclient.connect`.
        tls_context: As for :func:`jsclient.connect`.
        user_jwt_cb: As for :func:`jsclient.connect`.
        signature_cb: As for :func:`jsclient.connect`.
        server_selector: As for :func:`jsclient.connect`.

    Raises:
        InvalidArgumentError: As for :func:`jsclient.connect`, and an Options given both as ``servers`` and
            as ``options``.
        NoServersError: No server in the pool could be reached (not with ``retry_on_failed_connect``).
        AuthorizationError: The server refused the credentials, or a credentials callback failed.
        ServerError: The server refused the connection with another ``-ERR``.
        TLSError: TLS could not be set up.
        Error: A WebSocket URL while wsproto (the ``websocket`` extra) is not installed.

    Every call may raise:
        InvalidArgumentError: An argument its Args do not allow (a bad ``timeout``, say); raised before
            anything is sent.
        BadPayloadError: A payload that is not bytes-like.
        ConnectionClosedError: The connection is closed; for a call that sends, also draining and no longer
            taking messages.
        ReconnectBufferFullError: While reconnecting, what the call sends does not fit in
            ``reconnect_buf_size``; nothing was sent.
        ForkedConnectionError: Called in a process forked from the one that connected (unless
            ``reconnect_after_fork``).
    """

    def __init__(
        self,
        servers: str | list[str] | tuple[str, ...] | Options | None = None,
        *,
        options: Options | None = None,
        context: str | bool | None = None,
        name: str | None = OPTION_DEFAULTS.name,
        user: str | None = OPTION_DEFAULTS.user,
        password: str | None = OPTION_DEFAULTS.password,
        token: str | None = OPTION_DEFAULTS.token,
        verbose: bool = OPTION_DEFAULTS.verbose,
        pedantic: bool = OPTION_DEFAULTS.pedantic,
        echo: bool = OPTION_DEFAULTS.echo,
        connect_timeout: float = OPTION_DEFAULTS.connect_timeout,
        pending_msgs_limit: int = OPTION_DEFAULTS.pending_msgs_limit,
        pending_bytes_limit: int = OPTION_DEFAULTS.pending_bytes_limit,
        max_pending_size: int = OPTION_DEFAULTS.max_pending_size,
        inbox_prefix: str = OPTION_DEFAULTS.inbox_prefix,
        drain_timeout: float = OPTION_DEFAULTS.drain_timeout,
        allow_reconnect: bool = OPTION_DEFAULTS.allow_reconnect,
        max_reconnect_attempts: int = OPTION_DEFAULTS.max_reconnect_attempts,
        reconnect_time_wait: float = OPTION_DEFAULTS.reconnect_time_wait,
        reconnect_jitter: float = OPTION_DEFAULTS.reconnect_jitter,
        retry_on_failed_connect: bool = OPTION_DEFAULTS.retry_on_failed_connect,
        reconnect_buf_size: int = OPTION_DEFAULTS.reconnect_buf_size,
        no_randomize: bool = OPTION_DEFAULTS.no_randomize,
        ignore_discovered_servers: bool = OPTION_DEFAULTS.ignore_discovered_servers,
        ping_interval: float = OPTION_DEFAULTS.ping_interval,
        max_outstanding_pings: int = OPTION_DEFAULTS.max_outstanding_pings,
        spin_wait: float = OPTION_DEFAULTS.spin_wait,
        reconnect_after_fork: bool = OPTION_DEFAULTS.reconnect_after_fork,
        nkey_seed: str | Callable[[], str] | None = OPTION_DEFAULTS.nkey_seed,
        creds_file: str | None = OPTION_DEFAULTS.creds_file,
        user_credentials: str | Callable[[], str] | None = OPTION_DEFAULTS.user_credentials,
        tls: bool = OPTION_DEFAULTS.tls,
        tls_ca_file: str | None = OPTION_DEFAULTS.tls_ca_file,
        tls_cert_file: str | None = OPTION_DEFAULTS.tls_cert_file,
        tls_key_file: str | None = OPTION_DEFAULTS.tls_key_file,
        tls_hostname: str | None = OPTION_DEFAULTS.tls_hostname,
        tls_handshake_first: bool = OPTION_DEFAULTS.tls_handshake_first,
        ws_headers: tuple[tuple[str, str], ...] | list[tuple[str, str]] | dict[str, str] = OPTION_DEFAULTS.ws_headers,
        ws_compression: bool = OPTION_DEFAULTS.ws_compression,
        error_cb: ErrorCallback | None = None,
        closed_cb: EventCallback | None = None,
        disconnected_cb: EventCallback | None = None,
        reconnected_cb: EventCallback | None = None,
        tls_context: ssl.SSLContext | None = None,
        user_jwt_cb: Callable[[], str] | None = None,
        signature_cb: Callable[[bytes], bytes] | None = None,
        server_selector: ServerSelector | None = None,
        **unknown: Never,
    ) -> None:
        """As :func:`jsclient.connect` (same keywords); ``servers`` may also be an Options, as ``options=``."""
        refuse_unknown(unknown)  # a type checker flags these at the call; at run time they are a jsclient.Error
        if context is not None and context is not False:
            nats_context: NatsContext | None = load_context(context)
        else:
            nats_context = None
        options, credentials = _options_and_credentials(
            servers, options, locals(), user_jwt_cb, signature_cb, nats_context
        )
        for name, cb in (
            ("error_cb", error_cb),
            ("closed_cb", closed_cb),
            ("disconnected_cb", disconnected_cb),
            ("reconnected_cb", reconnected_cb),
            ("server_selector", server_selector),
        ):
            if cb is not None and not callable(cb):
                raise InvalidArgumentError(f"{name} must be callable")
        if tls_context is not None and not isinstance(tls_context, ssl.SSLContext):
            raise InvalidArgumentError(f"tls_context must be an ssl.SSLContext, not {type(tls_context).__name__}")
        self.options = options
        self._nats_context = nats_context
        self._callbacks = Callbacks(error_cb, closed_cb, disconnected_cb, reconnected_cb, server_selector)
        self._tls_context = tls_context
        self._credentials = credentials
        urls = list(options.servers)
        if not options.no_randomize:
            SPREAD.shuffle(urls)
        self._pool = urls
        self._encoder = PubEncoder()
        self._pub_lines = self._encoder.lines  # the publish fast path's cache (cleared, never replaced)
        self._nuid = secrets.token_hex(8)
        self._inbox_seq = itertools.count(1)
        self._forked = False
        self._reopen_lock = threading.Lock()
        self._install(self._new_session())
        self._session.connect()

    def _new_session(self, forked_from: int | None = None) -> Session:
        return Session(
            self,
            self.options,
            callbacks=self._callbacks,
            pool=self._pool,
            encoder=self._encoder,
            tls_context=self._tls_context,
            credentials=self._credentials,
            forked_from=forked_from,
        )

    def _install(self, session: Session) -> None:
        """Make ``session`` current and bind its hot paths here."""
        self._session = session
        self._queue_message = session.writer.queue_message
        self._append = session.writer.append
        self._requests = session.requests

    @property
    def core(self) -> CoreAPI:
        """The internal interface JetStream, messages and subscriptions use (not for applications).

        In a forked child it is the public calls' session too: a new connection
        (reconnect_after_fork=True), or ForkedConnectionError.
        """
        if self._forked:
            self._check_fork()
        return self._session

    # -- properties ----------------------------------------------------------
    def __repr__(self) -> str:
        url = self._session.connected_url
        return f"<jsclient.Connection {mask_url(url) if url else '-'} {self.state.value}>"

    @property
    def state(self) -> State:
        """Where the connection is in its life (connecting, connected, reconnecting, draining, closed)."""
        return self._session.writer.state

    @property
    def is_connected(self) -> bool:
        """Whether the connection has a live link to a server (not reconnecting, draining or closed)."""
        return self.state is State.CONNECTED

    @property
    def is_closed(self) -> bool:
        """Whether the connection is closed for good."""
        return self.state is State.CLOSED

    @property
    def is_draining(self) -> bool:
        """Whether :meth:`drain` is under way."""
        return self.state in (State.DRAINING_SUBS, State.DRAINING_PUBS)

    @property
    def nats_context(self) -> NatsContext | None:
        """The NATS CLI context the connection was made with (``connect(context=...)``), or None."""
        return self._nats_context

    @property
    def connected_url(self) -> str | None:
        """The URL of the server connected to last (password or token shown as ``***``), or None before any."""
        url = self._session.connected_url
        return mask_url(url) if url else None

    @property
    def servers(self) -> list[str]:
        """The server pool, as URLs (the ones given, then those the cluster announced, with the scheme connected with).

        Passwords and tokens in them are shown as ``***``.
        """
        session = self._session
        with session.pool_lock:
            return [mask_url(url) for url in session.pool]

    def set_servers(self, servers: str | list[str] | tuple[str, ...]) -> None:
        """Replace the server pool; the connection stays where it is, and the next reconnect dials the new pool.

        The URLs are checked as ``servers`` is by :func:`connect` (and must be
        of the kind connected with: WebSocket or not) before anything
        changes; ``options.servers`` becomes them.  Servers the cluster
        announces join the pool again unless ``ignore_discovered_servers``.

        Args:
            servers: The new pool, a URL or a non-empty list of URLs.

        Raises:
            InvalidArgumentError: A bad or empty list, or URLs of the other kind (WebSocket or not) than the
                connection's; nothing changes.
        """
        given = (servers,) if isinstance(servers, str) else servers
        if not isinstance(given, (list, tuple)):
            raise InvalidArgumentError(
                f"servers must be a URL or a non-empty list of URLs, not {type(servers).__name__}"
            )
        options = self.options.replace(servers=tuple(given))
        if _websocket(options.servers[0]) != _websocket(self.options.servers[0]):
            raise InvalidArgumentError(
                "set_servers cannot move a connection between WebSocket (ws://, wss://) and nats:// or tls:// URLs"
            )
        self._check_fork()
        session = self._session
        if session.writer.state is State.CLOSED:
            raise ConnectionClosedError(session.closed_reason())
        session.set_servers(options)
        self.options = options

    @property
    def server_info(self) -> dict[str, Any]:
        """The INFO of the server last heard from, as a dict (a copy)."""
        return dict(self._session.info)

    @property
    def server_version(self) -> ServerVersion | None:
        """The release of the server last heard from (its INFO), comparable as in ``nc.server_version >= (2, 11)``.

        None before any server answered, or if its INFO names no release.
        """
        text = self._session.info.get("version")
        return announced(text) if isinstance(text, str) else None

    @property
    def max_payload(self) -> int:
        """The largest message the server takes, in bytes (headers included), as its INFO says."""
        return self._encoder.max_payload

    @property
    def num_subscriptions(self) -> int:
        """Live subscriptions, the internal request inbox not counted."""
        return len(self._session.user_subscriptions())

    @property
    def subscriptions(self) -> list[Subscription]:
        """The live subscriptions, as a new list, the internal request inbox left out.

        Those JetStream makes for its consumers are among them.  Safe from any thread, without a lock
        (the table is copied at once), so that a monitor can read each one's ``pending_msgs``,
        ``pending_bytes`` and ``dropped`` while the connection runs.
        """
        return self._session.user_subscriptions()

    @property
    def last_error(self) -> Exception | None:
        """The last error the connection met (a lost link, a server ``-ERR``), or None."""
        return self._session.last_error

    @property
    def reconnects(self) -> int:
        """How many times the connection was restored after a loss."""
        return self._session.reconnects

    def stats(self) -> dict[str, int]:
        """Counts of the messages and payload bytes received and sent, and of late replies.

        Returns:
            ``in_msgs``, ``in_bytes``, ``out_msgs`` and ``out_bytes``, by name (a new dict), and
            ``late_replies``: replies that came for a request that had already ended (it timed out, or
            another responder answered first; each is logged at DEBUG).

        Raises:
            : Nothing.
        """
        return self._session.stats()

    # -- publishing ------------------------------------------------------------
    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        reply: str | None = None,
        headers: HeadersInput | None = None,
    ) -> None:
        """Queue one message for sending (returns before the server has it; see flush).

        Args:
            subject: Where to publish: a literal subject (no wildcards).
            payload: The message body (bytes-like).
            reply: A subject the receivers may answer to (e.g. one from :meth:`new_inbox`).
            headers: A mapping of names to a value or a list of values, or a :class:`jsclient.Headers`.

        Raises:
            InvalidArgumentError: A bad subject or reply subject (BadSubjectError), a bad header
                (BadHeaderError) or a message over the server's max_payload (MaxPayloadError); nothing is sent.
        """
        if type(payload) is not bytes:
            payload = _as_bytes(payload)
        if reply is None and headers is None:
            n = len(payload)
            try:
                entry = self._pub_lines.get(subject)
            except TypeError:  # unhashable: let the check name the problem
                entry = None
            line = entry[1] if entry is not None and entry[0] == n else self._encoder.pub_line(subject, n)
            if self._queue_message(line, payload, n):
                return
            self._check_fork()
            self._append(line + payload + b"\r\n", payload_size=n)
            return
        self._check_fork()
        self._session.publish_message(subject, payload, reply=reply, headers=headers)

    def publish_encoded(
        self, frames: bytes | memoryview, *, messages: int, payload_bytes: int, send_now: bool = False
    ) -> None:
        """Queue ``messages`` PUB/HPUB frames encoded by the caller (``jsclient.protocol.encode_*``).

        For batch publishers (atomic batches, the Spark sink) that validate
        subjects once and encode thousands of frames without a call per
        message.  Nothing here checks the frames: a malformed one makes the
        server close the connection.

        Args:
            frames: The encoded frames, back to back (copied into the write buffer before this returns).
            messages: How many messages they hold (for :meth:`stats`).
            payload_bytes: Their payload bytes in all (for :meth:`stats`).
            send_now: Send the buffer from this thread at once (unless another thread is sending it), not
                from the flusher, which is then not woken: for large blocks of frames, where a wake-up of
                another thread costs more than the send.
        """
        if self._forked:
            self._check_fork()
        self._append(frames, payload_size=payload_bytes, messages=messages, send_now=send_now)

    def rtt(self, timeout: float | None = 2.0) -> float:
        """The round trip to the server, in seconds: a PING answered by its PONG, behind what is queued.

        Args:
            timeout: Seconds to wait for the PONG; ``None``, no limit; ``0`` is refused (see :doc:`/conventions`).

        Returns:
            The seconds from sending the PING to its PONG.

        Raises:
            TimeoutError: No PONG within ``timeout``.
            ConnectionLostError: The link broke after the PING left.
            ConnectionClosedError: The connection is closed, or closed while waiting.
        """
        started = time.perf_counter()
        self.flush(timeout)
        return time.perf_counter() - started

    def force_reconnect(self) -> None:
        """Drop the connection and reconnect as after a loss: subscriptions come back, queued
        publishes are sent, and the disconnected and reconnected callbacks run (not the error one).

        Raises:
            InvalidArgumentError: The connection was made with ``allow_reconnect=False``.
        """
        self._check_fork()
        self._session.force_reconnect()

    def flush(self, timeout: float | None = 2.0) -> None:
        """Return once the server has processed everything sent before this call.

        While reconnecting, the PING waits in the buffer and the wait goes on
        within ``timeout``; if the connection breaks after the PING left,
        ConnectionLostError says the server may not have seen everything.

        Args:
            timeout: Seconds to wait for the server; ``None``, no limit; ``0`` is refused (see :doc:`/conventions`).

        Raises:
            TimeoutError: The server did not answer within ``timeout``.
            ConnectionLostError: The link broke after the PING left.
            ConnectionClosedError: The connection is closed, or closed while waiting.
        """
        timeout = answer_limit(timeout)
        self._check_fork()
        self._session.flush(timeout)

    # -- subscribing -------------------------------------------------------
    @renamed_keywords(cb="callback", max_msgs="max_messages")
    def subscribe(
        self,
        subject: str,
        queue: str | None = None,
        callback: MsgCallback | None = None,
        *,
        max_messages: int | None = None,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
    ) -> Subscription:
        """Subscribe; with ``callback`` messages go to it on the subscription's own thread.

        Args:
            subject: The subject to receive, wildcards allowed (``*`` one token, ``>`` the rest).
            queue: A queue group: each message goes to one subscriber of the group.
            callback: Called with each message, in order, on the subscription's own thread; an exception it
                raises goes to the error callback.  Without one, take messages with
                :meth:`Subscription.next_msg` or by iterating.
            max_messages: Unsubscribe by itself after that many messages.
            pending_msgs_limit: Messages the subscription holds before it drops new ones (reported as a
                SlowConsumerError); left out, the connection's ``pending_msgs_limit``.
            pending_bytes_limit: The same bound in payload bytes; left out, the connection's ``pending_bytes_limit``.

        Returns:
            The subscription.

        Raises:
            InvalidArgumentError: A bad subject or queue name (BadSubjectError), a callback that is not
                callable, a count that is not an int >= 1, or ``cb=`` or ``max_msgs=`` beside its new name;
                nothing is sent.
        """
        check_subscribe_subject(subject)
        if queue is not None:
            check_queue_name(queue)
        if callback is not None and not callable(callback):
            raise InvalidArgumentError("callback must be callable")
        for name, value in (
            ("max_messages", max_messages),
            ("pending_msgs_limit", pending_msgs_limit),
            ("pending_bytes_limit", pending_bytes_limit),
        ):
            if value is not None:
                whole(name, value)
        self._check_fork()
        return self._session.subscribe(
            subject,
            queue,
            callback,
            max_messages,
            pending_msgs_limit or self.options.pending_msgs_limit,
            pending_bytes_limit or self.options.pending_bytes_limit,
        )

    # -- request/reply -----------------------------------------------------
    def new_inbox(self) -> str:
        """A unique subject under the inbox prefix.

        Returns:
            ``<inbox_prefix>.<unique token>``, unique to this connection.

        Raises:
            : Nothing.
        """
        return f"{self.options.inbox_prefix}.{self._nuid}{next(self._inbox_seq):x}"

    def request(
        self,
        subject: str,
        payload: bytes = b"",
        timeout: float | None = 2.0,
        headers: HeadersInput | None = None,
    ) -> Msg:
        """Publish with a reply inbox and wait for the first response.

        Raises NoRespondersError when nobody is subscribed, TimeoutError when
        no answer comes within ``timeout``, ConnectionClosedError when the
        connection is or gets closed.  Each error's ``outcome`` says whether
        the request may have been processed (UNKNOWN) or surely was not
        (NOT_DELIVERED), and its ``failure`` why it ended (a
        :class:`jsclient.RequestFailure`).  Safe from many threads at once.

        Args:
            subject: Where to send the request: a literal subject.
            payload: The request's body (bytes-like).
            timeout: Seconds to wait for the reply; ``None``, no limit; ``0`` is refused (see :doc:`/conventions`).
            headers: A mapping of names to a value or a list of values, or a :class:`jsclient.Headers`.

        Returns:
            The first reply.

        Raises:
            InvalidArgumentError: A bad ``timeout``, subject (BadSubjectError) or header (BadHeaderError), or a
                message over the server's max_payload (MaxPayloadError); nothing is sent.
            NoRespondersError: Nobody is subscribed to ``subject``.
            TimeoutError: No reply within ``timeout``; the request may have been processed.
            ConnectionClosedError: The connection is closed, or draining and no longer takes messages, or it
                closed while waiting.
        """
        timeout = answer_limit(timeout)
        if self._forked:
            self._check_fork()
        return self._requests.request(subject, payload, timeout, headers)

    def request_async(
        self,
        subject: str,
        payload: bytes = b"",
        timeout: float | None = 2.0,
        headers: HeadersInput | None = None,
    ) -> Future[Msg]:
        """Like :meth:`request` without waiting: a Future resolved with the reply.

        Every future resolves: with the reply, NoRespondersError, TimeoutError
        after ``timeout``, or ConnectionClosedError, with ``outcome`` and
        ``failure`` as for :meth:`request`.  Its done-callbacks run on the
        connection's events thread, never on the reader.

        Args:
            subject: Where to send the request: a literal subject.
            payload: The request's body (bytes-like).
            timeout: Seconds after which the future fails with TimeoutError; ``None``, no limit; ``0`` is
                refused (see :doc:`/conventions`).
            headers: A mapping of names to a value or a list of values, or a :class:`jsclient.Headers`.

        Returns:
            A ``concurrent.futures.Future`` of the reply (its errors are above).

        Raises:
            InvalidArgumentError: A bad ``timeout``, subject (BadSubjectError) or header (BadHeaderError), or a
                message over the server's max_payload (MaxPayloadError); nothing is sent.
        """
        timeout = answer_limit(timeout)
        if self._forked:
            self._check_fork()
        requests = self._requests
        return requests.request_async(subject, payload, timeout, headers, requests.plain_kind)

    @renamed_keywords(max_msgs="max_messages")
    def request_many(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        timeout: float | None = 2.0,
        stall: float | None = None,
        max_messages: int | None = None,
        sentinel: Sentinel | bool | None = None,
        headers: HeadersInput | None = None,
    ) -> Replies:
        """Every reply to one request, as they come (ADR-47): iterate the result.

        The replies end after ``timeout`` of waiting, after ``stall`` without a
        further reply, after ``max_messages``, when ``sentinel(msg)`` is False
        (``sentinel=True``: a reply with an empty payload ends them), or on
        ``stop()``.  NoRespondersError if nobody is subscribed.

        Args:
            subject: Where to send the request: a literal subject.
            payload: The request's body (bytes-like).
            timeout: Seconds of waiting in all, after which the replies end; ``None``, no limit; ``0`` is
                refused (see :doc:`/conventions`).
            stall: Seconds to wait for each further reply after the first; left out, only ``timeout`` counts.
            max_messages: End after that many replies.
            sentinel: Called with each reply; False ends the replies (that reply is not given).  ``True``:
                a reply with an empty payload ends them.
            headers: A mapping of names to a value or a list of values, or a :class:`jsclient.Headers`.

        Returns:
            The replies: iterate them (or use them in a ``with`` block to stop at its end).

        Raises:
            InvalidArgumentError: A bad ``timeout``, ``stall``, ``max_messages``, ``sentinel``, subject
                (BadSubjectError) or header (BadHeaderError), a message over the server's max_payload
                (MaxPayloadError), or ``max_msgs=`` beside ``max_messages=``; nothing is sent.
            NoRespondersError: While iterating: nobody is subscribed to ``subject`` (the first answer is the
                server's no-responders status).
            ConnectionClosedError: The connection is closed, or draining and no longer takes messages; while
                iterating, it was closed under the replies (``outcome`` UNKNOWN).
        """
        timeout = answer_limit(timeout)
        if self._forked:
            self._check_fork()
        return request_many(
            self, subject, payload, timeout=timeout, stall=stall, max_messages=max_messages, sentinel=sentinel,
            headers=headers,
            closed_by=lambda: self._session.closed_by,
        )

    def trace_message(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        headers: HeadersInput | None = None,
        deliver: bool = False,
        timeout: float | None = 2.0,
    ) -> MessageTrace:
        """Publish a message that every server it crosses reports on (ADR-41, nats-server 2.11+), and
        return its path: what ``nats trace`` shows.

        The reports come to an inbox of the call's own; it returns as soon as the path is complete (every
        server the message was forwarded to has reported) or when ``timeout`` has passed, with what came
        (``complete`` False, ``missing`` naming the hops that did not report).

        Args:
            subject: Where to publish: a literal subject.
            payload: The message's body (bytes-like).
            headers: Headers to send with it, as for :meth:`publish` (not the ``Nats-Trace-*`` ones, which
                this call sets).
            deliver: Deliver the message as any other; left False, the servers trace its path without
                delivering it (``Nats-Trace-Only``): no subscriber gets it, no stream stores it.
            timeout: Seconds to wait for the path's reports in all; ``None``, no limit; ``0`` is refused
                (see :doc:`/conventions`).

        Returns:
            The path: each server's report, tied together by hop ids; ``str()`` shows it as a tree.

        Raises:
            InvalidArgumentError: A bad ``timeout``, subject (BadSubjectError), header (BadHeaderError, or
                one that sets the tracing headers or asks for snappy-compressed reports) or ``deliver``, or
                a message over the server's max_payload (MaxPayloadError); nothing is sent.
            BadPayloadError: ``payload`` is not bytes-like.
            FeatureNotSupportedError: The server is older than 2.11 (it would deliver the message and
                report nothing); nothing is sent.
            TimeoutError: Not one report came within ``timeout`` (the connection may not publish to its
                inbox, where the servers send them).
            ProtocolError: A report that is not one (or in an encoding jsclient does not read).
            ConnectionClosedError: The connection is closed, or draining, or it closed while waiting.
            ReconnectBufferFullError: While reconnecting, the message does not fit in ``reconnect_buf_size``.
            ForkedConnectionError: Called in a process forked from the one that connected (unless
                ``reconnect_after_fork``).
        """
        seconds = answer_limit(timeout)
        self._check_fork()  # not a hot path: the check itself, not the flag first
        return trace_message(self, subject, payload, headers=headers, deliver=deliver, timeout=seconds)

    # -- JetStream -------------------------------------------------------------
    def jetstream(
        self,
        prefix: str | None = None,
        domain: str | None = None,
        timeout: float | None = 5.0,
        publish_async_max_pending: int = 4000,
    ) -> JetStream:
        """A JetStream context on this connection (cheap: make as many as you like).

        ``timeout`` is the default of its calls that wait for the server (None: no limit).  With neither
        ``prefix`` nor ``domain``, those of the connection's NATS context apply, if it sets them.

        Args:
            prefix: The subject prefix of the JetStream API (another account's, imported, for example);
                left out, the NATS context's ``jetstream_api_prefix``, else ``$JS.API``.
            domain: A JetStream domain: the API of that domain (``$JS.<domain>.API``), instead of ``prefix``;
                left out (with ``prefix``), the NATS context's ``jetstream_domain``.
            timeout: Seconds its calls wait for the server by default; ``None``, no limit; ``0`` is refused.
            publish_async_max_pending: How many async publishes may wait for their acks at once.

        Returns:
            The JetStream context.

        Raises:
            InvalidArgumentError: A bad ``prefix``, ``domain``, ``timeout`` or ``publish_async_max_pending``.
        """
        from .jetstream.context import JetStream

        if prefix is None and domain is None and self._nats_context is not None:
            prefix, domain = self._nats_context.jetstream_api_prefix, self._nats_context.jetstream_domain
        return JetStream(
            self,
            prefix="$JS.API" if prefix is None else prefix,
            domain=domain,
            timeout=timeout,
            publish_async_max_pending=publish_async_max_pending,
        )

    # -- fork ----------------------------------------------------------------
    def _after_fork_in_child(self) -> None:
        """The fork hook, in the child while it is the only thread (see jsclient.core.fork)."""
        old = self._session
        old.disown()
        self._forked = True
        self._reopen_lock = threading.Lock()
        self._nuid = secrets.token_hex(8)  # the parent goes on making inboxes from the same sequence
        self._install(self._new_session(forked_from=old.pid))

    def _check_fork(self) -> None:
        """In a forked child: reconnect (reconnect_after_fork=True) or raise ForkedConnectionError."""
        if not self._forked:
            return
        if not self.options.reconnect_after_fork:
            raise self._session.refusal()
        with self._reopen_lock:
            if self._forked:
                session = self._new_session()
                session.connect()
                self._install(session)
                self._forked = False

    # -- ending ------------------------------------------------------------
    def drain(self, timeout: Timeout = DEFAULT) -> None:
        """Stop every subscription, deliver what they hold, send what is buffered, close.

        ``timeout`` defaults to the ``drain_timeout`` option.  Requests still
        waiting at the end give up with ConnectionClosedError, ``failure`` DRAINED.

        Args:
            timeout: Seconds the whole drain may take; ``None``, no limit; ``0`` is refused (see
                :doc:`/conventions`).

        Raises:
            ConnectionClosedError: The connection is closed, reconnecting or already draining; nothing is done.
            TimeoutError: A subscription still held messages, or the server did not answer, when ``timeout``
                ran out; the connection is closed all the same.
            ConnectionLostError: The link broke during the drain; the connection is closed all the same.
        """
        self._session.drain(answer_limit(timeout, self.options.drain_timeout))

    def close(self) -> None:
        """Send what is buffered (best effort) and close.  Idempotent.

        Requests still waiting end in ConnectionClosedError with ``failure``
        CLOSED (after :meth:`drain`: DRAINED).

        Raises:
            : Nothing; closing a closed connection does nothing.
        """
        self._session.close()

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Whether the connection is closed, waiting up to ``timeout`` for it (None: no limit; 0: only look).

        Args:
            timeout: Seconds to wait for the close; ``None``, no limit; ``0``, only look.

        Returns:
            True once the connection is closed; False if it was still open when ``timeout`` ran out.
        """
        return self._session.closed_event.wait(take_limit(timeout))

    def __enter__(self) -> Connection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def live_connections() -> list[Connection]:
    """Every connection of this process from its connect to its close, as a new list.

    For monitors that read each connection's counters (:meth:`Connection.stats`,
    :attr:`Connection.reconnects`, :attr:`Connection.subscriptions`): the OpenTelemetry
    metrics do, for connections made before they were switched on too.  A connection
    is listed once connected (or, with ``retry_on_failed_connect``, trying in the
    background) and no more once closed; the list holds no connection alive beyond
    the caller's use of it (the registry is weak, filled once per connection).  Any thread.

    Returns:
        The live connections, in no particular order.

    Raises:
        : Nothing.
    """
    return [obj for obj in fork.tracked() if isinstance(obj, Connection)]


def _websocket(url: str) -> bool:
    return url.startswith(("ws://", "wss://"))
