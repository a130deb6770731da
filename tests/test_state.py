"""The connection's state machine as data (jsclient.core.state), tested without sockets (h11-style).

The expected table is written out here again, on purpose: the test says
what the machine must do, and the module's TRANSITIONS must agree with it.
Then every legal transition, every illegal one, a property over any
sequence of events, and a check that nothing in the core sets the state
but the table's own function.  The last tests run a real server and break a
send: whatever the writer decided, closing runs with its send lock released.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import jsclient
from jsclient.core.state import (
    ACCEPTING,
    TRANSITIONS,
    Event,
    State,
    TransitionError,
    allowed,
    apply,
    next_state,
    start,
)
from jsclient.server import NatsServer

S, E = State, Event

#: What the machine must do: (state, event) -> next state; every other pair is refused.
EXPECTED = {
    (S.CONNECTING, E.CONNECT): S.CONNECTED,
    (S.CONNECTING, E.CONNECT_FAILED): S.RECONNECTING,
    (S.CONNECTING, E.FORKED): S.CLOSED,
    (S.CONNECTING, E.CLOSE): S.CLOSED,
    (S.CONNECTED, E.LOST): S.RECONNECTING,
    (S.CONNECTED, E.DRAIN): S.DRAINING_SUBS,
    (S.CONNECTED, E.CLOSE): S.CLOSED,
    (S.RECONNECTING, E.RECONNECT): S.CONNECTED,
    (S.RECONNECTING, E.CLOSE): S.CLOSED,
    (S.DRAINING_SUBS, E.SUBS_DRAINED): S.DRAINING_PUBS,
    (S.DRAINING_SUBS, E.CLOSE): S.CLOSED,
    (S.DRAINING_PUBS, E.CLOSE): S.CLOSED,
}
ILLEGAL = [(state, event) for state in State for event in Event if (state, event) not in EXPECTED]
MAX_PENDING = 1234


class Holder:
    """What the writer holds of the state, without a writer."""

    state: State
    accepting: bool
    threshold: int

    def __init__(self) -> None:
        self.max_pending = MAX_PENDING
        start(self)

    def snapshot(self) -> tuple[State, bool, int]:
        return self.state, self.accepting, self.threshold


def holder_in(state: State) -> Holder:
    """A holder brought to ``state`` through legal events only."""
    path = {
        S.CONNECTING: [],
        S.CONNECTED: [E.CONNECT],
        S.RECONNECTING: [E.CONNECT, E.LOST],
        S.DRAINING_SUBS: [E.CONNECT, E.DRAIN],
        S.DRAINING_PUBS: [E.CONNECT, E.DRAIN, E.SUBS_DRAINED],
        S.CLOSED: [E.CLOSE],
    }[state]
    holder = Holder()
    for event in path:
        apply(holder, event)
    assert holder.state is state
    return holder


def derived(state: State) -> tuple[State, bool, int]:
    """What the writer's fields must be in ``state``: messages taken, and the fast path's limit."""
    accepting = state in (S.CONNECTED, S.RECONNECTING, S.DRAINING_SUBS)
    threshold = 0 if state is S.RECONNECTING else MAX_PENDING  # reconnecting: every message is size-checked
    return state, accepting, threshold


# -- the table ------------------------------------------------------------------------------------------------------


def test_the_table_is_the_expected_one() -> None:
    assert dict(TRANSITIONS) == EXPECTED
    assert [state for state in State if state in ACCEPTING] == [S.CONNECTED, S.RECONNECTING, S.DRAINING_SUBS]


def test_the_table_cannot_be_changed_at_run_time() -> None:
    with pytest.raises(TypeError):
        TRANSITIONS[S.CLOSED, E.RECONNECT] = S.CONNECTED  # type: ignore[index]


def test_a_new_holder_is_connecting() -> None:
    assert Holder().snapshot() == derived(S.CONNECTING)


@pytest.mark.parametrize(("state", "event"), list(EXPECTED), ids=lambda v: v.name)
def test_every_legal_transition(state: State, event: Event) -> None:
    holder = holder_in(state)
    assert allowed(state, event)
    assert next_state(state, event) is EXPECTED[state, event]
    assert apply(holder, event) is EXPECTED[state, event]
    assert holder.snapshot() == derived(EXPECTED[state, event])


@pytest.mark.parametrize(("state", "event"), ILLEGAL, ids=lambda v: v.name)
def test_every_illegal_transition_is_refused_and_changes_nothing(state: State, event: Event) -> None:
    holder = holder_in(state)
    before = holder.snapshot()
    assert not allowed(state, event)
    with pytest.raises(TransitionError) as info:
        apply(holder, event)
    assert holder.snapshot() == before
    assert (info.value.source, info.value.event) == (state, event)
    text = str(info.value)
    assert "internal error" in text and event.name in text and state.name in text
    assert not isinstance(info.value, jsclient.Error)  # a bug of ours: no user's `except Error` swallows it
    with pytest.raises(TransitionError):
        next_state(state, event)


def test_closed_is_final_and_reachable_from_everywhere() -> None:
    assert [event for event in Event if allowed(S.CLOSED, event)] == []
    for state in State:
        if state is not S.CLOSED:
            assert next_state(state, E.CLOSE) is S.CLOSED


def test_every_state_is_reachable_and_every_event_used() -> None:
    seen, todo = {S.CONNECTING}, [S.CONNECTING]
    while todo:
        state = todo.pop()
        for (source, _), target in TRANSITIONS.items():
            if source is state and target not in seen:
                seen.add(target)
                todo.append(target)
    assert seen == set(State)
    assert {event for _, event in TRANSITIONS} == set(Event)


@given(st.lists(st.sampled_from(Event), max_size=40))
def test_any_sequence_of_events_keeps_the_machine_in_the_table(events: list[Event]) -> None:
    holder = Holder()
    targets = {S.CONNECTING} | set(TRANSITIONS.values())
    closed = False
    for event in events:
        before = holder.snapshot()
        if allowed(holder.state, event):
            assert not closed, "an event was allowed after CLOSED"
            assert apply(holder, event) is TRANSITIONS[before[0], event]
        else:
            with pytest.raises(TransitionError):
                apply(holder, event)
            assert holder.snapshot() == before
        assert holder.state in targets
        assert holder.snapshot() == derived(holder.state)
        closed = closed or holder.state is S.CLOSED
        if closed:
            assert holder.state is S.CLOSED


# -- nothing sets the state but the table's function -----------------------------------------------------------------

#: The writer's fields that are the state or follow from it.
GUARDED = {"state", "accepting", "threshold"}
#: The one function allowed to assign them.
SETTER = ("core/state.py", "_enter")
PACKAGE = Path(jsclient.__file__).parent


def state_assignments(source: str, where: str) -> Iterator[tuple[str, str, int]]:
    """(where, enclosing function, line) of every assignment to a guarded attribute, setattr included."""

    def targets(node: ast.expr) -> Iterator[ast.expr]:
        if isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                yield from targets(element)
        elif isinstance(node, ast.Starred):
            yield from targets(node.value)
        else:
            yield node

    def visit(node: ast.AST, function: str) -> Iterator[tuple[str, str, int]]:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            assigned: list[ast.expr] = []
            if isinstance(child, ast.Assign):
                assigned = [t for target in child.targets for t in targets(target)]
            elif isinstance(child, (ast.AugAssign, ast.AnnAssign)) and child.value is not None:
                assigned = list(targets(child.target))
            elif isinstance(child, ast.Call) and isinstance(child.func, (ast.Name, ast.Attribute)):
                name = child.func.id if isinstance(child.func, ast.Name) else child.func.attr
                if name in ("setattr", "__setattr__") and len(child.args) >= 2:
                    key = child.args[1]
                    if isinstance(key, ast.Constant) and key.value in GUARDED:
                        yield where, function, child.lineno
            for target in assigned:
                if isinstance(target, ast.Attribute) and target.attr in GUARDED:
                    yield where, function, target.lineno
            yield from visit(child, inner)

    yield from visit(ast.parse(source), "<module>")


def test_only_the_table_sets_the_connection_state() -> None:
    """Every module that can reach the writer (the core, and the connection over it) is read."""
    files = [*sorted((PACKAGE / "core").glob("*.py")), PACKAGE / "connection.py"]
    found = []
    for path in files:
        where = path.relative_to(PACKAGE).as_posix()
        found += list(state_assignments(path.read_text(), where))
    assert [(where, function) for where, function, _ in found] == [SETTER, SETTER, SETTER]


def test_the_check_finds_a_bypass() -> None:
    bypass = """
class Session:
    def close(self):
        self.writer.state = State.CLOSED
        w.accepting, w.threshold = False, 0
        setattr(self.writer, "state", State.CLOSED)
        self.writer.buf = bytearray()
"""
    found = list(state_assignments(bypass, "x.py"))
    assert [(function, line) for _, function, line in found] == [("close", 4), ("close", 5), ("close", 5), ("close", 6)]


# -- a failed send: decided under the send lock, acted on after it ----------------------------------------------------


def break_sends(nc: jsclient.Connection) -> None:
    """Make the current transport's sends fail as on a broken pipe (the socket itself stays open)."""
    transport = nc._session.link.transport
    assert transport is not None

    def broken(data: bytes | bytearray) -> None:
        raise BrokenPipeError("broken pipe (test)")

    transport.sendall = broken  # type: ignore[method-assign]


def test_a_failed_send_without_reconnect_closes_with_the_send_lock_free(server: NatsServer) -> None:
    nc = jsclient.connect(server.url, allow_reconnect=False)
    session = nc._session
    send_lock = session.writer.send_lock
    closing = session.close
    free: list[bool] = []

    def close(*args: object, **kwargs: object) -> None:
        # Taken within the time, the closing thread did not hold it (it is not reentrant).
        got = send_lock.acquire(timeout=2.0)
        if got:
            send_lock.release()
        free.append(got)
        closing(*args, **kwargs)  # type: ignore[arg-type]

    session.close = close  # type: ignore[method-assign]
    try:
        break_sends(nc)
        with pytest.raises(jsclient.ConnectionClosedError):
            nc.flush(timeout=5)
        assert nc.is_closed
        assert free == [True]
        assert isinstance(nc.last_error, BrokenPipeError)
        with pytest.raises(jsclient.ConnectionClosedError) as info:
            nc.publish("after", b"x")
        assert info.value.failure is jsclient.RequestFailure.CONNECTION_LOST
    finally:
        nc.close()


def test_a_failed_send_with_reconnect_reconnects_and_sends_what_it_held(server: NatsServer) -> None:
    reconnected = threading.Event()
    nc = jsclient.connect(server.url, reconnect_time_wait=0.05, reconnected_cb=reconnected.set)
    try:
        sub = nc.subscribe("held")
        nc.flush()
        break_sends(nc)
        nc.publish("held", b"kept")
        nc.flush(timeout=10)  # the PING behind the message waits for the new link
        assert reconnected.wait(10)
        assert nc.is_connected and nc.reconnects == 1
        assert sub.next_msg(timeout=5).data == b"kept"
    finally:
        nc.close()
