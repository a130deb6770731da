"""js.publish retries "no responders" by itself (a leader election looks like that), then says no stream answered.

The proxy only watches what the client sends (a real server, nothing rewritten): the test counts the
attempts on the wire, so no resubmission by the test can stand in for the library's own.
"""

from __future__ import annotations

import pytest

import jsclient
from jsclient.jetstream.context import PUBLISH_RETRY
from jsclient.server import NatsServer

from .proxy import FrameProxy


def test_publish_asks_again_on_no_responders_then_raises(server: NatsServer) -> None:
    sent = bytearray()

    def watch(chunk: bytes) -> bytes:
        sent.extend(chunk)
        return chunk

    with FrameProxy(server.host_port, upstream_filter=watch) as proxy:
        nc = jsclient.connect(proxy.url)
        try:
            js = nc.jetstream()
            with pytest.raises(jsclient.NoStreamResponseError):
                js.publish("nostream.x", b"1", timeout=5)
            nc.flush()
            # The first send, then the retry policy's tries.
            assert sent.count(b"PUB nostream.x ") == 1 + PUBLISH_RETRY.attempts
            future = js.publish_async("nostream.y", b"1", retry_on_no_responders=2)
            with pytest.raises(jsclient.NoStreamResponseError):
                future.result(timeout=10)
            nc.flush()  # the connection stays healthy
            assert sent.count(b"PUB nostream.y ") == 1 + 2
        finally:
            nc.close()
