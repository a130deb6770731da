"""The core's two other machines as data, tested without a server (h11-style, as test_state.py tests the
connection's): the flusher's (jsclient.core.writer) and the read side's (jsclient.core.readside).

Each expected table is written out here again, on purpose: the test says what the machine must do, and the
module's table must agree with it.  Then the code is driven through the table: the per-message paths check
the state by identity instead of looking the table up, so these tests are what holds them to it.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

import jsclient
from jsclient.core.fastpath import await_reply, park
from jsclient.core.reader import Reader
from jsclient.core.readside import READ_TRANSITIONS, ReadEvent, ReadSide, ReadState, SpinBackoff
from jsclient.core.router import Router
from jsclient.core.state import Event, Link, Waiter, apply
from jsclient.core.writer import (
    DEFERRED_SEND,
    FLUSHER_TRANSITIONS,
    FlusherEvent,
    FlusherState,
    Writer,
    flusher_main,
)
from jsclient.message import Msg
from jsclient.protocol import PONG, Parser

from .test_router import make_router

F, FE = FlusherState, FlusherEvent

#: Where the flusher looks at the buffer again before it sleeps: an append that moves it here from any other
#: state must set its kick, and no other may.
AWAKE = {F.SENDING, F.SENDING_DEFERRED}
#: What the flusher's machine must do.  Every pair is listed: nothing is refused.
FLUSHER_EXPECTED = {
    (F.SENDING, FE.APPEND): F.SENDING,
    (F.SENDING_DEFERRED, FE.APPEND): F.SENDING_DEFERRED,
    (F.IDLE, FE.APPEND): F.SENDING,
    (F.POLLING, FE.APPEND): F.SENDING,
    (F.POLLING_DEFERRED, FE.APPEND): F.SENDING_DEFERRED,
    (F.SENDING, FE.DEFER): F.SENDING_DEFERRED,
    (F.SENDING_DEFERRED, FE.DEFER): F.SENDING_DEFERRED,
    (F.IDLE, FE.DEFER): F.SENDING,  # the first async request after a quiet spell is not left for a poll
    (F.POLLING, FE.DEFER): F.POLLING_DEFERRED,
    (F.POLLING_DEFERRED, FE.DEFER): F.POLLING_DEFERRED,
    (F.SENDING, FE.SEND): F.SENDING,
    (F.SENDING_DEFERRED, FE.SEND): F.SENDING_DEFERRED,
    (F.IDLE, FE.SEND): F.SENDING,
    (F.POLLING, FE.SEND): F.SENDING,
    (F.POLLING_DEFERRED, FE.SEND): F.SENDING_DEFERRED,
    (F.SENDING, FE.SLEEP): F.IDLE,
    (F.SENDING_DEFERRED, FE.SLEEP): F.POLLING,
    (F.IDLE, FE.SLEEP): F.IDLE,
    (F.POLLING, FE.SLEEP): F.IDLE,
    (F.POLLING_DEFERRED, FE.SLEEP): F.POLLING,
}


# -- the flusher's table --------------------------------------------------------------------------------------------


def test_the_flusher_table_is_the_expected_one() -> None:
    assert dict(FLUSHER_TRANSITIONS) == FLUSHER_EXPECTED
    with pytest.raises(TypeError):
        FLUSHER_TRANSITIONS[F.IDLE, FE.SLEEP] = F.SENDING  # type: ignore[index]


def test_the_flusher_refuses_nothing_and_only_its_own_look_puts_it_to_sleep() -> None:
    """An append cannot know where the flusher is, and the flusher looks in any state (a shutdown or a new
    link kicks it without a transition): every pair is a transition.  Nothing but SLEEP takes it from awake
    to asleep, and SLEEP always leaves it asleep, so an append never needs to wake a flusher that is awake."""
    assert set(FLUSHER_TRANSITIONS) == {(state, event) for state in FlusherState for event in FlusherEvent}
    for (state, event), after in FLUSHER_TRANSITIONS.items():
        if state in AWAKE and after not in AWAKE:
            assert event is FE.SLEEP
        if event is FE.SLEEP:
            assert after not in AWAKE
        if event is FE.SEND:
            assert after in AWAKE


def reachable(table: Mapping[tuple[Any, Any], Any], start: Any) -> set[Any]:
    """The states ``table`` leads to from ``start``."""
    seen = {start}
    while more := {target for (source, _), target in table.items() if source in seen} - seen:
        seen |= more
    return seen


def test_every_flusher_state_is_reachable_and_every_event_used() -> None:
    assert reachable(FLUSHER_TRANSITIONS, F.SENDING) == set(FlusherState)
    assert {event for _, event in FLUSHER_TRANSITIONS} == set(FlusherEvent)


# -- the flusher's code against its table ---------------------------------------------------------------------------


class StopKick(threading.Event):
    """The flusher's event: its wait notes where the flusher went to sleep and for how long, and closes the
    writer, so that flusher_main looks once more and ends."""

    def __init__(self) -> None:
        super().__init__()
        self.writer: Writer | None = None
        self.slept: list[tuple[FlusherState, float | None]] = []

    def wait(self, timeout: float | None = None) -> bool:
        writer = self.writer
        assert writer is not None
        self.slept.append((writer.flusher, timeout))
        with writer.write_lock:
            apply(writer, Event.CLOSE)
        return True


class Transport:
    """What the writer sends through: it notes the flusher's state at each send."""

    def __init__(self, kick: StopKick) -> None:
        self.kick = kick
        self.sent: list[tuple[bytes, FlusherState]] = []

    def sendall(self, data: bytes | bytearray) -> None:
        assert self.kick.writer is not None
        self.sent.append((bytes(data), self.kick.writer.flusher))


def connected_writer(flusher: FlusherState) -> tuple[Writer, StopKick, Transport]:
    kick = StopKick()
    link = Link(kick)
    transport = Transport(kick)
    link.transport = cast(Any, transport)
    writer = Writer(jsclient.Options(), link, lost=lambda exc, gen: None, refusal=lambda: jsclient.Error("refused"))
    kick.writer = writer
    with writer.write_lock:
        apply(writer, Event.CONNECT)
    writer.flusher = flusher
    return writer, kick, transport


#: Each way an append reaches the flusher, and the event it is.
APPENDS: dict[str, tuple[FlusherEvent, Callable[[Writer], object]]] = {
    "publish": (FE.APPEND, lambda w: w.queue_message(b"PUB a 1\r\n", b"x", 1)),
    "async request": (FE.DEFER, lambda w: w.queue_message(b"PUB a _INBOX.1 1\r\n", b"x", 1, defer=True)),
    "general path": (FE.APPEND, lambda w: w.append(b"PUB a 1\r\nx\r\n", payload_size=1)),
    "control frame": (FE.APPEND, lambda w: w.append(PONG)),
    "stale-connection ping": (FE.APPEND, lambda w: w.queue_ping(None)),
}


@pytest.mark.parametrize("state", list(FlusherState), ids=lambda s: s.name)
@pytest.mark.parametrize("way", list(APPENDS))
def test_an_append_moves_the_flusher_as_the_table_says_and_kicks_only_a_sleeping_one(
    state: FlusherState, way: str
) -> None:
    event, call = APPENDS[way]
    writer, kick, _ = connected_writer(state)
    call(writer)
    after = FLUSHER_EXPECTED[state, event]
    assert writer.flusher is after
    assert kick.is_set() is (state not in AWAKE and after in AWAKE)


@pytest.mark.parametrize("state", list(FlusherState), ids=lambda s: s.name)
def test_a_send_left_to_the_flusher_is_an_append(state: FlusherState) -> None:
    """send_soon while another thread sends: the flusher sends it next (woken if asleep)."""
    writer, kick, transport = connected_writer(state)
    writer.buf += b"PUB a 1\r\nx\r\n"
    with writer.send_lock:  # another thread's send
        writer.send_soon()
    after = FLUSHER_EXPECTED[state, FE.APPEND]
    assert writer.flusher is after and transport.sent == []
    assert kick.is_set() is (state not in AWAKE and after in AWAKE)


@pytest.mark.parametrize("state", list(FlusherState), ids=lambda s: s.name)
def test_what_its_caller_sends_or_waits_on_leaves_the_flusher_alone(state: FlusherState) -> None:
    writer, kick, transport = connected_writer(state)
    writer.append(b"PUB a 1\r\nx\r\n", payload_size=1, send_now=True)  # sent from here
    assert writer.queue_ping(Waiter())  # flush(): its caller sends it
    assert (writer.flusher, kick.is_set()) == (state, False)
    assert [data for data, _ in transport.sent] == [b"PUB a 1\r\nx\r\n"]


@pytest.mark.parametrize("state", list(FlusherState), ids=lambda s: s.name)
def test_the_flusher_sends_and_sleeps_as_the_table_says(state: FlusherState) -> None:
    """One look that finds bytes (SEND), then one that finds none (SLEEP): it polls only in POLLING, once a
    send reset its interval to DEFERRED_SEND."""
    writer, kick, transport = connected_writer(state)
    writer.buf += b"PUB a 1\r\nx\r\n"
    flusher_main(weakref.ref(writer), kick)
    sending = FLUSHER_EXPECTED[state, FE.SEND]
    asleep = FLUSHER_EXPECTED[sending, FE.SLEEP]
    assert transport.sent == [(b"PUB a 1\r\nx\r\n", sending)]
    assert kick.slept == [(asleep, DEFERRED_SEND if asleep is F.POLLING else None)]


@pytest.mark.parametrize("state", list(FlusherState), ids=lambda s: s.name)
def test_a_flusher_that_finds_nothing_sleeps_as_the_table_says(state: FlusherState) -> None:
    """A look that finds nothing before any send doubles the poll's interval (their senders send them)."""
    writer, kick, transport = connected_writer(state)
    flusher_main(weakref.ref(writer), kick)
    asleep = FLUSHER_EXPECTED[state, FE.SLEEP]
    assert transport.sent == []
    assert kick.slept == [(asleep, 2 * DEFERRED_SEND if asleep is F.POLLING else None)]


def test_the_flusher_starts_awake() -> None:
    """Its first look comes without a kick."""
    writer = Writer(jsclient.Options(), Link(threading.Event()), lambda exc, gen: None, lambda: jsclient.Error())
    assert writer.flusher is F.SENDING


# -- the read side's table ------------------------------------------------------------------------------------------

R, RE = ReadState, ReadEvent

#: What the read side's machine must do; every other pair never happens.
READ_EXPECTED = {
    (R.READING, RE.PARK): R.PARKED,
    (R.READING_LENT, RE.PARK): R.PARKED_LENT,
    (R.READING, RE.TAKE): R.READING_LENT,
    (R.PARKED, RE.TAKE): R.PARKED_LENT,
    (R.RECALLED, RE.TAKE): R.RECALLED_LENT,
    (R.READING_LENT, RE.GIVE_BACK): R.READING,
    (R.PARKED_LENT, RE.GIVE_BACK): R.PARKED,
    (R.RECALLED_LENT, RE.GIVE_BACK): R.RECALLED,
    (R.READING, RE.WAKE): R.READING,
    (R.READING_LENT, RE.WAKE): R.READING_LENT,
    (R.PARKED, RE.WAKE): R.RECALLED,
    (R.PARKED_LENT, RE.WAKE): R.RECALLED_LENT,
    (R.RECALLED, RE.WAKE): R.RECALLED,
    (R.RECALLED_LENT, RE.WAKE): R.RECALLED_LENT,
    (R.PARKED, RE.RETURN): R.READING,
    (R.PARKED_LENT, RE.RETURN): R.READING_LENT,
    (R.RECALLED, RE.RETURN): R.READING,
    (R.RECALLED_LENT, RE.RETURN): R.READING_LENT,
}
READ_REFUSED = [(state, event) for state in ReadState for event in ReadEvent if (state, event) not in READ_EXPECTED]
LENT = {R.READING_LENT, R.PARKED_LENT, R.RECALLED_LENT}


def test_the_read_table_is_the_expected_one() -> None:
    assert dict(READ_TRANSITIONS) == READ_EXPECTED
    with pytest.raises(TypeError):
        READ_TRANSITIONS[R.READING, RE.RETURN] = R.READING  # type: ignore[index]


@pytest.mark.parametrize(("state", "event"), READ_REFUSED, ids=lambda v: v.name)
def test_every_read_step_that_never_happens_is_not_in_the_table(state: ReadState, event: ReadEvent) -> None:
    with pytest.raises(KeyError):
        READ_TRANSITIONS[state, event]


def test_the_refusals_are_the_protocols_rules() -> None:
    parked = {R.PARKED, R.PARKED_LENT, R.RECALLED, R.RECALLED_LENT}
    for state, event in READ_REFUSED:
        if event is RE.PARK:
            assert state in parked
        elif event is RE.RETURN:
            assert state not in parked
        elif event is RE.TAKE:
            assert state in LENT
        else:
            assert event is RE.GIVE_BACK and state not in LENT
    assert not [pair for pair in READ_REFUSED if pair[1] is RE.WAKE]  # anyone may wake it, any time


def test_every_read_state_is_reachable_and_every_event_used() -> None:
    assert reachable(READ_TRANSITIONS, R.READING) == set(ReadState)
    assert {event for _, event in READ_TRANSITIONS} == set(ReadEvent)


@given(st.lists(st.sampled_from(ReadEvent), max_size=40))
def test_any_sequence_of_read_steps_keeps_the_token_with_one_holder(events: list[ReadEvent]) -> None:
    """Whatever happens in whatever order, the steps the table allows keep its invariants: a take only while
    nobody holds the token, a give-back only by a holder, and the reader parked or not as PARK and RETURN say."""
    state, parked, lent = R.READING, False, False
    for event in events:
        after = READ_TRANSITIONS.get((state, event))
        if after is None:
            continue  # never happens (test_every_read_step_that_never_happens_is_not_in_the_table)
        if event is RE.TAKE:
            assert not lent
            lent = True
        elif event is RE.GIVE_BACK:
            assert lent
            lent = False
        elif event is RE.PARK:
            assert not parked
            parked = True
        elif event is RE.RETURN:
            assert parked
            parked = False
        state = after
        assert (state in LENT) is lent
        assert (state not in {R.READING, R.READING_LENT}) is parked


# -- the read side's code against its table -------------------------------------------------------------------------

TOKEN, NUMBER = "7", 7
REPLY = b"MSG _INBOX.mux.7 1 4\r\npong\r\n"


class GatedWake(threading.Event):
    """A read side's ``wake`` whose waiter, once woken, goes on only when the test opens the gate: the state
    the wake put the side in can be looked at before the reader acts on it."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()

    def wait(self, timeout: float | None = None) -> bool:
        woken = super().wait(timeout)
        assert self.gate.wait(10)
        return woken


class Side:
    """A read side on a plain socket that is not one: its recv hands over the next of ``replies`` and notes
    the state the side is in while its holder reads."""

    def __init__(self, *replies: bytes) -> None:
        self.token = threading.Lock()
        self.wake = GatedWake()
        self.parked = False
        self.last_used = 0.0
        self.spin = SpinBackoff()
        self.parser = Parser(msg_class=Msg)
        self.sock = self
        self.poller = self
        self.replies = list(replies)
        self.read_in: list[ReadState] = []

    def poll(self, timeout: float) -> list[tuple[int, int]]:
        return [(0, 1)]

    def recv(self, size: int) -> bytes:
        self.read_in.append(read_state(self))
        return self.replies.pop(0)


def read_state(side: Side | ReadSide) -> ReadState:
    """The state the side's fields say (the token is a caller's: no reader thread runs in these tests)."""
    lent = side.token.locked()
    if not side.parked:
        return R.READING_LENT if lent else R.READING
    if side.wake.is_set():
        return R.RECALLED_LENT if lent else R.RECALLED
    return R.PARKED_LENT if lent else R.PARKED


class Parts:
    """A real Reader and Router around a :class:`Side`."""

    def __init__(self, side: Side) -> None:
        self.side = side
        self.router: Router = make_router()[0]
        self.link = Link(threading.Event())
        self.link.reading = cast(ReadSide, side)
        self.reader = Reader(
            self.link, self.router, lost=lambda exc, gen: None, report_error=lambda exc: None, spin=0.0
        )

    def request(self) -> Waiter:
        """A request() caller waiting for its reply: the fast path's TAKE if the reader is parked."""
        waiter = Waiter()
        self.router.waiters[TOKEN] = waiter
        assert await_reply(self.reader, waiter, 5.0, TOKEN, NUMBER)
        return waiter

    def park(self, linger: float) -> None:
        """The reader steps aside (on this thread) until it returns."""
        park(weakref.ref(self.reader), cast(ReadSide, self.side), linger)

    def parked(self) -> threading.Thread:
        """The reader steps aside on a thread of its own, parked for as long as nothing wakes it."""
        thread = threading.Thread(target=self.park, args=(60.0,), daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not self.side.parked and time.monotonic() < deadline:
            time.sleep(0.001)
        assert self.side.parked and thread.is_alive()
        return thread


def moved(parts: Parts, state: ReadState, event: ReadEvent) -> ReadState:
    """Assert the side is where ``event`` takes ``state``; that state."""
    after = READ_EXPECTED[state, event]
    assert read_state(parts.side) is after, f"{event.name} from {state.name}"
    return after


def test_a_caller_takes_the_token_from_a_parked_reader_and_gives_it_back() -> None:
    """TAKE from PARKED, its own reply read, GIVE_BACK; with nothing else expecting messages, no WAKE."""
    parts = Parts(Side(REPLY))
    parts.side.parked = True
    waiter = parts.request()
    assert waiter.msg is not None and waiter.msg.data == b"pong"
    assert parts.side.read_in == [READ_EXPECTED[R.PARKED, RE.TAKE]]
    moved(parts, R.PARKED_LENT, RE.GIVE_BACK)


def test_a_caller_giving_the_token_back_while_others_expect_messages_wakes_the_reader() -> None:
    """GIVE_BACK then WAKE: another caller's waiter is listed, and the reader must read its reply."""
    parts = Parts(Side(REPLY))
    parts.side.parked = True
    parts.router.waiters["8"] = Waiter()
    parts.request()
    assert parts.side.read_in == [R.PARKED_LENT]
    assert read_state(parts.side) is READ_EXPECTED[READ_EXPECTED[R.PARKED_LENT, RE.GIVE_BACK], RE.WAKE]


def test_a_caller_may_take_the_token_before_a_woken_reader_is_back() -> None:
    """TAKE from RECALLED (it reads meanwhile), GIVE_BACK to RECALLED: the wake stays for the reader."""
    parts = Parts(Side(REPLY))
    parts.side.parked = True
    parts.side.wake.set()
    parts.request()
    assert parts.side.read_in == [READ_EXPECTED[R.RECALLED, RE.TAKE]]
    moved(parts, R.RECALLED_LENT, RE.GIVE_BACK)


def test_a_caller_never_tries_the_token_of_a_reader_that_reads() -> None:
    """READING: the plain path; its reply is routed by the reader (here, filled before it waits)."""
    parts = Parts(Side(REPLY))
    waiter = Waiter()
    waiter.fill(None)
    assert await_reply(parts.reader, waiter, 5.0, TOKEN, NUMBER)
    assert parts.side.read_in == [] and read_state(parts.side) is R.READING


def test_unpark_and_shutdown_wake_a_parked_reader_only() -> None:
    parts = Parts(Side())
    parts.reader.unpark()
    assert read_state(parts.side) is R.READING and not parts.side.wake.is_set()  # it reads anyway
    parts.side.parked = True
    parts.reader.unpark()
    moved(parts, R.PARKED, RE.WAKE)
    again = Parts(Side())
    again.side.parked = True
    again.link.shutdown()
    moved(again, R.PARKED, RE.WAKE)


def test_the_reader_parks_lends_the_token_and_comes_back_when_woken() -> None:
    """PARK, TAKE, WAKE, RETURN (it waits for the token), GIVE_BACK: the fields say each state in turn."""
    parts = Parts(Side())
    wake = parts.side.wake
    thread = parts.parked()
    state = moved(parts, R.READING, RE.PARK)
    parts.side.token.acquire()
    state = moved(parts, state, RE.TAKE)
    wake.gate.clear()
    wake.set()
    state = moved(parts, state, RE.WAKE)
    wake.gate.set()
    thread.join(10)
    assert not thread.is_alive()
    state = moved(parts, state, RE.RETURN)
    parts.side.token.release()
    moved(parts, state, RE.GIVE_BACK)


def test_a_wake_from_while_the_reader_read_does_not_end_its_next_park() -> None:
    """WAKE in READING leaves READING: PARK drops the wake, so the reader parks until woken again."""
    parts = Parts(Side())
    wake = parts.side.wake
    wake.set()  # a caller gave the token back as the reader came back, say
    thread = parts.parked()
    state = moved(parts, R.READING, RE.PARK)
    time.sleep(0.05)
    assert thread.is_alive()
    wake.gate.clear()
    parts.reader.unpark()
    state = moved(parts, state, RE.WAKE)
    wake.gate.set()
    thread.join(10)
    assert not thread.is_alive()
    moved(parts, state, RE.RETURN)
    assert not parts.side.wake.is_set()


def test_the_reader_comes_back_by_itself() -> None:
    """RETURN from PARKED: when no caller took the token between two looks, and at once while others expect
    messages and the token is free."""
    parts = Parts(Side())
    parts.park(0.01)
    moved(parts, R.PARKED, RE.RETURN)
    parts.router.waiters["8"] = Waiter()
    parts.park(60.0)
    moved(parts, R.PARKED, RE.RETURN)
