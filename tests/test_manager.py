"""The message-manager layer without a server: statuses in (real wire frames through the parser), verdicts out.

The matrix below is written out by hand, apart from the code's tables: it is
the documented decision for every status in every workflow
(docs/guides/errors.rst, "Statuses in consumer workflows").
"""

from __future__ import annotations

from typing import Any, cast

import pytest

import jsclient
from jsclient.jetstream import manager
from jsclient.jetstream.manager import TABLES, GapReporting, MessageManager, StrictOrder, Verdict
from jsclient.jetstream.status import Kind
from jsclient.message import Msg
from jsclient.protocol import Parser
from jsclient.scheduler import Scheduler

M, H, E, W, R, X = Verdict.MESSAGE, Verdict.HANDLED, Verdict.END, Verdict.WARNING, Verdict.RESET, Verdict.ERROR
WORKFLOWS = ("push", "ordered", "fetch", "consume", "direct batch", "acks")

MATRIX: list[tuple[bytes | None, tuple[Verdict, ...]]] = [
    #  status line                           push ordered fetch consume direct-batch acks
    (None,                                   (M, M, M, M, M, M)),
    (b"100 Idle Heartbeat",                  (H, H, H, H, X, X)),
    (b"100 FlowControl Request",             (H, H, H, H, X, X)),
    (b"404 No Messages",                     (X, X, E, E, E, X)),
    (b"408 Request Timeout",                 (X, X, E, E, X, X)),
    (b"408 Interest Expired",                (X, X, E, E, X, X)),
    (b"204 EOB",                             (X, X, X, X, E, X)),
    (b"409 Message Size Exceeds MaxBytes",   (X, X, E, E, X, X)),
    (b"409 Batch Completed",                 (X, X, E, E, X, X)),
    (b"423 Nats-Wrong-Pin-Id",               (X, X, E, E, X, X)),
    (b"409 Leadership Change",               (X, X, E, E, X, X)),
    (b"409 Server Shutdown",                 (X, X, E, E, X, X)),
    (b"409 Exceeded MaxWaiting",             (X, X, X, W, X, X)),
    (b"503",                                 (X, X, X, W, X, X)),
    (b"409 Consumer Deleted",                (X, R, X, X, X, X)),
    (b"409 Consumer is push based",          (X, X, X, X, X, X)),
    (b"409 Exceeded MaxRequestBatch of 10",  (X, X, X, X, X, X)),
    (b"400 Bad Request",                     (X, X, X, X, X, X)),
    (b"499 Something New",                   (X, X, X, X, X, X)),
]


class Core:
    """What a manager may use of the connection (CoreAPI): records it."""

    def __init__(self) -> None:
        self.controls: list[str] = []
        self.errors: list[Exception] = []
        self.watchdog = Scheduler("test-watchdog")

    def publish_control(self, subject: str, payload: bytes) -> None:
        self.controls.append(subject)

    def report_error(self, exc: Exception) -> None:
        self.errors.append(exc)


def frames(wire: bytes) -> list[Msg]:
    return cast(list[Msg], Parser(msg_class=Msg).feed(wire))


def status(line: bytes, reply: str = "", extra: bytes = b"") -> Msg:
    header = b"NATS/1.0 " + line + b"\r\n" + extra + b"\r\n"
    reply_part = reply.encode() + b" " if reply else b""
    (msg,) = frames(b"HMSG in.1 1 %s%d %d\r\n%s\r\n" % (reply_part, len(header), len(header), header))
    return msg


def message(cseq: int, sseq: int | None = None) -> Msg:
    sseq = cseq if sseq is None else sseq
    (msg,) = frames(b"MSG in.1 1 $JS.ACK.S.C.1.%d.%d.1700000000000000000.0 1\r\nx\r\n" % (sseq, cseq))
    return msg


def test_every_table_gives_every_kind_a_verdict() -> None:
    assert set(TABLES) == set(WORKFLOWS)
    for table in TABLES.values():
        assert set(table) == set(Kind)


@pytest.mark.parametrize(("line", "verdicts"), MATRIX, ids=[str(line) for line, _ in MATRIX])
def test_each_status_has_one_verdict_per_workflow(line: bytes | None, verdicts: tuple[Verdict, ...]) -> None:
    msg = message(1) if line is None else status(line, "$JS.FC.S.C.x" if b"Flow" in line else "")
    for workflow, expected in zip(WORKFLOWS, verdicts, strict=True):
        mm = MessageManager(cast(Any, Core()))
        assert mm.judge(msg, TABLES[workflow]) is expected, workflow


def test_flow_control_is_answered_once_per_subject_wherever_it_is_seen() -> None:
    core = Core()
    mm = MessageManager(cast(Any, core))
    fc = status(b"100 FlowControl Request", "$JS.FC.S.C.1")
    assert mm.judge(fc, manager.PUSH) is H and mm.judge(fc, manager.PUSH) is H
    stalled = status(b"100 Idle Heartbeat", extra=b"Nats-Consumer-Stalled: $JS.FC.S.C.1\r\n")
    assert mm.arrive(stalled) is True  # the same subject from a stalled heartbeat: not again
    assert mm.judge(status(b"100 FlowControl Request", "$JS.FC.S.C.2"), manager.PUSH) is H
    assert core.controls == ["$JS.FC.S.C.1", "$JS.FC.S.C.2"] and mm.flow_control_answers == 2


def test_the_reader_side_keeps_heartbeats_and_queues_everything_else() -> None:
    mm = MessageManager(cast(Any, Core()))
    assert mm.arrive(status(b"100 Idle Heartbeat")) is True
    for line in (b"100 FlowControl Request", b"408 Request Timeout", b"409 Consumer Deleted"):
        assert mm.arrive(status(line, "$JS.FC.x")) is False  # judged at the head of the queue, in order
    assert mm.arrive(message(9)) is False and mm.consumer_seq == 0  # the base tracks no order


def test_push_reports_each_gap_and_goes_on() -> None:
    core = Core()
    mm = GapReporting(cast(Any, core), lambda: "C")
    assert [mm.arrive(message(n, 100 + n)) for n in (5, 6, 8, 9)] == [False] * 4  # a bound consumer starts at 5
    assert (mm.gaps, mm.consumer_seq, mm.stream_seq) == (1, 9, 109)
    beat = status(b"100 Idle Heartbeat", extra=b"Nats-Last-Consumer: 12\r\nNats-Last-Stream: 112\r\n")
    assert mm.arrive(beat) is True and mm.gaps == 2 and mm.consumer_seq == 12
    gaps = [(e.expected, e.received) for e in core.errors if isinstance(e, jsclient.MessageGapError)]
    assert gaps == [(7, 8), (10, 13)]


def test_ordered_accepts_only_the_next_sequence_and_asks_for_a_reset() -> None:
    core = Core()
    resets: list[int] = []
    mm = StrictOrder(cast(Any, core), on_gap=lambda: resets.append(mm.stream_seq))
    assert [mm.arrive(message(n)) for n in (1, 2, 4)] == [False, False, True]  # 4 is dropped
    assert resets == [2] and mm.consumer_seq == 2
    stalled = status(b"100 Idle Heartbeat", extra=b"Nats-Last-Consumer: 3\r\nNats-Consumer-Stalled: $JS.FC.1\r\n")
    assert mm.arrive(stalled) is True and resets == [2, 2] and core.controls == []  # behind: reset, no answer
    mm.restart()
    assert mm.arrive(message(1, 3)) is False and mm.stream_seq == 3
