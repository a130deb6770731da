"""The churner of the ``*_changing`` rows: ``python -m benchmarks.churn <url> <bucket> <keys>``.

A client that keeps a reply it has seen (jsclient keeps each key's last
direct-get frame and compares the next one with it) reads an unchanged value
faster than a changed one, so the rows that read values as they change need
every value written anew between two reads of it, by somebody other than the
measured process and outside its timed part.  This process does it, on the
infrastructure core: prints "ready"; for each line on stdin it puts a new
value of the same size (128 B) under every key of the bucket, pre-encoded on
a raw socket, waits for every ack, then prints "done".
"""

from __future__ import annotations

import socket
import sys

from benchmarks.common import pin_helper, raw_socket


def read_replies(sock: socket.socket, count: int, buf: bytes) -> bytes:
    """Read ``count`` MSG/HMSG frames (answering the server's PINGs); what follows them is returned."""
    while count:
        line_end = buf.find(b"\r\n")
        if line_end < 0:
            buf += sock.recv(262144)
            continue
        line = buf[:line_end]
        if line == b"PING":
            sock.sendall(b"PONG\r\n")
            buf = buf[line_end + 2 :]
        elif line.startswith((b"MSG ", b"HMSG ")):
            end = line_end + 2 + int(line.split()[-1]) + 2
            while len(buf) < end:
                buf += sock.recv(262144)
            if b'"error"' in buf[line_end:end]:
                raise RuntimeError(f"a churn put failed: {buf[line_end:end]!r}")
            buf = buf[end:]
            count -= 1
        else:  # PONG, +OK
            buf = buf[line_end + 2 :]
    return buf


def main(url: str, bucket: str, keys: int) -> None:
    pin_helper()
    with raw_socket(url, b"_INBOX.churn") as sock:
        print("ready", flush=True)
        buf = b""
        for generation, _ in enumerate(sys.stdin, 1):
            value = b"%08d" % generation + b"x" * 120
            sock.sendall(b"".join(
                b"PUB $KV.%s.k%d _INBOX.churn.1 %d\r\n%s\r\n" % (bucket.encode(), i, len(value), value)
                for i in range(keys)
            ))
            buf = read_replies(sock, keys, buf)
            print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
