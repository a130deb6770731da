"""Old names kept for one minor version: each use warns with the new name.

The names are those of the API conventions (docs/conventions.rst): one
name per concept (``timeout`` for how long a call may block,
``max_messages`` for how many messages a call asks for, ``callback`` for a
function called per message, ``next_msg`` for taking one message).  A
renamed keyword or method still works in 1.x and goes in 2.0; the warning
says what to write instead.  No state, no threads.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar, cast

from .errors import InvalidArgumentError

F = TypeVar("F", bound=Callable[..., Any])

#: Where the old names go.
REMOVED_IN = "2.0"


def renamed_keywords(**old_to_new: str) -> Callable[[F], F]:
    """Accept each old keyword as its new name, with a DeprecationWarning naming the new one.

    Giving both the old and the new name is an error (raised before
    anything is sent).  The wrapped function's signature shows only the new
    names (``inspect.signature`` follows ``__wrapped__``).
    """

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                for old, new in old_to_new.items():
                    if old in kwargs:
                        if new in kwargs:
                            raise InvalidArgumentError(
                                f"{func.__qualname__}: {old}= is the old name of {new}=: give {new}= only"
                            )
                        warnings.warn(
                            f"{func.__qualname__}: {old}= is deprecated, write {new}= (the old name goes in "
                            f"{REMOVED_IN})",
                            DeprecationWarning,
                            stacklevel=2,
                        )
                        kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        wrapper.__renamed_keywords__ = dict(old_to_new)  # type: ignore[attr-defined]
        return cast(F, wrapper)

    return decorate


def renamed_method(new: Callable[..., Any], old: str) -> Callable[..., Any]:
    """A method kept under its old name ``old``: it warns, then calls ``new``."""

    @functools.wraps(new)
    def alias(self: Any, *args: Any, **kwargs: Any) -> Any:
        warnings.warn(
            f"{type(self).__name__}.{old}() is deprecated, call {new.__name__}() (the old name goes in {REMOVED_IN})",
            DeprecationWarning,
            stacklevel=2,
        )
        return new(self, *args, **kwargs)

    alias.__name__ = old
    alias.__qualname__ = new.__qualname__.rpartition(".")[0] + "." + old
    alias.__doc__ = f"Deprecated: the old name of :meth:`{new.__name__}`."
    alias.__deprecated_alias_of__ = new.__name__  # type: ignore[attr-defined]
    return alias
