"""The ``jsclient-events`` thread: user callbacks, in order, never on the reader.

Error, closed, disconnected and reconnected callbacks, and the
done-callbacks of ``request_async``/``publish_async`` futures, are posted
here by whichever thread decided them (reader, timer, reconnect, a closing
user thread).  No lock: ``queue.SimpleQueue`` is the only shared state.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger("jsclient")

EventQueue = queue.SimpleQueue[Callable[[], object] | None]


def start_events(events: EventQueue) -> threading.Thread:
    thread = threading.Thread(target=events_main, args=(events,), name="jsclient-events", daemon=True)
    thread.start()
    return thread


def events_main(events: EventQueue) -> None:
    """Run callbacks until a None: the thread ends after the callbacks before it."""
    while True:
        fn = events.get()
        if fn is None:
            return
        try:
            fn()
        except Exception:
            log.exception("jsclient: exception in a user callback")
