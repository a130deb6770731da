"""Patches: a public method of a public class replaced by a wrapper (or a hook set), and put back.

Instrumenting swaps class attributes and uninstrumenting restores them, so an
uninstrumented call runs the very function it ran before (no flag is checked
on any hot path), and objects made before ``instrument()`` are covered too.
Runs on whichever thread calls ``instrument()``/``uninstrument()``; the
instrumentor's lock keeps two of those from interleaving.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

Wrapper = Callable[[Callable[..., Any]], Callable[..., Any]]


class Patches:
    """The patches one ``instrument()`` applied, so that ``uninstrument()`` undoes exactly those."""

    def __init__(self) -> None:
        self._applied: list[tuple[object, str, Any]] = []

    def wrap(self, owner: type, name: str, wrapper: Wrapper) -> None:
        """Replace ``owner.name`` (defined on ``owner`` itself) by ``wrapper(original)``."""
        original = owner.__dict__[name]
        wrapped = functools.wraps(original)(wrapper(original))
        wrapped.__wrapped_by_jsclient__ = original  # type: ignore[attr-defined]
        self._applied.append((owner, name, original))
        setattr(owner, name, wrapped)

    def beneath(self, owner: type, name: str) -> Callable[..., Any]:
        """``owner.name`` as jsclient defines it, beneath every wrapper applied so far.

        A part whose own span stands for a call that another part's wrapper would trace too calls this
        instead of the method it wrapped, so that one call gives one span (see :mod:`.jetstream`).
        """
        found: Callable[..., Any] = owner.__dict__[name]
        for applied_owner, applied_name, original in self._applied:
            if applied_owner is owner and applied_name == name:
                found = original  # the first wrap of it kept the method itself
                break
        return found

    def replace(self, owner: object, name: str, value: object) -> None:
        """Set ``owner.name`` (a module's hook, such as :data:`jsclient.observe.listener`) to ``value``; undo puts
        back what was there."""
        self._applied.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def undo(self) -> None:
        """Put back every original, newest first."""
        while self._applied:
            owner, name, original = self._applied.pop()
            setattr(owner, name, original)
