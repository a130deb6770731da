"""What a client's own time between a reply and its next request costs: ``python -m benchmarks.turnaround``.

The raw-socket direct get of ``make bench`` (one request in flight), run
with a busy wait of D microseconds added after each reply, in blocks that
take turns so the machine's drift weighs on every D alike.  Server pinned
to core 0, this process to core 1, as in ``make bench``.

On a virtual machine a few microseconds of client work can cost the round
trip far more than themselves: the server's core has gone idle by the time
the next request arrives, and waking it is slow.  This table shows how much,
which is why jsclient's request path counts instructions after a reply.
A measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time

from benchmarks.__main__ import INFRA_CORES, pin_process, pinning
from benchmarks.js_clients import KEYS, raw_reply
from jsclient import connect
from jsclient.server import NatsServer

DELAYS_US = (0, 2, 4, 6, 8, 10, 15, 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--block", type=int, default=300, help="requests per block")
    args = parser.parse_args()
    with NatsServer(jetstream=True) as server:
        if pinning():
            assert server.proc is not None
            pin_process(server.proc.pid, INFRA_CORES)
            os.sched_setaffinity(0, {1})
        nc = connect(server.url)
        kv = nc.jetstream().create_key_value("bench")
        for i in range(KEYS):
            kv.put(f"k{i}", b"x" * 128)
        nc.close()
        host, _, port = server.url.split("//", 1)[-1].rpartition(":")
        sock = socket.create_connection((host, int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.recv(65536)  # INFO
        sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nSUB _INBOX.raw.* 1\r\nPING\r\n')
        buf = b""
        while b"PONG\r\n" not in buf:  # the server's own first PING comes before it
            buf += sock.recv(65536)
        frames = [b"PUB $JS.API.DIRECT.GET.KV_bench.$KV.bench.k%d _INBOX.raw.1 0\r\n\r\n" % i for i in range(KEYS)]
        rates: dict[int, list[float]] = {d: [] for d in DELAYS_US}
        for _ in range(args.rounds):
            for delay in DELAYS_US:
                rates[delay].append(_block(sock, frames, args.block, delay * 1000))
        sock.close()
    base = statistics.median(rates[0])
    print(f"{'added per request':>18}  {'ops/s':>8}  {'us per op':>9}  {'% of D=0':>8}  {'cost beyond D':>13}")
    for delay in DELAYS_US:
        rate = statistics.median(rates[delay])
        extra = 1e6 / rate - 1e6 / base
        share = 100 * rate / base
        print(f"{delay:>15} us  {rate:>8,.0f}  {1e6 / rate:>9.1f}  {share:>7.0f} %  {extra - delay:>10.1f} us")


def _block(sock: socket.socket, frames: list[bytes], n: int, delay_ns: int) -> float:
    clock = time.perf_counter_ns
    start = time.perf_counter()
    for i in range(n):
        if delay_ns:
            until = clock() + delay_ns
            while clock() < until:
                pass
        sock.sendall(frames[i % len(frames)])
        raw_reply(sock)
    return n / (time.perf_counter() - start)


if __name__ == "__main__":
    sys.exit(main())
