"""Message-path tracing (ADR-41): send a message that every server it crosses reports on, and gather the
reports into one typed path.

Runs on the caller's thread only.  :func:`trace_message` (behind
:meth:`jsclient.Connection.trace_message`) checks its arguments and the
server's release, subscribes to a fresh inbox, publishes the message with
``Nats-Trace-Dest`` naming that inbox (and ``Nats-Trace-Only`` unless it is
to be delivered), then reads the inbox with ``next_msg`` until the path is
complete or the timeout passes.  Nothing here is shared between threads, so
nothing is locked; the types are immutable values.

How a path is known complete: each server the message crosses sends one
report (nats-server's ``MsgTraceEvent``).  The first server's carries no
``Nats-Trace-Hop`` header.  Each egress of a report to a route, gateway or
leaf node that has a hop id and no error means one more report, from the
server at the other end, whose headers carry that hop id (``1``, ``2``, and
``1.1`` one server further).  An egress with an error (the remote does not
trace, or the message did not go) promises nothing.  The types follow
nats-server's ``server/msgtrace.go``; a connection kind or an event type that
a newer server adds still decodes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import gzip
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import msgspec

from .errors import (
    FeatureNotSupportedError,
    InvalidArgumentError,
    MaxPayloadError,
    ProtocolError,
    RequestOutcome,
    TimeoutError,
)
from .headers import (
    ACCEPT_ENCODING_HEADER,
    CONTENT_ENCODING_HEADER,
    TRACE_DEST_HEADER,
    TRACE_HOP_HEADER,
    TRACE_ONLY_HEADER,
    TRACE_ORIGIN_ACCOUNT_HEADER,
    Headers,
    HeadersInput,
)
from .payload import as_bytes
from .protocol import check_publish_subject
from .release import ServerVersion

if TYPE_CHECKING:
    from .subscription import Subscription

#: The first release whose servers trace messages.
TRACING_RELEASE = (2, 11)


class ConnectionKind(enum.IntEnum):
    """The kind of connection a message came in by or went out on, numbered as nats-server numbers them.

    A kind a newer server adds decodes as a member of its own, named ``KIND_<number>``.
    """

    CLIENT = 0
    ROUTER = 1
    GATEWAY = 2
    SYSTEM = 3
    LEAF = 4
    JETSTREAM = 5
    ACCOUNT = 6

    @classmethod
    def _missing_(cls, value: object) -> ConnectionKind | None:
        if isinstance(value, int) and not isinstance(value, bool):
            member = int.__new__(cls, value)
            member._name_ = f"KIND_{value}"
            member._value_ = value
            return member
        return None


#: The kinds that lead to another server, which then sends a report of its own.
_REMOTE = frozenset({ConnectionKind.ROUTER, ConnectionKind.GATEWAY, ConnectionKind.LEAF})

_LABELS = {
    ConnectionKind.CLIENT: "client",
    ConnectionKind.ROUTER: "route",
    ConnectionKind.GATEWAY: "gateway",
    ConnectionKind.SYSTEM: "system",
    ConnectionKind.LEAF: "leaf node",
    ConnectionKind.JETSTREAM: "JetStream",
    ConnectionKind.ACCOUNT: "account",
}


# -- the events of one server's report ------------------------------------------------------------


class TraceIngress(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="in"):
    """How the message entered a server: from a client, or from another server over a route, gateway or
    leaf node.  Always the first event of a report.

    Attributes:
        kind: The connection it came in by.
        cid: That connection's id on this server.
        name: The connection's name: the client's own, or the server at the other end of a route,
            gateway or leaf node.
        account: The account it was published in.
        subject: The subject it came in on.
        error: Why the server took it no further (a publish permission violation, a message over
            ``max_payload``); empty when none.
        timestamp: When the server received it.
    """

    kind: ConnectionKind
    cid: int = 0
    name: str = ""
    account: str = msgspec.field(default="", name="acc")
    subject: str = msgspec.field(default="", name="subj")
    error: str = ""
    timestamp: dt.datetime = msgspec.field(name="ts")


class TraceSubjectMapping(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="sm"):
    """A subject mapping of the account changed the message's subject.

    Attributes:
        mapped_to: The subject it was mapped to.
        timestamp: When.
    """

    mapped_to: str = msgspec.field(default="", name="to")
    timestamp: dt.datetime = msgspec.field(name="ts")


class TraceStreamExport(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="se"):
    """The message crossed a stream export into another account (traced only where that account's import
    allows it, ``allow_trace``).

    Attributes:
        account: The importing account.
        to_subject: The subject it has there.
        timestamp: When.
    """

    account: str = msgspec.field(default="", name="acc")
    to_subject: str = msgspec.field(default="", name="to")
    timestamp: dt.datetime = msgspec.field(name="ts")


class TraceServiceImport(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="si"):
    """The message crossed a service import into the exporting account (traced only where that export
    allows it, ``allow_trace``).

    Attributes:
        account: The account that exports the service.
        from_subject: The subject it was imported as.
        to_subject: The subject it has in the exporting account.
        timestamp: When.
    """

    account: str = msgspec.field(default="", name="acc")
    from_subject: str = msgspec.field(default="", name="from")
    to_subject: str = msgspec.field(default="", name="to")
    timestamp: dt.datetime = msgspec.field(name="ts")


class TraceJetStream(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="js"):
    """A stream took the message (the report of the server that leads the stream).

    When the message was traced without delivery the stream checked it and stored nothing.

    Attributes:
        stream: The stream's name.
        subject: The subject it was (or would be) stored under, after the stream's own subject transform.
        no_interest: An interest-retention stream with no consumer interested in the subject, so nothing
            was stored.
        error: Why the stream refused it (a limit, a failed expectation, ...); empty when none.
        timestamp: When the stream was done with it.
    """

    stream: str = ""
    subject: str = ""
    no_interest: bool = msgspec.field(default=False, name="nointerest")
    error: str = ""
    timestamp: dt.datetime = msgspec.field(name="ts")


class TraceEgress(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="eg"):
    """Where the message left a server: to a client's subscription, or to another server.

    Attributes:
        kind: The connection it went out on.
        cid: That connection's id on this server.
        name: The connection's name: the client's own, or the server at the other end.
        hop: For a route, gateway or leaf node: the hop id under which the server there reports
            (:meth:`MessageTrace.after` finds that report); empty otherwise.
        account: The account it was delivered in, when not the one it came in by (a service import).
        subscription: For a client: the subject of the subscription that matched.
        queue: For a client: the subscription's queue group, if it has one.
        error: Why it was not delivered there (permissions, a closed connection, a remote server that does
            not trace, ...); empty when it was (or, traced without delivery, would have been).
        timestamp: When.
    """

    kind: ConnectionKind
    cid: int = 0
    name: str = ""
    hop: str = ""
    account: str = msgspec.field(default="", name="acc")
    subscription: str = msgspec.field(default="", name="sub")
    queue: str = ""
    error: str = ""
    timestamp: dt.datetime = msgspec.field(name="ts")


class TraceOtherEvent(msgspec.Struct, frozen=True, kw_only=True):
    """An event of a type this version of jsclient does not know (a newer server's), kept as it came.

    Attributes:
        type: The event's type, as the server names it.
        fields: Its fields, as decoded JSON.
    """

    type: str
    fields: dict[str, Any]


#: One event of a server's report.
TraceEvent: TypeAlias = (
    TraceIngress | TraceSubjectMapping | TraceStreamExport | TraceServiceImport | TraceJetStream | TraceEgress
    | TraceOtherEvent
)


class TraceServer(msgspec.Struct, frozen=True, kw_only=True):
    """The server that sent a report.

    Attributes:
        name: Its name (``server_name``).
        id: Its id.
        host: The host it runs on.
        cluster: Its cluster's name; empty outside a cluster.
        domain: Its JetStream domain, if it has one.
        version: Its release (``2.11.4``).
        tags: Its tags (``server_tags``).
        jetstream: Whether it runs JetStream.
        time: When it sent the report.
    """

    name: str = ""
    id: str = ""
    host: str = ""
    cluster: str = ""
    domain: str = ""
    version: str = msgspec.field(default="", name="ver")
    tags: tuple[str, ...] = ()
    jetstream: bool = False
    time: dt.datetime | None = None


# -- a server's report, and the whole path ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ServerTrace:
    """One server's report on the traced message: how it came in, what happened to it there, where it went.

    Attributes:
        server: The server that sent it.
        hop: The hop id the message carried into this server (``Nats-Trace-Hop``): empty for the first
            server, ``"1"``, ``"2"`` ... for the servers it forwarded the message to, ``"1.1"`` one further.
        hops: To how many servers this one forwarded the message (over routes, gateways, leaf nodes).
        headers: The traced message's headers as this server read them, each name with its values.
        message_size: The message's size as this server counted it, in bytes.
        events: What happened to it here, in order: the ingress first, then subject mappings, imports and
            exports, a stream's store, and the egresses.
    """

    server: TraceServer
    hop: str
    hops: int
    headers: dict[str, list[str]]
    message_size: int
    events: tuple[TraceEvent, ...]

    @property
    def ingress(self) -> TraceIngress | None:
        """How the message came in (None only in a malformed report)."""
        first = self.events[0] if self.events else None
        return first if isinstance(first, TraceIngress) else None

    @property
    def subject_mappings(self) -> tuple[TraceSubjectMapping, ...]:
        """The subject mappings applied here."""
        return tuple(e for e in self.events if isinstance(e, TraceSubjectMapping))

    @property
    def stream_exports(self) -> tuple[TraceStreamExport, ...]:
        """The stream exports the message crossed here."""
        return tuple(e for e in self.events if isinstance(e, TraceStreamExport))

    @property
    def service_imports(self) -> tuple[TraceServiceImport, ...]:
        """The service imports the message crossed here."""
        return tuple(e for e in self.events if isinstance(e, TraceServiceImport))

    @property
    def jetstream(self) -> TraceJetStream | None:
        """The stream that took the message here, if one did."""
        return next((e for e in self.events if isinstance(e, TraceJetStream)), None)

    @property
    def egresses(self) -> tuple[TraceEgress, ...]:
        """Where the message went from here, to clients and to other servers."""
        return tuple(e for e in self.events if isinstance(e, TraceEgress))


@dataclasses.dataclass(frozen=True)
class TraceProblem:
    """A problem a server reported on the message's way (from an event's ``error``).

    Attributes:
        server: The name of the server that reported it.
        event: The event that carries it: the ingress (the message went no further), the stream's store,
            or an egress (it did not go there).
        text: The server's words.
    """

    server: str
    event: TraceIngress | TraceJetStream | TraceEgress
    text: str


@dataclasses.dataclass(frozen=True)
class MessageTrace:
    """The path of one traced message: every server's report, tied together by hop ids.

    ``str()`` gives the path as an indented tree, one line per step.

    Attributes:
        subject: The subject the message was published on.
        deliver: Whether it was delivered (else only traced: subscribers got nothing, streams stored nothing).
        reports: The servers' reports, in the order they came.
        missing: The hop ids of reports that the path promised and that did not come within the timeout
            (a server too busy, or cut off); empty when every one came.
    """

    subject: str
    deliver: bool
    reports: tuple[ServerTrace, ...]
    missing: tuple[str, ...]

    @property
    def origin(self) -> ServerTrace | None:
        """The report of the server the message was published to (None when it did not come)."""
        return next((r for r in self.reports if not r.hop), None)

    @property
    def complete(self) -> bool:
        """Whether every report of the path came (the first server's, and one per hop it promised)."""
        return self.origin is not None and not self.missing

    def after(self, egress: TraceEgress) -> ServerTrace | None:
        """The report of the server ``egress`` led to.

        Args:
            egress: An egress of one of the reports.

        Returns:
            That server's report; None for an egress to a client, or when its report did not come.

        Raises:
            : Nothing.
        """
        if not egress.hop:
            return None
        return next((r for r in self.reports if r.hop == egress.hop), None)

    @property
    def deliveries(self) -> tuple[TraceEgress, ...]:
        """The clients' subscriptions that received the message (or would have, traced without delivery)."""
        return tuple(
            e for r in self.reports for e in r.egresses if e.kind is ConnectionKind.CLIENT and not e.error
        )

    @property
    def stores(self) -> tuple[TraceJetStream, ...]:
        """The streams that took the message."""
        return tuple(r.jetstream for r in self.reports if r.jetstream is not None)

    @property
    def errors(self) -> tuple[TraceProblem, ...]:
        """Every problem the servers reported, in the order of their reports."""
        found = []
        for report in self.reports:
            for event in report.events:
                if isinstance(event, (TraceIngress, TraceJetStream, TraceEgress)) and event.error:
                    found.append(TraceProblem(report.server.name, event, event.error))
        return tuple(found)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form: the reports' servers and events in the servers' own field names.

        Returns:
            ``subject``, ``deliver``, ``complete``, ``missing`` and ``reports`` (each with ``server``,
            ``hop``, ``hops``, ``headers``, ``message_size`` and ``events``); times as RFC 3339 strings.

        Raises:
            : Nothing.
        """
        out: dict[str, Any] = msgspec.to_builtins(self)
        out["complete"] = self.complete
        return out

    def __str__(self) -> str:
        return "\n".join(_render(self))


# -- reading a report ---------------------------------------------------------------------------


class _Request(msgspec.Struct):
    header: dict[str, list[str]] | None = None
    msgsize: int = 0


class _Report(msgspec.Struct):
    server: TraceServer = msgspec.field(default_factory=TraceServer)
    request: _Request = msgspec.field(default_factory=_Request)
    hops: int = 0
    events: list[msgspec.Raw] = msgspec.field(default_factory=list)


class _Typed(msgspec.Struct):
    type: str = ""


_REPORT = msgspec.json.Decoder(_Report)
_TYPED = msgspec.json.Decoder(_Typed)
_FIELDS = msgspec.json.Decoder(dict[str, Any])
#: The events by their ``type`` (the tags of their classes).
_EVENTS: dict[str, msgspec.json.Decoder[Any]] = {
    "in": msgspec.json.Decoder(TraceIngress),
    "sm": msgspec.json.Decoder(TraceSubjectMapping),
    "se": msgspec.json.Decoder(TraceStreamExport),
    "si": msgspec.json.Decoder(TraceServiceImport),
    "js": msgspec.json.Decoder(TraceJetStream),
    "eg": msgspec.json.Decoder(TraceEgress),
}


def decode_report(data: bytes, encoding: str | None = None) -> ServerTrace:
    """One server's report from the body of the message it sent (``Content-Encoding`` ``encoding``)."""
    if encoding == "gzip":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise ProtocolError(f"a gzip trace report that does not decompress: {exc}") from None
    elif encoding not in (None, "", "identity"):
        raise ProtocolError(f"a trace report in an encoding jsclient cannot read: {encoding!r}")
    try:
        wire = _REPORT.decode(data)
        events = tuple(_event(raw) for raw in wire.events)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProtocolError(f"not a message trace report ({exc}): {data[:200]!r}") from None
    headers = wire.request.header or {}
    hop = headers.get(TRACE_HOP_HEADER) or [""]
    return ServerTrace(
        server=wire.server, hop=hop[0], hops=wire.hops, headers=headers, message_size=wire.request.msgsize,
        events=events,
    )


def _event(raw: msgspec.Raw) -> TraceEvent:
    kind = _TYPED.decode(raw).type
    decoder = _EVENTS.get(kind)
    if decoder is None:
        return TraceOtherEvent(type=kind, fields=_FIELDS.decode(raw))
    event: TraceEvent = decoder.decode(raw)
    return event


# -- the path -----------------------------------------------------------------------------------


def _hop_order(hop: str) -> tuple[tuple[int, int, str], ...]:
    """``1.2`` before ``1.10``: the parts of a hop id as numbers."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in hop.split("."))


def _promised(report: ServerTrace) -> list[str]:
    """The hop ids of the reports ``report``'s egresses promise."""
    return [e.hop for e in report.egresses if e.kind in _REMOTE and e.hop and not e.error]


def missing_hops(reports: Mapping[str, ServerTrace]) -> tuple[str, ...] | None:
    """The hop ids the path promises and ``reports`` (by hop id) lacks; None without the first server's."""
    origin = reports.get("")
    if origin is None:
        return None
    missing: list[str] = []
    seen = {""}
    stack = [origin]
    while stack:
        for hop in _promised(stack.pop()):
            if hop in seen:
                continue  # a report that promised a hop already counted (no server does): never twice
            seen.add(hop)
            found = reports.get(hop)
            if found is None:
                missing.append(hop)
            else:
                stack.append(found)
    return tuple(sorted(missing, key=_hop_order))


class Tracer(Protocol):
    """What :func:`trace_message` uses of the connection (a :class:`~jsclient.Connection`): public calls only,
    named here so that this module, which the connection imports, does not import it back."""

    @property
    def server_version(self) -> ServerVersion | None: ...

    @property
    def max_payload(self) -> int: ...

    def new_inbox(self) -> str: ...

    def subscribe(self, subject: str) -> Subscription: ...

    def publish(
        self, subject: str, payload: bytes = b"", reply: str | None = None, headers: HeadersInput | None = None
    ) -> None: ...


#: Headers the call sets itself (or that would turn the tracing off), compared without case.
_OWN_HEADERS = frozenset(
    name.lower() for name in (TRACE_DEST_HEADER, TRACE_ONLY_HEADER, TRACE_HOP_HEADER, TRACE_ORIGIN_ACCOUNT_HEADER)
)


def _checked_headers(headers: HeadersInput | None) -> Headers:
    """A copy of the caller's headers, refused when they would take the tracing out of this call's hands."""
    sent = Headers(headers) if headers is not None else Headers()
    for name in sent:
        if name.lower() in _OWN_HEADERS:
            raise InvalidArgumentError(f"headers must not set {name!r}: trace_message sets the tracing headers itself")
        if name.lower() == ACCEPT_ENCODING_HEADER.lower():
            for value in sent.get_all(name):
                if "snappy" in value.lower() or "s2" in value.lower():
                    raise InvalidArgumentError(
                        f"{name}: {value!r} would have the servers compress their reports with snappy, which "
                        "jsclient does not read; ask for gzip, or leave the header out"
                    )
    return sent


def require_tracing(version: ServerVersion | None) -> None:
    """FeatureNotSupportedError, before anything is sent, unless the server traces messages (2.11+)."""
    if version is not None and (version.major, version.minor) >= TRACING_RELEASE:  # 2.11's release candidates too
        return
    raise FeatureNotSupportedError(
        description=(
            f"message tracing needs nats-server 2.11 or newer; the connected server is {version or 'unknown'} "
            "(it would deliver the message and send no trace)"
        ),
        outcome=RequestOutcome.NOT_DELIVERED,
    )


def trace_message(
    conn: Tracer, subject: str, payload: bytes, *, headers: HeadersInput | None, deliver: bool, timeout: float
) -> MessageTrace:
    """Check everything, subscribe, publish the traced message, gather its reports: see
    :meth:`jsclient.Connection.trace_message` (``timeout`` is already checked there)."""
    check_publish_subject(subject)
    data = as_bytes(payload)
    if not isinstance(deliver, bool):
        raise InvalidArgumentError(f"deliver must be True or False, not {deliver!r}")
    sent = _checked_headers(headers)
    inbox = conn.new_inbox()
    sent[TRACE_DEST_HEADER] = inbox
    if not deliver:
        sent[TRACE_ONLY_HEADER] = "true"
    size = len(sent.encode()) + len(data)
    if size > conn.max_payload:
        raise MaxPayloadError(
            f"the traced message of {size} bytes (its tracing headers included) exceeds the server's "
            f"max_payload of {conn.max_payload} bytes"
        )
    require_tracing(conn.server_version)
    sub = conn.subscribe(inbox)
    try:
        conn.publish(subject, data, headers=sent)
        reports = _gather(sub, timeout)
    finally:
        if not sub.is_closed:
            sub.unsubscribe()
    if not reports:
        raise TimeoutError(
            f"no trace report on {subject!r} came within {timeout} s (is this connection allowed to publish to "
            f"its inbox {inbox!r}? The servers send their reports there)"
        )
    return MessageTrace(subject, deliver, tuple(reports.values()), missing_hops(reports) or ())


def _gather(sub: Subscription, timeout: float) -> dict[str, ServerTrace]:
    """The reports by hop id, read until the path is complete or ``timeout`` seconds have passed."""
    reports: dict[str, ServerTrace] = {}
    deadline = time.monotonic() + timeout
    while missing_hops(reports) != ():
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            msg = sub.next_msg(timeout=left)
        except TimeoutError:
            break
        encoding = msg.headers.get(CONTENT_ENCODING_HEADER) if msg.header else None
        report = decode_report(msg.data, encoding)
        reports.setdefault(report.hop, report)  # a second report under one hop id (none comes) is not kept
    return reports


# -- the readable form --------------------------------------------------------------------------


def _label(kind: ConnectionKind) -> str:
    return _LABELS.get(kind, kind.name)


def _connection(kind: ConnectionKind, name: str, cid: int) -> str:
    named = f" {name!r}" if name else ""
    return f"{_label(kind)}{named} (cid {cid})"


def _render(trace: MessageTrace) -> list[str]:
    how = "delivered" if trace.deliver else "traced only, not delivered"
    if trace.complete:
        state = f"complete, {len(trace.reports)} server{'s' if len(trace.reports) != 1 else ''}"
    else:
        state = "incomplete: " + (
            f"no report from hop {', '.join(trace.missing)}" if trace.origin is not None
            else "no report from the first server"
        )
    lines = [f"message on {trace.subject!r} ({how}): {state}"]
    by_hop = {r.hop: r for r in trace.reports}
    shown: set[str] = set()
    if trace.origin is not None:
        _render_report(trace, trace.origin, by_hop, shown, "", lines)
    for report in trace.reports:  # reports the path does not lead to (their forwarding server's did not come)
        if report.hop not in shown:
            _render_report(trace, report, by_hop, shown, "", lines)
    return lines


def _render_report(
    trace: MessageTrace, report: ServerTrace, by_hop: Mapping[str, ServerTrace], shown: set[str], indent: str,
    lines: list[str],
) -> None:
    shown.add(report.hop)
    server = report.server
    where = f"{server.name or server.id} ({server.version})" if server.version else server.name or server.id
    hop = f" [hop {report.hop}]" if report.hop else ""
    ingress = report.ingress
    if ingress is None:
        lines.append(f"{indent}{where}{hop}: no ingress")
    else:
        came = _connection(ingress.kind, ingress.name, ingress.cid)
        lines.append(f"{indent}{where}{hop}: from {came}, account {ingress.account}, subject {ingress.subject}")
        if ingress.error:
            lines.append(f"{indent}  error: {ingress.error}")
    inner = indent + "  "
    for event in report.events[1:] if ingress is not None else report.events:
        if isinstance(event, TraceSubjectMapping):
            lines.append(f"{inner}mapped to {event.mapped_to}")
        elif isinstance(event, TraceServiceImport):
            imported = f"{event.from_subject} -> {event.to_subject}"
            lines.append(f"{inner}service import into account {event.account}: {imported}")
        elif isinstance(event, TraceStreamExport):
            lines.append(f"{inner}stream export to account {event.account} as {event.to_subject}")
        elif isinstance(event, TraceJetStream):
            lines.append(f"{inner}{_stored(event, trace.deliver)}")
        elif isinstance(event, TraceEgress):
            _render_egress(trace, event, by_hop, shown, inner, lines)
        elif isinstance(event, TraceOtherEvent):
            lines.append(f"{inner}{event.type} event: {event.fields}")
    if (
        ingress is not None and ingress.kind is ConnectionKind.CLIENT and not ingress.error
        and not report.egresses and report.jetstream is None
    ):
        lines.append(f"{inner}no interest: no subscription or stream takes {ingress.subject}")


def _stored(event: TraceJetStream, deliver: bool) -> str:
    subject = f" as {event.subject}" if event.subject else ""
    if event.error:
        return f"stream {event.stream or '?'}: error: {event.error}"
    if event.no_interest:
        return f"stream {event.stream}: not stored{subject}, no consumer is interested"
    return f"stream {event.stream}: {'stored' if deliver else 'would store'}{subject}"


def _render_egress(
    trace: MessageTrace, event: TraceEgress, by_hop: Mapping[str, ServerTrace], shown: set[str], indent: str,
    lines: list[str],
) -> None:
    line = f"{indent}to {_connection(event.kind, event.name, event.cid)}"
    if event.account:
        line += f", account {event.account}"
    if event.subscription:
        line += f", subscription {event.subscription}"
    if event.queue:
        line += f", queue {event.queue}"
    if event.hop:
        line += f", hop {event.hop}"
    lines.append(line)
    if event.error:
        lines.append(f"{indent}  error: {event.error}")
    if event.hop and event.kind in _REMOTE and not event.error:
        following = by_hop.get(event.hop)
        if following is None:
            lines.append(f"{indent}  (no report came from there)")
        elif event.hop not in shown:
            _render_report(trace, following, by_hop, shown, indent + "  ", lines)
