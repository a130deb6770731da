"""Patches: a public method of a public class replaced by a wrapper (or a hook set), and put back.

Instrumenting swaps class attributes and uninstrumenting restores them, so an
uninstrumented call runs the very function it ran before (no flag is checked
on any hot path), and objects made before ``instrument()`` are covered too.
Runs on whichever thread calls ``instrument()``/``uninstrument()``; the
instrumentor's lock keeps two of those from interleaving.  A module that is
wrapped only once something imports it (:meth:`Patches.when_imported`: the
Spark parts, whose modules cost a second to import) is wrapped on the
importing thread; the patches' own lock keeps that from crossing an undo.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

Wrapper = Callable[[Callable[..., Any]], Callable[..., Any]]

log = logging.getLogger("jsclient.instrumentation")


class Patches:
    """The patches one ``instrument()`` applied, so that ``uninstrument()`` undoes exactly those."""

    def __init__(self) -> None:
        self._applied: list[tuple[object, str, Any]] = []
        self._lock = threading.RLock()
        self._undone = False

    def wrap(self, owner: type, name: str, wrapper: Wrapper) -> None:
        """Replace ``owner.name`` (defined on ``owner`` itself) by ``wrapper(original)``."""
        with self._lock:
            original = owner.__dict__[name]
            wrapped = functools.wraps(original)(wrapper(original))
            wrapped.__wrapped_by_jsclient__ = original  # type: ignore[attr-defined]
            self._applied.append((owner, name, original))
            setattr(owner, name, wrapped)

    def when_imported(self, module: str, install: Callable[[ModuleType], None]) -> None:
        """Run ``install(module)`` now if ``module`` is imported, else right after something imports it, unless
        these patches are undone by then: a part need not import a heavy module that a program may never use.

        ``install`` runs on the importing thread; an error in it is logged, never raised into that import (a
        library whose methods moved must not break the program that imports it).
        """
        import wrapt

        def hook(loaded: ModuleType) -> None:
            with self._lock:
                if self._undone:
                    return
                try:
                    install(loaded)
                except Exception:
                    log.exception("jsclient.instrumentation: could not instrument %s", module)

        wrapt.register_post_import_hook(hook, module)

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
        with self._lock:
            self._applied.append((owner, name, getattr(owner, name)))
            setattr(owner, name, value)

    def undo(self) -> None:
        """Put back every original, newest first; a module imported later is no longer wrapped."""
        with self._lock:
            self._undone = True
            while self._applied:
                owner, name, original = self._applied.pop()
                setattr(owner, name, original)
