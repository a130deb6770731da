"""One connection per Python worker process, made lazily after fork, shared by every task and UDF;
and a pool of bulk readers (links of their own, read by the task's thread) for the source's reads.

Spark's Python workers are forked from ``pyspark.daemon`` and reused across
tasks; a connection made before a fork belongs to the parent.  The cache is
keyed by the options and the process id, guarded by ``_lock`` (which also
guards the bulk-reader pool: a reader is taken out while a task uses it, so
it is never shared; a forked child gets a new lock, as one a parent's thread
held at the fork would never be released there), and closed at
interpreter exit where Spark lets that run (workers often leave with
``os._exit``, so nothing may depend on it: writers wait for their acks).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from ..connection import Connection, connect
from ..jetstream.bulk import BulkReader
from ..options import Options
from .options import SparkOptions, spark_options

_lock = threading.Lock()
_cache: dict[tuple[Options, int], Connection] = {}
#: Connections this process has opened (tests read it to check there is one per process).
opened = 0


def connection(options: SparkOptions | Mapping[str, Any] | Options) -> Connection:
    """The worker process's one connection for these options, made on first use in this process.

    For executor code (UDFs, ``foreachPartition``): every task and UDF of the
    process with equal connection settings shares it, so a lookup per row
    costs no connect.  Do not close it: later tasks use it.

    Args:
        options: A :class:`SparkOptions` (picklable, so a UDF can capture it), a mapping of the
            data source's option keys (``servers``, ``user``, ``creds``, ...), or a
            :class:`jsclient.Options`.

    Returns:
        The open connection (the same object on every call with equal settings in one process).

    Raises:
        InvalidArgumentError: An unknown option key or a bad value (named), before connecting.
        NoServersError: No server could be reached.
        AuthorizationError: The server refused the credentials.
        TLSError: The TLS handshake failed.
    """
    global opened
    conn_options = options if isinstance(options, Options) else spark_options(options).connection_options()
    key = (conn_options, os.getpid())
    with _lock:
        conn = _cache.get(key)
        if conn is None or conn.is_closed:
            conn = connect(options=conn_options)
            _cache[key] = conn
            opened += 1
        return conn


_readers: dict[tuple[Options, int], list[BulkReader]] = {}


def _new_lock_in_child() -> None:
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)


@contextlib.contextmanager
def bulk_reader(options: SparkOptions) -> Iterator[BulkReader]:
    """A bulk reader of this process for these options, for the duration of the block."""
    key = (options.connection_options(), os.getpid())
    with _lock:
        idle = _readers.setdefault(key, [])
        reader = idle.pop() if idle else BulkReader(key[0])
    try:
        yield reader
    finally:
        with _lock:
            _readers.setdefault(key, []).append(reader)


def close_all() -> None:
    with _lock:
        conns = [c for (_, pid), c in _cache.items() if pid == os.getpid()]
        readers = [r for (_, pid), idle in _readers.items() if pid == os.getpid() for r in idle]
        _cache.clear()
        _readers.clear()
    for conn in conns:
        conn.close()
    for reader in readers:
        reader.close()


atexit.register(close_all)
