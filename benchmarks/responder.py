"""The shared responder for request/reply benchmarks: a raw-socket echo.

It speaks just enough NATS to subscribe and echo each request's payload to
its reply subject, one process, one thread, so it adds the same small fixed
cost to every client measured against it and favours none of them.  A request
with headers (an instrumented client's trace context) is answered with its
payload alone, as a plain one.
"""

from __future__ import annotations

import socket
import sys


def serve(host: str, port: int, subject: str) -> None:
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.recv(65536)  # INFO
    sock.sendall(
        b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n'
        b"SUB " + subject.encode() + b" 1\r\nPING\r\n"
    )
    buf = b""
    while b"PONG\r\n" not in buf:
        buf += sock.recv(65536)
    print("ready", flush=True)
    buf = buf[buf.index(b"PONG\r\n") + 6 :]
    while True:
        out = []
        while True:
            nl = buf.find(b"\r\n")
            if nl < 0:
                break
            line = buf[:nl]
            if line.startswith((b"MSG ", b"HMSG ")):
                parts = line.split()
                size = int(parts[-1])
                end = nl + 2 + size
                if len(buf) < end + 2:
                    break
                skip = int(parts[-2]) if line.startswith(b"H") else 0  # the header block's length
                payload = buf[nl + 2 + skip : end]
                if len(parts) == 5 + (skip > 0 or line.startswith(b"H")):
                    out.append(b"PUB %s %d\r\n%s\r\n" % (parts[3], size - skip, payload))
                buf = buf[end + 2 :]
            else:
                if line == b"PING":
                    out.append(b"PONG\r\n")
                buf = buf[nl + 2 :]
        if out:
            sock.sendall(b"".join(out))
        data = sock.recv(262144)
        if not data:
            return
        buf += data


if __name__ == "__main__":
    url = sys.argv[1]
    hostport = url.split("//", 1)[-1]
    host, _, port = hostport.rpartition(":")
    serve(host, int(port), sys.argv[2] if len(sys.argv) > 2 else "bench.req")
