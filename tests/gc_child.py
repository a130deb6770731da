"""Connections dropped without close(): are they collected, and do their threads and sockets end?

usage: python gc_child.py SERVER_URL — prints one JSON line (threads and fds before and after).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time

import jsclient


def use(url: str, callback: bool) -> None:
    nc = jsclient.connect(url)
    if callback:
        nc.subscribe("gc.cb", callback=lambda m: None)
    sub = nc.subscribe("gc.plain")
    nc.publish("gc.plain", b"x")
    sub.next_msg(timeout=5)
    nc.request_async("gc.nobody", b"?", timeout=5).exception()  # the events thread has run a future
    nc.flush()


def main() -> None:
    url = sys.argv[1]
    with jsclient.connect(url) as warm:  # imports and module-level state, before the baseline
        warm.flush()
    gc.collect()
    time.sleep(0.3)
    threads, fds = threading.active_count(), len(os.listdir("/proc/self/fd"))
    for i in range(10):
        use(url, callback=i % 2 == 0)
    peak = threading.active_count()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        gc.collect()
        if threading.active_count() <= threads and len(os.listdir("/proc/self/fd")) <= fds:
            break
        time.sleep(0.2)
    print(json.dumps({
        "threads": threads, "peak": peak, "threads_after": threading.active_count(),
        "fds": fds, "fds_after": len(os.listdir("/proc/self/fd")),
        "left": sorted(t.name for t in threading.enumerate() if t.name.startswith("jsclient")),
    }), flush=True)


if __name__ == "__main__":
    main()
