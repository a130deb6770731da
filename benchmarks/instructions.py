"""The client's instructions on the critical path of one request: ``python -m benchmarks.instructions``.

With one request in flight, what a client does between a reply's arrival
and its next request is what the server waits for (see
``benchmarks.turnaround``).  Wall-clock rates on this shared machine move by
2x from run to run; instruction counts do not.  This runs a loop of one
call (``kv``: ``kv.get``, ``direct``: ``direct_get(last_by_subj=...)``,
``publish``: ``js.publish``, ``request``: ``request()`` to a responder)
under valgrind's callgrind, which starts a new part of its profile at every
``recv`` of the socket (the caller's own reply has arrived), at every
``sendall`` (the next request leaves) and at a marker call after each
return, and prints the median instructions of each kind of part:

* ``post``: from the reply's bytes to the caller's return (parse, build, bookkeeping);
* ``pre``: from the return to the next request's ``sendall`` (the loop, the call, the frame);
* ``wait``: from ``sendall`` to the reply (done while the server works: off the critical path).

The parked reader is kept parked (under callgrind a call is slow enough
that it would otherwise come back between calls and hand replies over),
so each part is the path a caller reading its own reply takes.  Needs
valgrind (Debian's package).  ``--root`` measures another checkout of
jsclient, for before/after.  A measurement, not a test.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from jsclient import connect
from jsclient.server import NatsServer

WHATS = ("kv", "direct", "publish", "request")

#: The loop callgrind runs (a child process): argv = jsclient root, what, calls, url.
CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
from zlib import crc32
import jsclient
import jsclient.core.reader as reader
reader.LINGER = 60.0  # keep the reader parked: each call reads its own reply
what, n, url = sys.argv[2], int(sys.argv[3]), sys.argv[4]
nc = jsclient.connect(url, spin_wait=0)
js = nc.jetstream()
kv = js.key_value("bench")
calls = {
    "kv": lambda i: kv.get(f"k{i % 100}"),
    "direct": lambda i: js.direct_get("KV_bench", last_by_subj=f"$KV.bench.k{i % 100}"),
    "publish": lambda i: js.publish("bpub.x", b"x" * 128),
    "request": lambda i: nc.request("bench.req", b"x" * 128),
}
call = calls[what]
for i in range(n):
    call(i)
    crc32(b"")  # the marker: the call has returned
nc.close()
"""


def measure(root: str, what: str, url: str, calls: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg")
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-after=sock_recv",
             "--dump-before=sock_sendall", "--dump-before=zlib_crc32",
             sys.executable, "-c", CHILD, root, what, str(calls), url],
            check=True, capture_output=True,
        )
        parts: dict[str, list[int]] = {"post": [], "pre": [], "wait": []}
        for path in glob.glob(out + ".*"):
            text = Path(path).read_text(errors="replace")
            trigger = re.search(r"^desc: Trigger: (.*)$", text, re.M)
            total = re.search(r"^summary: (\d+)", text, re.M)
            if trigger is None or total is None:
                continue
            kind = {"zlib_crc32": "post", "sock_sendall": "pre", "sock_recv": "wait"}.get(
                next((k for k in ("zlib_crc32", "sock_sendall", "sock_recv") if k in trigger.group(1)), ""), ""
            )
            if kind:
                parts[kind].append(int(total.group(1)))
    return {kind: statistics.median(values) for kind, values in parts.items() if values}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--what", default=",".join(WHATS), help=f"comma-separated, of {', '.join(WHATS)}")
    parser.add_argument("--root", action="append", help="a jsclient checkout (repeatable; default: this one)")
    args = parser.parse_args()
    roots = args.root or [str(Path(__file__).resolve().parent.parent)]
    with NatsServer(jetstream=True) as server:
        nc = connect(server.url)
        js = nc.jetstream()
        kv = js.create_key_value("bench", storage="memory")
        for i in range(100):
            kv.put(f"k{i}", b"v" * 100)
        js.add_stream(name="BPUB", subjects=["bpub.>"], storage="memory")
        nc.subscribe("bench.req", None, lambda msg: msg.respond(msg.data))
        nc.flush()
        print(f"{'root':<24}{'call':<10}{'post':>10}{'pre':>10}{'post+pre':>10}{'wait':>10}  (instructions, medians)")
        for what in args.what.split(","):
            for root in roots:
                got = measure(root, what, server.url, args.calls)
                turn = got.get("post", 0) + got.get("pre", 0)
                print(f"{Path(root).name:<24}{what:<10}{got.get('post', 0):>10,.0f}{got.get('pre', 0):>10,.0f}"
                      f"{turn:>10,.0f}{got.get('wait', 0):>10,.0f}", flush=True)
        nc.close()


if __name__ == "__main__":
    main()
