"""The ``jsclient`` command (also ``python -m jsclient``).

Runs on the main thread of its own process; every subcommand is a thin layer
over the public API.  User mistakes (a bad subject, an unreachable server, a
missing stream) print one line and exit non-zero, without a traceback.

Exit codes: 0 success, 1 a NATS/JetStream error, 2 a usage error,
3 a timeout, 130 interrupted.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

import msgspec

from . import __version__
from .connection import Connection, connect
from .errors import Error, InvalidArgumentError, NoRespondersError, TimeoutError
from .headers import Headers
from .message import Msg

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class UsageError(Exception):
    """A mistake in the command line itself."""


# -- output helpers ---------------------------------------------------------------


def emit_json(value: Any, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(msgspec.json.encode(_jsonable(value)).decode() + "\n")
    (out or sys.stdout).flush()


def _jsonable(obj: Any) -> Any:
    """Payloads as text when they are UTF-8 (``data``), else base64 (``data_base64``)."""
    if isinstance(obj, dict):
        result: dict[str, Any] = {}
        for key, value in obj.items():
            if isinstance(value, bytes):
                try:
                    result[key] = value.decode()
                except UnicodeDecodeError:
                    result[f"{key}_base64"] = base64.b64encode(value).decode()
            else:
                result[key] = _jsonable(value)
        return result
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, Headers):
        return {k: obj.get_all(k) for k in obj}
    return obj


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], out: TextIO | None = None) -> None:
    """A plain aligned text table."""
    out = out or sys.stdout
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        line = "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        out.write(line.rstrip() + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return "" if value is None else str(value)


class Progress:
    """A one-line progress bar on stderr (only when stderr is a terminal)."""

    def __init__(self, total: int, label: str) -> None:
        self.total = max(1, total)
        self.label = label
        self.enabled = sys.stderr.isatty()
        self._last = 0.0
        self.start = time.perf_counter()

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < 0.1 and done < self.total:
            return
        self._last = now
        frac = done / self.total
        bar = "#" * int(frac * 30)
        rate = done / max(now - self.start, 1e-9)
        sys.stderr.write(f"\r{self.label} [{bar:<30}] {done:,}/{self.total:,} {rate:,.0f}/s")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def parse_headers(pairs: Sequence[str] | None) -> Headers | None:
    if not pairs:
        return None
    h = Headers()
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(f"header {pair!r} must look like Name=value")
        h.add(name.strip(), value)
    return h


def show_msg(msg: Msg, args: argparse.Namespace, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if args.json:
        emit_json({"subject": msg.subject, "reply": msg.reply, "headers": msg.headers, "data": msg.data})
        return
    headers = f" {dict((k, msg.headers.get_all(k)) for k in msg.headers)}" if len(msg.headers) else ""
    out.write(f"[{msg.subject}]{headers} {msg.data.decode(errors='replace')}\n")
    out.flush()


# -- connection handling --------------------------------------------------------------


@contextlib.contextmanager
def connection(args: argparse.Namespace) -> Iterator[Connection]:
    if args.embedded:
        from .server import NatsServer

        with NatsServer() as server, connect(server.url, name="jsclient-cli", allow_reconnect=False) as nc:
            yield nc
        return
    url = args.server or os.environ.get("NATS_URL") or "nats://127.0.0.1:4222"
    with connect(url, name="jsclient-cli", connect_timeout=args.connect_timeout) as nc:
        yield nc


# -- commands ------------------------------------------------------------------------


def cmd_server(args: argparse.Namespace) -> int:
    from .server import NatsCluster, NatsServer

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if args.cluster:
        with NatsCluster(3, websocket=args.websocket) as cluster:
            print("3-node cluster with JetStream:", ", ".join(cluster.urls), flush=True)
            if args.websocket:
                print("WebSocket:", ", ".join(cluster.ws_urls), flush=True)
            _wait(stop)
        return EXIT_OK
    with NatsServer(port=args.port or None, websocket=args.websocket) as server:
        print(f"nats-server with JetStream at {server.url} (store {server.store_dir}); Ctrl-C stops it", flush=True)
        if args.websocket:
            print(f"WebSocket at {server.ws_url}", flush=True)
        _wait(stop)
    return EXIT_OK


def _wait(stop: threading.Event) -> None:
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass


def cmd_pub(args: argparse.Namespace) -> int:
    headers = parse_headers(args.header)
    with connection(args) as nc:
        progress = Progress(args.count, "pub")
        for i in range(args.count):
            data = args.data.replace("{n}", str(i)).encode()
            nc.publish(args.subject, data, headers=headers)
            progress.update(i + 1)
        nc.flush(timeout=10)
        progress.close()
    if args.json:
        emit_json({"published": args.count, "subject": args.subject})
    elif args.count > 1:
        print(f"published {args.count:,} messages to {args.subject}")
    return EXIT_OK


def cmd_sub(args: argparse.Namespace) -> int:
    with connection(args) as nc:
        sub = nc.subscribe(args.subject, queue=args.queue)
        nc.flush()
        received = 0
        while args.count == 0 or received < args.count:
            try:
                msg = sub.next_msg(timeout=args.timeout)
            except TimeoutError:
                if args.timeout:
                    break
                continue
            show_msg(msg, args)
            received += 1
    return EXIT_OK


def cmd_req(args: argparse.Namespace) -> int:
    with connection(args) as nc:
        reply = nc.request(args.subject, args.data.encode(), timeout=args.timeout, headers=parse_headers(args.header))
        show_msg(reply, args)
    return EXIT_OK


def cmd_reply(args: argparse.Namespace) -> int:
    with connection(args) as nc:
        sub = nc.subscribe(args.subject, queue=args.queue)
        nc.flush()
        answered = 0
        while args.count == 0 or answered < args.count:
            try:
                msg = sub.next_msg(timeout=None)
            except Error:
                break
            msg.respond(args.response.replace("{data}", msg.data.decode(errors="replace")).encode())
            answered += 1
            if not args.json:
                print(f"answered request on {msg.subject}", flush=True)
    return EXIT_OK


def cmd_stream(args: argparse.Namespace) -> int:
    with connection(args) as nc:
        js = nc.jetstream()
        if args.action == "add":
            info = js.add_stream(
                name=args.name,
                subjects=args.subjects or [f"{args.name.lower()}.>"],
                storage=args.storage,
                max_msgs=args.max_msgs,
                allow_direct=True,
                **_stream_features(args),
            )
            _out_struct(args, info, f"stream {info.config.name} created with subjects {info.config.subjects}")
        elif args.action == "ls":
            streams = js.streams()
            if args.json:
                emit_json([s.to_dict() for s in streams])
            else:
                rows = [(s.config.name, ", ".join(s.config.subjects or []), s.state.messages, s.state.bytes)
                        for s in streams]
                table(rows, ["stream", "subjects", "messages", "bytes"])
        elif args.action == "info":
            info = js.stream_info(args.name)
            _out_struct(args, info, _describe_stream(info))
        elif args.action == "rm":
            js.delete_stream(args.name)
            _out(args, {"deleted": args.name}, f"stream {args.name} deleted")
        elif args.action == "purge":
            purged = js.purge_stream(args.name, subject=args.subject)
            _out(args, {"purged": purged}, f"purged {purged:,} messages from {args.name}")
    return EXIT_OK


def _stream_features(args: argparse.Namespace) -> dict[str, Any]:
    """The 2.11+ stream options asked for on the command line (none: the server's defaults)."""
    fields: dict[str, Any] = {}
    if args.ttl:
        fields["allow_msg_ttl"] = True
    if args.marker_ttl is not None:
        fields["subject_delete_marker_ttl"] = args.marker_ttl
    if args.counters:
        fields["allow_msg_counter"] = True
    if args.atomic:
        fields["allow_atomic"] = True
    if args.schedules:
        fields["allow_msg_schedules"] = True
    return fields


def _describe_stream(info: Any) -> str:
    c, s = info.config, info.state
    return (
        f"stream {c.name}\n  subjects   {', '.join(c.subjects or [])}\n  storage    {c.storage}\n"
        f"  messages   {s.messages:,}\n  bytes      {s.bytes:,}\n  sequences  {s.first_seq}..{s.last_seq}\n"
        f"  consumers  {s.consumer_count}"
    )


def cmd_consumer(args: argparse.Namespace) -> int:
    with connection(args) as nc:
        js = nc.jetstream()
        if args.action == "add":
            info = js.add_consumer(args.stream, durable_name=args.name, ack_policy="explicit",
                                   filter_subject=args.filter)
            _out_struct(args, info, f"pull consumer {info.name} created on {args.stream}")
        elif args.action == "ls":
            consumers = js.consumers(args.stream)
            if args.json:
                emit_json([c.to_dict() for c in consumers])
            else:
                rows = [(c.name, c.num_pending, c.num_ack_pending, c.delivered.stream_seq) for c in consumers]
                table(rows, ["consumer", "pending", "ack pending", "delivered seq"])
        elif args.action == "info":
            info = js.consumer_info(args.stream, args.name)
            _out_struct(args, info, f"consumer {info.name}: {info.num_pending:,} pending, "
                                    f"{info.num_ack_pending:,} awaiting ack")
        elif args.action == "rm":
            js.delete_consumer(args.stream, args.name)
            _out(args, {"deleted": args.name}, f"consumer {args.name} deleted")
        elif args.action == "pause":
            until = _pause_until(args)
            paused = js.pause_consumer(args.stream, _named(args), until)
            _out_struct(args, paused, f"consumer {args.name} paused until {paused.pause_until}")
        elif args.action == "resume":
            _out_struct(args, js.resume_consumer(args.stream, _named(args)), f"consumer {args.name} resumed")
        elif args.action == "unpin":
            js.unpin_consumer(args.stream, _named(args), args.group)
            _out(args, {"unpinned": args.group}, f"group {args.group} of consumer {args.name} unpinned")
        elif args.action == "reset":
            reset = js.reset_consumer(args.stream, _named(args), args.seq)
            _out_struct(args, reset, f"consumer {args.name} delivers again from stream sequence {reset.reset_seq}")
        elif args.action == "next":
            psub = js.pull_subscribe(stream=args.stream, consumer=args.name)
            msgs = psub.fetch(args.count, timeout=args.timeout)
            for msg in msgs:
                show_msg(msg, args)
                msg.ack()
            if not msgs and not args.json:
                print("no messages")
    return EXIT_OK


def _pause_until(args: argparse.Namespace) -> dt.datetime:
    if not args.until:
        return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=args.seconds)
    try:
        return dt.datetime.fromisoformat(args.until)
    except ValueError:
        raise InvalidArgumentError(f"--until {args.until!r} is not an ISO 8601 time") from None


def _named(args: argparse.Namespace) -> str:
    if not args.name:
        raise InvalidArgumentError(f"consumer {args.action} needs the consumer's name")
    return str(args.name)


def cmd_counter(args: argparse.Namespace) -> int:
    with connection(args) as nc:
        js = nc.jetstream()
        if args.action == "add":
            total = js.counter_add(args.subject, args.delta)
            _out(args, {"subject": args.subject, "value": str(total)}, f"{args.subject} = {total}")
        else:
            if not args.stream:
                raise InvalidArgumentError("counter get needs --stream")
            total = js.counter_get(args.stream, args.subject)
            _out(args, {"subject": args.subject, "value": str(total)}, str(total))
    return EXIT_OK


def cmd_micro(args: argparse.Namespace) -> int:
    """Discover services (ADR-32) with request-many: every instance that answers within --timeout."""
    verb = {"ls": "PING", "info": "INFO", "stats": "STATS"}[args.action]
    subject = f"$SRV.{verb}" + (f".{args.name}" if args.name else "")
    with connection(args) as nc:
        try:
            answers = [json.loads(m.data) for m in nc.request_many(subject, timeout=args.timeout)]
        except NoRespondersError:
            answers = []  # no service is running: an empty list, not an error
    found = sorted(answers, key=lambda s: (s.get("name", ""), s.get("id", "")))
    if args.json:
        emit_json(found)
    elif args.action == "ls":
        table([(s["name"], s["id"], s["version"]) for s in found], ["service", "id", "version"])
    elif args.action == "info":
        info = [(s["name"], s["id"], e["name"], e["subject"], e["queue_group"]) for s in found for e in s["endpoints"]]
        table(info, ["service", "id", "endpoint", "subject", "queue group"])
    else:
        rows = [
            (s["name"], s["id"], e["name"], e["num_requests"], e["num_errors"],
             f"{e['average_processing_time'] / 1e6:.3f} ms", e["last_error"])
            for s in found for e in s["endpoints"]
        ]
        table(rows, ["service", "id", "endpoint", "requests", "errors", "average", "last error"])
    return EXIT_OK


def cmd_kv(args: argparse.Namespace) -> int:
    with connection(args) as nc:
        js = nc.jetstream()
        if args.action == "add":
            js.create_key_value(args.bucket, history=args.history, limit_marker_ttl=args.limit_marker_ttl)
            _out(args, {"bucket": args.bucket}, f"bucket {args.bucket} ready")
            return EXIT_OK
        kv = js.key_value(args.bucket)
        if args.action == "get":
            entry = kv.get(args.key)
            _out(args, {"key": entry.key, "value": entry.value, "revision": entry.revision},
                 entry.value.decode(errors="replace"))
        elif args.action == "put":
            if args.ttl is None:
                rev = kv.put(args.key, args.value.encode())
            else:  # ADR-48 allows a TTL only where the key gets its first value
                rev = kv.create(args.key, args.value.encode(), ttl=args.ttl)
            _out(args, {"key": args.key, "revision": rev}, f"{args.key} = {args.value} (revision {rev})")
        elif args.action == "del":
            kv.delete(args.key)
            _out(args, {"deleted": args.key}, f"{args.key} deleted")
        elif args.action == "ls":
            keys = kv.keys()
            if args.json:
                emit_json(keys)
            else:
                for key in keys:
                    print(key)
        elif args.action == "watch":
            watcher = kv.watch(args.key or ">")
            try:
                for update in watcher:
                    if update is None:
                        if not args.json:
                            print("-- current values above, live updates below --", flush=True)
                        continue
                    value = update.value.decode(errors="replace")
                    text = f"{update.operation:5} {update.key} = {value} (revision {update.revision})"
                    _out(args, update._asdict(), text)
            finally:
                watcher.stop()
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    payload = b"x" * args.size
    with connection(args) as nc:
        n = args.count
        progress = Progress(n, f"bench {args.kind}")
        start = time.perf_counter()
        if args.kind == "pub":
            for i in range(n):
                nc.publish("bench.cli", payload)
                if i % 1000 == 0:
                    progress.update(i)
            nc.flush(timeout=60)
        elif args.kind == "sub":
            sub = nc.subscribe("bench.cli", pending_msgs_limit=n + 1)
            nc.flush()
            pub = connect(nc.options.servers[0]) if not args.embedded else nc

            def feed() -> None:
                for _ in range(n):
                    pub.publish("bench.cli", payload)
                pub.flush(timeout=60)

            feeder = threading.Thread(target=feed)
            start = time.perf_counter()
            feeder.start()
            for i in range(n):
                sub.next_msg(timeout=10)
                if i % 1000 == 0:
                    progress.update(i)
            feeder.join()
        elif args.kind == "req":
            nc.subscribe("bench.cli.svc", cb=lambda m: m.respond(m.data))
            nc.flush()
            start = time.perf_counter()
            for i in range(n):
                nc.request("bench.cli.svc", payload, timeout=5)
                if i % 100 == 0:
                    progress.update(i)
        elif args.kind == "js":
            js = nc.jetstream()
            name = f"BENCH_{os.getpid()}"
            js.add_stream(name=name, subjects=[f"bench.js.{os.getpid()}"], storage="memory")
            start = time.perf_counter()
            for i in range(n):
                js.publish_async(f"bench.js.{os.getpid()}", payload)
                if i % 1000 == 0:
                    progress.update(i)
            js.publish_async_completed(timeout=120)
            elapsed = time.perf_counter() - start
            js.delete_stream(name)
            progress.update(n)
            progress.close()
            return _bench_result(args, n, elapsed)
        progress.update(n)
        progress.close()
        return _bench_result(args, n, time.perf_counter() - start)


def _bench_result(args: argparse.Namespace, n: int, elapsed: float) -> int:
    rate = n / elapsed
    if args.json:
        emit_json({"kind": args.kind, "count": n, "size": args.size, "seconds": elapsed, "rate": rate})
    else:
        table([(args.kind, n, args.size, round(elapsed, 3), rate)], ["bench", "messages", "bytes", "seconds", "msgs/s"])
    return EXIT_OK


def _out(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.json:
        emit_json(data)
    else:
        print(text)


def _out_struct(args: argparse.Namespace, value: Any, text: str) -> None:
    """JSON in the server's own form (durations in nanoseconds), or the text."""
    if args.json:
        emit_json(value.to_dict())
    else:
        print(text)


# -- argument parsing -------------------------------------------------------------------


def _add_common(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """Options accepted before the command and after it (after it, unset ones keep the earlier value)."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument("--server", "-s", default=default(None),
                        help="server URL (default: $NATS_URL, then nats://127.0.0.1:4222)")
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


_NEEDS: dict[tuple[str, str | None], tuple[str, ...]] = {
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


def _check_arguments(args: argparse.Namespace) -> None:
    """Catch bad subjects and counts before connecting anywhere."""
    from .protocol import check_publish_subject, check_queue_name, check_subscribe_subject

    if args.command in ("pub", "req"):
        check_publish_subject(args.subject)
    if args.command in ("sub", "reply"):
        check_subscribe_subject(args.subject)
        if args.queue is not None:
            check_queue_name(args.queue)
    for name in ("count",):
        value = getattr(args, name, None)
        if value is not None and value < 0:
            raise UsageError(f"--{name} must be >= 0, not {value}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        for needed in _NEEDS.get((args.command, getattr(args, "action", None)), ()):
            if getattr(args, needed, None) is None:
                raise UsageError(f"{args.command} {args.action} needs a {needed}")
        _check_arguments(args)
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
