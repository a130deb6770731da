"""Per-message JetStream headers: TTL (ADR-43), schedules (ADR-51), counter increments (ADR-49).

Pure functions that check an option and give its header value, so a bad
option is named before anything is sent.  No I/O, no threads.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from ..checks import whole_seconds
from ..errors import InvalidArgumentError
from ..protocol import check_publish_subject
from .api import MIN_MESSAGE_TTL as _MIN_TTL

TTL_HEADER = "Nats-TTL"
INCR_HEADER = "Nats-Incr"
SCHEDULE_HEADER = "Nats-Schedule"
SCHEDULE_TARGET_HEADER = "Nats-Schedule-Target"
SCHEDULE_SOURCE_HEADER = "Nats-Schedule-Source"
SCHEDULE_TTL_HEADER = "Nats-Schedule-TTL"
SCHEDULE_TIME_ZONE_HEADER = "Nats-Schedule-Time-Zone"

#: A per-message TTL: whole seconds (an int, a float or a timedelta without a fraction) or "never".
TTL = int | float | dt.timedelta | str
#: The server's minimum TTL, in whole seconds.
MIN_MESSAGE_TTL = int(_MIN_TTL)
#: A schedule: an aware datetime (once, then), a timedelta (every so often) or the ADR's text form.
Schedule = dt.datetime | dt.timedelta | str

_PREDEFINED = frozenset(("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"))
# Go's time.ParseDuration: a sequence of decimal numbers, each with a unit.
_GO_TERM = r"(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h)"
_GO_DURATION = re.compile(f"(?:{_GO_TERM})+")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_CRON_FIELD = re.compile(r"[0-9A-Za-z*?,/\-]+")


def _go_seconds(text: str) -> float:
    return sum(float(n) * _GO_UNITS[u] for n, u in re.findall(r"([\d.]+)(ns|us|µs|ms|s|m|h)", text))


def ttl_value(name: str, ttl: Any) -> str:
    """The header value of a TTL: whole seconds >= 1 (``1.0`` too, not ``1.5``), or "never"."""
    if isinstance(ttl, str):
        if ttl.lower() == "never":
            return "never"
        raise InvalidArgumentError(
            f"{name} must be whole seconds (an int or float >= 1, or a timedelta) or 'never', not {ttl!r}"
        )
    return str(whole_seconds(name, ttl, MIN_MESSAGE_TTL))


def increment_value(delta: Any) -> str:
    """A counter increment (ADR-49): any int, sent as +N or -N."""
    if isinstance(delta, bool) or not isinstance(delta, int):
        raise InvalidArgumentError(f"a counter delta must be an int, not {delta!r}")
    return f"{delta:+d}"


def schedule_value(schedule: Any) -> tuple[str, bool]:
    """The Nats-Schedule value, and whether it is a cron schedule (only those take a time zone)."""
    if isinstance(schedule, dt.datetime):
        if schedule.utcoffset() is None:
            raise InvalidArgumentError(f"a schedule time must be timezone-aware, not {schedule!r}")
        stamp = schedule.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
        return f"@at {stamp}", False
    if isinstance(schedule, dt.timedelta):
        return f"@every {whole_seconds('a schedule interval', schedule)}s", False
    if not isinstance(schedule, str):
        raise InvalidArgumentError(f"schedule must be an aware datetime, a timedelta or a str, not {schedule!r}")
    text = schedule.strip()
    if text.startswith("@at "):
        try:
            when = dt.datetime.fromisoformat(text[4:].strip())
        except ValueError:
            when = None
        if when is None or when.utcoffset() is None:
            raise InvalidArgumentError(f"schedule {schedule!r}: '@at' needs an RFC 3339 time with a zone")
        return text, False
    if text.startswith("@every "):
        interval = text[7:].strip()
        if _GO_DURATION.fullmatch(interval) is None or _go_seconds(interval) < 1:
            raise InvalidArgumentError(f"schedule {schedule!r}: '@every' needs a duration of at least 1s, like 5m")
        return text, False
    if text in _PREDEFINED:
        return text, True
    fields = text.split()
    if len(fields) != 6 or any(_CRON_FIELD.fullmatch(f) is None for f in fields):
        raise InvalidArgumentError(
            f"schedule {schedule!r} is not '@at <time>', '@every <duration>', one of {', '.join(sorted(_PREDEFINED))}"
            " or a cron line of 6 fields (seconds first)"
        )
    return text, True


def repeats(headers: dict[str, str]) -> bool:
    """Whether a schedule's headers make it repeat (anything but ``@at``): server 2.14+, 2.12 refuses it."""
    return not headers[SCHEDULE_HEADER].startswith("@at ")


def schedule_headers(
    subject: str,
    schedule: Any,
    target: Any,
    source: Any,
    ttl: Any,
    time_zone: Any,
) -> dict[str, str]:
    """The headers of a message that holds a schedule (ADR-51); the server requires a target."""
    value, cron = schedule_value(schedule)
    if target is None:
        raise InvalidArgumentError("a schedule needs schedule_target: the subject its messages are published to")
    check_publish_subject(target, "schedule_target")
    if target == subject:
        raise InvalidArgumentError(f"schedule_target {target!r} must differ from the schedule's own subject")
    headers = {SCHEDULE_HEADER: value, SCHEDULE_TARGET_HEADER: target}
    if source is not None:
        check_publish_subject(source, "schedule_source")
        headers[SCHEDULE_SOURCE_HEADER] = source
    if ttl is not None:
        headers[SCHEDULE_TTL_HEADER] = ttl_value("schedule_ttl", ttl)
    if time_zone is not None:
        if not cron:
            raise InvalidArgumentError("schedule_time_zone applies to cron schedules only, not '@at' or '@every'")
        if not isinstance(time_zone, str) or not time_zone or re.fullmatch(r"[+-]\d.*", time_zone):
            raise InvalidArgumentError(
                f"schedule_time_zone must be an IANA zone name like 'Europe/Amsterdam' or 'UTC', not {time_zone!r}"
            )
        headers[SCHEDULE_TIME_ZONE_HEADER] = time_zone
    return headers
