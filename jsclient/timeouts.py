"""The one timeout convention (docs/conventions.rst, "Timeouts"), and the checks that hold every call to it.

* omitted (:data:`DEFAULT`, or the number in the signature): the call's
  documented default; for JetStream calls, the context's ``timeout``;
* ``None``: no limit;
* ``0``: do not wait.  A *take* (a message, an entry, a result that may
  already be there) answers from what is there now, else raises
  TimeoutError at once; a call that needs the server's answer refuses it
  with InvalidArgumentError before sending, since it could only time out.

Anything else must be a finite number of seconds > 0.  Pure functions, any
thread; each raises InvalidArgumentError naming ``timeout`` before anything
is sent.
"""

from __future__ import annotations

import enum
import math
import threading
from typing import Any, Final, TypeAlias

from .errors import InvalidArgumentError

__all__ = ["DEFAULT", "NO_LIMIT", "Default", "Timeout", "answer_limit", "take_limit"]


class Default(enum.Enum):
    """The type of :data:`DEFAULT`: "use the call's default timeout", distinct from ``None`` (no limit)."""

    DEFAULT = "DEFAULT"

    def __repr__(self) -> str:
        return "DEFAULT"


#: A ``timeout`` left out: the call's default (for JetStream calls, the context's).
DEFAULT: Final = Default.DEFAULT

#: What a ``timeout`` argument may be: seconds, None (no limit) or DEFAULT.
Timeout: TypeAlias = float | Default | None

#: ``timeout=None`` of a call that waits for an answer, as seconds: finite, so that every deadline and lock
#: wait below takes it as it takes any other (a lock refuses infinity).  A quarter of the platform's longest
#: lock wait: some 73 years on Linux, about 12 days on Windows (docs/conventions.rst says so).
NO_LIMIT: Final = threading.TIMEOUT_MAX / 4

_HUGE = 1 << 53  # an int past this is left to the slow path, which names the problem


def answer_limit(timeout: Any, default: float | None = None) -> float:
    """The seconds a call that needs the server's answer may wait: ``NO_LIMIT`` for None.

    ``default`` is what DEFAULT stands for; a call without one has a number in its signature.
    """
    kind = type(timeout)
    if (kind is float and 0 < timeout < math.inf) or (kind is int and 0 < timeout < _HUGE):
        return float(timeout)
    if timeout is None:
        return NO_LIMIT
    if timeout is DEFAULT and default is not None:
        return default
    if _number(timeout) == 0:
        raise InvalidArgumentError(
            "timeout=0 does not wait, and this call needs the server's answer: give seconds > 0, or None for no limit"
        )
    return _seconds(timeout)


def take_limit(timeout: Any) -> float | None:
    """The seconds a take may wait: None for no limit, 0 for "what is there now"."""
    kind = type(timeout)
    if timeout is None:
        return None
    if (kind is float and 0 <= timeout < math.inf) or (kind is int and 0 <= timeout < _HUGE):
        return float(timeout)
    if _number(timeout) == 0:
        return 0.0
    return _seconds(timeout)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    try:
        return float(value)
    except OverflowError:  # an int too large for a float
        return math.inf


def _seconds(value: Any) -> float:
    """Refuse what is not a finite number of seconds > 0, saying what to write instead."""
    number = _number(value)
    if math.isinf(number):
        raise InvalidArgumentError(f"timeout must be a finite number of seconds, not {value!r} (None is no limit)")
    if math.isnan(number) or number <= 0:
        raise InvalidArgumentError(f"timeout must be a number of seconds > 0, or None for no limit, not {value!r}")
    return number
