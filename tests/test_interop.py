"""Interoperability with nats-py (a peer client used only here, never by jsclient)."""

from __future__ import annotations

import asyncio
import threading

import nats

import jsclient
from jsclient.server import NatsServer


def test_jsclient_publishes_nats_py_receives(server: NatsServer) -> None:
    ready = threading.Event()
    received: list[tuple[str, bytes, dict[str, str] | None]] = []

    async def receive() -> None:
        nc = await nats.connect(server.url)
        sub = await nc.subscribe("interop.a")
        await nc.flush()
        ready.set()
        for _ in range(2):
            msg = await sub.next_msg(timeout=5)
            received.append((msg.subject, msg.data, msg.headers))
        await nc.close()

    th = threading.Thread(target=lambda: asyncio.run(receive()))
    th.start()
    assert ready.wait(10)
    with jsclient.connect(server.url) as js_nc:
        js_nc.publish("interop.a", b"with headers", headers={"Trace-Id": "abc", "K": "v"})
        js_nc.publish("interop.a", b"plain")
    th.join(10)
    assert received == [
        ("interop.a", b"with headers", {"Trace-Id": "abc", "K": "v"}),
        ("interop.a", b"plain", None),
    ]


def test_nats_py_publishes_jsclient_receives(server: NatsServer) -> None:
    with jsclient.connect(server.url) as js_nc:
        sub = js_nc.subscribe("interop.b")
        js_nc.flush()

        async def send() -> None:
            nc = await nats.connect(server.url)
            await nc.publish("interop.b", b"from nats-py", headers={"Origin": "nats-py"})
            await nc.publish("interop.b", b"plain")
            await nc.flush()
            await nc.close()

        asyncio.run(send())
        first = sub.next_msg(timeout=5)
        assert first.data == b"from nats-py" and first.headers["Origin"] == "nats-py"
        assert sub.next_msg(timeout=5).data == b"plain"


def test_request_reply_across_clients(server: NatsServer) -> None:
    with jsclient.connect(server.url) as js_nc:
        js_nc.subscribe("interop.svc", callback=lambda m: m.respond(b"js:" + m.data))
        js_nc.flush()

        async def ask() -> bytes:
            nc = await nats.connect(server.url)
            reply = await nc.request("interop.svc", b"hi", timeout=5)
            await nc.close()
            return reply.data

        assert asyncio.run(ask()) == b"js:hi"
