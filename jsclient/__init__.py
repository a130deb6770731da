"""jsclient: a synchronous, thread-based NATS and JetStream client.

Only the public names live here; see README.rst for the tour.
"""

from ._version import __version__
from .connection import Connection, State, connect
from .errors import (
    AuthorizationError,
    BadHeaderError,
    BadPayloadError,
    BadSubjectError,
    ConnectionClosedError,
    ConnectionLostError,
    Error,
    ForkedConnectionError,
    InvalidArgumentError,
    MaxPayloadError,
    MaxPayloadServerError,
    NoRespondersError,
    NoServersError,
    ProtocolError,
    ReconnectBufferFullError,
    ServerError,
    SlowConsumerError,
    StaleConnectionError,
    SubscriptionClosedError,
    TimeoutError,
    TLSError,
)
from .headers import Headers
from .jetstream.context import JetStream
from .message import Msg
from .options import Options
from .subscription import Subscription

__all__ = [
    "AuthorizationError",
    "BadHeaderError",
    "BadPayloadError",
    "BadSubjectError",
    "Connection",
    "ConnectionClosedError",
    "ConnectionLostError",
    "Error",
    "ForkedConnectionError",
    "Headers",
    "InvalidArgumentError",
    "JetStream",
    "MaxPayloadError",
    "MaxPayloadServerError",
    "Msg",
    "NoRespondersError",
    "NoServersError",
    "Options",
    "ProtocolError",
    "ReconnectBufferFullError",
    "ServerError",
    "SlowConsumerError",
    "StaleConnectionError",
    "State",
    "Subscription",
    "SubscriptionClosedError",
    "TLSError",
    "TimeoutError",
    "__version__",
    "connect",
]
