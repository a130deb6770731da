"""The ``jsclient`` command (also ``python -m jsclient``).

Runs on the main thread of its own process; every subcommand is a thin layer
over the public API.  User mistakes (a bad subject, an unreachable server, a
missing stream) print one line and exit non-zero, without a traceback.

Exit codes: 0 success, 1 a NATS/JetStream error, 2 a usage error,
3 a timeout, 130 interrupted.

This package's :func:`main` runs a command line; the rest is by topic, re-exported here:
:mod:`.parser` (the subcommands' options and the checks made before connecting),
:mod:`.natscommands` and :mod:`.jscommands` (the core NATS and the JetStream subcommands),
:mod:`.output` (JSON, tables, progress), :mod:`.command` (the connection, exit codes).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..errors import Error, InvalidArgumentError, TimeoutError, UsageError
from .command import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    connection,
)
from .jscommands import cmd_consumer, cmd_counter, cmd_kv, cmd_stream
from .natscommands import (
    cmd_bench,
    cmd_micro,
    cmd_pub,
    cmd_reply,
    cmd_req,
    cmd_server,
    cmd_sub,
    cmd_trace,
    parse_headers,
)
from .output import Progress, emit_json, show_msg, table
from .parser import NEEDS, build_parser, check_arguments

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TIMEOUT",
    "EXIT_USAGE",
    "Progress",
    "UsageError",
    "build_parser",
    "cmd_bench",
    "cmd_consumer",
    "cmd_counter",
    "cmd_kv",
    "cmd_micro",
    "cmd_pub",
    "cmd_reply",
    "cmd_req",
    "cmd_server",
    "cmd_stream",
    "cmd_sub",
    "cmd_trace",
    "connection",
    "emit_json",
    "main",
    "parse_headers",
    "show_msg",
    "table",
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        for needed in NEEDS.get((args.command, getattr(args, "action", None)), ()):
            if getattr(args, needed, None) is None:
                raise UsageError(f"{args.command} {args.action} needs a {needed}")
        check_arguments(args)
        return int(args.func(args))
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"jsclient: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except InvalidArgumentError as exc:
        print(f"jsclient: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TimeoutError as exc:
        print(f"jsclient: timeout: {exc}", file=sys.stderr)
        return EXIT_TIMEOUT
    except Error as exc:
        print(f"jsclient: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
