"""What a key-value and an object store watch share: an ordered consumer read as initial items, a marker, updates.

Runs on the thread that reads the watch (one thread per watch).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Generic, TypeVar

from ..errors import ConsumerNotFoundError, SubscriptionClosedError

if TYPE_CHECKING:
    from .context import JetStream
    from .ordered import OrderedSubscription

T = TypeVar("T")


class Watch(Generic[T]):
    """``next(timeout)`` gives items; ``None`` exactly once marks the end of the initial ones.

    A subclass sets ``_sub`` (its ordered consumer) and ``_timeout`` (how long
    :meth:`initial` waits for each item) and defines :meth:`next`.
    """

    _sub: OrderedSubscription
    _timeout: float

    def next(self, timeout: float | None = 1.0) -> T | None:
        """The next item, or ``None`` once after the initial ones; each kind of watcher defines it.

        Args:
            timeout: Seconds to wait; ``None``, no limit; ``0``, only what already arrived.

        Returns:
            The next item, or None.

        Raises:
            NotImplementedError: Always, here.
        """
        raise NotImplementedError

    def _initial_pending(self, js: JetStream, stream: str) -> int:
        """How many initial items the consumer has for this watch (0: the marker comes first)."""
        try:
            info = js.consumer_info(stream, self._sub.consumer)
        except ConsumerNotFoundError:
            return 0
        return info.num_pending + info.delivered.consumer_seq

    def initial(self) -> Iterator[T]:
        """The initial items only (ends at the marker).

        Each must come within the context's ``timeout``.

        Yields:
            Each initial item, in stream order.

        Raises:
            TimeoutError: An item did not come within the context's timeout.
            SubscriptionClosedError: The watcher was stopped.
            JetStreamAPIError: Recreating the watch's consumer failed, for example with StreamNotFoundError once
                its stream was deleted.
            ConnectionClosedError: The connection is closed.
        """
        while (item := self.next(timeout=self._timeout)) is not None:
            yield item

    def __iter__(self) -> Iterator[T | None]:
        while True:
            try:
                yield self.next(timeout=None)
            except SubscriptionClosedError:
                return

    def stop(self) -> None:
        """Stop watching, and delete the watch's consumer without waiting for the answer.

        Raises:
            : Nothing; stopping again is harmless.
        """
        self._sub.unsubscribe()

    def __enter__(self) -> Watch[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
