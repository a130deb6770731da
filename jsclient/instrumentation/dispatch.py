"""Spans around user code called with messages, through the dispatch seam (:data:`jsclient.observe.dispatch`).

A callback or handler is not wrapped when it is given to ``subscribe``,
``js.subscribe``, ``Consumer.consume`` or ``add_endpoint``: jsclient reads
the seam where it calls it (once per round of a subscription's queued
messages; once per message on the ``jsclient-ordered`` and
``jsclient-consume`` threads, which take one at a time) and, while this
part set it, calls what it returns.  So subscriptions, consumers and
endpoints made before ``instrument()`` are traced from their next round,
and after ``uninstrument()`` (the seam None again) each calls the user's own
code, at the uninstrumented cost.

- A core callback: the CONSUMER ``process`` span of :func:`.core.traced_callback`.
- A JetStream callback: the same span with the delivery's attributes (:func:`.jetstream.traced_delivery`).
- A service handler: the SERVER span of :func:`.micro.served`, on the worker thread.

Threads: the seam is asked on the thread that then calls the code (a
subscription's dispatcher, the ordered or consume thread; for a service,
the endpoint's dispatcher, whose workers run the wrapped handler); the
spans run there.  Nothing here runs on the reader thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import observe
from .core import traced_callback
from .jetstream import traced_delivery
from .micro import served
from .patches import Patches
from .telemetry import Telemetry

if TYPE_CHECKING:
    from ..connection import Connection
    from ..message import Msg
    from ..micro import Endpoint, Request, Service
    from ..subscription import Subscription, SubscriptionOwner


class Traced:
    """The :class:`jsclient.observe.Dispatch` this part sets: each piece of user code in its span."""

    def __init__(self, tel: Telemetry) -> None:
        self._tel = tel

    def callback(
        self, owner: SubscriptionOwner, sub: Subscription, callback: Callable[[Msg], None]
    ) -> Callable[[Msg], None]:
        from ..connection import Connection

        conn = owner if isinstance(owner, Connection) else None
        return traced_callback(self._tel, conn, sub.subject, sub.queue, callback)

    def delivery(
        self, conn: Connection | None, pattern: str, callback: Callable[[Msg], None]
    ) -> Callable[[Msg], None]:
        return traced_delivery(self._tel, conn, pattern, callback)

    def handler(
        self, service: Service, endpoint: Endpoint, handler: Callable[[Request], None]
    ) -> Callable[[Request], None]:
        return served(self._tel, service, endpoint, handler)


def install(patches: Patches, tel: Telemetry) -> None:
    patches.replace(observe, "dispatch", Traced(tel))
