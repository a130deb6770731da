"""One connection per Python worker process, made lazily after fork, shared by every task and UDF.

Spark's Python workers are forked from ``pyspark.daemon`` and reused across
tasks; a connection made before a fork belongs to the parent.  The cache is
keyed by the options and the process id, guarded by ``_lock``, and closed at
interpreter exit where Spark lets that run (workers often leave with
``os._exit``, so nothing may depend on it: writers wait for their acks).
"""

from __future__ import annotations

import atexit
import os
import threading

from ..connection import Connection, connect
from ..options import Options
from .options import SparkOptions

_lock = threading.Lock()
_cache: dict[tuple[Options, int], Connection] = {}
#: Connections this process has opened (tests read it to check there is one per process).
opened = 0


def connection(options: SparkOptions | Options) -> Connection:
    """The process-wide connection for these options (made on first use in this process)."""
    global opened
    conn_options = options.connection_options() if isinstance(options, SparkOptions) else options
    key = (conn_options, os.getpid())
    with _lock:
        conn = _cache.get(key)
        if conn is None or conn.is_closed:
            conn = connect(options=conn_options)
            _cache[key] = conn
            opened += 1
        return conn


def close_all() -> None:
    with _lock:
        conns = [c for (_, pid), c in _cache.items() if pid == os.getpid()]
        _cache.clear()
    for conn in conns:
        conn.close()


atexit.register(close_all)
