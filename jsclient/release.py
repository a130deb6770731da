"""ServerVersion: the release a nats-server announces, as a comparable value.

An immutable value object; any thread.  Feature checks compare it with a
tuple (``version >= (2, 11)``); the connection, ``jsclient.server`` and
the JetStream feature levels all read releases through it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from .errors import InvalidArgumentError

_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]*)?")


@dataclass(frozen=True, eq=False)
class ServerVersion:
    """A nats-server release as its INFO announces it (``"2.15.1"``, ``"2.12.0-RC.1"``).

    Ordered by (major, minor, patch), and a pre-release before its release
    (2.12.0-RC.1 < 2.12.0; pre-release parts compared as semantic
    versioning does, but words without regard to case, so beta.2 <
    RC.1), so a feature check reads ``nc.server_version >=
    (2, 11)``: the ordering also takes a tuple of ints, missing parts 0.
    ``==`` compares with another ServerVersion; ``str()`` gives the text.

    Attributes:
        major: The major release number (the 2 of 2.12.0).
        minor: The minor release number (the 12 of 2.12.0).
        patch: The patch number (the 0 of 2.12.0).
        prerelease: The pre-release part after ``-`` (``"RC.1"`` of 2.12.0-RC.1); None for a release.
    """

    major: int
    minor: int
    patch: int
    prerelease: str | None = None

    @classmethod
    def parse(cls, text: str) -> ServerVersion:
        """The release named by ``text``; InvalidArgumentError when it names none.

        Args:
            text: A version as nats-server writes it: ``"2.15.1"``, ``"v2.12.0-RC.1"``; build metadata
                (``+...``) is dropped.

        Returns:
            The version.

        Raises:
            InvalidArgumentError: ``text`` is not a str naming a release.
        """
        found = _VERSION.fullmatch(text.strip()) if isinstance(text, str) else None
        if found is None:
            raise InvalidArgumentError(f"not a nats-server version: {text!r} (expected e.g. '2.15.1')")
        major, minor, patch, prerelease = found.groups()
        return cls(int(major), int(minor), int(patch), prerelease)

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        return f"{text}-{self.prerelease}" if self.prerelease else text

    def _key(self) -> tuple[Any, ...]:
        if not self.prerelease:
            return (self.major, self.minor, self.patch, 1, ())
        # Words compared without case: nats-server's betas ("beta.1") come before its "RC.1"s.
        parts = tuple((0, int(p), "", "") if p.isdigit() else (1, 0, p.lower(), p) for p in self.prerelease.split("."))
        return (self.major, self.minor, self.patch, 0, parts)

    def _other(self, other: object) -> ServerVersion | None:
        """What the ordering compares with: another version, or a tuple of ints read as one."""
        if isinstance(other, ServerVersion):
            return other
        if (
            isinstance(other, tuple)
            and 0 < len(other) <= 3
            and all(isinstance(p, int) and not isinstance(p, bool) for p in other)
        ):
            return ServerVersion(*(*other, 0, 0)[:3])
        return None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ServerVersion):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __lt__(self, other: object) -> bool:
        version = self._other(other)
        return NotImplemented if version is None else self._key() < version._key()

    def __le__(self, other: object) -> bool:
        version = self._other(other)
        return NotImplemented if version is None else self._key() <= version._key()

    def __gt__(self, other: object) -> bool:
        version = self._other(other)
        return NotImplemented if version is None else self._key() > version._key()

    def __ge__(self, other: object) -> bool:
        version = self._other(other)
        return NotImplemented if version is None else self._key() >= version._key()


@functools.lru_cache(maxsize=64)
def announced(text: str) -> ServerVersion | None:
    """The release an INFO's ``version`` names, or None when it names none (cached: every call asks again)."""
    try:
        return ServerVersion.parse(text)
    except InvalidArgumentError:
        return None
