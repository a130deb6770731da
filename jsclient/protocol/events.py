"""The events the parser makes of what the server sends: a message, INFO, PING, PONG, +OK and -ERR."""

from __future__ import annotations

from typing import Any

import msgspec


class Info:
    """The server's INFO: its id, limits, features and cluster URLs."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def __repr__(self) -> str:
        return f"Info({self.data!r})"


class MsgEvent(msgspec.Struct):
    """A MSG or HMSG frame: ``header`` is the raw NATS/1.0 block or None.

    :class:`jsclient.Msg` subclasses this, and the connection's parser builds
    Msg objects directly, so a message is allocated once on its way in.  A
    msgspec Struct is built in C: parsing a run of acks took 740 ns a frame
    with a Python ``__init__`` and 580 ns with this.
    """

    subject: str
    sid: int
    reply: str | None
    header: bytes | None
    data: bytes

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(subject={self.subject!r}, sid={self.sid}, reply={self.reply!r}, "
            f"header={self.header!r}, data={self.data[:64]!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MsgEvent):
            return NotImplemented
        return (self.subject, self.sid, self.reply, self.header, self.data) == (
            other.subject,
            other.sid,
            other.reply,
            other.header,
            other.data,
        )

    __hash__ = None  # type: ignore[assignment]


class Ping:
    """The server asks for a PONG."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Ping()"

    def __eq__(self, other: object) -> bool:
        return type(other) is Ping

    __hash__ = object.__hash__


class Pong:
    """The answer to one of our PINGs."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Pong()"

    def __eq__(self, other: object) -> bool:
        return type(other) is Pong

    __hash__ = object.__hash__


class Ok:
    """``+OK`` (only sent in verbose mode)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Ok()"

    def __eq__(self, other: object) -> bool:
        return type(other) is Ok

    __hash__ = object.__hash__


class Err:
    """``-ERR 'text'``: the server's error text without the quotes."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Err({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Err) and other.text == self.text

    __hash__ = None  # type: ignore[assignment]


Event = Info | MsgEvent | Ping | Pong | Ok | Err
