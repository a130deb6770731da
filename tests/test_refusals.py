"""Refusals the docstring review found missing, each on a real server: the error is a jsclient.Error named for
the argument, raised before anything is sent, and nothing is left behind (no subscription, no consumer)."""

from __future__ import annotations

import json
import math
import urllib.request

import msgspec
import pytest

import jsclient
from jsclient.server import NatsServer


def subscriptions(server: NatsServer, name: str) -> list[str]:
    """The subjects the connection called ``name`` is subscribed to, as the server sees them."""
    with urllib.request.urlopen(f"http://127.0.0.1:{server.monitor_port}/connz?subs=1", timeout=5) as reply:
        conns = json.load(reply)["connections"]
    return sorted(s for c in conns if c.get("name") == name for s in c.get("subscriptions_list", []))


def test_a_consume_heartbeat_too_long_for_expires_leaves_nothing_behind(
    server: NatsServer, nc: jsclient.Connection, js: jsclient.JetStream
) -> None:
    js.add_stream(name="HBREF", subjects=["hbref"])
    consumer = js.stream("HBREF").create_consumer(durable_name="c")
    nc.flush()
    before, sent = subscriptions(server, "test"), nc.stats()["out_msgs"]
    for start in (consumer.messages, lambda **kw: consumer.consume(lambda m: None, **kw)):
        with pytest.raises(jsclient.InvalidArgumentError, match=r"heartbeat \(1.5 s\) must be less than half"):
            start(expires=2.0, heartbeat=1.5)
    nc.flush()
    assert subscriptions(server, "test") == before and nc.stats()["out_msgs"] == sent


def test_an_ordered_consumer_refuses_an_unknown_deliver_policy(js: jsclient.JetStream) -> None:
    js.add_stream(name="DPREF", subjects=["dpref"])
    stream = js.stream("DPREF")
    with pytest.raises(jsclient.InvalidArgumentError, match=r"deliver_policy must be one of .*'sometimes'"):
        stream.ordered_consumer(deliver_policy="sometimes")


def test_an_ordered_consumer_checks_max_messages_before_making_its_consumer(js: jsclient.JetStream) -> None:
    js.add_stream(name="MMREF", subjects=["mmref"])
    with js.stream("MMREF").ordered_consumer() as oc:
        with pytest.raises(jsclient.InvalidArgumentError, match="max_messages"):
            oc.fetch(0)
        assert js.stream_info("MMREF").state.consumer_count == 0  # nothing was made for the refused call


@pytest.mark.parametrize("older_than", [math.inf, 1e300])
def test_purge_deletes_refuses_a_limit_beyond_any_date(js: jsclient.JetStream, older_than: float) -> None:
    kv = js.create_key_value("pdref")
    with pytest.raises(jsclient.InvalidArgumentError, match="older_than must be a finite number"):
        kv.purge_deletes(older_than=older_than)


def test_a_chunk_gone_mid_read_is_object_not_found_without_allow_direct(js: jsclient.JetStream) -> None:
    """Without allow_direct the reader fetches chunks with get_msg; a chunk gone is the object's miss there too."""
    obs = js.create_object_store("nodirect")
    obs.put("a", b"x" * 500, chunk_size=100)
    config = js.stream_info(obs.stream).config
    js.update_stream(msgspec.structs.replace(config, allow_direct=False))
    with obs.get("a") as reader:
        assert reader.read(100) == b"x" * 100
        js.purge_stream(obs.stream, subject="$O.nodirect.C.>")  # every chunk gone under the reader
        with pytest.raises(jsclient.ObjectNotFoundError, match="is gone"):
            reader.read()
