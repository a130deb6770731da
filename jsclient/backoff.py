"""One backoff policy for every retry in the client (tenacity underneath).

Reconnecting, recreating an ordered consumer and retrying a JetStream
publish that found no stream all wait the same way: exponentially from
``initial`` up to ``maximum``, plus up to ``jitter`` seconds at random, for at
most ``attempts`` tries or ``within`` seconds.  A :class:`Backoff` is a frozen
value; :meth:`Backoff.retrying` makes the tenacity loop for blocking retries
and :meth:`Backoff.delay` gives the wait for retries scheduled on a timer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tenacity import (
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    stop_after_delay,
    stop_never,
    wait_exponential,
)
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from .options import Options

#: The client's own randomness, for jitter and for the order of servers.  A program that seeded the global
#: generator gets the same sequence with the client at work (and a forked child draws apart from its parent).
SPREAD = random.SystemRandom()


class _Jitter(wait_base):
    """Up to ``jitter`` seconds more, drawn from :data:`SPREAD` (tenacity's ``wait_random`` draws from the
    global generator)."""

    def __init__(self, jitter: float) -> None:
        self.jitter = jitter

    def __call__(self, retry_state: object) -> float:
        return SPREAD.uniform(0, self.jitter)


@dataclass(frozen=True)
class Backoff:
    initial: float
    maximum: float
    jitter: float = 0.0
    attempts: int | None = None  # tries in all (None: no limit)
    within: float | None = None  # seconds from the first try (None: no limit)

    def delay(self, attempt: int) -> float:
        """The wait after try number ``attempt`` (1 is the first) failed."""
        wait: float = min(self.maximum, self.initial * 2.0 ** (attempt - 1))
        return wait + (SPREAD.uniform(0, self.jitter) if self.jitter else 0.0)

    def retrying(
        self, *, on: tuple[type[BaseException], ...] = (), until_true: bool = False
    ) -> Retrying:
        """A tenacity loop: retry on the exceptions ``on`` (re-raising the last), or until a try returns True."""
        stop: stop_base
        if self.attempts is not None:
            stop = stop_after_attempt(self.attempts)
        elif self.within is not None:
            stop = stop_after_delay(self.within)
        else:
            stop = stop_never
        wait: wait_base = wait_exponential(multiplier=self.initial, max=self.maximum)
        if self.jitter:
            wait = wait + _Jitter(self.jitter)
        if until_true:
            return Retrying(stop=stop, wait=wait, retry=retry_if_result(lambda done: not done))
        return Retrying(stop=stop, wait=wait, retry=retry_if_exception_type(on), reraise=True)

    @classmethod
    def for_reconnect(cls, options: Options) -> Backoff:
        """Reconnect rounds: up to ``reconnect_time_wait`` apart plus ``reconnect_jitter``."""
        attempts = options.max_reconnect_attempts
        return cls(
            initial=0.05,
            maximum=options.reconnect_time_wait,
            jitter=options.reconnect_jitter,
            attempts=None if attempts < 0 else attempts + 1,
        )
