"""Argument checks shared by every public call, so one mistake gets one wording everywhere.

Pure functions, any thread.  Each raises InvalidArgumentError naming the
argument before anything is sent.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from .errors import InvalidArgumentError


def whole(name: str, value: Any, minimum: int = 1) -> int:
    """An int (not a bool) no smaller than ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(f"{name} must be an int >= {minimum}, not {value!r}")
    return value


def seconds(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """A finite number of seconds, > 0 (or >= 0 with ``allow_zero``)."""
    try:
        number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    except OverflowError:  # an int too large for a float
        number = math.inf
    if math.isnan(number) or math.isinf(number) or number < 0 or (number == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidArgumentError(f"{name} must be a number of seconds {bound}, not {value!r}")
    return number


def whole_seconds(name: str, value: Any, minimum: int = 1) -> int:
    """Seconds the server keeps only whole (a TTL): an int, a float or a timedelta without a fraction.

    ``1.0`` is one second, as any other duration of the API takes it; ``1.5``
    is refused rather than cut, since the server would keep 1.
    """
    if isinstance(value, dt.timedelta):
        number = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = value
    else:
        raise InvalidArgumentError(f"{name} must be whole seconds (an int or float >= {minimum}, or a timedelta), "
                                   f"not {value!r}")
    if isinstance(number, float) and not math.isfinite(number):
        raise InvalidArgumentError(f"{name} must be a finite number of whole seconds, not {value!r}")
    if number < minimum:
        raise InvalidArgumentError(f"{name} must be at least {minimum} s (server minimum), not {value!r}")
    if isinstance(number, float):
        if not number.is_integer():
            raise InvalidArgumentError(f"{name} must be whole seconds (the server keeps no fraction), not {value!r}")
        number = int(number)
    return number
