"""The core NATS subcommands: ``server`` (an embedded nats-server), ``pub``, ``sub``, ``req``,
``reply``, ``trace`` (a message's path, ADR-41), ``micro`` (service discovery) and ``bench``.

Runs on the main thread of the command's process.  ``server`` waits there for Ctrl-C or SIGTERM
(its handler only sets an event).  ``bench sub`` publishes from one more thread, ``feed``, on a
second connection (with ``--embedded``, on the command's own); the two threads share nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence

from ..connection import connect
from ..errors import Error, NoRespondersError, SlowConsumerError, TimeoutError, UsageError
from ..headers import Headers
from .command import EXIT_OK, EXIT_TIMEOUT, connection
from .output import Progress, emit_json, show_msg, table


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


def cmd_server(args: argparse.Namespace) -> int:
    from ..server import NatsCluster, NatsServer

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
            except SlowConsumerError:
                continue  # messages were dropped here: the connection has logged it; the later ones follow
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
            except SlowConsumerError:
                continue  # requests were dropped here (logged by the connection): answer the later ones
            except Error:
                break
            msg.respond(args.response.replace("{data}", msg.data.decode(errors="replace")).encode())
            answered += 1
            if not args.json:
                print(f"answered request on {msg.subject}", flush=True)
    return EXIT_OK


def cmd_trace(args: argparse.Namespace) -> int:
    """Trace a message's path through the servers (``nats trace``): the tree, or the reports with --json.

    An incomplete path (a server whose report did not come within --timeout) is printed as far as it
    came, and exits with the timeout's code.
    """
    with connection(args) as nc:
        trace = nc.trace_message(
            args.subject, args.data.encode(), headers=parse_headers(args.header), deliver=args.deliver,
            timeout=args.timeout,
        )
    if args.json:
        emit_json(trace.to_dict())
    else:
        print(trace, flush=True)
    if trace.complete:
        return EXIT_OK
    lacking = f"hop {', '.join(trace.missing)}" if trace.missing else "the first server"
    print(f"jsclient: timeout: no report from {lacking} within {args.timeout} s", file=sys.stderr)
    return EXIT_TIMEOUT


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
            pub = connect(options=nc.options) if not args.embedded else nc  # the same credentials and TLS

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
            nc.subscribe("bench.cli.svc", callback=lambda m: m.respond(m.data))
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
