"""A user's script, typed as a user would write it: ``tests/test_typed_user.py`` runs mypy --strict on it
(no ignore comment allowed) and then runs it against a real server.

It uses the documented calls of each part (core, JetStream classic and ADR-37 handles, key-value, object
store, services), keeping what each returns in variables of the exported types, so that a signature or a
return type that an IDE cannot follow fails the type check.
"""

from __future__ import annotations

import sys
from concurrent.futures import Future

import jsclient
from jsclient import micro
from jsclient.server import NatsServer


def core(nc: jsclient.Connection) -> None:
    got: list[jsclient.Msg] = []
    sub: jsclient.Subscription = nc.subscribe("typed.>", callback=got.append)
    nc.publish("typed.a", b"1", headers={"k": "v"})
    echo = nc.subscribe("typed.echo", callback=lambda m: m.respond(m.data))
    reply: jsclient.Msg = nc.request("typed.echo", b"hi", timeout=2.0)
    assert reply.data == b"hi"
    future: Future[jsclient.Msg] = nc.request_async("typed.echo", b"again", timeout=2.0)
    assert future.result(timeout=2.0).data == b"again"
    replies: jsclient.Replies = nc.request_many("typed.echo", b"many", timeout=1.0, max_messages=1)
    assert [m.data for m in replies] == [b"many"]
    nc.flush(timeout=2.0)
    headers: jsclient.Headers = got[0].headers
    assert headers["k"] == "v"
    sub.unsubscribe()
    echo.drain(timeout=2.0)


def jetstream(js: jsclient.JetStream) -> None:
    info: jsclient.StreamInfo = js.add_stream(name="TYPED", subjects=["orders.>"], allow_direct=True)
    assert info.config.name == "TYPED"
    ack: jsclient.PubAck = js.publish("orders.new", b"x", msg_id="id-1")
    pending: Future[jsclient.PubAck] = js.publish_async("orders.new", b"y")
    js.publish_async_completed(timeout=10.0)
    assert pending.result().seq == ack.seq + 1

    push: jsclient.PushSubscription = js.subscribe("orders.>", durable="typed-push")
    first: jsclient.Msg = push.next_msg(timeout=2.0)
    first.ack()
    push.unsubscribe()
    ordered: jsclient.OrderedSubscription = js.subscribe("orders.>", ordered=True)
    assert ordered.next_msg(timeout=2.0).data == b"x"
    ordered.unsubscribe()
    pull: jsclient.PullSubscription = js.pull_subscribe("orders.>", "typed-pull")
    for msg in pull.fetch(10, timeout=2.0):
        msg.ack()

    stream: jsclient.Stream = js.stream("TYPED")
    consumer: jsclient.Consumer = stream.create_or_update_consumer(durable_name="typed-handle")
    config: jsclient.ConsumerConfig = consumer.info().config
    assert config.ack_policy == jsclient.AckPolicy.EXPLICIT
    one: jsclient.Msg = consumer.next_msg(timeout=2.0)
    one.ack_sync(timeout=2.0)
    with stream.ordered_consumer() as replay:
        assert [m.data for m in replay.fetch(2, timeout=2.0)] == [b"x", b"y"]

    stored: jsclient.StoredMessage = js.direct_get("TYPED", last_by_subj="orders.new")
    assert stored.seq == 2
    batch: list[jsclient.StoredMessage] = list(js.direct_get_batch("TYPED", "orders.>", max_messages=10))
    assert len(batch) == 2


def stores(js: jsclient.JetStream) -> None:
    kv: jsclient.KeyValue = js.create_key_value("typed")
    revision: int = kv.put("k", b"v1")
    entry: jsclient.KeyValueEntry = kv.get("k")
    assert entry.revision == revision
    kv.update("k", b"v2", last=revision)
    objects: jsclient.ObjectStore = js.create_object_store("typed-files")
    put: jsclient.ObjectInfo = objects.put("a.bin", b"\x00" * 1000)
    assert objects.get_bytes("a.bin") == b"\x00" * 1000 and put.size == 1000


def service(nc: jsclient.Connection) -> None:
    svc: jsclient.Service = micro.add_service(nc, name="typed", version="1.0.0")
    svc.add_endpoint("echo", lambda request: request.respond(request.data))
    assert nc.request("echo", b"svc", timeout=2.0).data == b"svc"
    svc.stop()


def main(url: str) -> None:
    with jsclient.connect(url, name="typed") as nc:
        core(nc)
        js: jsclient.JetStream = nc.jetstream(timeout=5.0)
        jetstream(js)
        stores(js)
        service(nc)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with NatsServer() as server:
            main(server.url)


def keywords(url: str) -> None:
    """connect() and Connection take Options' fields as typed keywords, so mypy checks each name and type."""
    base = jsclient.Options(servers=(url,), name="typed-base", connect_timeout=5.0)
    with jsclient.connect(options=base, name="typed-keywords", ping_interval=60.0, no_randomize=True) as nc:
        assert nc.options.name == "typed-keywords" and nc.options.connect_timeout == 5.0
    with jsclient.Connection(url, name="typed-connection", user_credentials=None, ws_headers={}) as conn:
        assert conn.options.name == "typed-connection"


if __name__ == "__main__" and len(sys.argv) > 1:
    keywords(sys.argv[1])
