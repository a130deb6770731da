"""Hygiene for the nemesis tests: an exception that ends a thread, or one jsclient catches and logs, fails the test.

Thread deaths: every test here gets the filterwarnings mark that makes
pytest's PytestUnhandledThreadExceptionWarning an error.  Swallowed ones:
jsclient logs (at ERROR, on the "jsclient" logger) an exception its timer,
reader or events thread caught so as to go on; none may happen here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

STRICT_THREADS = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(STRICT_THREADS)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(autouse=True)
def swallowed_errors() -> Iterator[list[logging.LogRecord]]:
    """The ERROR records jsclient logged during the test; any left at the end fails it."""
    handler = _Collect()
    logger = logging.getLogger("jsclient")
    logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
    shown = [f"{r.getMessage()}\n{logging.Formatter().formatException(r.exc_info) if r.exc_info else ''}"
             for r in handler.records[:3]]
    assert not handler.records, "jsclient caught and logged errors:\n" + "\n".join(shown)
