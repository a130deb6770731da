"""The one exception tree of jsclient.

Every error the library raises derives from :class:`Error`.  Errors that mean
"timed out" also derive from the built-in :class:`TimeoutError`, and errors
about bad arguments also derive from :class:`ValueError` or :class:`TypeError`,
so callers can catch them the way they already catch standard errors.

No threads or locks here: these are plain value objects.
"""

from __future__ import annotations

import builtins


class Error(Exception):
    """Base of every jsclient error."""


class TimeoutError(Error, builtins.TimeoutError):
    """An operation did not complete within its timeout."""


class InvalidArgumentError(Error, ValueError):
    """A caller passed a value the library refuses before sending anything."""


class BadSubjectError(InvalidArgumentError):
    """A subject is empty, contains whitespace or empty tokens, or misuses wildcards."""


class BadPayloadError(Error, TypeError):
    """A payload is not bytes-like (for example a str)."""


class BadHeaderError(InvalidArgumentError):
    """A header name or value cannot be encoded in a NATS/1.0 header block."""


class MaxPayloadError(InvalidArgumentError):
    """A message is larger than the server's max_payload."""


class ConnectionClosedError(Error):
    """The connection is closed (or draining) and cannot be used for this."""


class SubscriptionClosedError(Error):
    """The subscription was unsubscribed, drained or reached max_msgs, and is empty."""


class NoServersError(Error):
    """No server in the pool could be reached."""


class NoRespondersError(Error):
    """A request reached no subscriber (the server answered with status 503)."""


class ProtocolError(Error):
    """The peer sent bytes that are not valid NATS protocol."""


class ServerError(Error):
    """The server reported an error with ``-ERR``; ``text`` is its message."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class AuthorizationError(ServerError):
    """The server rejected the credentials or a permission was violated."""


class StaleConnectionError(ServerError):
    """The server closed the connection as stale (it missed our PONGs)."""


class MaxPayloadServerError(ServerError):
    """The server refused a message as larger than its max_payload."""


class SlowConsumerError(Error):
    """A subscription's pending limits were exceeded and messages were dropped.

    Reported through the connection's error callback; ``dropped`` counts the
    messages dropped for this subscription so far.
    """

    def __init__(self, subject: str, sid: int, dropped: int) -> None:
        super().__init__(
            f"slow consumer on subject {subject!r} (sid {sid}): "
            f"{dropped} message(s) dropped so far"
        )
        self.subject = subject
        self.sid = sid
        self.dropped = dropped


def server_error(text: str) -> ServerError:
    """Map the text of a ``-ERR`` line to the most specific error class."""
    lowered = text.lower()
    if "authorization" in lowered or "permissions violation" in lowered or "authentication" in lowered:
        return AuthorizationError(text)
    if "stale connection" in lowered:
        return StaleConnectionError(text)
    if "maximum payload" in lowered:
        return MaxPayloadServerError(text)
    return ServerError(text)
