"""Opening a link to a server: dial, INFO, TLS, CONNECT, and the first PONG.

Runs on the thread that connects (the caller of ``connect()``, the reconnect
thread, or a bulk reader's own thread) before the link is shared with
anyone, so nothing here takes a lock.  :class:`jsclient.Connection` and
:class:`jsclient.jetstream.bulk.BulkReader` both open their sockets here.
"""

from __future__ import annotations

import builtins
import ssl
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from . import auth
from ._version import __version__
from .errors import AuthorizationError, ProtocolError, TimeoutError, TLSError, server_error
from .message import Msg
from .options import WEBSOCKET_SCHEMES, Options, mask_url
from .protocol import PING, Err, Info, Parser, Pong, encode_connect
from .transport import PlainTransport, TLSTransport, Transport, default_tls_context, dial
from .websocket import open_websocket


def open_link(
    url: str,
    options: Options,
    tls_context: ssl.SSLContext | None = None,
    on_info: Callable[[dict[str, Any]], None] | None = None,
    credentials: auth.CredentialCallbacks | None = None,
) -> tuple[Transport, Parser, list[Any]]:
    """Dial, read INFO, start TLS if needed, send CONNECT + PING, wait for PONG (or -ERR).

    ``on_info`` sees the server's INFO before CONNECT is sent.  Returns the
    transport, its parser, and any events that followed the PONG.
    """
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    timeout = options.connect_timeout
    sock = dial(host, parts.port or 4222, timeout)
    transport: Transport = PlainTransport(sock)
    websocket = parts.scheme in WEBSOCKET_SCHEMES
    try:
        parser = Parser(msg_class=Msg)
        if websocket:  # TLS (wss) under the WebSocket, then the INFO inside it; never STARTTLS after
            if parts.scheme == "wss" or options.tls or tls_context is not None:
                transport = _start_tls(sock, url, host, options, tls_context, timeout)
            transport = open_websocket(
                transport, parts, options.ws_headers, compression=options.ws_compression, timeout=timeout
            )
        elif options.tls_handshake_first:  # TLS before anything else, then the INFO over it
            transport = _start_tls(sock, url, host, options, tls_context, timeout)
        try:
            info, _ = read_until(transport, parser, Info, timeout)
        except TimeoutError:
            if options.tls_handshake_first or websocket:
                raise
            raise TimeoutError(
                f"no INFO from {mask_url(url)} within {timeout} s (a server with TLS handshake_first needs "
                "tls_handshake_first=True)"
            ) from None
        assert isinstance(info, Info)
        wants_tls = parts.scheme == "tls" or options.tls or tls_context is not None or info.data.get("tls_required")
        if wants_tls and not options.tls_handshake_first and not websocket:
            transport = _start_tls(sock, url, host, options, tls_context, timeout)
        # Not refused here: a server with only a system account, or mapping TLS certificates, says
        # auth_required yet takes a client without credentials.  Its refusal is explained below.
        unauthenticated = bool(info.data.get("auth_required")) and not _has_credentials(options, parts, credentials)
        if on_info is not None:
            on_info(info.data)
        payload = connect_payload(options, parts, info.data.get("nonce"), credentials)
        transport.sendall(encode_connect(payload) + PING)
        try:
            _, rest = read_until(transport, parser, Pong, timeout)
        except AuthorizationError as exc:
            if not unauthenticated:
                raise
            raise AuthorizationError(
                f"{exc} ({mask_url(url)} requires authentication: give user and password, token, nkey_seed, "
                "creds_file or user_credentials)"
            ) from None
        transport.settimeout(None)
    except BaseException:
        transport.close()
        raise
    return transport, parser, rest


def _has_credentials(options: Options, parts: SplitResult, credentials: auth.CredentialCallbacks | None) -> bool:
    return bool(
        parts.username or options.user or options.token or options.nkey_seed or options.creds_file
        or options.user_credentials or credentials is not None
    )


def _start_tls(
    sock: Any, url: str, host: str, options: Options, tls_context: ssl.SSLContext | None, timeout: float
) -> Transport:
    name = options.tls_hostname or host
    context = tls_context or default_tls_context(options.tls_ca_file, options.tls_cert_file, options.tls_key_file)
    tls = TLSTransport(sock, context, name)
    try:
        tls.handshake(timeout)
    except ssl.SSLCertVerificationError as exc:
        why = exc.verify_message or exc.reason
        raise TLSError(f"TLS certificate verification failed for {name!r}: {why}") from None
    except ssl.SSLError as exc:
        raise TLSError(f"TLS handshake with {mask_url(url)} failed: {exc.reason or exc}") from None
    except builtins.TimeoutError:
        raise TLSError(f"TLS handshake with {mask_url(url)} timed out (a server without handshake_first?)") from None
    return tls


def read_until(transport: Transport, parser: Parser, kind: type, timeout: float) -> tuple[Any, list[Any]]:
    """Read until an event of ``kind``; -ERR raises.  Returns it and the events after it."""
    deadline = time.monotonic() + timeout
    buffer = bytearray(65536)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"server did not complete the handshake within {timeout} s")
        transport.settimeout(remaining)
        try:
            n = transport.recv_into(buffer)
        except builtins.TimeoutError:
            continue
        if not n:
            raise ProtocolError("server closed the connection during the handshake")
        events = parser.feed(memoryview(buffer)[:n])
        for i, ev in enumerate(events):
            if isinstance(ev, Err):
                raise server_error(ev.text)
            if isinstance(ev, kind):
                return ev, events[i + 1 :]


def connect_payload(
    opts: Options, parts: SplitResult, nonce: str | None, credentials: auth.CredentialCallbacks | None = None
) -> dict[str, Any]:
    """The CONNECT fields for these options (credentials from the options, else from the URL)."""
    payload: dict[str, Any] = {
        "verbose": opts.verbose,
        "pedantic": opts.pedantic,
        "lang": "python3-jsclient",
        "version": __version__,
        "protocol": 1,
        "headers": True,
        "no_responders": True,
        "echo": opts.echo,
    }
    if opts.name:
        payload["name"] = opts.name
    user, password, token = opts.user, opts.password, opts.token
    if parts.username and not (user or token):
        if parts.password is not None:
            user, password = unquote(parts.username), unquote(parts.password)
        else:
            token = unquote(parts.username)
    if user:
        payload["user"] = user
        payload["pass"] = password or ""
    elif token:
        payload["auth_token"] = token
    creds = opts.user_credentials or opts.creds_file
    payload.update(auth.connect_fields(opts.nkey_seed, creds, nonce, credentials))
    return payload
