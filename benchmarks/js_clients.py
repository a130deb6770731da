"""JetStream measurements, one per process: ``python -m benchmarks.js_clients <client> <row> <url> <n>``.

Prints one JSON line, a :class:`benchmarks.common.Figure` (operations per
second and CPU per operation; for ``watchdog``, percent of one core and CPU
per subscription-second; for the object rows, MiB/s and CPU per MiB).  The
runner fills the shared streams first (BSRC, BPULL, BORD and the buckets
``bench``, ``bench_chg`` and ``bench_put``); rows only read them, except the
publish rows, which create and delete a memory stream of their own, and
``kv_put``.  The ``*_changing`` rows read ``bench_chg``, whose values a
churner rewrites between two reads of a key (:func:`benchmarks.common.parts`).
pynats2 has no JetStream; nats-py-sync's reaches KV get and put, and a
JetStream publish through its ``request``.  natsio (Python 3.13+) has every
row but ``push_ack`` (it has pull consumers only, as ADR-37 has it) and the
feature rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import json
import os
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

from benchmarks.clients import raw_recv, run_main
from benchmarks.common import (
    Churner,
    Figure,
    LoopThread,
    Meter,
    close_sync,
    each,
    each_async,
    raw_socket,
    timed,
)

T = TypeVar("T")
PAYLOAD = b"x" * 128
KEYS = 1000
#: Messages per atomic batch (the server's default limit is 1,000).
ATOMIC_BATCH = 1000
#: The bucket each key-value row reads or writes (direct_last* read the same buckets' streams).
BUCKETS = {"kv_get": "bench", "direct_last": "bench", "kv_get_changing": "bench_chg",
           "direct_last_changing": "bench_chg", "kv_put": "bench_put"}
CHANGING = "bench_chg"
#: The messages a fetch pulls at once, and the buffer of the handles that pull for themselves.
FETCH_BATCH = 500
#: The round-trip rows: one call at a time, through :func:`benchmarks.common.each`.
ROUND_TRIP = ("js_publish", "kv_get", "kv_get_changing", "direct_last", "direct_last_changing", "kv_put")


def keys() -> list[str]:
    """The keys of every bucket, made once so no client's loop formats them."""
    return [f"k{i}" for i in range(KEYS)]


def round_trip(row: str, subject: str, publish: Callable[[str, bytes], T], direct_get: Callable[[str, str], T],
               kv: Any) -> Callable[[int], T]:
    """The one call of a round-trip row, from a client's own calls (so every client reads the same keys):
    ``publish(subject, payload)`` awaiting its ack, ``direct_get(stream, last_by_subject)``, a bucket's ``get``
    and ``put``."""
    names = keys()
    if row == "js_publish":
        return lambda _i: publish(subject, PAYLOAD)
    bucket = BUCKETS[row]
    if row.startswith("direct_last"):
        stream, subjects = f"KV_{bucket}", [f"$KV.{bucket}.{key}" for key in names]
        return lambda i: direct_get(stream, subjects[i % KEYS])
    if row == "kv_put":
        return lambda i: kv.put(names[i % KEYS], PAYLOAD)
    return lambda i: kv.get(names[i % KEYS])


def fetch_batch(row: str) -> int:
    """The messages a fetch row pulls at once: ``fetch_ack_<B>`` B (the distance rows), else FETCH_BATCH."""
    return int(row.removeprefix("fetch_ack_")) if row.startswith("fetch_ack_") else FETCH_BATCH


def churner(row: str, url: str) -> Churner | None:
    """The churner of a ``*_changing`` row (every value written anew before each read), else None."""
    return Churner(url, CHANGING, KEYS) if row.endswith("_changing") else None


def api(url: str, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """One JetStream API request on a raw socket of its own, for setup every client shares (no client's code)."""
    with raw_socket(url, b"_INBOX.api") as sock:
        data = json.dumps(body).encode() if body is not None else b""
        sock.sendall(b"PUB %s _INBOX.api.0 %d\r\n%s\r\n" % (subject.encode(), len(data), data))
        reply = json.loads(raw_reply(sock))
    if "error" in reply:
        raise RuntimeError(f"{subject}: {reply['error']}")
    return reply


@contextlib.contextmanager
def own_stream(url: str, name: str, *, wanted: bool = True, **config: Any) -> Iterator[str]:
    """A memory stream of this process's own (subject ``bpub.<name>``), deleted at the end: its subject.

    Only the publish rows want one: not ``wanted``, no stream and "" (the round-trip rows share one path).
    """
    if not wanted:
        yield ""
        return
    subject = f"bpub.{name}"
    api(url, f"$JS.API.STREAM.CREATE.{name}", {"name": name, "subjects": [subject], "storage": "memory", **config})
    try:
        yield subject
    finally:
        api(url, f"$JS.API.STREAM.DELETE.{name}")


# -- jsclient -----------------------------------------------------------------


def jsclient_row(row: str, url: str, n: int, **options: Any) -> Figure:
    """jsclient, each row on the call it names (its fastest path for that work; the feature rows on features
    nats-py lacks).  ``options`` go to ``connect`` (the distance rows' ``spin_wait=0``)."""
    import jsclient
    from jsclient.jetstream.api import ConsumerConfig

    nc = jsclient.connect(url, pending_msgs_limit=2_000_000, pending_bytes_limit=1 << 31, **options)
    js = nc.jetstream(timeout=30)
    tag = f"J{os.getpid()}"
    row = row.removesuffix("_unpinned")  # the same measurement; only the runner's pinning differs
    try:
        if row in ROUND_TRIP:
            # js.publish, kv.get, direct_get(last_by_subj=), kv.put: jsclient's one call for each.
            kv = js.key_value(BUCKETS[row]) if row.startswith("kv_") else None
            with own_stream(url, tag, wanted=row.startswith("js_publish")) as subject:
                call = round_trip(row, subject, js.publish, lambda stream, last: js.direct_get(
                    stream, last_by_subj=last), kv)
                return each(call, n, churner(row, url))
        if row == "js_publish_async":
            with own_stream(url, tag) as subject:

                def window() -> None:
                    for _ in range(n):
                        js.publish_async(subject, PAYLOAD)
                    js.publish_async_completed(timeout=300)

                return timed(window, n)
        if row == "js_publish_stream":
            with own_stream(url, tag, allow_batched=True) as subject, Meter() as meter:
                ack = js.publish_stream((subject, PAYLOAD) for _ in range(n))
            return meter.figure(ack.count)
        if row == "js_publish_batch":
            with own_stream(url, tag, allow_atomic=True) as subject:
                batch = [(subject, PAYLOAD)] * ATOMIC_BATCH
                batches = max(1, n // ATOMIC_BATCH)
                return timed(lambda: [js.publish_batch(batch) for _ in range(batches)], batches * ATOMIC_BATCH)
        if row == "push_ack":
            sub = js.subscribe("bsrc", config=ConsumerConfig(ack_policy="explicit", max_ack_pending=-1))
            with Meter() as meter:
                for _ in range(n):
                    sub.next_msg(timeout=30).ack()
            sub.unsubscribe()
            return meter.figure(n)
        if row.startswith("fetch_ack") or row == "pull_messages":
            psub = js.pull_subscribe("bpull", durable=tag)
            got = 0
            with Meter() as meter:
                if row.startswith("fetch_ack"):
                    while got < n:
                        for msg in psub.fetch(fetch_batch(row), timeout=10):
                            msg.ack()
                            got += 1
                else:
                    stream = psub.messages(FETCH_BATCH, expires=10)
                    for msg in stream:
                        msg.ack()
                        got += 1
                        if got >= n:
                            stream.stop()
                            break
            js.delete_consumer("BPULL", tag)
            return meter.figure(got)
        if row in ("consume", "consumer_messages"):  # ADR-37 handles, a buffer of FETCH_BATCH as fetch_ack asks
            # Explicit acks with no pending limit, as the nats-py row's consumer: the acks are real work for the
            # server (a consumer made without ack_policy got none before 1.0, which the server ignores).
            consumer = js.stream("BPULL").create_consumer(
                durable_name=tag, ack_policy="explicit", max_ack_pending=-1
            )
            got = 0
            with Meter() as meter:
                if row == "consumer_messages":
                    with consumer.messages(max_messages=FETCH_BATCH) as it:
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

                    ctx = consumer.consume(handle, max_messages=FETCH_BATCH)
                    done.wait(120)
                    ctx.stop()
            consumer.delete()
            return meter.figure(got)
        if row == "ordered":
            osub = js.subscribe("bord", ordered=True, pending_msgs_limit=2_000_000)
            with Meter() as meter:
                for _ in range(n):
                    osub.next_msg(timeout=30)
            osub.unsubscribe()
            return meter.figure(n)
        if row == "direct_batch":
            with Meter() as meter:
                # The count's keyword is max_messages from 1.0 on, batch in an older tree (make bench's --old).
                params = inspect.signature(js.direct_get_batch).parameters
                count = {"max_messages" if "max_messages" in params else "batch": n}
                got = sum(1 for _ in js.direct_get_batch("BPULL", "bpull", seq=1, **count))
            return meter.figure(got)
        if row == "watchdog":
            return watchdog_cost(nc, js, n)
        if row in ("obj_put", "obj_get", "obj_get_writeinto"):  # n MiB in one object, in a memory bucket of its own
            data = os.urandom(n << 20)
            obs = js.create_object_store(tag, storage="memory")
            meter = Meter()
            with meter if row == "obj_put" else contextlib.nullcontext():
                obs.put("big", data)
            if row == "obj_get":
                with meter:
                    assert len(obs.get_bytes("big")) == len(data)
            if row == "obj_get_writeinto":  # into a file object: the reader's chunks as they come, each written
                sink = io.BytesIO()
                with meter, obs.get("big") as reader:
                    for chunk in reader:
                        sink.write(chunk)
                assert sink.tell() == len(data)
            js.delete_object_store(tag)
            return meter.figure(n)
    finally:
        nc.close()
    raise SystemExit(f"unknown row {row}")


def watchdog_cost(nc: Any, js: Any, n: int) -> Figure:
    """CPU of a process idling with n heartbeat-monitored subscriptions: percent of one core, and CPU per
    subscription-second (each subscription's heartbeat watched for one second)."""
    smoke = os.environ.get("BENCH_SMOKE") == "1"  # the harness's test: the same steps, not the same wait
    per_stream = 1000  # the server's limit of consumers per stream
    streams = [f"WD{k}" for k in range((n + per_stream - 1) // per_stream)]
    for k, name in enumerate(streams):
        js.add_stream(name=name, subjects=[f"wd{k}.>"], storage="memory")
    subs = [js.subscribe(f"wd{i // per_stream}.{i}", idle_heartbeat=1.0) for i in range(n)]
    time.sleep(0.2 if smoke else 2.0)  # let every consumer settle into its heartbeat rhythm
    with Meter() as meter:
        time.sleep(0.5 if smoke else 5.0)
    assert len(subs) == n
    for name in streams:
        js.delete_stream(name)  # takes the consumers with it; closing the connection ends the rest
    return Figure(meter.cpu / meter.wall * 100, meter.cpu * 1e6 / (meter.wall * n))


# -- nats-py ------------------------------------------------------------------


async def natspy_call(js: Any, row: str, subject: str) -> Callable[[int], Coroutine[Any, Any, object]]:
    """nats-py's one call of a round-trip row (its only path for each): ``js.publish``, ``kv.get``,
    ``js.get_msg(direct=True)``, ``kv.put``; awaited in place by nats-py, handed to the loop by nats-py-thread."""
    kv = await js.key_value(BUCKETS[row]) if row.startswith("kv_") else None
    return round_trip(row, subject, js.publish, lambda stream, last: js.get_msg(stream, subject=last, direct=True), kv)


def natspy_row(row: str, url: str, n: int) -> Figure:
    """nats-py awaited in its own loop; where it lacks jsclient's feature, its nearest (each row says which)."""
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig

    async def main() -> Figure:
        nc = await nats.connect(url)
        js = nc.jetstream(timeout=30)
        tag = f"N{os.getpid()}"
        try:
            if row in ROUND_TRIP:
                with own_stream(url, tag, wanted=row.startswith("js_publish")) as subject:
                    return await each_async(await natspy_call(js, row, subject), n, churner(row, url))
            if row in ("js_publish_async", "js_publish_batch", "js_publish_stream"):  # no batches: async
                with own_stream(url, tag) as subject, Meter() as meter:
                    for _ in range(n):
                        await js.publish_async(subject, PAYLOAD)
                    await js.publish_async_completed()
                return meter.figure(n)
            if row == "push_ack":
                sub = await js.subscribe(
                    "bsrc",
                    config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, max_ack_pending=-1),
                    manual_ack=True,
                    pending_msgs_limit=2_000_000,
                )
                with Meter() as meter:
                    for _ in range(n):
                        msg = await sub.next_msg(timeout=30)
                        await msg.ack()
                await sub.unsubscribe()
                return meter.figure(n)
            if row.startswith("fetch_ack") or row in ("consume", "consumer_messages"):  # its pull consume: fetch
                psub = await js.pull_subscribe("bpull", durable=tag)
                got = 0
                with Meter() as meter:
                    while got < n:
                        for msg in await psub.fetch(fetch_batch(row), timeout=10):
                            await msg.ack()
                            got += 1
                await js.delete_consumer("BPULL", tag)
                return meter.figure(got)
            if row == "ordered":
                osub = await js.subscribe("bord", ordered_consumer=True, pending_msgs_limit=2_000_000)
                with Meter() as meter:
                    for _ in range(n):
                        await osub.next_msg(timeout=30)
                await osub.unsubscribe()
                return meter.figure(n)
            if row == "direct_batch":
                # nats-py has no batched direct get: a loop of single direct gets.
                return await each_async(lambda i: js.get_msg("BPULL", seq=i + 1, direct=True), n)
            if row in ("obj_put", "obj_get", "obj_get_writeinto"):
                from nats.js.api import ObjectStoreConfig, StorageType

                data = os.urandom(n << 20)
                obs = await js.create_object_store(tag, config=ObjectStoreConfig(storage=StorageType.MEMORY))
                meter = Meter()
                with meter if row == "obj_put" else contextlib.nullcontext():
                    await obs.put("big", data)
                if row == "obj_get":  # its default get: the object's bytes in result.data (+= per chunk)
                    with meter:
                        assert len((await obs.get("big")).data) == len(data)
                if row == "obj_get_writeinto":  # its get(writeinto=): each chunk written through the executor
                    sink = io.BytesIO()
                    with meter:
                        await obs.get("big", writeinto=sink)
                    assert sink.tell() == len(data)
                await js.delete_object_store(tag)
                return meter.figure(n)
        finally:
            await nc.close()
        raise SystemExit(f"unsupported row {row} for nats-py")

    return asyncio.run(main())


def natspythread_row(row: str, url: str, n: int) -> Figure:
    """nats-py on a loop thread (:class:`benchmarks.common.LoopThread`): nats-py's call, handed to the loop
    with ``run_coroutine_threadsafe`` and waited for."""
    import nats

    if row not in ROUND_TRIP:
        raise SystemExit(f"unsupported row {row} for nats-py-thread")
    lt = LoopThread()
    nc = lt.call(nats.connect(url))
    try:
        with own_stream(url, f"T{os.getpid()}", wanted=row.startswith("js_publish")) as subject:
            call = lt.call(natspy_call(nc.jetstream(timeout=30), row, subject))
            return each(lambda i: lt.call(call(i)), n, churner(row, url))
    finally:
        lt.call(nc.close())
        lt.close()


def natspysync_row(row: str, url: str, n: int) -> Figure:
    """nats-py-sync: ``js.key_value(bucket)``'s ``get`` and ``put``; a JetStream publish as its ``request`` to
    the stream's subject with the ack's JSON read (it has no js.publish: a request is what a publish is)."""
    import nats_sync

    if row not in ("js_publish", "kv_get", "kv_get_changing", "kv_put"):
        raise SystemExit(f"unsupported row {row} for nats-py-sync")
    ctx = nats_sync.connect(url)

    def publish(subject: str, payload: bytes) -> None:
        ack = json.loads(ctx.request(subject, payload, timeout=5).data)
        if "error" in ack:
            raise RuntimeError(ack["error"])

    try:
        kv = ctx.jetstream().key_value(BUCKETS[row]) if row.startswith("kv_") else None
        with own_stream(url, f"S{os.getpid()}", wanted=row.startswith("js_publish")) as subject:
            return each(round_trip(row, subject, publish, no_direct_get, kv), n, churner(row, url))
    finally:
        close_sync(ctx)


def no_direct_get(stream: str, subject: str) -> None:
    raise SystemExit("nats-py-sync has no direct get")


def natsio_row(row: str, url: str, n: int) -> Figure:
    """natsio awaited in its own loop, each row on its one call for that work: ``js.publish``,
    ``publish_async`` with its window (4,000, as raw's), a consumer's ``fetch``, its ADR-37 ``consume()``
    (an async iterator: natsio has no callback form, so both ADR-37 rows iterate it), the stream's
    ``ordered_consumer()``, the stream's ``get_msg(subject=)`` (a direct get on these streams), a bucket's
    ``get`` and ``put``, and the object store's ``put``, ``get_bytes`` and ``get`` (chunks as they come)."""
    import natsio
    from natsio.jetstream import AckPolicy, ConsumerConfig, StorageType

    async def main() -> Figure:
        nc = await natsio.connect(url, pending_msgs_limit=2_000_000, pending_bytes_limit=1 << 31)
        # The stall wait only decides when a full window gives up: a pause of a busy machine is then a lower
        # rate, not an error (its default is 0.2 s); it changes nothing while acks keep coming.
        js = nc.jetstream(timeout=30, publish_async_stall_wait=30)
        tag = f"I{os.getpid()}"
        try:
            if row in ROUND_TRIP:
                kv = await js.key_value(BUCKETS[row]) if row.startswith("kv_") else None
                kv_stream = await js.stream(f"KV_{BUCKETS[row]}") if row.startswith("direct_last") else None

                async def direct_get(_stream: str, last: str) -> object:
                    assert kv_stream is not None
                    return await kv_stream.get_msg(subject=last)

                with own_stream(url, tag, wanted=row.startswith("js_publish")) as subject:
                    return await each_async(round_trip(row, subject, js.publish, direct_get, kv), n,
                                            churner(row, url))
            if row == "js_publish_async":
                with own_stream(url, tag) as subject, Meter() as meter:
                    for _ in range(n):
                        await js.publish_async(subject, PAYLOAD)
                    await js.publish_async_complete(timeout=300)
                return meter.figure(n)
            if row.startswith("fetch_ack") or row in ("consume", "consumer_messages"):
                # fetch_ack as the other clients' pull_subscribe(durable=): a durable with explicit acks and the
                # server's default pending limit; the ADR-37 rows as jsclient's, with no pending limit.
                limit = {} if row.startswith("fetch_ack") else {"max_ack_pending": -1}
                stream = await js.stream("BPULL")
                consumer = await stream.create_consumer(
                    ConsumerConfig(durable_name=tag, ack_policy=AckPolicy.EXPLICIT, **limit)
                )
                got = 0
                with Meter() as meter:
                    if row.startswith("fetch_ack"):
                        while got < n:
                            for msg in await consumer.fetch(fetch_batch(row), timeout=10):
                                await msg.ack()
                                got += 1
                    else:
                        async with consumer.consume(max_messages=FETCH_BATCH) as messages:
                            async for msg in messages:
                                await msg.ack()
                                got += 1
                                if got >= n:
                                    break
                await consumer.delete()
                return meter.figure(got)
            if row == "ordered":
                async with (await js.stream("BORD")).ordered_consumer() as ordered:
                    await ordered.start()  # its consumer made before the timed part, as the others' subscribe
                    messages = ordered.messages()
                    with Meter() as meter:
                        for _ in range(n):
                            await anext(messages)
                    await messages.aclose()
                return meter.figure(n)
            if row in ("obj_put", "obj_get", "obj_get_writeinto"):
                from natsio.objectstore import ObjectStoreConfig

                data = os.urandom(n << 20)
                obs = await js.create_object_store(ObjectStoreConfig(bucket=tag, storage=StorageType.MEMORY))
                meter = Meter()
                with meter if row == "obj_put" else contextlib.nullcontext():
                    await obs.put("big", data)
                if row == "obj_get":
                    with meter:
                        assert len(await obs.get_bytes("big")) == len(data)
                if row == "obj_get_writeinto":  # its chunks as they come, each written
                    sink = io.BytesIO()
                    with meter:
                        async with obs.get("big") as result:
                            async for chunk in result:
                                sink.write(chunk)
                    assert sink.tell() == len(data)
                await js.delete_object_store(tag)
                return meter.figure(n)
        finally:
            await nc.close()
        raise SystemExit(f"unsupported row {row} for natsio")

    return asyncio.run(main())


def prepare(url: str, scale: float) -> None:
    """Fill the shared streams and buckets once (memory storage), with jsclient."""
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
        for bucket in ("bench", CHANGING, "bench_put"):
            kv = js.create_key_value(bucket, storage="memory")
            for key in keys():
                kv.put(key, PAYLOAD)


# -- raw socket: the floor for rows with one request in flight ------------------


def raw_row(row: str, url: str, n: int) -> Figure:
    """Pre-encoded requests on a bare socket, each waiting for its whole reply: no client can beat this."""
    publishes = row.startswith("js_publish")
    with raw_socket(url) as sock, own_stream(url, f"R{os.getpid()}", wanted=publishes) as subject:
        if row in ("js_publish", "js_publish_async"):
            frames = [b"PUB %s _INBOX.raw.1 %d\r\n%s\r\n" % (subject.encode(), len(PAYLOAD), PAYLOAD)]
        elif row in ROUND_TRIP:
            prefix = b"$JS.API.DIRECT.GET.KV_%s.$KV.%s." % ((BUCKETS[row].encode(),) * 2)
            if row == "kv_put":
                frames = [b"PUB $KV.bench_put.k%d _INBOX.raw.1 %d\r\n%s\r\n" % (i, len(PAYLOAD), PAYLOAD)
                          for i in range(KEYS)]
            else:
                frames = [b"PUB %sk%d _INBOX.raw.1 0\r\n\r\n" % (prefix, i) for i in range(KEYS)]
        else:
            raise SystemExit(f"unsupported row {row} for raw")
        if row == "js_publish_async":
            return timed(lambda: _raw_window(sock, frames[0], n, 4000), n)

        def one(i: int) -> None:
            sock.sendall(frames[i % len(frames)])
            raw_reply(sock)

        return each(one, n, churner(row, url))


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


def raw_reply(sock: Any) -> bytes:
    """Read exactly one MSG or HMSG (the only traffic on this socket but the server's PINGs, answered): its
    body (headers and payload)."""
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
    if not b"PING\r\n".startswith(rest[need : need + 6]):  # nothing else may follow: a reply not ours came
        raise RuntimeError(f"a raw socket was sent more than its one reply: {rest[need : need + 60]!r}")
    return rest[: need - 2]


CLIENTS: dict[str, Callable[[str, str, int], Figure]] = {
    "jsclient": jsclient_row,
    "nats-py": natspy_row,
    "nats-py-sync": natspysync_row,
    "nats-py-thread": natspythread_row,
    "natsio": natsio_row,
    "raw": raw_row,
}

if __name__ == "__main__":
    run_main(CLIENTS)
