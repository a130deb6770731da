"""ADR-37's simplified API: stream and consumer handles over the pull workflow of :mod:`.pull`.

``js.stream(name)`` gives a :class:`Stream`; ``stream.consumer(name)`` a
:class:`Consumer` with ``fetch``, ``fetch_no_wait``, ``next``, ``messages``
and ``consume``; ``stream.ordered_consumer()`` an :class:`OrderedConsumer`,
pull based, recreated at the next stream sequence whenever a delivery is
missed.  Runs on the caller's thread, except a :class:`ConsumeContext`'s
own thread (``jsclient-consume``), which runs the callback.  Handles hold no
subscription between calls (each ``fetch``/``next`` subscribes to an inbox of
its own and leaves it, as nats.go does), so a handle may be shared by threads
and dropped without closing; a ``messages``/``consume`` call holds one until
it ends.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from msgspec import UNSET

from .. import observe
from ..checks import seconds, whole
from ..deprecation import renamed_keywords, renamed_method
from ..errors import (
    ConsumerNotFoundError,
    Error,
    InvalidArgumentError,
    JetStreamAPIError,
    JetStreamStatusError,
    SubscriptionClosedError,
    TimeoutError,
)
from ..message import Msg
from ..observe import ConsumerKind
from ..timeouts import DEFAULT, Timeout, answer_limit, take_limit
from . import api
from .api import AckPolicy, ConsumerConfig, ConsumerInfo, DeliverPolicy, StoredMsg, StreamInfo
from .manager import StrictOrder
from .ordered import delete_quietly, resume_after
from .pull import MessageStream, PullSubscription, check_heartbeat, check_pull

if TYPE_CHECKING:
    from .context import JetStream

#: ADR-37 defaults for consume: the buffer, a pull's expiry, and where the buffer is refilled.
DEFAULT_MAX_MESSAGES = 500
DEFAULT_EXPIRES = 30.0
DEFAULT_THRESHOLD = 0.5


class Stream:
    """A stream by name, with its last known info in ``cached_info``.

    Get one from ``js.stream(name)``, ``js.create_stream(...)`` or
    ``js.create_or_update_stream(...)``.  A handle holds no resources: share
    it between threads, drop it without closing.  Its calls wait the
    context's ``timeout`` for the server's answer.

    Every call may raise:
        InvalidArgumentError: An argument its Args do not allow, or two that do not go together; raised
            before anything is sent.
        FeatureNotSupportedError: A field or option needs a newer server than the connected one; raised
            before anything is sent.
        StreamNotFoundError: The stream was deleted.
        JetStreamAPIError: Any other refusal by the server: a subclass names the case (JetStreamNotEnabledError:
            no JetStream answered), ``err_code`` carries the server's code.
        TimeoutError: No answer within the context's timeout.
        ConnectionClosedError: The connection is closed or draining.
    """

    def __init__(self, js: JetStream, info: StreamInfo) -> None:
        """Wrap a stream's info; the context's calls make handles, users do not.

        Args:
            js: The context whose requests the handle makes.
            info: The stream's info, kept as ``cached_info``; its config names the stream.

        Raises:
            : Nothing; it only keeps what it is given.
        """
        self._js = js
        self.cached_info = info
        self.name: str = info.config.name  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<Stream {self.name!r}>"

    def info(self, subjects_filter: str | None = None, *, deleted_details: bool = False) -> StreamInfo:
        """The stream's current config and state, asked of the server; also kept as ``cached_info``.

        Args:
            subjects_filter: Fill ``state.subjects`` with how many messages each subject matching this
                filter holds (wildcards allowed; every page is read).
            deleted_details: Also list the sequences of deleted messages in ``state.deleted``.

        Returns:
            The stream's info.
        """
        self.cached_info = self._js.stream_info(self.name, subjects_filter, deleted_details=deleted_details)
        return self.cached_info

    def purge(self, subject: str | None = None, seq: int | None = None, keep: int | None = None) -> int:
        """Remove messages: all of them, or those on ``subject``; all, or those below ``seq``, or all but ``keep``.

        Args:
            subject: Only messages on this subject (wildcards allowed).
            seq: Only messages below this stream sequence (the message at ``seq`` stays).
            keep: Keep this many of the newest messages (of ``subject``, when given); not with ``seq``.

        Returns:
            How many messages were removed.

        Raises:
            InvalidArgumentError: A bad subject, a negative ``seq`` or ``keep``, or both, raised before anything
                is sent.
            JetStreamAPIError: Any other refusal, for example from a stream that denies purges.
        """
        return self._js.purge_stream(self.name, subject, seq, keep)

    def get_msg(
        self, seq: int | None = None, *, last_by_subj: str | None = None, next_by_subj: str | None = None
    ) -> StoredMsg:
        """One stored message, by sequence or by subject, through the stream's API (its leader answers).

        Args:
            seq: The message's stream sequence; with ``next_by_subj``, where the search starts (default 1).
            last_by_subj: The last message on this subject; not with ``seq`` or ``next_by_subj``.
            next_by_subj: The first message on this subject (wildcards allowed) at ``seq`` or after it.

        Returns:
            The message (subject, sequence, data, its raw header block and when it was stored).

        Raises:
            InvalidArgumentError: None of the three given, ``last_by_subj`` with another, a ``seq`` below 1 or a
                bad subject, raised before anything is sent.
            MessageNotFoundError: No message matches.
        """
        return self._js.get_msg(self.name, seq, last_by_subj=last_by_subj, next_by_subj=next_by_subj)

    def delete_msg(self, seq: int, *, erase: bool = False) -> bool:
        """Remove one message from the stream.

        Args:
            seq: The stream sequence of the message.
            erase: Also overwrite its bytes in storage, rather than only mark them removed (slower).

        Returns:
            True (a refusal raises instead).

        Raises:
            JetStreamAPIError: Any other refusal: no message has that sequence, or the stream denies deletes.
        """
        return self._js.delete_msg(self.name, seq, erase=erase)

    # -- consumers ---------------------------------------------------------------------
    def consumer(self, name: str) -> Consumer:
        """The consumer ``name`` (ConsumerNotFoundError when there is none).

        Args:
            name: The consumer's name, durable or not.

        Returns:
            Its handle, with the info just asked of the server in ``cached_info``.

        Raises:
            InvalidArgumentError: A bad name (raised before anything is sent), or a push consumer of that name
                (the handles read pull consumers).
            ConsumerNotFoundError: The stream has no consumer of that name.
        """
        return self._js.consumer(self.name, name)

    def create_consumer(self, config: ConsumerConfig | None = None, **fields: Any) -> Consumer:
        """A new pull consumer (an error if one of that name exists with another config).

        ``ack_policy`` defaults to explicit (the server's default, none, never redelivers).

        Args:
            config: The consumer's configuration; left out, ``fields`` make it.
            **fields: ConsumerConfig fields as keywords (``durable_name="worker"``); on top of ``config``, they win.

        Returns:
            The consumer's handle.

        Raises:
            InvalidArgumentError: An unknown or bad field, or a ``deliver_subject`` (that makes a push
                consumer), raised before anything is sent.
            ConsumerAlreadyExistsError: A consumer of that name exists with another configuration.
            MaximumConsumersError: The stream or the account has as many consumers as it may.
        """
        return pull_consumer(self._js, self.name, config, fields, action="create")

    def update_consumer(self, config: ConsumerConfig | None = None, **fields: Any) -> Consumer:
        """Change an existing pull consumer to this configuration.

        Args:
            config: The consumer's new configuration; it names the consumer (``durable_name`` or ``name``).
            **fields: ConsumerConfig fields as keywords; on top of ``config``, they win.

        Returns:
            The consumer's handle, with its updated info.

        Raises:
            InvalidArgumentError: An unknown or bad field, or a ``deliver_subject``, raised before anything is sent.
            ConsumerDoesNotExistError: There is no consumer of that name to update.
            JetStreamAPIError: Any other refusal, for example a field that cannot change.
        """
        return pull_consumer(self._js, self.name, config, fields, action="update")

    def create_or_update_consumer(self, config: ConsumerConfig | None = None, **fields: Any) -> Consumer:
        """Create a pull consumer, or change the one of that name to this configuration.

        Args:
            config: The consumer's configuration; left out, ``fields`` make it.
            **fields: ConsumerConfig fields as keywords; on top of ``config``, they win.

        Returns:
            The consumer's handle.

        Raises:
            InvalidArgumentError: An unknown or bad field, or a ``deliver_subject``, raised before anything is sent.
            MaximumConsumersError: A new consumer, and the stream or the account has as many as it may.
            JetStreamAPIError: Any other refusal, for example a field of an existing consumer that cannot change.
        """
        return pull_consumer(self._js, self.name, config, fields, action="")

    def delete_consumer(self, name: str) -> bool:
        """Delete the consumer ``name`` of this stream.

        Args:
            name: The consumer's name.

        Returns:
            True (a refusal raises instead).

        Raises:
            ConsumerNotFoundError: The stream has no consumer of that name.
        """
        return self._js.delete_consumer(self.name, name)

    def consumer_names(self) -> list[str]:
        """The names of the stream's consumers, push and pull (every page is read).

        Returns:
            The names.
        """
        return self._js.consumer_names(self.name)

    def ordered_consumer(
        self,
        *,
        filter_subjects: list[str] | None = None,
        deliver_policy: DeliverPolicy | str = DeliverPolicy.ALL,
        opt_start_seq: int | None = None,
        headers_only: bool = False,
    ) -> OrderedConsumer:
        """Every message once, in order, from a consumer this handle recreates whenever one is missed.

        Nothing is sent here: the first read creates the consumer.

        Args:
            filter_subjects: Only messages on these subjects (a non-empty list; wildcards allowed); left out, all.
            deliver_policy: Where to start: a DeliverPolicy or its value ("all", "last", "new",
                "by_start_sequence", "last_per_subject", ...).
            opt_start_seq: The stream sequence to start at; needs ``deliver_policy="by_start_sequence"``.
            headers_only: Deliver each message's headers without its body (whose size is in ``Nats-Msg-Size``).

        Returns:
            The ordered consumer; ``close()`` (or a with block) deletes its consumer.

        Raises:
            InvalidArgumentError: A bad ``filter_subjects``, ``headers_only`` or ``opt_start_seq``, or
                ``opt_start_seq`` without that policy.
            ValueError: ``deliver_policy`` is not one of DeliverPolicy's values.
        """
        return OrderedConsumer(
            self._js, self.name, filter_subjects=filter_subjects, deliver_policy=deliver_policy,
            opt_start_seq=opt_start_seq, headers_only=headers_only,
        )


def pull_consumer(
    js: JetStream, stream: str, config: ConsumerConfig | None, fields: dict[str, Any],
    *, action: Literal["", "create", "update"],
) -> Consumer:
    """The create and update calls of both the context and a stream handle: one request, no stream lookup."""
    api.check_name("stream name", stream)  # a bad stream name is reported before a bad config
    cfg = api.merge_config(ConsumerConfig, config, fields)
    if cfg.deliver_subject is not UNSET and cfg.deliver_subject is not None:
        raise InvalidArgumentError("deliver_subject makes a push consumer; the handle API reads pull consumers")
    return Consumer(js, js.add_consumer(stream, cfg, action=action))


def _buffer(
    max_messages: int | None, max_bytes: int | None, threshold_messages: int | None, threshold_bytes: int | None,
    expires: float, heartbeat: float | None,
) -> tuple[int, int | None, float, float, float]:
    """ADR-37's consume options checked: (messages, bytes or None, threshold share, expires, heartbeat)."""
    if max_messages is not None and max_bytes is not None:
        raise InvalidArgumentError("max_messages and max_bytes are mutually exclusive (ADR-37)")
    expires = seconds("expires", expires)
    if expires < 1:
        raise InvalidArgumentError(f"expires must be at least 1 s, not {expires}")
    if heartbeat is None:
        heartbeat = min(30.0, max(0.5, expires / 2))
        heartbeat = min(heartbeat, expires / 2 - 0.01)
    else:
        heartbeat = check_heartbeat(heartbeat, expires, "expires")
    if max_bytes is not None:
        whole("max_bytes", max_bytes)
        if threshold_messages is not None:
            raise InvalidArgumentError("threshold_messages goes with max_messages, not max_bytes")
        share = DEFAULT_THRESHOLD if threshold_bytes is None else whole("threshold_bytes", threshold_bytes) / max_bytes
        if share > 1:
            raise InvalidArgumentError(f"threshold_bytes ({threshold_bytes}) cannot exceed max_bytes ({max_bytes})")
        return 1, max_bytes, share, expires, heartbeat
    count = DEFAULT_MAX_MESSAGES if max_messages is None else whole("max_messages", max_messages)
    if threshold_bytes is not None:
        raise InvalidArgumentError("threshold_bytes goes with max_bytes, not max_messages")
    share = DEFAULT_THRESHOLD if threshold_messages is None else whole("threshold_messages", threshold_messages) / count
    if share > 1:
        raise InvalidArgumentError(f"threshold_messages ({threshold_messages}) cannot exceed max_messages ({count})")
    return count, None, max(share, 1 / count), expires, heartbeat


class Consumer:
    """A pull consumer by name, with its last known info in ``cached_info``.

    Get one from a :class:`Stream`'s consumer calls or ``js.consumer``.  It
    holds no subscription between calls: share it between threads, drop it
    without closing.

    Every call may raise:
        InvalidArgumentError: An argument its Args do not allow, or two that do not go together; raised
            before anything is sent.
        ConnectionClosedError: The connection is closed or draining.
    """

    def __init__(self, js: JetStream, info: ConsumerInfo) -> None:
        """Wrap a consumer's info; the stream's and the context's calls make handles, users do not.

        Args:
            js: The context whose requests the handle makes.
            info: The consumer's info, kept as ``cached_info``; it names the stream and the consumer.

        Raises:
            InvalidArgumentError: ``info`` is a push consumer's (it has a ``deliver_subject``).
        """
        if info.config.deliver_subject not in (UNSET, None, ""):
            raise InvalidArgumentError(f"consumer {info.name!r} is a push consumer; the handle API reads pull ones")
        self._js = js
        self.cached_info = info
        self.stream = info.stream_name
        self.name = info.name

    def __repr__(self) -> str:
        return f"<Consumer {self.stream!r}/{self.name!r}>"

    def info(self) -> ConsumerInfo:
        """The consumer's current info, asked of the server; also kept as ``cached_info``.

        Returns:
            The consumer's info.

        Raises:
            ConsumerNotFoundError: The consumer was deleted.
            TimeoutError: No answer within the context's timeout.
            StreamNotFoundError: The stream was deleted.
            JetStreamAPIError: Any other refusal.
        """
        self.cached_info = self._js.consumer_info(self.stream, self.name)
        return self.cached_info

    def delete(self) -> bool:
        """Delete the consumer on the server; reads through any handle on it fail from then on.

        Returns:
            True (a refusal raises instead).

        Raises:
            ConsumerNotFoundError: The consumer was deleted already.
            TimeoutError: No answer within the context's timeout.
            StreamNotFoundError: The stream was deleted.
            JetStreamAPIError: Any other refusal.
        """
        return self._js.delete_consumer(self.stream, self.name)

    @renamed_keywords(batch="max_messages", max_wait="timeout")
    def fetch(
        self, max_messages: int = 1, *, timeout: float | None = 5.0, max_bytes: int | None = None,
        heartbeat: float | None = None,
    ) -> list[Msg]:
        """Up to ``max_messages`` messages: what came by ``timeout`` ([] only when nothing did).

        ADR-37 calls this wait ``max_wait``; here it is the call's ``timeout``, as everywhere.

        Args:
            max_messages: The most messages to return.
            timeout: Seconds to wait for them; ``None``, no limit; ``0`` is refused (a pull needs the server).
            max_bytes: The most bytes to return, counted as the server counts them (subject, headers and
                body); the request ends before a message that would pass it.
            heartbeat: Seconds between the server's heartbeats while the request waits, under half the
                ``timeout``: a server silent for two of them raises HeartbeatsMissedError instead of being
                waited out.  Left out, none.

        Returns:
            The messages in order, perhaps fewer than asked for (``[]`` when none came in time).

        Raises:
            InvalidArgumentError: A bad ``max_messages``, ``timeout``, ``max_bytes`` or ``heartbeat``, raised
                before the pull request is sent.
            HeartbeatsMissedError: ``heartbeat`` was given, and neither a message nor a heartbeat came.
            JetStreamStatusError: The server ended the request with an error status before any message came:
                NoRespondersStatusError (no such consumer), ConsumerDeletedError, MaxWaitingExceededError, or a
                request over the consumer's limits (MaxRequestBatchExceededError and the like).
        """
        return _fetch_once(self._js, self.stream, self.name, max_messages, answer_limit(timeout), max_bytes, heartbeat)

    @renamed_keywords(batch="max_messages")
    def fetch_no_wait(self, max_messages: int = 1, *, max_bytes: int | None = None) -> list[Msg]:
        """What the consumer has now, up to ``max_messages`` messages, without waiting for more.

        Args:
            max_messages: The most messages to return.
            max_bytes: The most bytes to return, counted as for :meth:`fetch`.

        Returns:
            What the consumer had ready, in order (``[]`` when nothing).

        Raises:
            JetStreamStatusError: As for :meth:`fetch`.
        """
        return _fetch_once(
            self._js, self.stream, self.name, max_messages, self._js.timeout, max_bytes, None, no_wait=True
        )

    def next_msg(self, timeout: float | None = 5.0) -> Msg:
        """One message (TimeoutError when none comes by ``timeout``).

        Args:
            timeout: Seconds to wait; ``None``, no limit; ``0`` is refused (a pull needs the server).

        Returns:
            The next message.

        Raises:
            TimeoutError: No message came within ``timeout``.
            JetStreamStatusError: As for :meth:`fetch`.
        """
        got = self.fetch(1, timeout=timeout)
        if not got:
            raise TimeoutError(f"no message from consumer {self.name!r} within {timeout} s")
        return got[0]

    next = renamed_method(next_msg, "next")

    def messages(
        self,
        *,
        max_messages: int | None = None,
        max_bytes: int | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        expires: float = DEFAULT_EXPIRES,
        heartbeat: float | None = None,
    ) -> ConsumerMessages:
        """An iterator that keeps a buffer filled (ADR-37's consume); ``stop()`` or ``drain()`` ends it.

        Pull requests stay outstanding while it runs, and more is asked for
        whenever what is still to come falls below the threshold.  Size the
        buffer in messages or in bytes, not both.

        Args:
            max_messages: How many messages to keep asked for (500 unless ``max_bytes`` is given).
            max_bytes: How many bytes to keep asked for, instead of a number of messages.
            threshold_messages: Ask for more when fewer messages than this are still to come; left out, half
                of ``max_messages``.  Goes with ``max_messages``.
            threshold_bytes: The same in bytes, with ``max_bytes``; left out, half of it.
            expires: Seconds each pull request lives on the server (at least 1); not a wait of this call.
            heartbeat: Seconds between the server's heartbeats while a request waits, under half of
                ``expires``; left out, just under half of it, at most 30.  Missed heartbeats are reported to the
                connection's error callback and the requests sent again.

        Returns:
            The iterator; iterating it raises the error that ends consumption (ConsumerDeletedError, say).
        """
        count, size, share, expires, heartbeat = _buffer(
            max_messages, max_bytes, threshold_messages, threshold_bytes, expires, heartbeat
        )
        psub = PullSubscription(self._js, self.stream, self.name, None, created=False)
        try:
            stream = psub.messages(count, expires, None, heartbeat, share, buffer_bytes=size)
        except BaseException:
            psub.unsubscribe()  # its inbox and reconnect hook go with it (the consumer is not ours to delete)
            raise
        return ConsumerMessages(psub, stream)

    def consume(
        self,
        callback: Callable[[Msg], None],
        *,
        max_messages: int | None = None,
        max_bytes: int | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        expires: float = DEFAULT_EXPIRES,
        heartbeat: float | None = None,
        error_cb: Callable[[Exception], None] | None = None,
    ) -> ConsumeContext:
        """Run ``callback`` for each message on a thread of its own; the context's ``stop``/``drain`` end it.

        A callback that raises is reported (``error_cb``, else the connection's
        error callback) and consumption goes on; an error that ends the
        consumer (it was deleted) ends the context, which keeps it in ``error``.

        Args:
            callback: Called with each message, one at a time, on the context's thread.
            max_messages: As for :meth:`messages`.
            max_bytes: As for :meth:`messages`.
            threshold_messages: As for :meth:`messages`.
            threshold_bytes: As for :meth:`messages`.
            expires: As for :meth:`messages`.
            heartbeat: As for :meth:`messages`.
            error_cb: Called with each exception ``callback`` raises and with the error that ends consumption;
                left out, the connection's error callback.

        Returns:
            The running consumption, with ``stop()``, ``drain()``, ``wait()``, and ``error`` once an error ended it.

        Raises:
            InvalidArgumentError: ``callback`` is not callable, or a bad value or combination (as for
                :meth:`messages`), raised before any pull request is sent.
        """
        if not callable(callback):
            raise InvalidArgumentError(f"callback must be callable, not {callback!r}")
        messages = self.messages(
            max_messages=max_messages, max_bytes=max_bytes, threshold_messages=threshold_messages,
            threshold_bytes=threshold_bytes, expires=expires, heartbeat=heartbeat,
        )
        report = error_cb or self._js.conn.core.report_error
        return ConsumeContext(messages, callback, report, self.stream)


def _fetch_once(
    js: JetStream, stream: str, consumer: str, batch: int, wait: float, max_bytes: int | None,
    heartbeat: float | None, *, no_wait: bool = False,
) -> list[Msg]:
    """One fetch on an inbox of its own, left at the end (the pull ends before ``wait`` does, so nothing
    is on its way; a message that still is comes again after ack_wait)."""
    check_pull(batch, "timeout", wait, max_bytes, heartbeat)  # before the inbox is subscribed
    psub = PullSubscription(js, stream, consumer, None, created=False)
    try:
        return psub.fetch(batch, wait, max_bytes, heartbeat, no_wait=no_wait)
    finally:
        psub.unsubscribe()  # not created here: nothing is deleted


class ConsumerMessages:
    """The iterator of :meth:`Consumer.messages`; ``stop()`` at once, ``drain()`` after what is buffered.

    Iterate it on one thread; ``stop()`` and ``drain()`` may come from any.
    A with block stops it at the end.  Iteration ends quietly once stopped
    or drained, or when the connection closes.

    Raises:
        JetStreamStatusError: While iterating: the server ended consumption with an error status, such as
            ConsumerDeletedError (the consumer was deleted) or ConsumerIsPushBasedError.
    """

    def __init__(self, psub: PullSubscription, stream: MessageStream) -> None:
        """Wrap a subscription and its message stream; :meth:`Consumer.messages` makes them.

        Args:
            psub: The subscription on the consumer, left when the iteration ends.
            stream: Its message stream, which keeps the pull requests going.

        Raises:
            : Nothing; it only keeps what it is given.
        """
        self._psub = psub
        self._stream = stream
        self._draining = threading.Event()

    def __iter__(self) -> Iterator[Msg]:
        try:
            for msg in self._stream:
                yield msg
                if self._draining.is_set():
                    break
            if self._draining.is_set():
                yield from self._psub.take_ready(1 << 30)  # what had already arrived: handed out, not lost
        finally:
            self._psub.unsubscribe()

    def stop(self) -> None:
        """End now; messages already delivered to this client but not handed out come again after ack_wait.

        Raises:
            : Nothing; stopping again is harmless.
        """
        self._stream.stop()

    def drain(self) -> None:
        """Ask for no more; hand out what already arrived, then end.

        Raises:
            : Nothing; it does not wait (the iterating thread hands out the rest).
        """
        self._draining.set()
        self._stream.stop()

    def __enter__(self) -> ConsumerMessages:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ConsumeContext:
    """A running :meth:`Consumer.consume`: ``stop()``, ``drain()``, ``wait()``; ``error`` if it ended on one.

    ``closed`` tells whether consumption has ended.  A with block stops it at the end.
    """

    def __init__(
        self, messages: ConsumerMessages, callback: Callable[[Msg], None], report: Callable[[Exception], None],
        stream: str,
    ) -> None:
        """Start the consumption thread (``jsclient-consume``); :meth:`Consumer.consume` makes contexts.

        Args:
            messages: The iterator whose messages go to ``callback``.
            callback: Called with each message, on that thread.
            report: Called with what ``callback`` raises and with the error that ends consumption.
            stream: The consumer's stream (what the dispatch seam is told the callback reads).

        Raises:
            RuntimeError: The thread cannot be started (the interpreter is shutting down, or out of threads).
        """
        self._messages = messages
        self._callback = callback
        self._report = report
        self._stream_name = stream
        self.error: Exception | None = None
        self._thread = threading.Thread(target=self._run, name="jsclient-consume", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """The consumption thread: each message to the callback, or to what the dispatch seam wraps it in.

        The seam (:data:`jsclient.observe.dispatch`) is read once per message (this thread takes one at a time,
        with no rounds), and asked again only when it changed.
        """
        callback = self._callback
        seen: observe.Dispatch | None = None
        call = callback
        try:
            for msg in self._messages:
                hook = observe.dispatch
                if hook is not seen:
                    seen = hook
                    call = callback if hook is None else hook.delivery(None, self._stream_name, callback)
                try:
                    call(msg)
                except Exception as exc:  # noqa: BLE001 - the user's callback: reported, consumption goes on
                    self._report(exc)
        except (SubscriptionClosedError, ConsumerNotFoundError, JetStreamAPIError) as exc:
            self.error = exc
            self._report(exc)
        except Exception as exc:  # noqa: BLE001 - anything else ends it too, never silently
            self.error = exc
            self._report(exc)

    @property
    def closed(self) -> bool:
        return not self._thread.is_alive()

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop now and wait (up to ``timeout``; None: no limit) for the callback running, if any, to return.

        Messages that arrived but were not handed to the callback come again
        after ack_wait.  Called from the callback itself, it does not wait.

        Args:
            timeout: Seconds to wait for the thread to end; ``None``, no limit; ``0``, do not wait.  Running
                out of time is not an error: ``closed`` (or :meth:`wait`) tells whether it ended.

        Raises:
            InvalidArgumentError: A bad ``timeout``.
        """
        timeout = take_limit(timeout)
        self._messages.stop()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def drain(self, timeout: float | None = 30.0) -> None:
        """Pull no more; run the callback for what already arrived, then stop (``timeout``: as :meth:`stop`).

        Args:
            timeout: Seconds to wait for that; ``None``, no limit; ``0``, do not wait.  Running out of time is
                not an error, and the callback goes on with what is left.

        Raises:
            InvalidArgumentError: A bad ``timeout``.
        """
        timeout = take_limit(timeout)
        self._messages.drain()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Until consumption ends (by stop, drain or an error); whether it has.  ``0`` only looks.

        Args:
            timeout: Seconds to wait; ``None`` (the default), no limit; ``0``, only look.

        Returns:
            True once consumption has ended; False while it still runs.

        Raises:
            InvalidArgumentError: A bad ``timeout``.
            RuntimeError: Called from the callback, whose thread cannot wait for itself.
        """
        self._thread.join(take_limit(timeout))
        return not self._thread.is_alive()

    def __enter__(self) -> ConsumeContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class OrderedConsumer:
    """ADR-37's ordered consumer: one ephemeral pull consumer at a time, recreated at the next sequence.

    Messages are unacknowledged (ack policy none), delivered once each, in
    stream order.  A delivery that skips a consumer sequence, or a consumer
    that disappears, makes it delete that consumer and create another from
    the stream sequence after the last message handed out.
    """

    def __init__(
        self,
        js: JetStream,
        stream: str,
        *,
        filter_subjects: list[str] | None,
        deliver_policy: DeliverPolicy | str,
        opt_start_seq: int | None,
        headers_only: bool,
    ) -> None:
        """Check the options; the first read creates the consumer.  :meth:`Stream.ordered_consumer` makes these.

        Args:
            js: The context whose requests it makes.
            stream: The stream's name.
            filter_subjects: As for :meth:`Stream.ordered_consumer`.
            deliver_policy: As for :meth:`Stream.ordered_consumer`.
            opt_start_seq: As for :meth:`Stream.ordered_consumer`.
            headers_only: As for :meth:`Stream.ordered_consumer`.

        Raises:
            InvalidArgumentError: A bad option or combination.
            ValueError: ``deliver_policy`` is not one of DeliverPolicy's values.
        """
        self._js = js
        self.stream = stream
        if filter_subjects is not None and (not isinstance(filter_subjects, list) or not filter_subjects):
            raise InvalidArgumentError(f"filter_subjects must be a non-empty list, not {filter_subjects!r}")
        if not isinstance(headers_only, bool):
            raise InvalidArgumentError(f"headers_only must be True or False, not {headers_only!r}")
        self._filters = filter_subjects
        self._headers_only = headers_only
        try:
            policy = DeliverPolicy(deliver_policy)
        except ValueError:
            names = ", ".join(p.value for p in DeliverPolicy)
            raise InvalidArgumentError(f"deliver_policy must be one of {names}; not {deliver_policy!r}") from None
        self._start: dict[str, Any] = {"deliver_policy": policy.value}
        if opt_start_seq is not None:
            if policy is not DeliverPolicy.BY_START_SEQUENCE:
                raise InvalidArgumentError("opt_start_seq needs deliver_policy 'by_start_sequence'")
            self._start["opt_start_seq"] = whole("opt_start_seq", opt_start_seq, 1)
        # Taking thread only (StrictOrder's reader-thread use is the push subscription's).
        self._order = StrictOrder(js.conn.core, on_gap=self._reset)
        api.validate_consumer_config(self._config())
        #: How many consumers this one has been through (1 once it has its first).
        self.generation = 0
        self._consumer: str | None = None  # the current consumer's name (created on first use)
        self._stream: MessageStream | None = None
        self._closed = False

    def _config(self) -> ConsumerConfig:
        last = self._order.stream_seq
        start = resume_after(last) if last else self._start
        return ConsumerConfig(
            ack_policy=AckPolicy.NONE, max_deliver=1, mem_storage=True, num_replicas=1,
            inactive_threshold=api.Duration(300.0),
            filter_subjects=self._filters if self._filters else UNSET,
            headers_only=True if self._headers_only else UNSET, **start,
        )

    def _current(self, deadline: float | None = None) -> str:
        """The consumer to read from, created after the last message handed out when there is none (by
        ``deadline``, when given: the creation spends the caller's time)."""
        if self._consumer is None:
            timeout: Timeout = DEFAULT
            if deadline is not None:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    raise TimeoutError(f"ordered consumer on {self.stream!r}: no time left to create a consumer")
            self._consumer = self._js.add_consumer(self.stream, self._config(), timeout=timeout).name
            self.generation += 1
            self._order.restart()
        return self._consumer

    def _reset(self) -> None:
        """Drop the consumer (a delivery was missed, or it is gone); the next read starts another.

        Taking thread, no lock held: a consumer dropped is told to an observer (:mod:`jsclient.observe`).
        """
        name, self._consumer = self._consumer, None
        if name is not None:
            listener = observe.listener
            if listener is not None:
                listener.ordered_reset(ConsumerKind.ORDERED_PULL)
            delete_quietly(self._js, self.stream, name)

    def _in_order(self, msg: Msg) -> bool:
        """The next consumer sequence; anything else has the consumer dropped (StrictOrder's ``on_gap``)."""
        return not self._order.sequenced(msg.reply)

    @renamed_keywords(batch="max_messages", max_wait="timeout")
    def fetch(self, max_messages: int = 1, *, timeout: float | None = 5.0) -> list[Msg]:
        """Up to ``max_messages`` messages in order: what came by ``timeout``.

        The first read creates the consumer.  A missed delivery drops the
        messages after it, and a consumer that went away gives ``[]``; either
        way the next read starts a new consumer after the last message handed out.

        Args:
            max_messages: The most messages to return.
            timeout: Seconds to wait for them; ``None``, no limit; ``0`` is refused (a pull needs the server).

        Returns:
            The messages in stream order; ``[]`` when none came in time, or the consumer was just dropped.

        Raises:
            InvalidArgumentError: A bad ``max_messages`` or ``timeout``.
            TimeoutError: Creating the consumer got no answer within ``timeout``.
            StreamNotFoundError: The stream was deleted.
            JetStreamAPIError: Any other refusal to create the consumer.
            ConnectionClosedError: The connection is closed.
        """
        wait = answer_limit(timeout)
        whole("max_messages", max_messages)  # before the first call makes the consumer
        deadline = time.monotonic() + wait  # one deadline: creating a consumer spends it too
        consumer = self._current(deadline)
        wait = deadline - time.monotonic()
        if wait <= 0:
            return []
        try:
            got = _fetch_once(self._js, self.stream, consumer, max_messages, wait, None, None)
        except (ConsumerNotFoundError, JetStreamStatusError):  # deleted, or gone: the next call starts another
            self._reset()
            return []
        out = []
        for msg in got:
            if not self._in_order(msg):
                break
            out.append(msg)
        return out

    def next_msg(self, timeout: float | None = 5.0) -> Msg:
        """One message, in order (TimeoutError when none comes by ``timeout``).

        Args:
            timeout: Seconds to wait; ``None``, no limit; ``0`` is refused (a pull needs the server).

        Returns:
            The next message in stream order.

        Raises:
            TimeoutError: No message within ``timeout``, or, sooner, the consumer had to be dropped (the next
                call reads from a new one, where this one stopped).
            InvalidArgumentError: A bad ``timeout``.
            StreamNotFoundError: The stream was deleted.
            JetStreamAPIError: Any other refusal to create the consumer.
            ConnectionClosedError: The connection is closed.
        """
        got = self.fetch(1, timeout=timeout)
        if not got:
            raise TimeoutError(f"no message from the ordered consumer on {self.stream!r} within {timeout} s")
        return got[0]

    next = renamed_method(next_msg, "next")

    def messages(self, *, max_messages: int = DEFAULT_MAX_MESSAGES, expires: float = DEFAULT_EXPIRES) -> Iterator[Msg]:
        """Every message from here on, in order, across as many consumers as it takes; ``close()`` ends it.

        A generator: nothing is checked or sent before the first message is asked for.

        Args:
            max_messages: How many messages to keep asked for.
            expires: Seconds each pull request lives on the server (at least 1); not a wait of this call.

        Yields:
            Each message, in stream order.

        Raises:
            InvalidArgumentError: A bad ``max_messages`` or ``expires`` (when iteration starts).
            TimeoutError: Creating a consumer got no answer within the context's timeout.
            StreamNotFoundError: The stream was deleted.
            JetStreamAPIError: Any other refusal to create a consumer.
            ConnectionClosedError: The connection is closed.
        """
        count, _, share, expires, heartbeat = _buffer(max_messages, None, None, None, expires, None)
        self._closed = False
        while not self._closed:
            psub = PullSubscription(self._js, self.stream, self._current(), None, created=False)
            stream = self._stream = psub.messages(count, expires, None, heartbeat, share, warnings_end=True)
            try:
                for msg in stream:
                    if not self._in_order(msg):
                        break  # _in_order dropped the consumer: the next round starts another
                    yield msg
                else:
                    if not self._closed:  # the iteration ended under us (its subscription closed)
                        self._reset()
            except (ConsumerNotFoundError, JetStreamStatusError):  # deleted under us: start another
                self._reset()
            finally:
                stream.stop()
                psub.unsubscribe()

    def close(self) -> None:
        """End ``messages()`` and delete the consumer (one left behind ends after 5 minutes unused).

        Raises:
            : Nothing; a failed delete is ignored (that consumer ends by itself).
        """
        self._closed = True
        if self._stream is not None:
            self._stream.stop()
        name, self._consumer = self._consumer, None
        if name is not None:  # waited for, unlike a reset's: after close() the consumer is gone
            with contextlib.suppress(Error):
                self._js.delete_consumer(self.stream, name)

    def __enter__(self) -> OrderedConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
