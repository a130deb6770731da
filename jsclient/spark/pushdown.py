"""Spark's pushed filters (Spark 4.1+ ``pushFilters``) as narrower read options, and subject filter algebra.

Pure functions, run on the thread that calls them: the planning worker on
the driver side for the pushes, the driver and the executors for the
algebra.  pyspark's filter classes are imported when a push is asked for
(they exist from pyspark 4.1 on, the first release that pushes filters).

Spark does not check again a filter it is told was pushed, so a filter is
either applied exactly and not handed back, or applied as a superset of
what it keeps and handed back, to be checked on every row as well; what
cannot be applied at all is only handed back.  What a stream read applies:

* ``subject``: ``=``, ``IN`` and ``LIKE 'prefix%'`` become subject filters,
  intersected with the option ``subjects`` (exact; a prefix that does not
  end at a token boundary is read as the subjects under its last whole
  token, and handed back);
* ``seq``: ranges become ``startingSequence``/``endingSequence`` (exact);
* ``timestamp``: ranges become ``startingTime``/``endingTime``, always
  handed back (see :func:`push_stream_filters`);
* ``IS NOT NULL`` of a column that is never null (all but ``headers``).

A bucket read applies ``=``, ``IN`` and ``LIKE 'prefix%'`` on ``key`` as key
filters (:func:`push_key_filters`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError
from ..jetstream.kv import check_key
from .options import SparkOptions

if TYPE_CHECKING:
    from pyspark.sql.datasource import Filter

#: Columns of a stream read that are never null (``headers`` is, for a message without headers).
NEVER_NULL = frozenset({("subject",), ("data",), ("stream",), ("seq",), ("timestamp",)})
#: One step of the ``timestamp`` column (microseconds): ``t <= x`` is ``t < x + STEP``.
STEP = dt.timedelta(microseconds=1)
_NOT_IN_LITERALS = frozenset(" \t\r\n*>")


# -- subject filter algebra (NATS filters: tokens split at '.', '*' one token, '>' one or more, last) --------


def intersect(a: str, b: str) -> str | None:
    """The filter matching exactly the subjects both filters match.

    Args:
        a: A subject filter.
        b: Another.

    Returns:
        Their intersection as one filter, or None when no subject matches both.
    """
    p, q = a.split("."), b.split(".")
    out: list[str] = []
    for i in range(max(len(p), len(q))):
        x = p[i] if i < len(p) else None
        y = q[i] if i < len(q) else None
        if x == ">" or y == ">":
            rest = q[i:] if x == ">" else p[i:]
            return ".".join(out + rest) if rest else None
        if x is None or y is None:
            return None
        if x == "*" or x == y:
            out.append(y)
        elif y == "*":
            out.append(x)
        else:
            return None
    return ".".join(out)


def covers(wide: str, narrow: str) -> bool:
    """Whether every subject ``narrow`` matches is matched by ``wide`` too.

    Args:
        wide: A subject filter.
        narrow: Another.

    Returns:
        True when ``wide`` matches all that ``narrow`` does.
    """
    w, n = wide.split("."), narrow.split(".")
    for i, token in enumerate(w):
        if token == ">":
            return len(n) > i
        if i >= len(n) or n[i] == ">" or token not in ("*", n[i]):
            return False
    return len(n) == len(w)


def distinct(filters: Iterable[str]) -> tuple[str, ...]:
    """The filters without repeats and without one that another covers, in the order first seen.

    Subjects without wildcards cover only themselves, so thousands of them
    (an ``IN`` list) are compared with the wildcard filters alone.

    Args:
        filters: Subject filters.

    Returns:
        As few filters, matching the same subjects.
    """
    given = list(dict.fromkeys(filters))
    wild: list[str] = []
    for f in given:
        if _wild(f) and not any(covers(w, f) for w in wild):
            wild = [w for w in wild if not covers(f, w)]
            wild.append(f)
    kept = set(wild)
    return tuple(f for f in given if f in kept or not (_wild(f) or any(covers(w, f) for w in wild)))


def _wild(subject: str) -> bool:
    return any(token in ("*", ">") for token in subject.split("."))


def disjoint(filters: Sequence[str]) -> bool:
    """Whether no subject matches two of the filters (a consumer's ``filter_subjects`` may not overlap).

    Args:
        filters: Subject filters.

    Returns:
        True when they do not overlap.
    """
    return all(intersect(a, b) is None for i, a in enumerate(filters) for b in filters[i + 1:])


def covering(filters: Sequence[str]) -> str:
    """One filter matching at least every subject the filters match (a wildcard the server reads for them).

    Args:
        filters: Subject filters, at least one.

    Returns:
        Their tokens where all agree and ``*`` where not, when they are of one length without ``>``; else
        their common leading tokens and ``>``.
    """
    split = [f.split(".") for f in filters]
    if len({len(t) for t in split}) == 1 and not any(">" in t for t in split):
        return ".".join(col[0] if len(set(col)) == 1 else "*" for col in zip(*split, strict=True))
    shortest = min(len(t) for t in split)
    prefix: list[str] = []
    for col in zip(*split, strict=False):
        if len(prefix) == shortest - 1 or len(set(col)) != 1 or col[0] in ("*", ">"):
            break
        prefix.append(col[0])
    return ".".join([*prefix, ">"])


# -- pushes -------------------------------------------------------------------------------------------------------


def _literal_subject(value: Any) -> bool:
    """A subject a message can be stored on, with nothing the server would read as a wildcard."""
    return (
        isinstance(value, str) and bool(value) and not _NOT_IN_LITERALS.intersection(value)
        and all(value.split("."))
    )


def _literal_key(value: Any) -> bool:
    try:
        check_key(value)
    except InvalidArgumentError:
        return False
    return True


def _matching(f: Filter, literal: Callable[[Any], bool]) -> tuple[tuple[str, ...], bool] | None:
    """The filters an ``=``, ``IN`` or prefix filter reads, and whether exactly (None: not one to push).

    A prefix ending in ``.`` is exactly ``prefix>``; another is within the
    subjects under its whole tokens (``a.b`` within ``a.>``), and one
    without a whole token narrows nothing.
    """
    from pyspark.sql.datasource import EqualTo, In, StringStartsWith

    if isinstance(f, EqualTo) and literal(f.value):
        return (f.value,), True
    if isinstance(f, In) and f.value and all(literal(v) for v in f.value):
        return distinct(f.value), True
    if isinstance(f, StringStartsWith) and isinstance(f.value, str):
        whole, _, part = f.value.rpartition(".")
        if whole and literal(whole):
            return (whole + ".>",), not part
    return None


class _Subjects:
    """The subject (or key) filters a read keeps to, narrowed filter by filter; empty tuple: none match."""

    def __init__(self, given: tuple[str, ...]) -> None:
        self.filters: tuple[str, ...] | None = given or None  # None: every subject

    def narrow(self, f: Filter, literal: Callable[[Any], bool]) -> bool:
        """Apply ``f`` if it is a filter to push; whether it was applied exactly."""
        found = _matching(f, literal)
        if found is None:
            return False
        wanted, exact = found
        if self.filters is None:
            self.filters = wanted
        else:
            self.filters = distinct(x for a in self.filters for b in wanted if (x := intersect(a, b)) is not None)
        return exact


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _instant(value: Any) -> bool:
    return isinstance(value, dt.datetime) and value.tzinfo is not None


def _bounds(f: Filter, valid: Callable[[Any], bool], step: Any) -> tuple[Any, Any, bool] | None:
    """The first and last value a comparison keeps (None: no bound that side), and whether it keeps all between.

    ``step`` is the column's unit: ``x > v`` keeps from ``v + step``.
    """
    from pyspark.sql.datasource import (
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        LessThan,
        LessThanOrEqual,
    )

    if isinstance(f, In):
        values = list(f.value or ())
        if not values or not all(valid(v) for v in values):
            return None
        low, high = min(values), max(values)
        return low, high, len(set(values)) == (high - low) // step + 1
    value = getattr(f, "value", None)
    if not valid(value):
        return None
    if isinstance(f, EqualTo):
        return value, value, True
    if isinstance(f, GreaterThan):
        return value + step, None, True
    if isinstance(f, GreaterThanOrEqual):
        return value, None, True
    if isinstance(f, LessThan):
        return None, value - step, True
    if isinstance(f, LessThanOrEqual):
        return None, value, True
    return None


def _nothing(opts: SparkOptions) -> SparkOptions:
    """Options that read no message (filters no message can pass): ending before the first sequence."""
    return dataclasses.replace(opts, starting_sequence=None, starting_time=None, ending_time=None, ending_sequence=0)


def push_stream_filters(
    opts: SparkOptions, filters: list[Filter], *, times: bool = True
) -> tuple[SparkOptions, list[Filter]]:
    """Narrow a stream read's options by the filters Spark pushes, and say which Spark must still apply.

    Sequences are exact, and so are subjects (intersected with the option
    ``subjects``).  A sequence bound is not pushed against a time the options
    already give on the same side (``startingTime`` with ``seq >= n``): the
    options take one of the two.

    A time bound narrows the range of sequences read: ``timestamp >= t`` starts
    at the first message stored at or after ``t`` (as ``startingTime``),
    ``timestamp < t`` ends before it (as ``endingTime``).  That finds every
    message in the range only when the stream's stored times do not go back as
    its sequences grow, which the server assumes when it looks a time up; they
    do go back where a clock was set back, after a leader change to a server
    whose clock is behind, or in a stream that keeps the times of another
    (a mirror of a stream with such times).  So time filters are always handed
    back for Spark to check each row read; they are not pushed at all against
    sequences the read already has on the same side.

    Args:
        opts: The read's options.
        filters: The filters Spark offers (their AND).
        times: Push ``timestamp`` ranges (a server before 2.11 cannot look a time up).

    Returns:
        The narrowed options (reading no message, when no message can pass the filters), and the filters
        Spark must still apply: those passed in, by reference, in their order.
    """
    from pyspark.sql.datasource import IsNotNull

    subjects = _Subjects(opts.subjects)
    first, last = opts.starting_sequence, opts.ending_sequence
    kept: list[Filter] = []
    timed: list[tuple[dt.datetime | None, dt.datetime | None]] = []
    for f in filters:
        column = getattr(f, "attribute", None)
        if isinstance(f, IsNotNull) and column in NEVER_NULL:
            continue
        applied = False
        if column == ("subject",):
            applied = subjects.narrow(f, _literal_subject)
        elif column == ("seq",) and (found := _bounds(f, _integer, 1)) is not None:
            low, high, applied = found
            if low is not None and opts.starting_time is None:
                first = low if first is None else max(first, low)
            elif low is not None:
                applied = False
            if high is not None and opts.ending_time is None:
                last = high if last is None else min(last, high)
            elif high is not None:
                applied = False
        elif column == ("timestamp",) and times and (found := _bounds(f, _instant, STEP)) is not None:
            low, high, _ = found
            timed.append((low and low.astimezone(dt.UTC), high and (high + STEP).astimezone(dt.UTC)))
        if not applied:
            kept.append(f)
    if subjects.filters == () or (last is not None and last < max(first or 1, 1)):
        return _nothing(opts), kept
    start, end = opts.starting_time, opts.ending_time
    for low, after in timed:
        if low is not None and first is None:
            start = low if start is None else max(start, low)
        if after is not None and last is None:
            end = after if end is None else min(end, after)
    narrowed = dataclasses.replace(
        opts, subjects=subjects.filters or (), starting_sequence=first, ending_sequence=last,
        starting_time=start, ending_time=end,
    )
    return narrowed, kept


def push_key_filters(opts: SparkOptions, filters: list[Filter]) -> tuple[SparkOptions, list[Filter]]:
    """Narrow a bucket read's key filters (the option ``keys``) by the filters Spark pushes on ``key``.

    ``key = 'k'``, ``key IN (...)`` and ``key LIKE 'a.b.%'`` become key
    filters, intersected with the option ``keys`` (exact); ``key LIKE 'a.b%'``
    reads the keys under ``a.`` and is handed back.  A value that is not a
    valid key (``check_key``) narrows nothing.  Every other filter (on
    ``revision``, ``created``, ``value``, ``operation``) stays with Spark, and
    so do key filters no key can pass together (no option says "no key").

    Args:
        opts: The bucket read's options.
        filters: The filters Spark offers (their AND).

    Returns:
        The options with the narrowed ``keys``, and the filters Spark must still apply (by reference, in
        their order).
    """
    keys = _Subjects(opts.keys)
    kept = [f for f in filters if not (getattr(f, "attribute", None) == ("key",) and keys.narrow(f, _literal_key))]
    if keys.filters == ():
        return opts, list(filters)
    return dataclasses.replace(opts, keys=keys.filters or ()), kept
