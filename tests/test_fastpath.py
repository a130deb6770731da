"""The fast path without a socket: what a caller reading its own reply makes of a frame is what the plain
path (Parser.feed, then Router.route) makes of it, and the flags around the read token move as
docs/guides/internals.rst ("The fast path of a request") says.  Server-free; the fast path against a real
server is in test_core.py.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any, cast

import pytest

from jsclient.core import fastpath
from jsclient.core.fastpath import park, route_one, take_own, take_shaped
from jsclient.core.readside import HITS_TO_RETURN, MAX_SPIN_BACKOFF, ReadSide, SpinBackoff
from jsclient.core.router import no_responders
from jsclient.core.state import Waiter
from jsclient.message import Msg
from jsclient.protocol import REPLY_LINE, Parser, ReplyShape, reply_pattern

from .test_router import CONN, MUX_SID, PREFIX, add_sub, future, make_router


def test_a_caller_takes_its_own_reply_unless_closing_took_its_waiter() -> None:
    """take_own: the request() caller that read its reply gets it as a message, counted; its waiter is
    not filled (the caller reads ``msg``), and a waiter no longer listed (closing took it) is left alone."""
    router, _, _ = make_router()
    waiter, other = Waiter(), Waiter()
    router.waiters.update({"12": waiter, "13": other})
    frame = b"HMSG _INBOX.mux.12 1 12 16\r\nNATS/1.0\r\n\r\npong\r\n"
    assert take_own(router, "12", (frame, 28, 40, 44), waiter) is True
    msg = waiter.msg
    assert msg is not None and (msg.subject, msg.sid, msg.reply) == (PREFIX + "12", MUX_SID, None)
    assert (msg.header, msg.data, msg._conn) == (b"NATS/1.0\r\n\r\n", b"pong", CONN)
    assert (router.in_msgs, router.in_bytes) == (1, 4)
    assert not waiter.lock.acquire(blocking=False) and list(router.waiters) == ["13"]
    router.take_all()
    assert take_own(router, "13", (b"MSG _INBOX.mux.13 1 4\r\nlate\r\n", 23, 23, 27), other) is False
    assert other.msg is None and (router.in_msgs, router.in_bytes) == (1, 4)


@pytest.mark.parametrize(
    "wire",
    [
        b"MSG _INBOX.mux.%d 1 4\r\npong\r\n",
        b"MSG _INBOX.mux.%d 1 0\r\n\r\n",
        b"HMSG _INBOX.mux.%d 1 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nok\r\n",
        b"HMSG _INBOX.mux.%d 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n",
    ],
)
def test_a_reply_read_by_its_caller_is_the_message_the_reader_would_route(wire: bytes) -> None:
    """The fast path's one-frame read (Parser.feed_reply, take_own) and the plain path (feed, route)
    give the same message and the same counts, a no-responders status included."""
    own, _, _ = make_router()
    plain, _, feed = make_router()
    mine, theirs = Waiter(), Waiter()
    own.waiters["7"] = mine
    plain.waiters["7"] = theirs
    frame = Parser(msg_class=Msg).feed_reply(wire % 7, REPLY_LINE % (own.mux, 7, own.resp_sid))
    assert frame is not None
    assert take_own(own, "7", frame, mine) is True
    assert feed(wire % 7) is True and theirs.wait(0)
    a, b = cast(Msg, mine.msg), cast(Msg, theirs.msg)
    assert (a.subject, a.sid, a.reply, a.header, a.data, a._conn) == (
        b.subject, b.sid, b.reply, b.header, b.data, b._conn
    )
    assert (own.in_msgs, own.in_bytes) == (plain.in_msgs, plain.in_bytes)
    assert no_responders(a) is no_responders(b)


def test_no_responders_is_a_503_status_without_a_payload() -> None:
    (empty, with_data, other, plain) = Parser(msg_class=Msg).feed(
        b"HMSG r 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"
        b"HMSG r 1 16 17\r\nNATS/1.0 503\r\n\r\nx\r\n"
        b"HMSG r 1 16 16\r\nNATS/1.0 408\r\n\r\n\r\n"
        b"MSG r 1 0\r\n\r\n"
    )
    assert [no_responders(cast(Msg, m)) for m in (empty, with_data, other, plain)] == [True, False, False, False]


def test_a_caller_that_knows_its_replys_shape_gets_what_its_reader_made_of_it() -> None:
    """take_shaped: the shape's reader sees the groups of the one match; its value is the caller's answer,
    None makes the reply a message after all (header block and payload as matched), and a reply whose waiter
    closing took is never read."""
    router, _, _ = make_router()
    seen: list[tuple[bytes, ...]] = []

    def upper(groups: tuple[bytes, ...]) -> bytes | None:
        seen.append(groups)
        return groups[-1].upper() if groups[-1] != b"odd" else None

    shape = ReplyShape(
        reply_pattern(rb"NATS/1\.0\r\n(\w*): ?\r\n\r\n"), upper, decode=lambda msg: msg.data.upper(), headers=True
    )
    first, second, third = Waiter(), Waiter(), Waiter()
    router.waiters.update({"1": first, "2": second, "3": third})
    block = b"NATS/1.0\r\nA: \r\n\r\n"
    assert take_shaped(router, "1", (b"17", b"21", block, b"A", b"pong"), first, shape) is True
    assert first.msg == b"PONG" and seen == [(b"17", b"21", block, b"A", b"pong")]
    assert take_shaped(router, "2", (b"17", b"20", block, b"A", b"odd"), second, shape) is True
    assert type(second.msg) is Msg and (second.msg.header, second.msg.data) == (block, b"odd")
    assert (second.msg.subject, second.msg._conn) == (PREFIX + "2", CONN)
    assert (router.in_msgs, router.in_bytes) == (2, 7)
    router.take_all()
    assert take_shaped(router, "3", (b"17", b"20", block, b"A", b"odd"), third, shape) is False
    assert third.msg is None and len(seen) == 2


def test_route_one_takes_a_lone_reply_as_route_does() -> None:
    """The reader's path for a read that was one frame (Parser.feed_one, then route_one).

    A request() caller's reply is handed over in a few steps; an async reply, a subscription's message
    and a reply nobody waits for any more go through route(), so each ends where route() puts it.
    """
    router, _, _ = make_router()
    parser = Parser(msg_class=Msg)

    def one(wire: bytes) -> bool:
        msg = parser.feed_one(wire)
        assert msg is not None
        return route_one(router, msg)

    waiter = Waiter()
    router.waiters["5"] = waiter
    assert one(b"HMSG _INBOX.mux.5 1 12 14\r\nNATS/1.0\r\n\r\nok\r\n") is True
    assert waiter.lock.acquire(blocking=False) and waiter.msg is not None
    assert (waiter.msg.data, waiter.msg.header, waiter.msg._conn) == (b"ok", b"NATS/1.0\r\n\r\n", CONN)
    assert "5" not in router.waiters

    fut = future()
    router.waiters["6"] = fut
    assert one(b"MSG _INBOX.mux.6 1 2\r\nhi\r\n") is False
    assert fut.result(timeout=1).data == b"hi" and "6" not in router.waiters

    sub = add_sub(router, 9, "feed")
    assert one(b"MSG feed 9 1\r\nx\r\n") is False
    assert [m.data for m in sub._queue] == [b"x"]

    assert one(b"MSG _INBOX.mux.7 1 4\r\nlate\r\n") is False  # its caller timed out and left
    assert (router.in_msgs, router.in_bytes) == (4, 9)


def test_spin_backoff_doubles_the_waits_it_sits_out_and_hits_in_a_row_start_over() -> None:
    spin = SpinBackoff()
    assert spin.until(10.0, 0.0) == 0.0  # spin_wait=0: never
    assert spin.until(10.0, 0.5) == 10.5
    for misses in range(1, MAX_SPIN_BACKOFF + 3):
        spin.missed()
        sat_out = 0
        while spin.until(0.0, 0.5) == 0.0:
            sat_out += 1
        assert sat_out == 1 << min(misses, MAX_SPIN_BACKOFF)
    # A hit lets the next wait poll; fewer than HITS_TO_RETURN in a row leave the misses counted.
    for _ in range(HITS_TO_RETURN - 1):
        spin.hit()
        assert spin.until(0.0, 0.5) == 0.5
    spin.missed()
    assert spin.misses == MAX_SPIN_BACKOFF and spin.until(0.0, 0.5) == 0.0
    # HITS_TO_RETURN in a row start over: the next miss sits out two waits.
    spin.skip = 0
    for _ in range(HITS_TO_RETURN):
        spin.hit()
    assert spin.misses == 0
    spin.missed()
    assert [spin.until(0.0, 0.5) for _ in range(3)] == [0.0, 0.0, 0.5]


def test_spin_backoff_backs_off_from_replies_in_bursts_a_round_trip_apart() -> None:
    """Async replies from a distant server: each burst gives a hit or two, then the poll after it misses.

    Each miss counts, so the waits sat out keep doubling: polling costs a poll per 2**MAX_SPIN_BACKOFF
    waits, not a miss per burst.
    """
    spin = SpinBackoff()
    bursts, polls = 5000, 0
    for _ in range(bursts):  # a burst: three waits, the poll of the last one outlasted by the round trip
        for caught in (True, True, False):
            if spin.until(0.0, 0.5):
                polls += 1
                if not caught:
                    spin.missed()
                elif spin.misses:  # as the callers do: a hit is counted only while there are misses
                    spin.hit()
    assert spin.misses == MAX_SPIN_BACKOFF
    # A burst's three polls at most, after the first misses and then once per 2**MAX_SPIN_BACKOFF waits.
    assert polls <= 3 * (MAX_SPIN_BACKOFF + 3 * bursts // (1 << MAX_SPIN_BACKOFF))


def test_a_poll_kept_off_the_core_past_its_time_is_a_miss(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread that yields and gets the core back only after its time is up has not caught the reply that
    came meanwhile: counted as a catch, it would bring polling back for a server that is far away."""
    arrived: list[tuple[int, int]] = []

    def held_off() -> None:
        time.sleep(0.002)  # other threads had the core: the reply arrived, and the time ran out
        arrived.append((0, 1))

    monkeypatch.setattr(fastpath.os, "sched_yield", held_off)
    assert fastpath.spin_poll(lambda _timeout: arrived, time.monotonic() + 0.001, 1) is False
    assert fastpath.spin_poll(lambda _timeout: arrived, time.monotonic() + 0.001, 1) is True  # there already


class _Side:
    """The fields of a ReadSide that park uses."""

    def __init__(self) -> None:
        self.token = threading.Lock()
        self.wake = threading.Event()
        self.parked = False
        self.last_used = 0.0


class _Reader:
    """The fields of a Reader that park uses: its link's read side, and whether others expect messages."""

    def __init__(self, side: _Side, others: bool) -> None:
        self.link = self
        self.reading = side
        self.router = self
        self.others = others

    def others_expect(self) -> bool:
        return self.others


def _park(reader: _Reader, side: _Side, linger: float) -> None:
    park(cast(Any, weakref.ref(reader)), cast(ReadSide, side), linger)


def test_park_comes_back_at_once_when_others_expect_messages_and_clears_its_flags() -> None:
    side = _Side()
    reader = _Reader(side, others=True)
    side.wake.set()  # set while not parked (a shutdown): park clears it on its way out
    _park(reader, side, 60.0)
    assert not side.parked and not side.wake.is_set()


def test_a_parked_reader_stays_while_a_caller_holds_the_token_and_comes_back_when_woken() -> None:
    """Only park sets and clears ``parked``; whoever needs the reader sets ``wake``, and park clears it."""
    side = _Side()
    reader = _Reader(side, others=True)  # others expect messages, but the token's holder reads for them
    side.token.acquire()
    thread = threading.Thread(target=_park, args=(reader, side, 60.0))
    thread.start()
    deadline = time.monotonic() + 10
    while not side.parked and time.monotonic() < deadline:
        time.sleep(0.001)
    assert side.parked and thread.is_alive()
    side.wake.set()  # Reader.unpark, or a caller giving the token back
    thread.join(10)
    side.token.release()
    assert not thread.is_alive() and not side.parked and not side.wake.is_set()

