"""Connection options: one frozen, validated, picklable value object.

Options hold data only (no callbacks, no sockets, no SSL contexts) so they can
be pickled to Spark executors and compared as cache keys.  Every field is
checked in ``__post_init__``; a bad value raises :class:`InvalidArgumentError`
naming the option before any connection is attempted.  Immutable, so any
thread may read it without a lock.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

from .checks import seconds, whole
from .errors import InvalidArgumentError

DEFAULT_URL = "nats://127.0.0.1:4222"
SCHEMES = ("nats", "tls", "ws", "wss")
WEBSOCKET_SCHEMES = ("ws", "wss")
#: Beyond this a poll loop costs more CPU than any wake-up it could spare.
MAX_SPIN_WAIT = 0.01
#: The options that each give one kind of credentials (``password`` goes with ``user``).
CREDENTIALS = ("user", "token", "nkey_seed", "creds_file", "user_credentials")


def mask_url(url: str) -> str:
    """The URL with any password or token replaced by ``***`` (for repr and errors)."""
    parts = urlsplit(url)
    if not parts.username and not parts.password:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = "***" if parts.password is None else f"{parts.username}:***"
    return parts._replace(netloc=f"{user}@{host}").geturl()


@dataclass(frozen=True, kw_only=True)
class Options:
    """Everything :func:`jsclient.connect` needs, except callbacks.

    Frozen and picklable; every field is checked when the Options is made (or changed with
    :meth:`replace`).  The defaults are in the signature.

    Attributes:
        servers: The URLs to connect to, normalised (scheme and port filled in); a single str is one URL.
        name: The client's name, sent to the server, whose monitoring shows it.
        user: The user name, for user and password authentication.
        password: The user's password (needs ``user``); repr leaves it out.
        token: An authentication token (not with ``user``); repr leaves it out.
        verbose: Ask the server to confirm every protocol command with ``+OK`` (for debugging).
        pedantic: Ask the server to check the protocol more strictly (for debugging).
        echo: Deliver the connection's own publishes to its own subscriptions; False asks the server not to.
        connect_timeout: Seconds each step of connecting to one server may take (the dial, TLS, the server's
            INFO, its answer to CONNECT).
        pending_msgs_limit: Messages a new subscription holds by default before it drops new ones (reported
            as a SlowConsumerError).
        pending_bytes_limit: The same default bound, in payload bytes.
        max_pending_size: Bytes buffered for writing at which ``publish`` sends them itself instead of
            leaving them to the flusher thread (back-pressure).
        inbox_prefix: The subject prefix of reply inboxes (requests, :meth:`Connection.new_inbox`), for
            permissions that allow replies only under a prefix of your own.
        drain_timeout: Seconds a drain (``nc.drain()``, ``sub.drain()``, ``service.stop()``) may take when its
            ``timeout`` is left out.
        allow_reconnect: Reconnect when the link is lost; False closes the connection instead.
        max_reconnect_attempts: Rounds over the server pool after the first one, before giving up (0: the first
            round only); -1 retries forever.
        reconnect_time_wait: Longest wait between rounds, in seconds (the backoff grows to it), plus up to
            ``reconnect_jitter``.
        reconnect_jitter: Seconds, at most, added at random to each wait between rounds, so that clients
            cut off together do not all come back at once.
        retry_on_failed_connect: When no server takes the first connect, return anyway and keep trying as a
            reconnect would (publishes buffer, the reconnected callback says when it is up; closed after the
            last round).
        reconnect_buf_size: Bytes of publishes kept while reconnecting; past it ``publish`` raises
            ReconnectBufferFullError.
        no_randomize: Try the servers in the order given; otherwise the pool is shuffled, which spreads
            clients over a cluster.
        ignore_discovered_servers: Keep the pool to the URLs given: do not add the servers a cluster announces.
        ping_interval: Seconds between the PINGs that check the link is alive.
        max_outstanding_pings: Unanswered PINGs at which the link counts as stale: it is dropped (and
            reconnected, if allowed).
        spin_wait: Seconds a thread reading its own reply (see ``request``) polls the socket before it
            sleeps, while replies keep coming back that fast; the reader thread does the same while async
            requests are out.  0 never polls (nor does a one-CPU machine).  On virtual machines waking a
            sleeping thread can cost more than a round trip to a server nearby.
        reconnect_after_fork: In a forked child, reconnect on first use instead of raising
            ForkedConnectionError.
        nkey_seed: An nkey seed, or the path of a file that holds one (read again at every connect), to sign
            the server's nonce; a callable that returns one is accepted by ``connect``.  repr leaves it out.
        creds_file: The path of a .creds file (user JWT and nkey seed), read again at every connect.
        user_credentials: A .creds file's path or its text (from a secret manager); a callable is accepted
            by ``connect``.  repr leaves it out.
        tls: Use TLS even for nats:// URLs (tls:// URLs and servers requiring it always do).
        tls_ca_file: A file of CA certificates (PEM) to verify the server with, instead of the system's.
        tls_cert_file: A client certificate (PEM) to present to the server (mutual TLS).
        tls_key_file: The private key of ``tls_cert_file``, when that file does not hold it (needs
            ``tls_cert_file``).
        tls_hostname: Name to verify the server certificate against, instead of the URL's host.
        tls_handshake_first: Start TLS before the server's INFO (a server with
            ``tls { handshake_first: true }``, or a TLS proxy).
        ws_headers: Extra HTTP headers for the WebSocket upgrade request, as (name, value) pairs (a dict is
            accepted): a proxy's Authorization, a JWT cookie.  Values may be secrets, so repr leaves them out.
        ws_compression: Offer permessage-deflate on WebSocket URLs (the server takes it only with
            ``websocket { compression: true }``).

    Raises:
        InvalidArgumentError: A bad value, naming the field, or fields that contradict each other (two kinds
            of credentials, ``password`` without ``user``, WebSocket and other URLs mixed, ...).
    """

    servers: tuple[str, ...] = (DEFAULT_URL,)
    name: str | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    verbose: bool = False
    pedantic: bool = False
    echo: bool = True
    connect_timeout: float = 2.0
    pending_msgs_limit: int = 512 * 1024
    pending_bytes_limit: int = 64 * 1024 * 1024
    max_pending_size: int = 2 * 1024 * 1024
    inbox_prefix: str = "_INBOX"
    drain_timeout: float = 30.0
    # -- resilience --
    allow_reconnect: bool = True
    max_reconnect_attempts: int = 60
    reconnect_time_wait: float = 2.0
    reconnect_jitter: float = 0.1
    retry_on_failed_connect: bool = False
    reconnect_buf_size: int = 8 * 1024 * 1024
    no_randomize: bool = False
    ignore_discovered_servers: bool = False
    ping_interval: float = 120.0
    max_outstanding_pings: int = 2
    spin_wait: float = 0.0002
    reconnect_after_fork: bool = False
    # -- security --
    nkey_seed: str | None = field(default=None, repr=False)
    creds_file: str | None = None
    user_credentials: str | None = field(default=None, repr=False)
    tls: bool = False
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_hostname: str | None = None
    tls_handshake_first: bool = False
    # -- WebSocket (ws:// and wss:// URLs) --
    ws_headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    ws_compression: bool = False

    def __new__(cls, *args: Any, **kwargs: Any) -> Options:
        """Refuses what the generated ``__init__`` would refuse with a bare TypeError (a positional value, an
        unknown name) with a :class:`jsclient.Error`, like every other bad option."""
        if args:
            raise InvalidArgumentError("Options takes keywords only: Options(servers=...), or Options.build(url, ...)")
        refuse_unknown(kwargs)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        servers: Any = self.servers
        if isinstance(servers, str):
            servers = (servers,)
        if not isinstance(servers, (tuple, list)) or not servers:
            raise InvalidArgumentError("servers must be a URL or a non-empty list of URLs")
        normalised = tuple(normalise_url(s) for s in servers)
        object.__setattr__(self, "servers", normalised)
        if len({urlsplit(s).scheme in WEBSOCKET_SCHEMES for s in normalised}) > 1:
            raise InvalidArgumentError("servers mixes ws:// or wss:// URLs with nats:// or tls:// ones; use one kind")
        object.__setattr__(self, "ws_headers", _ws_headers(self.ws_headers))
        if self.tls_handshake_first is True and any(s.startswith("ws://") for s in normalised):
            raise InvalidArgumentError("tls_handshake_first does not apply to ws:// URLs (wss:// starts with TLS)")
        for key in (
            "name",
            "user",
            "password",
            "token",
            "nkey_seed",
            "creds_file",
            "user_credentials",
            "tls_ca_file",
            "tls_cert_file",
            "tls_key_file",
            "tls_hostname",
        ):
            value = getattr(self, key)
            if value is not None and not isinstance(value, str):
                raise InvalidArgumentError(f"{key} must be a str, not {type(value).__name__}")
        if self.password is not None and self.user is None:
            raise InvalidArgumentError("password needs user")
        if self.token is not None and self.user is not None:
            raise InvalidArgumentError("token and user/password are mutually exclusive")
        kinds = [key for key in CREDENTIALS if getattr(self, key)]
        if len(kinds) > 1:
            raise InvalidArgumentError(f"use one kind of credentials, not {' and '.join(sorted(kinds))}")
        if self.tls_key_file and not self.tls_cert_file:
            raise InvalidArgumentError("tls_key_file needs tls_cert_file")
        for key in (
            "verbose",
            "pedantic",
            "echo",
            "allow_reconnect",
            "no_randomize",
            "ignore_discovered_servers",
            "reconnect_after_fork",
            "tls",
            "tls_handshake_first",
            "retry_on_failed_connect",
            "ws_compression",
        ):
            if not isinstance(getattr(self, key), bool):
                raise InvalidArgumentError(f"{key} must be a bool, not {getattr(self, key)!r}")
        seconds("connect_timeout", self.connect_timeout)
        seconds("drain_timeout", self.drain_timeout)
        whole("pending_msgs_limit", self.pending_msgs_limit)
        whole("pending_bytes_limit", self.pending_bytes_limit)
        whole("max_pending_size", self.max_pending_size)
        whole("reconnect_buf_size", self.reconnect_buf_size)
        whole("max_outstanding_pings", self.max_outstanding_pings)
        seconds("reconnect_time_wait", self.reconnect_time_wait, allow_zero=True)
        seconds("reconnect_jitter", self.reconnect_jitter, allow_zero=True)
        seconds("ping_interval", self.ping_interval)
        seconds("spin_wait", self.spin_wait, allow_zero=True)
        if self.spin_wait > MAX_SPIN_WAIT:
            raise InvalidArgumentError(f"spin_wait must be at most {MAX_SPIN_WAIT} s, not {self.spin_wait!r}")
        attempts = self.max_reconnect_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or (attempts < 0 and attempts != -1):
            raise InvalidArgumentError(f"max_reconnect_attempts must be an int >= 0 or -1, not {attempts!r}")
        prefix = self.inbox_prefix
        if not isinstance(prefix, str) or not prefix or any(c in prefix for c in " \t\r\n*>"):
            raise InvalidArgumentError(f"inbox_prefix must be a literal subject, not {prefix!r}")

    def __repr__(self) -> str:
        shown = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "servers":
                value = tuple(mask_url(s) for s in value)
            elif f.name in ("password", "token", "nkey_seed", "user_credentials") and value is not None:
                value = "***"
            elif f.name == "ws_headers":
                value = tuple((name, "***") for name, _ in value)
            shown.append(f"{f.name}={value!r}")
        return f"Options({', '.join(shown)})"

    @classmethod
    def build(
        cls, servers: str | list[str] | tuple[str, ...] | None = None, *, options: Options | None = None, **kwargs: Any
    ) -> Options:
        """Options from keywords, each replacing that field of ``options`` (else of the defaults).

        The one place keywords become Options (:func:`jsclient.connect` and :class:`jsclient.Connection`
        come here).  A keyword left at its ``OPTION_DEFAULTS`` marker was not given, so it changes
        nothing.  An unknown name is refused by name, since ``**kwargs`` escapes the type checker.

        Args:
            servers: A URL or a list of URLs; left out, those of ``options`` (else the default).
            options: The Options to start from; left out, the defaults.
            **kwargs: Fields to set, by name.

        Returns:
            The new Options.

        Raises:
            InvalidArgumentError: An unknown field name, ``options`` that is not an Options, or a bad value.
        """
        refuse_unknown(kwargs)
        given = given_options(kwargs)
        if servers is not None:
            given["servers"] = servers  # a str or list is normalised to a tuple by __post_init__
        if options is None:
            return cls(**given)
        if not isinstance(options, Options):
            raise InvalidArgumentError(f"options must be a jsclient.Options, not {type(options).__name__}")
        return dataclasses.replace(options, **given) if given else options

    def replace(self, **changes: Any) -> Options:
        """A copy with some fields changed (an Options is frozen).

        Args:
            **changes: The fields to change, by name, and their new values.

        Returns:
            The new Options, checked as a new one is.

        Raises:
            InvalidArgumentError: An unknown field name or a bad value (named).
        """
        return dataclasses.replace(self, **changes)


def given_options(keywords: Mapping[str, Any]) -> dict[str, Any]:
    """The keywords a caller gave: those not left at their ``OPTION_DEFAULTS`` marker.

    What a keyword replaces depends on it (``options=``'s field, a NATS context's value), so "left
    out" has to stay distinct from "given as the default value".
    """
    return {name: value for name, value in keywords.items() if not isinstance(value, _NotGiven)}


def refuse_unknown(names: Iterable[str]) -> None:
    """InvalidArgumentError naming each name that is no field of Options, with the field it is closest to."""
    fields = [f.name for f in dataclasses.fields(Options)]
    unknown = sorted(set(names) - set(fields))
    if unknown:
        named = []
        for name in unknown:
            near = difflib.get_close_matches(name, fields, n=1)
            named.append(f"{name} (did you mean {near[0]}?)" if near else name)
        raise InvalidArgumentError(f"unknown connection option(s): {', '.join(named)}")


def normalise_url(url: Any) -> str:
    """A server URL as the pool holds it (scheme and port filled in); InvalidArgumentError when it is none."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidArgumentError(f"server URL must be a non-empty str, not {url!r}")
    url = url.strip()
    if "://" not in url:
        url = "nats://" + url
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidArgumentError(f"server URL {mask_url(url)!r} has a bad port") from None
    if parts.scheme not in SCHEMES:
        raise InvalidArgumentError(f"server URL {mask_url(url)!r}: scheme must be one of {', '.join(SCHEMES)}")
    if not parts.hostname:
        raise InvalidArgumentError(f"server URL {mask_url(url)!r} has no host")
    if port is None:
        default = {"ws": 80, "wss": 443}.get(parts.scheme, 4222)
        url = parts._replace(netloc=f"{parts.netloc}:{default}").geturl()
    return str(url)


def _ws_headers(value: Any) -> tuple[tuple[str, str], ...]:
    """Upgrade headers as (name, value) pairs, each checked (a value is never shown: it may be a secret)."""
    pairs = list(value.items()) if isinstance(value, dict) else value
    if not isinstance(pairs, (tuple, list)):
        raise InvalidArgumentError(f"ws_headers must be a dict or (name, value) pairs, not {type(value).__name__}")
    checked = []
    for pair in pairs:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2 or not all(isinstance(x, str) for x in pair):
            raise InvalidArgumentError("ws_headers entries must be (name, value) pairs of str")
        name, text = pair
        if not name or any(c in _NOT_TOKEN or ord(c) < 33 or ord(c) > 126 for c in name):
            raise InvalidArgumentError(f"ws_headers: {name!r} is not a valid HTTP header name")
        if name.lower() in RESERVED_HEADERS:
            raise InvalidArgumentError(f"ws_headers: {name!r} is set by the WebSocket upgrade itself")
        if any(c in "\r\n\0" for c in text):
            raise InvalidArgumentError(f"ws_headers: the value of {name!r} has a line break or NUL")
        checked.append((name, text))
    return tuple(checked)


#: Headers the upgrade itself sets; a user may not replace them.
RESERVED_HEADERS = frozenset({
    "host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
    "sec-websocket-protocol", "content-length", "transfer-encoding",
})
_NOT_TOKEN = frozenset('()<>@,;:\\"/[]?={} \t')


class _NotGiven:
    """The default of an option keyword of ``connect()`` and ``Connection``: "not given", so that beside
    ``options=`` it keeps that object's field.  Its repr is Options' default, which ``help()`` then shows."""

    __slots__ = ("default",)

    def __init__(self, default: Any) -> None:
        self.default = default

    def __repr__(self) -> str:
        return repr(self.default)


#: One "not given" marker per field, as ``OPTION_DEFAULTS.<field>``: the default of each option keyword of
#: ``connect()`` and ``Connection`` (typed Any so that each keyword keeps its field's type; a misspelt
#: field name fails at import).
OPTION_DEFAULTS: Any = SimpleNamespace(**{name: _NotGiven(value) for name, value in vars(Options()).items()})
