"""An external publisher for subscribe benchmarks: pre-encoded frames on a raw socket.

The subscriber under test runs in another process, so the feeder's cost is
the same for every client and never competes with it for a GIL.  Prints
"ready" once connected, waits for a line on stdin, blasts ``count`` frames,
then waits for the server's PONG so every frame has left.
"""

from __future__ import annotations

import socket
import sys

from benchmarks.common import pin_helper


def main(url: str, subject: str, count: int, size: int) -> None:
    pin_helper()
    host, _, port = url.split("//", 1)[-1].rpartition(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.recv(65536)
    sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
    buf = b""
    while b"PONG" not in buf:
        buf += sock.recv(65536)
    frame = b"PUB %s %d\r\n%s\r\n" % (subject.encode(), size, b"x" * size)
    per_chunk = max(1, 65536 // len(frame))
    chunk = frame * per_chunk
    print("ready", flush=True)
    sys.stdin.readline()
    sent = 0
    while sent + per_chunk <= count:
        sock.sendall(chunk)
        sent += per_chunk
    if sent < count:
        sock.sendall(frame * (count - sent))
    sock.sendall(b"PING\r\n")
    buf = b""
    while b"PONG" not in buf:
        buf += sock.recv(65536)
    sock.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
