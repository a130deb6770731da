"""What every subcommand shares: the connection its options ask for and the exit code it returns
(a mistake in the command line is :class:`jsclient.UsageError`).

Runs on the main thread of the command's process (a subcommand opens its one connection with
:func:`connection` and closes it on the way out).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from ..connection import Connection, connect
from ..errors import UsageError

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

#: The ``nats`` command's environment variables for its connection flags, and the keyword each gives: as
#: there, each replaces the NATS context's value (``NATS_URL`` and ``NATS_CONTEXT`` are read apart).
ENVIRONMENT: Mapping[str, str] = {
    "NATS_USER": "user",
    "NATS_PASSWORD": "password",
    "NATS_TOKEN": "token",
    "NATS_CREDS": "creds_file",
    "NATS_NKEY": "nkey_seed",
    "NATS_CERT": "tls_cert_file",
    "NATS_KEY": "tls_key_file",
    "NATS_CA": "tls_ca_file",
}


def environment_keywords(environ: Mapping[str, str]) -> dict[str, Any]:
    """The connect keywords the ``NATS_*`` variables set, read as the ``nats`` command reads them.

    ``NATS_USER`` without ``NATS_PASSWORD`` is a token, as the ``nats`` command's ``--user`` is.
    """
    given = {keyword: environ[name] for name, keyword in ENVIRONMENT.items() if environ.get(name)}
    if "user" in given and "password" not in given and "token" not in given:
        given["token"] = given.pop("user")
    return given


@contextlib.contextmanager
def connection(args: argparse.Namespace) -> Iterator[Connection]:
    if args.embedded:
        if args.context:
            raise UsageError("--embedded starts a server of its own: leave out --context")
        from ..server import NatsServer

        with NatsServer() as server, connect(server.url, name="jsclient-cli", allow_reconnect=False) as nc:
            yield nc
        return
    context = args.context or os.environ.get("NATS_CONTEXT") or None
    url = args.server or os.environ.get("NATS_URL") or None
    keywords = environment_keywords(os.environ)
    with connect(url, context=context, name="jsclient-cli", connect_timeout=args.connect_timeout, **keywords) as nc:
        yield nc
