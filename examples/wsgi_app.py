"""A WSGI app that shares one jsclient connection across its request threads.

Each HTTP request becomes a NATS request to ``svc.echo`` on the shared
connection, made once and lazily; with ``reconnect_after_fork=True`` a
forking server's children each get a connection of their own.  Serve it with
any threaded WSGI server, for example::

    NATS_URL=nats://127.0.0.1:4222 waitress-serve --threads=8 examples.wsgi_app:app
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

import jsclient

_lock = threading.Lock()
_conn: jsclient.Connection | None = None


def connection() -> jsclient.Connection:
    global _conn
    with _lock:
        if _conn is None or _conn.is_closed:
            _conn = jsclient.connect(
                os.environ.get("NATS_URL", "nats://127.0.0.1:4222"), name="wsgi-example", reconnect_after_fork=True
            )
        return _conn


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    size = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(size) if size else b""
    try:
        reply = connection().request("svc.echo", body, timeout=5)
    except jsclient.NoRespondersError:
        start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
        return [b"no responder\n"]
    except jsclient.TimeoutError:
        start_response("504 Gateway Timeout", [("Content-Type", "text/plain")])
        return [b"timeout\n"]
    start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(len(reply.data)))])
    return [reply.data]
