"""A child process doing KV compare-and-set on its own connection, under the same faults as the parent's threads.

``python -m tests.nemesis.kv_child CONFIG_JSON`` (from the repository root).
The config names the client URLs, bucket, keys, seed, threads, the file to
create once ready, the file whose appearance says stop, and where to write
the history (JSON lines of :class:`tests.nemesis.history.Call`).  Its
monotonic times compare with the parent's (one CLOCK_MONOTONIC per machine).
Exit status: 0, or 3 when one of its threads died of an exception (which
the parent turns into a failure, as an unhandled thread exception there).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import jsclient

from .history import History
from .workloads import CLIENT_OPTIONS, CasWorkload


def main(argv: list[str]) -> int:
    config = json.loads(argv[0])
    died: list[str] = []
    hook = threading.excepthook

    def excepthook(args: threading.ExceptHookArgs) -> None:
        died.append(f"{args.thread.name if args.thread else '?'}: {args.exc_type.__name__}: {args.exc_value}")
        hook(args)

    threading.excepthook = excepthook
    history = History()
    stop = threading.Event()
    nc = jsclient.connect(config["urls"], name="nemesis-kv-child", **CLIENT_OPTIONS)
    try:
        js = nc.jetstream(timeout=config["timeout"])
        kv = js.key_value(config["bucket"])
        threads = [
            threading.Thread(target=CasWorkload(
                kv, config["keys"], history, stop, process=f"child-kv-{t}", seed=config["seed"] * 100 + t,
                budget=config["timeout"], pace=config["pace"],
            ).run, name=f"child-kv-{t}")
            for t in range(config["threads"])
        ]
        for t in threads:
            t.start()
        Path(config["ready"]).touch()
        stop_file = Path(config["stop"])
        deadline = time.monotonic() + config["max_seconds"]
        while not stop_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join(60)
        stuck = [t.name for t in threads if t.is_alive()]
        if stuck:
            died.append(f"threads still running 60 s after stop: {stuck}")
    finally:
        nc.close()
        history.dump(Path(config["history"]))
    if died:
        print("\n".join(died), file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
