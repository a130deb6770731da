"""What the commands print: JSON lines (``--json``; payloads as text, or base64 when not UTF-8),
aligned text tables, messages, and a progress bar on stderr.

Runs on the main thread of the command's process; writes to stdout (stderr for the progress bar).
"""

from __future__ import annotations

import argparse
import base64
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

import msgspec

from ..headers import Headers
from ..message import Msg


def emit_json(value: Any, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(msgspec.json.encode(_jsonable(value)).decode() + "\n")
    (out or sys.stdout).flush()


def _jsonable(obj: Any) -> Any:
    """Payloads as text when they are UTF-8 (``data``), else base64 (``data_base64``)."""
    if isinstance(obj, dict):
        result: dict[str, Any] = {}
        for key, value in obj.items():
            if isinstance(value, bytes):
                try:
                    result[key] = value.decode()
                except UnicodeDecodeError:
                    result[f"{key}_base64"] = base64.b64encode(value).decode()
            else:
                result[key] = _jsonable(value)
        return result
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, Headers):
        return {k: obj.get_all(k) for k in obj}
    return obj


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], out: TextIO | None = None) -> None:
    """A plain aligned text table."""
    out = out or sys.stdout
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        line = "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        out.write(line.rstrip() + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return "" if value is None else str(value)


class Progress:
    """A one-line progress bar on stderr (only when stderr is a terminal)."""

    def __init__(self, total: int, label: str) -> None:
        self.total = max(1, total)
        self.label = label
        self.enabled = sys.stderr.isatty()
        self._last = 0.0
        self.start = time.perf_counter()

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < 0.1 and done < self.total:
            return
        self._last = now
        frac = done / self.total
        bar = "#" * int(frac * 30)
        rate = done / max(now - self.start, 1e-9)
        sys.stderr.write(f"\r{self.label} [{bar:<30}] {done:,}/{self.total:,} {rate:,.0f}/s")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def show_msg(msg: Msg, args: argparse.Namespace, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if args.json:
        emit_json({"subject": msg.subject, "reply": msg.reply, "headers": msg.headers, "data": msg.data})
        return
    headers = f" {dict((k, msg.headers.get_all(k)) for k in msg.headers)}" if len(msg.headers) else ""
    out.write(f"[{msg.subject}]{headers} {msg.data.decode(errors='replace')}\n")
    out.flush()
