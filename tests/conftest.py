"""Shared fixtures: a real nats-server per module, a fresh connection per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import jsclient
from jsclient.server import NatsServer


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer() as srv:
        yield srv


@pytest.fixture
def nc(server: NatsServer) -> Iterator[jsclient.Connection]:
    conn = jsclient.connect(server.url, name="test")
    try:
        yield conn
    finally:
        conn.close()


class ErrorLog:
    """Collects what the error callback receives, with a way to wait for it."""

    def __init__(self) -> None:
        import threading

        self.errors: list[Exception] = []
        self._cond = threading.Condition()

    def __call__(self, exc: Exception) -> None:
        with self._cond:
            self.errors.append(exc)
            self._cond.notify_all()

    def wait_for(self, kind: type, timeout: float = 5.0) -> Exception:
        with self._cond:
            ok = self._cond.wait_for(lambda: any(isinstance(e, kind) for e in self.errors), timeout)
            assert ok, f"no {kind.__name__} reported; got {self.errors!r}"
            return next(e for e in self.errors if isinstance(e, kind))


@pytest.fixture
def error_log() -> ErrorLog:
    return ErrorLog()
