"""The command line: the parser of every subcommand and its options, and the checks of the
arguments made before connecting anywhere.

Pure argument handling, no I/O; runs on the main thread of the command's process.
"""

from __future__ import annotations

import argparse
from typing import Any

from .. import __version__
from ..errors import UsageError
from .jscommands import cmd_consumer, cmd_counter, cmd_kv, cmd_stream
from .natscommands import cmd_bench, cmd_micro, cmd_pub, cmd_reply, cmd_req, cmd_server, cmd_sub, cmd_trace


def _add_common(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """Options accepted before the command and after it (after it, unset ones keep the earlier value)."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument("--server", "-s", default=default(None),
                        help="server URL (default: $NATS_URL, then the context's, then nats://127.0.0.1:4222)")
    parser.add_argument("--context", default=default(None), metavar="NAME",
                        help="a NATS CLI context's name or .json file (default: $NATS_CONTEXT)")
    parser.add_argument("--embedded", action="store_true", default=default(False),
                        help="start an embedded nats-server for this command")
    parser.add_argument("--json", action="store_true", default=default(False), help="machine-readable output")
    parser.add_argument("--connect-timeout", type=float, default=default(2.0))


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    _add_common(common, suppress=True)
    parser = argparse.ArgumentParser(prog="jsclient", description="A synchronous NATS and JetStream client.")
    parser.add_argument("--version", action="version", version=f"jsclient {__version__}")
    _add_common(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("server", help="run an embedded nats-server with JetStream")
    p.add_argument("--cluster", action="store_true", help="a local 3-node cluster")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--websocket", action="store_true", help="also listen for WebSocket clients (ws://)")
    p.set_defaults(func=cmd_server)

    p = sub.add_parser("pub", parents=[common], help="publish a message ({n} in DATA becomes its number)")
    p.add_argument("subject")
    p.add_argument("data", nargs="?", default="")
    p.add_argument("--count", "-n", type=int, default=1)
    p.add_argument("--header", "-H", action="append", help="Name=value (repeatable)")
    p.set_defaults(func=cmd_pub)

    p = sub.add_parser("sub", parents=[common], help="print messages")
    p.add_argument("subject")
    p.add_argument("--queue", "-q")
    p.add_argument("--count", "-n", type=int, default=0, help="stop after this many (0: never)")
    p.add_argument("--timeout", type=float, default=None, help="stop after this long without a message")
    p.set_defaults(func=cmd_sub)

    p = sub.add_parser("req", parents=[common], help="send a request and print the reply")
    p.add_argument("subject")
    p.add_argument("data", nargs="?", default="")
    p.add_argument("--timeout", type=float, default=2.0)
    p.add_argument("--header", "-H", action="append")
    p.set_defaults(func=cmd_req)

    p = sub.add_parser("reply", parents=[common], help="answer requests ({data} in RESPONSE is the request)")
    p.add_argument("subject")
    p.add_argument("response")
    p.add_argument("--queue", "-q")
    p.add_argument("--count", "-n", type=int, default=0)
    p.set_defaults(func=cmd_reply)

    p = sub.add_parser("trace", parents=[common], help="trace a message's path through the servers (2.11+)")
    p.add_argument("subject")
    p.add_argument("data", nargs="?", default="")
    p.add_argument("--deliver", action="store_true", help="deliver the message too (default: only trace it)")
    p.add_argument("--header", "-H", action="append", help="Name=value (repeatable)")
    p.add_argument("--timeout", type=float, default=2.0, help="how long to wait for the servers' reports")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("stream", parents=[common], help="manage streams")
    p.add_argument("action", choices=["add", "ls", "info", "rm", "purge"])
    p.add_argument("name", nargs="?")
    p.add_argument("--subjects", nargs="*")
    p.add_argument("--storage", choices=["file", "memory"], default="file")
    p.add_argument("--max-msgs", type=int, default=-1)
    p.add_argument("--subject", help="purge only this subject")
    p.add_argument("--ttl", action="store_true", help="allow per-message TTLs (server 2.11+)")
    p.add_argument("--marker-ttl", type=float, help="leave delete markers that live this many seconds (2.11+)")
    p.add_argument("--counters", action="store_true", help="a counter stream (server 2.12+)")
    p.add_argument("--atomic", action="store_true", help="allow atomic batch publish (server 2.12+)")
    p.add_argument("--schedules", action="store_true", help="allow message schedules (server 2.12+)")
    p.set_defaults(func=cmd_stream)

    p = sub.add_parser("consumer", parents=[common], help="manage consumers")
    p.add_argument("action", choices=["add", "ls", "info", "rm", "next", "pause", "resume", "unpin", "reset"])
    p.add_argument("stream")
    p.add_argument("name", nargs="?")
    p.add_argument("--filter")
    p.add_argument("--until", help="pause: until this ISO 8601 time with a zone")
    p.add_argument("--seconds", type=float, default=3600.0, help="pause: for this long (default an hour)")
    p.add_argument("--group", help="unpin: the priority group")
    p.add_argument("--seq", type=int, help="reset: deliver again from this stream sequence")
    p.add_argument("--count", "-n", type=int, default=1)
    p.add_argument("--timeout", type=float, default=2.0)
    p.set_defaults(func=cmd_consumer)

    p = sub.add_parser("counter", parents=[common], help="counters (ADR-49, server 2.12+)")
    p.add_argument("action", choices=["add", "get"])
    p.add_argument("subject")
    p.add_argument("delta", nargs="?", type=int, default=1, help="add: the amount, negative too (default 1)")
    p.add_argument("--stream", help="get: the counter's stream")
    p.set_defaults(func=cmd_counter)

    p = sub.add_parser("micro", parents=[common], help="discover services (ADR-32)")
    p.add_argument("action", choices=["ls", "info", "stats"])
    p.add_argument("name", nargs="?", help="only services of this name")
    p.add_argument("--timeout", type=float, default=1.0, help="how long to gather answers")
    p.set_defaults(func=cmd_micro)

    p = sub.add_parser("kv", parents=[common], help="key-value buckets")
    p.add_argument("action", choices=["add", "get", "put", "del", "watch", "ls"])
    p.add_argument("bucket")
    p.add_argument("key", nargs="?")
    p.add_argument("value", nargs="?")
    p.add_argument("--history", type=int, default=1)
    p.add_argument("--limit-marker-ttl", type=float, help="add: keys may have TTLs; markers live this long (2.11+)")
    p.add_argument("--ttl", type=int, help="put: the key expires after this many seconds (only a key without a value)")
    p.set_defaults(func=cmd_kv)

    p = sub.add_parser("bench", parents=[common], help="quick throughput checks")
    p.add_argument("kind", choices=["pub", "sub", "req", "js"])
    p.add_argument("--count", "-n", type=int, default=100_000)
    p.add_argument("--size", type=int, default=128)
    p.set_defaults(func=cmd_bench)
    return parser


#: The positional arguments an action cannot do without (argparse leaves them optional).
NEEDS: dict[tuple[str, str | None], tuple[str, ...]] = {
    ("stream", "add"): ("name",),
    ("stream", "info"): ("name",),
    ("stream", "rm"): ("name",),
    ("stream", "purge"): ("name",),
    ("consumer", "add"): ("name",),
    ("consumer", "info"): ("name",),
    ("consumer", "rm"): ("name",),
    ("consumer", "next"): ("name",),
    ("kv", "get"): ("key",),
    ("kv", "put"): ("key", "value"),
    ("kv", "del"): ("key",),
}


def check_arguments(args: argparse.Namespace) -> None:
    """Catch bad subjects and counts before connecting anywhere."""
    from ..protocol import check_publish_subject, check_queue_name, check_subscribe_subject

    if args.command in ("pub", "req", "trace"):
        check_publish_subject(args.subject)
    if args.command in ("sub", "reply"):
        check_subscribe_subject(args.subject)
        if args.queue is not None:
            check_queue_name(args.queue)
    for name in ("count",):
        value = getattr(args, name, None)
        if value is not None and value < 0:
            raise UsageError(f"--{name} must be >= 0, not {value}")
