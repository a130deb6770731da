"""Sans-IO NATS wire protocol: a parser that turns bytes into events, and the encoders of every frame sent.

Nothing here touches a socket, a thread or a clock, so every line of it can be
tested by feeding bytes (whole, byte by byte, split anywhere).  Every frame the
client reads is parsed here and every frame it sends is encoded here (header
blocks in :mod:`jsclient.headers`); no other module frames or parses NATS
protocol.

A package so that each part stays within a module's length: :mod:`.events`
(what the parser makes), :mod:`.parser` (the one reading of a message's
control line and the parser's entries over it) and :mod:`.frames` (encoders,
frame templates, subject checks).  Import from here.
"""

from .events import Err, Event, Info, MsgEvent, Ok, Ping, Pong
from .frames import (
    CRLF,
    FAST_APPEND_FRAME,
    PING,
    PONG,
    PREFIX_CACHE_MAX,
    REPLY_LINE,
    REQUEST_FRAME,
    REQUEST_HEAD,
    REQUEST_LINE,
    PubEncoder,
    check_publish_subject,
    check_queue_name,
    check_subscribe_subject,
    encode_connect,
    encode_fast_ingest,
    encode_hpub,
    encode_pub,
    encode_sub,
    encode_unsub,
    hpub_frame,
    pub_frame,
    remember,
)
from .parser import (
    MAX_CONTROL_LINE,
    ONE_FRAME_MAX,
    REPEAT_MAX,
    MsgLine,
    OwnFrame,
    Parser,
    R,
    ReplyShape,
    parse_msg_line,
    reply_pattern,
)

__all__ = [
    "CRLF",
    "FAST_APPEND_FRAME",
    "MAX_CONTROL_LINE",
    "ONE_FRAME_MAX",
    "PING",
    "PONG",
    "PREFIX_CACHE_MAX",
    "REPEAT_MAX",
    "REPLY_LINE",
    "REQUEST_FRAME",
    "REQUEST_HEAD",
    "REQUEST_LINE",
    "Err",
    "Event",
    "Info",
    "MsgEvent",
    "MsgLine",
    "Ok",
    "OwnFrame",
    "Parser",
    "Ping",
    "Pong",
    "PubEncoder",
    "R",
    "ReplyShape",
    "check_publish_subject",
    "check_queue_name",
    "check_subscribe_subject",
    "encode_connect",
    "encode_fast_ingest",
    "encode_hpub",
    "encode_pub",
    "encode_sub",
    "encode_unsub",
    "hpub_frame",
    "parse_msg_line",
    "pub_frame",
    "remember",
    "reply_pattern",
]
