"""NATS over WebSocket: the sans-IO codec fed bytes (fuzzed too), then ws:// and wss:// against real servers.

The faults a real nats-server will not produce on demand (a text frame,
garbage, a frame cut in half, a ping, a close with an error code) are
injected by the WebSocket-aware test proxy, and each such test says so.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import trustme
from hypothesis import given, settings
from hypothesis import strategies as st
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, CloseConnection, Message, Ping, Pong, Request
from wsproto.extensions import PerMessageDeflate

import jsclient
from jsclient.errors import InvalidArgumentError, ProtocolError
from jsclient.options import Options
from jsclient.server import NatsCluster, NatsServer
from jsclient.websocket import WebSocketCodec

from .conftest import ErrorLog
from .proxy import Cut, FrameProxy, split_ws_frames, ws_frame, ws_parse

# -- the codec, without sockets -------------------------------------------------------------------------


def accepted(*, compression: bool = False) -> tuple[WebSocketCodec, WSConnection, Request]:
    """A codec whose upgrade a wsproto server end has accepted."""
    codec = WebSocketCodec("example.org:8080", "/nats?x=1", [("X-Proxy-Token", "t0k")], compression=compression)
    server = WSConnection(ConnectionType.SERVER)
    server.receive_data(codec.upgrade)
    request = next(server.events())
    assert isinstance(request, Request)
    assert codec.feed(server.send(AcceptConnection(extensions=[PerMessageDeflate()] if compression else []))) == b""
    assert codec.accepted and codec.compressed is compression
    return codec, server, request


def server_events(server: WSConnection, data: bytes) -> list[object]:
    server.receive_data(data)
    return list(server.events())


def test_upgrade_request_has_path_host_and_headers() -> None:
    _, _, request = accepted()
    assert request.host == "example.org:8080"
    assert request.target == "/nats?x=1"
    headers = dict(request.extra_headers)
    assert headers[b"x-proxy-token"] == b"t0k"
    assert headers[b"user-agent"].startswith(b"jsclient/")
    assert request.extensions == []  # compression is off unless asked for


def test_client_frames_are_masked_binary_and_decode_on_the_server() -> None:
    codec, server, _ = accepted()
    frame = codec.encode(b"PUB a 1\r\nx\r\n")
    assert frame[0] == 0x82 and frame[1] & 0x80  # FIN + binary, masked
    assert b"PUB" not in frame
    (event,) = server_events(server, frame)
    assert isinstance(event, BytesMessage) and event.data == b"PUB a 1\r\nx\r\n"


def test_ping_is_answered_and_data_flows_around_it() -> None:
    codec, server, _ = accepted()
    data = server.send(Message(data=b"MSG a 1 1\r\n")) + server.send(Ping(b"p1")) + server.send(Message(data=b"x\r\n"))
    assert codec.feed(data) == b"MSG a 1 1\r\nx\r\n"
    (pong,) = server_events(server, codec.control.popleft())
    assert isinstance(pong, Pong) and pong.payload == b"p1"
    assert codec.ended is None


def test_server_close_gets_a_reply_and_data_before_it_comes_first() -> None:
    codec, server, _ = accepted()
    data = server.send(Message(data=b"+OK\r\n")) + server.send(CloseConnection(code=1001, reason="shutdown"))
    assert codec.feed(data) == b"+OK\r\n"
    assert isinstance(codec.ended, ConnectionResetError) and "1001" in str(codec.ended)
    (reply,) = server_events(server, codec.control.popleft())
    assert isinstance(reply, CloseConnection)
    assert codec.feed(b"anything after the end") == b""
    # A writer that sends now meets an OSError (its bytes are kept, the link reported lost), not wsproto's error.
    with pytest.raises(ConnectionResetError, match="closing"):
        codec.encode(b"PUB late 0\r\n\r\n")


def test_closing_after_the_servers_close_lets_a_send_under_way_finish_and_then_answers() -> None:
    """A writer blocked in a large send (the server reads slowly) when the server's close frame comes: closing
    waits for that send before it changes the socket's timeout, so the frame leaves whole, and then sends the
    answer to the close.  (A socket pair stands for the server: the codec is driven by wsproto's server end.)"""
    import select
    import socket

    from jsclient.transport import PlainTransport
    from jsclient.websocket import WebSocketTransport

    codec, server, _ = accepted()
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    transport = WebSocketTransport(PlainTransport(ours), codec)
    big = b"PUB big 2000000\r\n" + b"z" * 2_000_000 + b"\r\n"
    failed: list[BaseException] = []

    def write() -> None:
        try:
            transport.sendall(big)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertions below
            failed.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    deadline = time.monotonic() + 10
    while select.select([], [ours], [], 0)[1] and time.monotonic() < deadline:
        time.sleep(0.01)  # until the writer has filled the socket's buffers and blocks
    theirs.sendall(server.send(CloseConnection(code=1001, reason="shutdown")))
    assert transport.recv_into(bytearray(100)) == 0  # the reader meets the close; its answer waits for the writer
    closer = threading.Thread(target=transport.close)
    closer.start()
    time.sleep(0.2)  # the closer, unfixed, would change the socket's timeout now, under the blocked send
    received = bytearray()
    theirs.settimeout(10)
    while chunk := theirs.recv(1 << 16):
        received += chunk
    writer.join(10)
    closer.join(10)
    theirs.close()
    assert not failed
    events = server_events(server, bytes(received))
    assert isinstance(events[0], BytesMessage) and events[0].data == big
    assert isinstance(events[-1], CloseConnection)


def test_the_answer_to_a_close_waiting_on_a_send_that_the_close_refuses_still_leaves() -> None:
    """The server's close frame comes while a writer holds the send lock but has not encoded its frame yet: the
    reader queues the answer for the writer to send, and the writer's encode is refused (the WebSocket is
    closing).  The refused send hands the answer on all the same, before the link is shut down and closed; it
    was lost, and the server saw no answer (make test-pythons on 3.13, under load: close-1001)."""
    import socket

    from jsclient.transport import PlainTransport
    from jsclient.websocket import WebSocketTransport

    codec, server, _ = accepted()
    ours, theirs = socket.socketpair()
    transport = WebSocketTransport(PlainTransport(ours), codec)
    refused: list[BaseException] = []

    def write() -> None:
        try:
            transport.sendall(b"PING\r\n")
        except OSError as exc:
            refused.append(exc)

    transport._send_lock.acquire()  # the writer's moment between taking the lock and encoding
    writer = threading.Thread(target=write)
    writer.start()
    theirs.sendall(server.send(CloseConnection(code=1001, reason="shutdown")))
    assert transport.recv_into(bytearray(100)) == 0  # the close met; its answer cannot be sent now
    transport._send_lock.release()
    writer.join(10)
    transport.shutdown()  # as the connection does when the link is lost
    transport.close()
    theirs.settimeout(10)
    received = bytearray()
    while chunk := theirs.recv(1 << 16):
        received += chunk
    theirs.close()
    assert refused and "closing" in str(refused[0])
    events = server_events(server, bytes(received))
    assert [type(e) for e in events] == [CloseConnection], events


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (ws_frame(1, b"INFO {}\r\n"), "text frame"),
        (b"\xf2\x05hello", "bad WebSocket frame"),  # reserved bits set
        (ws_frame(8, (1008).to_bytes(2, "big") + b"policy"), "code 1008: policy"),
    ],
    ids=["text", "garbage", "close-1008"],
)
def test_bad_frames_end_with_protocol_error(data: bytes, words: str) -> None:
    codec, _, _ = accepted()
    assert codec.feed(data) == b""
    assert isinstance(codec.ended, ProtocolError) and words in str(codec.ended)


def test_end_of_stream_mid_frame_is_a_protocol_error_between_frames_a_reset() -> None:
    codec, server, _ = accepted()
    frame = server.send(Message(data=b"y" * 1000))
    assert codec.feed(frame[:500]) == b"y" * (500 - 4)
    codec.feed(None)
    assert isinstance(codec.ended, ProtocolError) and "middle" in str(codec.ended)
    codec, server, _ = accepted()
    assert codec.feed(server.send(Message(data=b"whole"))) == b"whole"
    codec.feed(None)
    assert isinstance(codec.ended, ConnectionResetError)


def test_refused_upgrade_raises_with_the_reason() -> None:
    codec = WebSocketCodec("h", "/", ())
    codec.feed(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
    with pytest.raises(ProtocolError, match=r"HTTP 400 .*use a wss:// URL"):
        codec.feed(None)
    with pytest.raises(ProtocolError, match="not valid HTTP"):
        WebSocketCodec("h", "/", ()).feed(b"SSH-2.0-OpenSSH\r\n\r\n")
    with pytest.raises(ProtocolError, match="a nats:// port"):
        WebSocketCodec("h", "/", ()).feed(b"INFO {} this is a NATS port\r\n\r\n")
    with pytest.raises(ProtocolError, match="during the WebSocket upgrade"):
        WebSocketCodec("h", "/", ()).feed(None)


def test_compression_round_trip() -> None:
    codec, server, request = accepted(compression=True)
    assert [str(e).split(";")[0] for e in request.extensions] == ["permessage-deflate"]
    text = b"PUB compressible 4000\r\n" + b"a" * 4000 + b"\r\n"
    (event,) = server_events(server, codec.encode(text))
    assert isinstance(event, BytesMessage) and event.data == text
    frame = server.send(Message(data=text))
    assert len(frame) < 200
    assert codec.feed(frame) == text


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600), st.lists(st.integers(1, 64), max_size=30))
def test_fuzz_arbitrary_bytes_never_escape_as_anything_but_an_ending(data: bytes, cuts: list[int]) -> None:
    """Whatever the server sends after the upgrade, feed returns bytes; a failure is kept in ``ended``."""
    codec, _, _ = accepted()
    pos = 0
    for size in [*cuts, len(data)]:
        out = codec.feed(data[pos : pos + size])
        assert isinstance(out, bytes)
        pos += size
    codec.feed(None)
    assert isinstance(codec.ended, (ProtocolError, ConnectionResetError))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.binary(max_size=300), st.booleans()), max_size=20),
    st.integers(1, 97),
    st.booleans(),
)
def test_fuzz_frames_split_anywhere_decode_to_the_same_bytes(
    messages: list[tuple[bytes, bool]], step: int, compression: bool
) -> None:
    codec, server, _ = accepted(compression=compression)
    wire = b""
    for payload, fragment in messages:  # some messages in two fragments
        if fragment and len(payload) > 1:
            half = len(payload) // 2
            wire += server.send(Message(data=payload[:half], message_finished=False))
            wire += server.send(Message(data=payload[half:]))
        else:
            wire += server.send(Message(data=payload))
        wire += server.send(Ping(b"")) if fragment else b""
    out = b"".join(codec.feed(wire[i : i + step]) for i in range(0, len(wire), step))
    assert out == b"".join(p for p, _ in messages)
    assert codec.ended is None


# -- against real servers --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ws_server() -> Iterator[NatsServer]:
    with NatsServer(websocket=True) as server:
        yield server


def roundtrip(nc: jsclient.Connection, subject: str = "ws.rt") -> None:
    sub = nc.subscribe(subject)
    nc.publish(subject, b"hello")
    assert sub.next_msg(timeout=5).data == b"hello"
    sub.unsubscribe()


def test_pub_sub_request_and_jetstream_over_websocket(ws_server: NatsServer) -> None:
    with jsclient.connect(ws_server.ws_url) as nc:
        assert nc.connected_url == ws_server.ws_url
        roundtrip(nc)
        big = os.urandom(900 * 1024)  # more than one read and one write buffer
        sub = nc.subscribe("ws.big")
        for _ in range(5):
            nc.publish("ws.big", big)
        assert all(sub.next_msg(timeout=10).data == big for _ in range(5))
        responder = nc.subscribe("ws.svc", callback=lambda m: m.respond(m.data[::-1]))
        assert nc.request("ws.svc", b"abc", timeout=5).data == b"cba"
        futures = [nc.request_async("ws.svc", b"%d" % i, timeout=5) for i in range(200)]
        assert [f.result(timeout=10).data for f in futures] == [(b"%d" % i)[::-1] for i in range(200)]
        responder.unsubscribe()
        js = nc.jetstream()
        js.add_stream(name="WS", subjects=["ws.js.>"])
        try:
            for i in range(100):
                js.publish("ws.js.a", b"%d" % i)
            psub = js.pull_subscribe("ws.js.>", durable="ws")
            msgs = psub.fetch(100, timeout=5)
            assert [m.data for m in msgs] == [b"%d" % i for i in range(100)]
            for m in msgs:
                m.ack()
        finally:
            js.delete_stream("WS")
        assert nc.rtt() > 0


def ws_frames_sent(proxy: FrameProxy) -> list[tuple[int, bytes]]:
    """The client's frames as (opcode, unmasked payload), after each link's upgrade request, link by link (the
    links' bytes interleave in ``proxy.sent`` when the client reconnects)."""
    frames: list[tuple[int, bytes]] = []
    for link in proxy.sent_by_link():
        if (end := link.find(b"\r\n\r\n")) >= 0:
            frames += [ws_parse(frame) for frame in split_ws_frames(bytearray(link[end + 4 :]))]
    return frames


def test_publishes_leave_many_to_a_frame_with_path_and_headers(ws_server: NatsServer) -> None:
    assert ws_server.ws_port is not None
    with FrameProxy(("127.0.0.1", ws_server.ws_port), websocket=True) as proxy:
        url = f"ws://127.0.0.1:{proxy.port}/behind/the/proxy?tenant=a"
        with jsclient.connect(url, ws_headers={"X-Proxy-Token": "s3cret-value"}) as nc:
            sub = nc.subscribe("ws.many")
            for i in range(5000):
                nc.publish("ws.many", b"%d" % i)
            nc.flush(timeout=10)
            assert [sub.next_msg(timeout=5).data for _ in range(5000)] == [b"%d" % i for i in range(5000)]
        head = bytes(proxy.sent[: bytes(proxy.sent).index(b"\r\n\r\n")])
        assert head.startswith(b"GET /behind/the/proxy?tenant=a HTTP/1.1\r\n")
        assert b"\r\nX-Proxy-Token: s3cret-value" in head and b"\r\nUser-Agent: jsclient/" in head
        frames = ws_frames_sent(proxy)
        data = [payload for opcode, payload in frames if opcode == 2]
        assert b"".join(data).count(b"PUB ws.many ") == 5000
        assert len(data) < 5000 / 20, f"{len(data)} frames for 5,000 publishes"
        # nc.close() said goodbye with a close frame before closing the socket
        deadline = time.monotonic() + 5
        while frames[-1][0] != 8 and time.monotonic() < deadline:
            time.sleep(0.05)
            frames = ws_frames_sent(proxy)
        assert frames[-1][0] == 8, frames[-3:]


def test_compression_is_off_by_default_and_on_when_asked() -> None:
    with NatsServer(jetstream=False, websocket=True, websocket_compression=True) as server:
        assert server.ws_port is not None
        for asked in (False, True):
            with FrameProxy(("127.0.0.1", server.ws_port), websocket=True) as proxy:
                with jsclient.connect(proxy.url, ws_compression=asked) as nc:
                    sub = nc.subscribe("ws.z")
                    text = b"compressible " * 5000
                    nc.publish("ws.z", text)
                    assert sub.next_msg(timeout=5).data == text
                answer = bytes(proxy.received[: bytes(proxy.received).index(b"\r\n\r\n")])
                assert answer.startswith(b"HTTP/1.1 101")
                assert (b"permessage-deflate" in answer) is asked
                # compressed, the 65 KB message crossed the wire in far fewer bytes
                assert (len(proxy.received) < 20_000) is asked


@pytest.fixture(scope="module")
def wss_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    ca = trustme.CA()
    d = tmp_path_factory.mktemp("wss")
    cert = ca.issue_cert("127.0.0.1", "localhost")
    files = {"ca": str(d / "ca.pem"), "cert": str(d / "cert.pem"), "key": str(d / "key.pem")}
    ca.cert_pem.write_to_path(files["ca"])
    cert.cert_chain_pems[0].write_to_path(files["cert"])
    cert.private_key_pem.write_to_path(files["key"])
    return files


def test_wss_and_scheme_mistakes_are_explained(wss_files: dict[str, str], ws_server: NatsServer) -> None:
    with NatsServer(
        jetstream=False, websocket=True, websocket_cert_file=wss_files["cert"], websocket_key_file=wss_files["key"]
    ) as server:
        assert server.ws_url.startswith("wss://")
        with jsclient.connect(server.ws_url, tls_ca_file=wss_files["ca"]) as nc:
            roundtrip(nc)
            assert nc.server_info["tls_required"]  # the WebSocket's TLS; no second TLS inside it
        plain = server.ws_url.replace("wss://", "ws://")
        with pytest.raises(jsclient.NoServersError, match=r"refused the WebSocket upgrade.*use a wss:// URL"):
            jsclient.connect(plain, allow_reconnect=False, connect_timeout=5)
        with pytest.raises(jsclient.TLSError, match="certificate verification failed"):
            jsclient.connect(server.ws_url, allow_reconnect=False)  # no CA given: not trusted
    with pytest.raises(jsclient.TLSError):
        jsclient.connect(ws_server.ws_url.replace("ws://", "wss://"), allow_reconnect=False, connect_timeout=3)
    with pytest.raises(jsclient.NoServersError, match="NATS INFO: that is a nats:// port"):
        jsclient.connect(ws_server.url.replace("nats://", "ws://"), allow_reconnect=False, connect_timeout=3)


@pytest.mark.parametrize(
    "bad",
    [
        {"servers": ["ws://127.0.0.1:1", "nats://127.0.0.1:2"]},
        {"ws_headers": {"Bad Name": "x"}},
        {"ws_headers": {"X-Ok": "line\r\nInjected: yes"}},
        {"ws_headers": {"Sec-WebSocket-Key": "mine"}},
        {"ws_headers": [("X-Only-Name",)]},
        {"ws_headers": "X-A: b"},
        {"ws_compression": "yes"},
        {"tls_handshake_first": True},
    ],
    ids=["mixed-schemes", "header-name", "header-crlf", "reserved-header", "not-a-pair", "not-pairs", "compression",
         "handshake-first"],
)
def test_bad_websocket_options_raise_before_anything_is_sent(ws_server: NatsServer, bad: dict[str, object]) -> None:
    assert ws_server.ws_port is not None
    with FrameProxy(("127.0.0.1", ws_server.ws_port), websocket=True) as proxy:
        kwargs = {"servers": [proxy.url], **bad}
        with pytest.raises(InvalidArgumentError) as info:
            jsclient.connect(**kwargs)  # type: ignore[arg-type]
        assert "line\r\n" not in str(info.value) and "mine" not in str(info.value)
        time.sleep(0.1)
        assert proxy.sent == b""


def test_header_values_stay_out_of_reprs_and_errors() -> None:
    options = Options.build("ws://127.0.0.1:9", ws_headers={"Authorization": "Bearer top-secret"})
    assert "top-secret" not in repr(options) and "Authorization" in repr(options)
    with pytest.raises(jsclient.Error) as info:
        jsclient.connect(options=options, allow_reconnect=False, connect_timeout=1)
    assert "top-secret" not in str(info.value)


def test_default_ports_follow_the_scheme() -> None:
    assert Options.build(["ws://example.org/nats"]).servers == ("ws://example.org:80/nats",)
    assert Options.build(["wss://example.org"]).servers == ("wss://example.org:443",)


# -- faults and reconnects ------------------------------------------------------------------------------


class Reconnects:
    def __init__(self) -> None:
        self.event = threading.Event()

    def __call__(self) -> None:
        self.event.set()


def once(change: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    """A proxy filter that changes the first server frame carrying the trigger message, and nothing else."""
    done = threading.Event()

    def filt(frame: bytes) -> bytes:
        if not done.is_set() and b"ws.trigger" in frame:
            done.set()
            return change(frame)
        return frame

    return filt


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda frame: ws_frame(1, b"+OK\r\n"), "text frame"),
        (lambda frame: b"\xf2\x05hello" + frame, "bad WebSocket frame"),
        (lambda frame: Cut(frame[: len(frame) // 2]), "middle of a WebSocket frame"),
        (lambda frame: ws_frame(8, (1008).to_bytes(2, "big") + b"policy"), "code 1008"),
        (lambda frame: ws_frame(8, (1001).to_bytes(2, "big") + b"going away"), None),
    ],
    ids=["text-frame", "garbage", "closed-mid-frame", "close-1008", "close-1001"],
)
def test_broken_websocket_reports_reconnects_and_goes_on(
    ws_server: NatsServer, change: Callable[[bytes], bytes], words: str | None
) -> None:
    """Faults injected by the proxy (a real nats-server sends none of these on demand)."""
    assert ws_server.ws_port is not None
    log, reconnected = ErrorLog(), Reconnects()
    with FrameProxy(("127.0.0.1", ws_server.ws_port), once(change), websocket=True) as proxy:
        nc = jsclient.connect(
            proxy.url, error_cb=log, reconnected_cb=reconnected, reconnect_time_wait=0.05, connect_timeout=5
        )
        try:
            sub = nc.subscribe("ws.trigger")
            nc.publish("ws.trigger", b"z" * 3000)
            assert reconnected.event.wait(10), "no reconnect"
            if words is not None:
                error = log.wait_for(ProtocolError)
                assert words in str(error)
            else:  # an orderly close: no error, and the client answered it with its own close frame
                assert not any(isinstance(e, ProtocolError) for e in log.errors), log.errors
                deadline = time.monotonic() + 5  # the old link's last frame may be read after the reconnect
                while not any(opcode == 8 for opcode, _ in ws_frames_sent(proxy)):
                    assert time.monotonic() < deadline, "the client never answered the close frame"
                    time.sleep(0.01)
            nc.publish("ws.trigger", b"after")  # the first was lost with the broken link
            assert sub.next_msg(timeout=5).data == b"after"
            roundtrip(nc, "ws.after")
        finally:
            nc.close()


def test_server_ping_is_answered_and_the_connection_stays(ws_server: NatsServer) -> None:
    """The ping is injected by the proxy: nats-server answers pings but sends none."""
    assert ws_server.ws_port is not None
    with FrameProxy(
        ("127.0.0.1", ws_server.ws_port), once(lambda frame: ws_frame(9, b"are-you-there") + frame), websocket=True
    ) as proxy, jsclient.connect(proxy.url) as nc:
        sub = nc.subscribe("ws.trigger")
        nc.publish("ws.trigger", b"1")
        assert sub.next_msg(timeout=5).data == b"1"
        deadline = time.monotonic() + 5
        while (10, b"are-you-there") not in ws_frames_sent(proxy) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (10, b"are-you-there") in ws_frames_sent(proxy)
        assert nc.reconnects == 0
        roundtrip(nc)


def test_restart_reconnects_over_websocket(ws_server: NatsServer) -> None:
    with NatsServer(jetstream=False, websocket=True) as server:
        reconnected = Reconnects()
        with jsclient.connect(server.ws_url, reconnected_cb=reconnected, reconnect_time_wait=0.1) as nc:
            sub = nc.subscribe("ws.restart")
            server.restart()
            assert reconnected.event.wait(15)
            assert nc.connected_url == server.ws_url
            nc.publish("ws.restart", b"back")
            assert sub.next_msg(timeout=5).data == b"back"


def test_cluster_discovery_keeps_the_websocket_scheme_and_fails_over() -> None:
    with NatsCluster(3, jetstream=False, websocket=True) as cluster:
        first = cluster.servers[0]
        reconnected = Reconnects()
        with jsclient.connect(first.ws_url, reconnected_cb=reconnected, reconnect_time_wait=0.1) as nc:
            deadline = time.monotonic() + 10
            while len(nc.servers) < 3 and time.monotonic() < deadline:
                nc.rtt()  # INFO updates arrive as the routes form
                time.sleep(0.1)
            assert sorted(nc.servers) == sorted(cluster.ws_urls), nc.servers
            sub = nc.subscribe("ws.failover")
            first.kill()
            assert reconnected.event.wait(15)
            assert nc.connected_url in cluster.ws_urls[1:]
            nc.publish("ws.failover", b"still here")
            assert sub.next_msg(timeout=5).data == b"still here"


# -- with nats-py -----------------------------------------------------------------------------------------


def test_interop_with_nats_py_over_tcp_and_websocket(ws_server: NatsServer) -> None:
    """jsclient on one transport, nats-py on the other, messages both ways (nats-py's ws needs aiohttp)."""
    import nats

    async def receive(url: str, subject: str, ready: threading.Event, got: list[bytes], lost: list[str]) -> None:
        nc = await nats.connect(url, disconnected_cb=functools.partial(_note, lost, "nats-py disconnected"))
        try:
            sub = await nc.subscribe(subject)
            await nc.flush()
            ready.set()
            for _ in range(100):
                got.append((await sub.next_msg(timeout=10)).data)
        finally:
            await nc.close()

    async def send(url: str, subject: str) -> None:
        nc = await nats.connect(url)
        try:
            for i in range(100):
                await nc.publish(subject, b"py-%d" % i)
            await nc.flush()
        finally:
            await nc.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        for mine, theirs in [(ws_server.ws_url, ws_server.url), (ws_server.url, ws_server.ws_url)]:
            lost: list[str] = []
            with jsclient.connect(mine, disconnected_cb=functools.partial(_broke, lost, "jsclient")) as nc:
                ready = threading.Event()  # jsclient publishes, nats-py receives
                got: list[bytes] = []
                received = pool.submit(asyncio.run, receive(theirs, "interop.a", ready, got, lost))
                assert ready.wait(10)
                for i in range(100):
                    nc.publish("interop.a", b"js-%d" % i)
                nc.flush()
                try:
                    received.result(timeout=20)
                except (TimeoutError, nats.errors.Error) as exc:  # what nats-py had; did a link break?
                    pytest.fail(f"jsclient on {mine}: nats-py took {len(got)} of 100 ({exc!r}); "
                                f"{lost or 'no link broke'}; jsclient {nc.stats()}, reconnects {nc.reconnects}")
                assert got == [b"js-%d" % i for i in range(100)]
                sub = nc.subscribe("interop.b")  # nats-py publishes, jsclient receives
                nc.flush()
                pool.submit(asyncio.run, send(theirs, "interop.b")).result(timeout=20)
                assert [sub.next_msg(timeout=10).data for _ in range(100)] == [b"py-%d" % i for i in range(100)]


async def _note(lost: list[str], what: str) -> None:
    lost.append(what)


def _broke(lost: list[str], who: str, *_: object) -> None:
    lost.append(f"{who} disconnected")
