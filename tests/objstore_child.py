"""Child of the object store memory test: a 50 MiB object through put and get, and how much memory that took.

Run as ``python -m tests.objstore_child URL DIR``; prints one JSON line with
the peak RSS before and after (KiB) and whether the bytes came back whole.
It is its own process so nothing else the test run holds counts against it.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
from pathlib import Path

import jsclient

SIZE = 50 * 1024 * 1024


def sha_of(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            sha.update(block)
    return sha.hexdigest()


def main(url: str, folder: str) -> None:
    source, target = Path(folder) / "big.in", Path(folder) / "big.out"
    with open(source, "wb") as f:
        for _ in range(SIZE >> 20):
            f.write(os.urandom(1 << 20))
    with jsclient.connect(url) as nc:
        js = nc.jetstream(timeout=30)
        obs = js.create_object_store("BIG", max_bytes=200 * 1024 * 1024)
        obs.put("warm-up", b"x" * 300_000)  # every code path once before the baseline
        obs.get_bytes("warm-up")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        info = obs.put("big", source)
        with obs.get("big") as reader:  # streamed: read a block at a time, like a consumer would
            sha = hashlib.sha256()
            while block := reader.read(1 << 20):
                sha.update(block)
        obs.get_file("big", target)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        js.delete_object_store("BIG")
    whole = info.size == SIZE and sha.hexdigest() == sha_of(source) == sha_of(target)
    print(json.dumps({"before_kib": before, "after_kib": after, "whole": whole, "chunks": info.chunks}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
