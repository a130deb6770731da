"""JetStream measurements, one per process: ``python -m benchmarks.js_clients <client> <row> <url> <n>``.

Prints ``{"rate": ...}`` (operations per second; for ``watchdog``, percent of
one core).  The runner fills the shared streams first (BSRC, BPULL, BORD and
the bucket ``bench``); rows only read them, except the publish rows, which
create and delete a memory stream of their own.  pynats2 has no JetStream.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from typing import Any

from benchmarks.clients import raw_recv

PAYLOAD = b"x" * 128
KEYS = 1000
#: Messages per atomic batch (the server's default limit is 1,000).
ATOMIC_BATCH = 1000


def jsclient_row(row: str, url: str, n: int) -> float:
    import jsclient
    from jsclient.jetstream.api import ConsumerConfig

    nc = jsclient.connect(url, pending_msgs_limit=2_000_000, pending_bytes_limit=1 << 31)
    js = nc.jetstream(timeout=30)
    tag = f"J{os.getpid()}"
    row = row.removesuffix("_unpinned")  # the same measurement; only the runner's pinning differs
    try:
        if row in ("js_publish", "js_publish_async"):
            js.add_stream(name=tag, subjects=[f"bpub.{tag}"], storage="memory")
            subject = f"bpub.{tag}"
            start = time.perf_counter()
            if row == "js_publish":
                for _ in range(n):
                    js.publish(subject, PAYLOAD)
            else:
                for _ in range(n):
                    js.publish_async(subject, PAYLOAD)
                js.publish_async_completed(timeout=300)
            rate = n / (time.perf_counter() - start)
            js.delete_stream(tag)
            return rate
        if row == "js_publish_stream":
            js.add_stream(name=tag, subjects=[f"bpub.{tag}"], storage="memory", allow_batched=True)
            subject = f"bpub.{tag}"
            start = time.perf_counter()
            ack = js.publish_stream((subject, PAYLOAD) for _ in range(n))
            rate = ack.count / (time.perf_counter() - start)
            js.delete_stream(tag)
            return rate
        if row == "js_publish_batch":
            js.add_stream(name=tag, subjects=[f"bpub.{tag}"], storage="memory", allow_atomic=True)
            batch = [(f"bpub.{tag}", PAYLOAD)] * ATOMIC_BATCH
            start = time.perf_counter()
            for _ in range(n // ATOMIC_BATCH):
                js.publish_batch(batch)
            rate = n // ATOMIC_BATCH * ATOMIC_BATCH / (time.perf_counter() - start)
            js.delete_stream(tag)
            return rate
        if row == "push_ack":
            sub = js.subscribe("bsrc", config=ConsumerConfig(ack_policy="explicit", max_ack_pending=-1))
            start = time.perf_counter()
            for _ in range(n):
                sub.next_msg(timeout=30).ack()
            rate = n / (time.perf_counter() - start)
            sub.unsubscribe()
            return rate
        if row in ("fetch_ack", "pull_messages"):
            psub = js.pull_subscribe("bpull", durable=tag)
            got = 0
            start = time.perf_counter()
            if row == "fetch_ack":
                while got < n:
                    for msg in psub.fetch(500, timeout=10):
                        msg.ack()
                        got += 1
            else:
                stream = psub.messages(batch=500, expires=10)
                for msg in stream:
                    msg.ack()
                    got += 1
                    if got >= n:
                        stream.stop()
                        break
            rate = got / (time.perf_counter() - start)
            js.delete_consumer("BPULL", tag)
            return rate
        if row in ("consume", "consumer_messages"):  # ADR-37 handles, a buffer of 500 as fetch_ack asks
            consumer = js.stream("BPULL").create_consumer(durable_name=tag)
            got = 0
            start = time.perf_counter()
            if row == "consumer_messages":
                with consumer.messages(max_messages=500) as it:
                    for msg in it:
                        msg.ack()
                        got += 1
                        if got >= n:
                            break
            else:
                done = threading.Event()

                def handle(msg: Any) -> None:
                    nonlocal got
                    msg.ack()
                    got += 1
                    if got == n:
                        done.set()

                ctx = consumer.consume(handle, max_messages=500)
                done.wait(120)
                ctx.stop()
            rate = got / (time.perf_counter() - start)
            consumer.delete()
            return rate
        if row == "ordered":
            osub = js.subscribe("bord", ordered=True, pending_msgs_limit=2_000_000)
            start = time.perf_counter()
            for _ in range(n):
                osub.next_msg(timeout=30)
            rate = n / (time.perf_counter() - start)
            osub.unsubscribe()
            return rate
        if row == "direct_last":
            start = time.perf_counter()
            for i in range(n):
                js.direct_get("KV_bench", last_by_subj=f"$KV.bench.k{i % KEYS}")
            return n / (time.perf_counter() - start)
        if row == "direct_batch":
            start = time.perf_counter()
            got = sum(1 for _ in js.direct_get_batch("BPULL", "bpull", batch=n, seq=1))
            return got / (time.perf_counter() - start)
        if row == "kv_get":
            kv = js.key_value("bench")
            start = time.perf_counter()
            for i in range(n):
                kv.get(f"k{i % KEYS}")
            return n / (time.perf_counter() - start)
        if row == "watchdog":
            return watchdog_cost(nc, js, n)
        if row in ("obj_put", "obj_get"):  # n MiB in one object, in a memory bucket of its own
            data = os.urandom(n << 20)
            obs = js.create_object_store(tag, storage="memory")
            start = time.perf_counter()
            obs.put("big", data)
            if row == "obj_get":
                start = time.perf_counter()
                assert len(obs.get_bytes("big")) == len(data)
            rate = n / (time.perf_counter() - start)
            js.delete_object_store(tag)
            return rate
    finally:
        nc.close()
    raise SystemExit(f"unknown row {row}")


def watchdog_cost(nc: Any, js: Any, n: int) -> float:
    """CPU (percent of one core) of a process idling with n heartbeat-monitored subscriptions."""
    per_stream = 1000  # the server's limit of consumers per stream
    streams = [f"WD{k}" for k in range((n + per_stream - 1) // per_stream)]
    for k, name in enumerate(streams):
        js.add_stream(name=name, subjects=[f"wd{k}.>"], storage="memory")
    subs = [js.subscribe(f"wd{i // per_stream}.{i}", idle_heartbeat=1.0) for i in range(n)]
    time.sleep(2.0)  # let every consumer settle into its heartbeat rhythm
    cpu0, wall0 = time.process_time(), time.perf_counter()
    time.sleep(5.0)
    cpu = (time.process_time() - cpu0) / (time.perf_counter() - wall0) * 100
    assert len(subs) == n
    for name in streams:
        js.delete_stream(name)  # takes the consumers with it; closing the connection ends the rest
    return cpu


def natspy_row(row: str, url: str, n: int) -> float:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig

    async def main() -> float:
        nc = await nats.connect(url)
        js = nc.jetstream(timeout=30)
        tag = f"N{os.getpid()}"
        try:
            if row in ("js_publish", "js_publish_async", "js_publish_batch", "js_publish_stream"):  # no batches: async
                await js.add_stream(name=tag, subjects=[f"bpub.{tag}"], storage="memory")
                subject = f"bpub.{tag}"
                start = time.perf_counter()
                if row == "js_publish":
                    for _ in range(n):
                        await js.publish(subject, PAYLOAD)
                else:
                    for _ in range(n):
                        await js.publish_async(subject, PAYLOAD)
                    await js.publish_async_completed()
                rate = n / (time.perf_counter() - start)
                await js.delete_stream(tag)
                return rate
            if row == "push_ack":
                sub = await js.subscribe(
                    "bsrc",
                    config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, max_ack_pending=-1),
                    manual_ack=True,
                    pending_msgs_limit=2_000_000,
                )
                start = time.perf_counter()
                for _ in range(n):
                    msg = await sub.next_msg(timeout=30)
                    await msg.ack()
                rate = n / (time.perf_counter() - start)
                await sub.unsubscribe()
                return rate
            if row in ("fetch_ack", "consume", "consumer_messages"):  # nats-py's pull consume: a fetch loop
                psub = await js.pull_subscribe("bpull", durable=tag)
                got = 0
                start = time.perf_counter()
                while got < n:
                    for msg in await psub.fetch(500, timeout=10):
                        await msg.ack()
                        got += 1
                rate = got / (time.perf_counter() - start)
                await js.delete_consumer("BPULL", tag)
                return rate
            if row == "ordered":
                sub = await js.subscribe("bord", ordered_consumer=True, pending_msgs_limit=2_000_000)
                start = time.perf_counter()
                for _ in range(n):
                    await sub.next_msg(timeout=30)
                rate = n / (time.perf_counter() - start)
                await sub.unsubscribe()
                return rate
            if row == "direct_last":
                start = time.perf_counter()
                for i in range(n):
                    await js.get_msg("KV_bench", subject=f"$KV.bench.k{i % KEYS}", direct=True)
                return n / (time.perf_counter() - start)
            if row == "direct_batch":
                # nats-py has no batched direct get: a loop of single direct gets.
                start = time.perf_counter()
                for seq in range(1, n + 1):
                    await js.get_msg("BPULL", seq=seq, direct=True)
                return n / (time.perf_counter() - start)
            if row == "kv_get":
                kv = await js.key_value("bench")
                start = time.perf_counter()
                for i in range(n):
                    await kv.get(f"k{i % KEYS}")
                return n / (time.perf_counter() - start)
            if row in ("obj_put", "obj_get"):
                from nats.js.api import ObjectStoreConfig, StorageType

                data = os.urandom(n << 20)
                obs = await js.create_object_store(tag, config=ObjectStoreConfig(storage=StorageType.MEMORY))
                start = time.perf_counter()
                await obs.put("big", data)
                if row == "obj_get":
                    start = time.perf_counter()
                    assert len((await obs.get("big")).data) == len(data)
                rate = n / (time.perf_counter() - start)
                await js.delete_object_store(tag)
                return rate
        finally:
            await nc.close()
        raise SystemExit(f"unsupported row {row} for nats-py")

    return asyncio.run(main())


def prepare(url: str, scale: float) -> None:
    """Fill the shared streams once (memory storage), with jsclient."""
    import jsclient

    with jsclient.connect(url) as nc:
        js = nc.jetstream(timeout=30)
        for name, subject, count in (
            ("BSRC", "bsrc", 100_000),
            ("BPULL", "bpull", 200_000),
            ("BORD", "bord", 500_000),
        ):
            count = max(1000, int(count * scale))
            js.add_stream(name=name, subjects=[subject], storage="memory", allow_direct=True)
            for _ in range(count):
                js.publish_async(subject, PAYLOAD)
            js.publish_async_completed(timeout=600)
        kv = js.create_key_value("bench", storage="memory")
        for i in range(KEYS):
            kv.put(f"k{i}", PAYLOAD)


# -- raw socket: the floor for rows with one request in flight ------------------


def raw_row(row: str, url: str, n: int) -> float:
    """Pre-encoded requests on a bare socket, each waiting for its whole reply: no client can beat this."""
    import socket

    host, _, port = url.split("//", 1)[-1].rpartition(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.recv(65536)  # INFO
    sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nSUB _INBOX.raw.* 1\r\nPING\r\n')
    buf = b""
    while b"PONG\r\n" not in buf:
        buf += sock.recv(65536)
    try:
        if row in ("js_publish", "js_publish_async"):
            stream = f"R{os.getpid()}"
            _raw_request(sock, b"$JS.API.STREAM.CREATE." + stream.encode(),
                         json.dumps({"name": stream, "subjects": [f"bpub.{stream}"], "storage": "memory"}).encode())
            frames = [b"PUB bpub.%s _INBOX.raw.1 %d\r\n%s\r\n" % (stream.encode(), len(PAYLOAD), PAYLOAD)]
        elif row in ("direct_last", "kv_get"):
            frames = [b"PUB $JS.API.DIRECT.GET.KV_bench.$KV.bench.k%d _INBOX.raw.1 0\r\n\r\n" % i for i in range(KEYS)]
        else:
            raise SystemExit(f"unsupported row {row} for raw")
        start = time.perf_counter()
        if row == "js_publish_async":
            _raw_window(sock, frames[0], n, 4000)
        else:
            for i in range(n):
                sock.sendall(frames[i % len(frames)])
                raw_reply(sock)
        rate = n / (time.perf_counter() - start)
        if row.startswith("js_publish"):
            _raw_request(sock, b"$JS.API.STREAM.DELETE." + stream.encode(), b"")
        return rate
    finally:
        sock.close()


def _raw_request(sock: Any, subject: bytes, body: bytes) -> None:
    sock.sendall(b"PUB %s _INBOX.raw.0 %d\r\n%s\r\n" % (subject, len(body), body))
    raw_reply(sock)


def _raw_window(sock: Any, frame: bytes, n: int, window: int) -> None:
    """Keep ``window`` publishes awaiting their acks, topping up as acks arrive.

    Each ack is one MSG: a control line and a payload line, so two CRLFs.
    """
    sent = min(window, n)
    sock.sendall(frame * sent)
    acked, lines, carry = 0, 0, b""
    while acked < n:
        data = carry + sock.recv(262144)
        carry = b"\r" if data.endswith(b"\r") else b""  # a CRLF split across reads counts next time
        lines += data.count(b"\r\n")
        got = lines // 2 - acked
        acked += got
        more = min(got, n - sent)
        if more > 0:
            sock.sendall(frame * more)
            sent += more


def raw_reply(sock: Any) -> None:
    """Read exactly one MSG or HMSG (the only traffic on this socket but the server's PINGs, answered)."""
    buf = b""
    while True:
        while b"\r\n" not in buf:
            buf += raw_recv(sock)
        line, _, rest = buf.partition(b"\r\n")
        if line != b"PING":
            break
        sock.sendall(b"PONG\r\n")
        buf = rest
    need = int(line.split()[-1]) + 2
    while len(rest) < need:
        rest += raw_recv(sock)


CLIENTS = {"jsclient": jsclient_row, "nats-py": natspy_row, "raw": raw_row}

if __name__ == "__main__":
    client, row, url, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    print(json.dumps({"rate": CLIENTS[client](row, url, count)}))
