"""Bulk reads of a stream over a link of their own, read by the thread that asked.

A :class:`BulkReader` belongs to one thread at a time (Spark runs one task
per Python worker process; the per-process pool in
:mod:`jsclient.spark.connections` hands it out) and takes no lock: it has
no reader thread, so a reader of millions of messages pays for no event,
message object or hand-over between threads per reply.  How it asks
(direct gets, pulls, runs cut in bulk), and what it does with statuses and
faults: docs/guides/internals.rst, "Bulk reads".
"""

from __future__ import annotations

import builtins
import secrets
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, Protocol

from ..errors import (
    ConnectionLostError,
    JetStreamAPIError,
    NoServersError,
    ProtocolError,
    TimeoutError,
    server_error,
)
from ..handshake import open_link
from ..headers import header_value
from ..options import Options, mask_url
from ..protocol import PING, PONG, Err, Event, Parser, Ping, Pong, check_subscribe_subject, encode_pub, encode_sub
from ..transport import Transport
from . import api, features
from .direct import eob_counts, stored_size
from .manager import DIRECT_BATCH, FETCH, Verdict
from .metadata import parse_metadata
from .status import MAX_MULTI_SUBJECTS, Kind, Request, Status, classify_header, reply_error

#: Bytes per recv: a few hundred replies at a time.
RECV_SIZE = 1 << 20
#: A pull that ended without a status (its messages filled max_bytes exactly): an end like any other.
BATCH_FILLED = Status(Kind.BATCH_COMPLETED, 409, "Batch Completed")
#: Bytes of subjects one multi-subject get asks for at most: well inside a server's max_payload (1 MiB by default).
GROUP_BYTES = 256 << 10
#: Pulls in a row that may end before their first message (leader changes) before the read gives up.
EMPTY_PULLS = 3
#: The pause before a pull nobody took (503) is asked again: the consumer's interest is still reaching this server.
UNKNOWN_PAUSE = 0.05
#: pull_runs: bytes gathered before they are cut (unless the pull may have ended), and the seconds gathered bytes
#: wait for more before they are cut all the same.
CUT_BYTES = 1 << 20
CUT_WAIT = 0.005


class Cut(NamedTuple):
    """Messages the reader's parser cut: ``<subject> <sid> <reply>`` lines, header blocks and payloads."""

    args: list[bytes]
    headers: list[bytes]
    payloads: list[bytes]

    @property
    def counted(self) -> int:
        """Bytes toward a pull's max_bytes, as the server counts them (see :class:`_Filled`)."""
        return (sum(map(len, self.args)) + sum(map(len, self.headers)) + sum(map(len, self.payloads))
                - 3 * len(self.args))


class Run(Protocol):
    """Messages a caller's cutter took whole from a pull's bytes (:meth:`BulkReader.pull_runs`)."""

    @property
    def count(self) -> int: ...
    @property
    def counted(self) -> int: ...  # bytes toward the pull's max_bytes, as the server counts them
    @property
    def last_reply(self) -> bytes: ...


#: Cuts the run of messages at the start of some bytes (from a frame's start, only read and not kept): the bytes it
#: takes and the run (None: none taken).
Cutter = Callable[[bytearray], tuple[int, Run | None]]


def _groups(subjects: list[str]) -> list[list[str]]:
    """``subjects`` in requests of at most MAX_MULTI_SUBJECTS subjects and GROUP_BYTES of them."""
    groups: list[list[str]] = [[]]
    size = 0
    for subject in subjects:
        if groups[-1] and (len(groups[-1]) >= MAX_MULTI_SUBJECTS or size + len(subject) + 3 > GROUP_BYTES):
            groups.append([])
            size = 0
        groups[-1].append(subject)
        size += len(subject) + 3  # quoted, and a comma
    return groups


class _Filled:
    """Whether a pull's messages so far fill its ``max_bytes``, counted as the server counts them.

    The server counts a message's subject, ack reply, headers and payload:
    its ``args`` line less the sid (always 1 here) and the two spaces.
    """

    __slots__ = ("args", "counted", "headers", "max_bytes", "payloads", "used")

    def __init__(self, args: list[bytes], headers: list[bytes], payloads: list[bytes], max_bytes: int) -> None:
        self.args = args
        self.headers = headers
        self.payloads = payloads
        self.max_bytes = max_bytes
        self.counted = 0
        self.used = 0

    def __call__(self) -> bool:
        n = len(self.args)
        if n > self.counted:
            new = slice(self.counted, n)
            self.used += (
                sum(map(len, self.args[new])) + sum(map(len, self.headers[new])) + sum(map(len, self.payloads[new]))
                - 3 * (n - self.counted)
            )
            self.counted = n
        return self.used >= self.max_bytes


def _grown(replies: list[bytes]) -> Callable[[], bool]:
    """Whether ``replies`` holds more than it does now: one reply has come."""
    before = len(replies)
    return lambda: len(replies) > before


class BulkReader:
    """Reads ranges of a stream as (header blocks, payloads) lists; one thread at a time."""

    def __init__(self, options: Options, *, prefix: str = "$JS.API", tls_context: ssl.SSLContext | None = None) -> None:
        self.options = options
        self.prefix = prefix
        self._tls_context = tls_context
        self._transport: Transport | None = None
        self._parser: Parser | None = None  # the link's, from its handshake on: it keeps what is not parsed yet
        self._info: dict[str, Any] = {}  # the INFO of the server at the other end of the link
        self._inbox = ""
        self._chunk = bytearray(RECV_SIZE)  # what each recv fills
        self._received = memoryview(self._chunk)  # whose first bytes go to the parser, uncopied

    def _link(self) -> Transport:
        if self._transport is not None:
            return self._transport
        errors = []
        for url in self.options.servers:
            try:
                transport, parser, events = open_link(url, self.options, self._tls_context, on_info=self._info_seen)
            except (OSError, JetStreamAPIError, ProtocolError, TimeoutError) as exc:
                errors.append(f"{mask_url(url)}: {exc}")
                continue
            self._inbox = f"_INBOX.{secrets.token_hex(11)}"  # its own: every subscriber of a subject gets the replies
            self._transport = transport
            self._parser = parser
            try:
                self._act(transport, events, until_pong=False)  # a PING that came with the handshake's PONG
                transport.sendall(encode_sub(self._inbox, 1))
            except BaseException:
                self.close()
                raise
            return transport
        raise NoServersError(f"bulk reader could not connect: {'; '.join(errors)}")

    def _info_seen(self, info: dict[str, Any]) -> None:
        self._info = info

    def close(self) -> None:
        transport, self._transport = self._transport, None
        self._parser = None
        if transport is not None:
            transport.close()

    def read(
        self, stream: str, subject: str, first: int, last: int, *, batch: int, max_bytes: int, timeout: float
    ) -> Iterator[tuple[list[bytes], list[bytes]]]:
        """Header blocks and payloads of the messages matching ``subject`` from ``first``, a server batch at a time.

        A batch may run past ``last`` (a filtered batch does not know where to
        stop); reading ends once one reaches it, or the stream has nothing more.
        """
        api.check_name("stream", stream)
        check_subscribe_subject(subject, "subject")
        if first > last:
            return
        transport = self._live_link(timeout)
        if not features.supports(self._info, features.BATCHED_DIRECT_GET):
            yield from self._read_one_by_one(
                transport, stream, subject, first, last, batch=batch, max_bytes=max_bytes, timeout=timeout
            )
            return
        ok = False
        try:
            request = self._batch_asked(transport, stream, subject, first, batch, max_bytes)
            while True:
                headers, payloads, status, judged = self._take_direct_batch(transport, stream, timeout)
                if judged.kind is Kind.NO_MESSAGES:
                    ok = True
                    if headers:
                        yield headers, payloads
                    return
                pending, newest = eob_counts(status)
                more = pending > 0 and newest < last
                if more:
                    self._ask(transport, request, subject, newest + 1, batch, max_bytes)
                else:
                    ok = True
                yield headers, payloads
                if not more:
                    return
        finally:
            if not ok:
                self.close()  # a request may still be answering: that link is spent

    def pull(
        self, stream: str, consumer: str, last: int, *, batch: int, max_bytes: int, timeout: float
    ) -> Iterator[tuple[list[bytes], list[bytes], list[bytes]]]:
        """A pull consumer's messages (``<subject> <sid> <ack reply>`` lines, header blocks, payloads), a pull at a
        time, until one reaches stream sequence ``last`` or the consumer has nothing more.

        The consumer acks nothing (ack policy none).  A pull ends with a
        status, except one whose messages fill ``max_bytes`` exactly: the
        server ends that one silently, so the bytes are counted as it does.
        A pull may run past ``last``.
        """
        for parts in self._pulls(stream, consumer, last, batch=batch, max_bytes=max_bytes, timeout=timeout):
            for part in parts:
                assert isinstance(part, Cut)  # no cutter: the parser cut every message
                yield part

    def pull_runs(
        self, stream: str, consumer: str, last: int, *, batch: int, max_bytes: int, timeout: float, cut: Cutter
    ) -> Iterator[list[Cut | Run]]:
        """:meth:`pull`, each pull's messages as ``cut`` and the parser cut them, in order: the runs of messages
        ``cut`` takes from the start of each piece of bytes received, and :class:`Cut` for those it leaves."""
        yield from self._pulls(stream, consumer, last, batch=batch, max_bytes=max_bytes, timeout=timeout, cut=cut)

    def _pulls(
        self, stream: str, consumer: str, last: int, *, batch: int, max_bytes: int, timeout: float,
        cut: Cutter | None = None,
    ) -> Iterator[list[Cut | Run]]:
        api.check_name("stream", stream)
        api.check_name("consumer", consumer)
        ok = False
        empty = 0  # pulls in a row that ended before their first message
        deadline = time.monotonic() + timeout
        try:
            transport = self._live_link(timeout)
            body = api.encode({"batch": batch, "max_bytes": max_bytes, "no_wait": True})
            frame = encode_pub(f"{self.prefix}.CONSUMER.MSG.NEXT.{stream}.{consumer}", body, self._inbox)
            transport.sendall(frame)
            while True:
                parts: list[Cut | Run] = []
                if cut is None:
                    args: list[bytes] = []
                    headers: list[bytes] = []
                    payloads: list[bytes] = []
                    filled = _Filled(args, headers, payloads, max_bytes)
                    status = self._take(transport, headers, payloads, timeout, until_pong=False, args=args,
                                        ends=filled)
                    if args:
                        parts.append(Cut(args, headers, payloads))
                else:
                    status = self._take_runs(transport, parts, timeout, max_bytes, cut)
                judged = BATCH_FILLED if status is None else classify_header(status)
                if FETCH[judged.kind] is not Verdict.END:
                    if judged.kind is Kind.BUSY and not parts and time.monotonic() + UNKNOWN_PAUSE < deadline:
                        # Nobody took the pull (503): a consumer just made through another server of a cluster
                        # is not yet known to this one.  Asked again until the timeout, then the 503 is the error.
                        time.sleep(UNKNOWN_PAUSE)
                        transport.sendall(frame)
                        continue
                    raise reply_error(judged, Request.CONSUME, consumer)
                if judged.kind is Kind.NO_MESSAGES:
                    more = False
                elif parts:
                    tail = parts[-1]
                    reply = tail.args[-1].rpartition(b" ")[2] if isinstance(tail, Cut) else tail.last_reply
                    meta = parse_metadata(reply.decode())
                    more = meta.num_pending > 0 and meta.sequence.stream < last
                    empty = 0
                elif judged.kind is Kind.MAX_BYTES:  # one message larger than max_bytes: no pull would ever take it
                    raise reply_error(judged, Request.CONSUME, consumer)
                elif empty < EMPTY_PULLS:
                    more = True  # a pull that ended before its first message (a leader change): pull again
                    empty += 1
                else:  # ended empty time after time: the task fails and is retried
                    raise reply_error(judged, Request.CONSUME, consumer)
                if more:
                    transport.sendall(frame)
                else:
                    ok = True
                if parts:
                    yield parts
                if not more:
                    return
        finally:
            if not ok:
                self.close()  # a pull may still be answering: that link is spent

    def last_values(
        self, stream: str, subjects: list[str], *, up_to: int | None, max_bytes: int, timeout: float
    ) -> Iterator[tuple[list[bytes], list[bytes]]]:
        """Header blocks and payloads of the last message of each subject (at or before ``up_to``), a request of
        up to :data:`~.status.MAX_MULTI_SUBJECTS` subjects at a time (multi-subject direct gets, server 2.11+).

        A request the server cuts short at ``max_bytes`` is continued from
        the sequence it reached, at the point in time (``up_to_seq``) its end
        names; a subject with no message (up to ``up_to``) is left out.  The
        next group of subjects is asked for as soon as a request's end arrives.
        A 2.11 server's end counts one message fewer than remain (it says 0
        with one to go), so from it every answered request is continued once
        more: the answer is the rest, or "no results".  Groups hold at most
        :data:`~.status.MAX_MULTI_SUBJECTS` subjects and :data:`GROUP_BYTES`
        of them, well inside the server's ``max_payload``.
        """
        api.check_name("stream", stream)
        for subject in subjects:
            check_subscribe_subject(subject, "subject")
        if not subjects:
            return
        transport = self._live_link(timeout)
        features.require(self._info, [features.MULTI_LAST_DIRECT_GET])  # before sending: a 2.10 server answers 408
        counts_one_short = features.server_level(self._info) == 1  # 2.11
        request = f"{self.prefix}.DIRECT.GET.{stream}"
        groups = _groups(subjects)

        def ask(group: list[str], seq: int, point: int | None) -> None:
            body: dict[str, Any] = {"multi_last": group, "max_bytes": max_bytes}
            if seq > 1:
                body["seq"] = seq
            if point:
                body["up_to_seq"] = point
            transport.sendall(encode_pub(request, api.encode(body), self._inbox))

        ok = False
        try:
            index = 0
            ask(groups[0], 1, up_to)
            while True:
                headers, payloads, status, judged = self._take_direct_batch(transport, stream, timeout)
                more = False
                if judged.kind is not Kind.NO_MESSAGES:
                    pending, newest = eob_counts(status)
                    if pending > 0 or (counts_one_short and headers):
                        point = header_value(status, b"Nats-UpTo-Sequence")
                        if point is None or not point.isdigit():  # without it the rest would be another moment
                            raise ProtocolError(f"a multi-subject get's end without Nats-UpTo-Sequence: {status!r}")
                        ask(groups[index], newest + 1, int(point))
                        more = True
                if not more and index + 1 < len(groups):
                    index += 1
                    ask(groups[index], 1, up_to)
                    more = True
                ok = not more
                if headers:
                    yield headers, payloads
                if not more:
                    return
        finally:
            if not ok:
                self.close()  # a request may still be answering: that link is spent

    def _live_link(self, timeout: float) -> Transport:
        """The link to send a first request on.  A pooled one is first proved alive by a PING (a link the server
        dropped, say on a restart, often takes a send and fails only on the next read); a dead one is opened again."""
        if self._transport is not None:
            try:
                self._transport.sendall(PING)
                self._take_pong(self._transport, timeout)
            except (OSError, ConnectionLostError, TimeoutError):
                self.close()
        return self._link()

    def _batch_asked(
        self, transport: Transport, stream: str, subject: str, first: int, batch: int, max_bytes: int
    ) -> str:
        """Send the first request (on a live link); the request subject for the next ones."""
        request = f"{self.prefix}.DIRECT.GET.{stream}"
        self._ask(transport, request, subject, first, batch, max_bytes)
        return request

    def _read_one_by_one(
        self, transport: Transport, stream: str, subject: str, first: int, last: int, *, batch: int, max_bytes: int,
        timeout: float,
    ) -> Iterator[tuple[list[bytes], list[bytes]]]:
        """:meth:`read` from a server before 2.11: one direct get per message (``seq`` and ``next_by_subj``),
        gathered into lists of up to ``batch`` messages or ``max_bytes``, until ``last`` or a 404."""
        request = f"{self.prefix}.DIRECT.GET.{stream}"
        seq = first
        ok = False
        try:
            while True:
                headers: list[bytes] = []
                payloads: list[bytes] = []
                counted = 0
                more = True
                while more and len(headers) < batch and counted < max_bytes:
                    body = api.encode({"seq": seq, "next_by_subj": subject})
                    transport.sendall(encode_pub(request, body, self._inbox))
                    status = self._take(
                        transport, headers, payloads, timeout, until_pong=False, ends=_grown(headers)
                    )
                    if status is not None:
                        judged = classify_header(status)
                        if judged.kind is not Kind.NO_MESSAGES:
                            raise reply_error(judged, Request.DIRECT_GET, stream)
                        more = False
                        break
                    header = headers[-1]
                    found = header_value(header, b"Nats-Sequence")
                    named = header_value(header, b"Nats-Subject")
                    if found is None or named is None or not found.isdigit():
                        raise ProtocolError(f"a direct get reply without its sequence or subject: {header[:200]!r}")
                    got = int(found)
                    counted += stored_size(header, named.decode("utf-8", "replace"), payloads[-1])
                    more = got < last
                    seq = got + 1
                if headers:
                    yield headers, payloads
                if not more:
                    ok = True
                    return
        finally:
            if not ok:
                self.close()  # a request may still be answering: that link is spent

    def _take_pong(self, transport: Transport, timeout: float) -> None:
        """Read until the PONG that answers our PING (nothing else is in flight on an idle link)."""
        self._take(transport, [], [], timeout, until_pong=True)

    def _ask(self, transport: Transport, request: str, subject: str, seq: int, batch: int, max_bytes: int) -> None:
        body = api.encode({"batch": batch, "seq": seq, "next_by_subj": subject, "max_bytes": max_bytes})
        transport.sendall(encode_pub(request, body, self._inbox))

    def _take_direct_batch(
        self, transport: Transport, stream: str, timeout: float
    ) -> tuple[list[bytes], list[bytes], bytes, Status]:
        """A direct get's replies up to its end (header blocks, payloads, the end's header block, its status);
        an error status raised as the error it maps to."""
        headers: list[bytes] = []
        payloads: list[bytes] = []
        status = self._take_batch(transport, headers, payloads, timeout)
        judged = classify_header(status)
        if DIRECT_BATCH[judged.kind] is not Verdict.END:
            raise reply_error(judged, Request.DIRECT_GET, stream)
        return headers, payloads, status, judged

    def _take_batch(self, transport: Transport, headers: list[bytes], payloads: list[bytes], timeout: float) -> bytes:
        """Read until the status reply that ends a batch; its header block."""
        status = self._take(transport, headers, payloads, timeout, until_pong=False)
        assert status is not None
        return status

    def _take(
        self,
        transport: Transport,
        headers: list[bytes],
        payloads: list[bytes],
        timeout: float,
        *,
        until_pong: bool,
        args: list[bytes] | None = None,
        ends: Callable[[], bool] | None = None,
    ) -> bytes | None:
        """Read and split replies until a status reply (returned), or None: ``until_pong``, a PONG; ``ends``, once
        it says the messages so far are all there will be.  ``args``: take a consumer's deliveries (see
        :meth:`jsclient.protocol.Parser.feed_replies`)."""
        parser = self._parser
        assert parser is not None  # a live link has its parser
        chunk = self._chunk
        data: memoryview | bytes = b""  # first what the parser kept (a batch's end may have come with the last)
        transport.settimeout(timeout)
        try:
            while True:
                status, events = parser.feed_replies(data, headers, payloads, args)
                if events and self._act(transport, events, until_pong=until_pong):
                    return None
                if status is not None:
                    return status
                if ends is not None and ends():
                    return None
                try:
                    n = transport.recv_into(chunk)
                except builtins.TimeoutError:
                    raise TimeoutError(f"bulk read: no reply within {timeout} s") from None
                if not n:
                    raise ConnectionLostError("the server closed the bulk reader's link")
                data = self._received[:n]
        finally:
            transport.settimeout(None)

    def _take_runs(
        self, transport: Transport, parts: list[Cut | Run], timeout: float, max_bytes: int, cut: Cutter
    ) -> bytes | None:
        """:meth:`_take` for :meth:`pull_runs`: one pull's messages into ``parts``, until its status (returned) or
        until they fill ``max_bytes`` (None).

        What comes is gathered, then cut once there is CUT_BYTES of it, or
        it ends as a status frame does (CRLF three times: the end of a header
        block and an empty payload), or the pull has brought ``max_bytes``
        (past which it may end without a status: its messages count no more
        than their bytes on the wire), or nothing more came for CUT_WAIT, so
        that no end waits for bytes that will not come; never before a frame
        begun, whose size the parser found, is whole (a large message is cut
        once, not at every piece of it).
        """
        parser = self._parser
        assert parser is not None  # a live link has its parser
        chunk = self._chunk
        kept, need = parser.take_buffered()  # what came after the last status
        gathered = bytearray(kept)
        fresh = bool(gathered)  # gathered holds bytes no cut has looked at
        received = used = 0
        try:
            while True:
                ready = fresh and len(gathered) >= need  # a cut could take something
                transport.settimeout(CUT_WAIT if ready else timeout)
                try:
                    n = transport.recv_into(chunk)
                except builtins.TimeoutError:
                    if not ready:
                        raise TimeoutError(f"bulk read: no reply within {timeout} s") from None
                    n = -1  # nothing more for now: cut what has come
                if not n:
                    raise ConnectionLostError("the server closed the bulk reader's link")
                if n > 0:
                    gathered += self._received[:n]
                    received += n
                    fresh = True
                    if len(gathered) < need or (len(gathered) < CUT_BYTES and received < max_bytes
                                                and not gathered.endswith(b"\r\n" * 3)):
                        continue
                raw, gathered, fresh = gathered, bytearray(), False  # raw is only read from here on
                taken, run = cut(raw)
                if run is not None:
                    parts.append(run)
                    used += run.counted
                rest = Cut([], [], [])
                status, events = parser.feed_replies(memoryview(raw)[taken:], rest.headers, rest.payloads, rest.args)
                if rest.args:
                    parts.append(rest)
                    used += rest.counted
                if events:
                    self._act(transport, events, until_pong=False)
                if status is not None:
                    return status
                if used >= max_bytes:
                    return None
                kept, need = parser.take_buffered()  # a frame begun: cut with what completes it
                gathered += kept
        finally:
            transport.settimeout(None)

    @staticmethod
    def _act(transport: Transport, events: list[Event], *, until_pong: bool) -> bool:
        """Answer the server's PINGs and raise its -ERR; True when a PONG came and ``until_pong`` waits for one."""
        ponged = False
        for event in events:
            if isinstance(event, Ping):
                transport.sendall(PONG)
            elif isinstance(event, Err):
                raise server_error(event.text)
            elif isinstance(event, Pong):
                ponged = until_pong
        return ponged
