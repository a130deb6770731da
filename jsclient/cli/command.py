"""What every subcommand shares: the connection its options ask for and the exit code it returns
(a mistake in the command line is :class:`jsclient.UsageError`).

Runs on the main thread of the command's process (a subcommand opens its one connection with
:func:`connection` and closes it on the way out).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator

from ..connection import Connection, connect

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


@contextlib.contextmanager
def connection(args: argparse.Namespace) -> Iterator[Connection]:
    if args.embedded:
        from ..server import NatsServer

        with NatsServer() as server, connect(server.url, name="jsclient-cli", allow_reconnect=False) as nc:
            yield nc
        return
    url = args.server or os.environ.get("NATS_URL") or "nats://127.0.0.1:4222"
    with connect(url, name="jsclient-cli", connect_timeout=args.connect_timeout) as nc:
        yield nc
