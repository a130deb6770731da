"""The server pool: the URLs a connection dials, the ones a cluster announces, the user's server_selector.

One list of URLs is shared by a connection and every session of it (a
forked child's too), so it is only ever changed in place.  Threads: the
reader adds the members an INFO announces (:meth:`ServerPool.discover`), a
caller replaces the list (:meth:`ServerPool.replace`, ``set_servers``),
and the reconnect thread orders a copy at the start of each round
(:meth:`ServerPool.round`), running the user's ``server_selector`` there
with no lock held.  ``lock`` guards the list (one per session; their
order: :mod:`jsclient.core`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from ..backoff import SPREAD
from ..errors import InvalidArgumentError, ServerSelectorError
from ..options import mask_url, normalise_url

#: ``server_selector(pool, lost)``: the pool in the order a reconnect round would try it, and the URL just
#: lost (None if none was ever connected); returns the URL of the pool to try first.
ServerSelector = Callable[[list[str], "str | None"], str]


class ServerPool:
    """One session's view of the shared URL list (see the module docstring)."""

    __slots__ = ("_report_error", "lock", "urls")

    def __init__(self, urls: list[str], report_error: Callable[[Exception], None]) -> None:
        self.urls = urls  # shared across forks: changed in place only
        self.lock = threading.Lock()
        self._report_error = report_error

    def copy(self) -> list[str]:
        with self.lock:
            return list(self.urls)

    def discover(self, urls: list[str], through: str | None, *, shuffle: bool) -> None:
        """Add cluster members announced in INFO, with the scheme of the URL ``through`` which they were
        learnt (a ws:// client hears of WebSocket ports)."""
        scheme = urlsplit(through).scheme if through else "nats"
        with self.lock:
            known = {urlsplit(url).netloc.rpartition("@")[2] for url in self.urls}
            fresh = [f"{scheme}://{u}" for u in urls if isinstance(u, str) and u not in known]
            if not fresh:
                return
            if shuffle:
                SPREAD.shuffle(fresh)
            self.urls.extend(fresh)

    def replace(self, urls: Sequence[str], *, shuffle: bool) -> None:
        """``set_servers``: the given URLs (checked by the caller) become the pool."""
        fresh = list(urls)
        if shuffle:
            SPREAD.shuffle(fresh)
        with self.lock:
            self.urls[:] = fresh

    def round(self, lost: str | None, selector: ServerSelector | None) -> list[str]:
        """The order of one reconnect round: the server just ``lost`` goes last, the selector's choice first."""
        pool = self.copy()
        order = [url for url in pool if url != lost] + [url for url in pool if url == lost]
        chosen = self._select(order, lost, selector)
        if chosen is not None:
            order.remove(chosen)
            order.insert(0, chosen)
        return order

    def _select(self, order: list[str], lost: str | None, selector: ServerSelector | None) -> str | None:
        """The pool URL the user's server_selector puts first (None: no selector, or it failed).

        A selector that raises, or answers with something not in ``order``,
        is reported as a ServerSelectorError and this round keeps the
        default order.  Its exception's text is left out of ours (a URL in
        it may carry a password); the exception is the error's ``__cause__``.
        """
        if selector is None or not order:
            return None
        try:
            answer = selector(list(order), lost)
        except Exception as exc:  # noqa: BLE001 - user code: reported, and the round goes on
            error = ServerSelectorError(
                f"server_selector raised {type(exc).__name__}; trying the servers in the default order"
            )
            error.__cause__ = exc
            self._report_error(error)
            return None
        chosen: object = answer
        if isinstance(answer, str) and answer not in order:
            try:
                chosen = normalise_url(answer)  # "host:port" for "nats://host:port", as the pool holds it
            except InvalidArgumentError:
                chosen = None
        if not isinstance(chosen, str) or chosen not in order:
            shown = _shown_answer(answer)
            self._report_error(
                ServerSelectorError(
                    f"server_selector returned {shown}, which is not in the server pool "
                    f"({', '.join(mask_url(url) for url in order)}); trying the servers in the default order"
                )
            )
            return None
        return chosen


def _shown_answer(answer: object) -> str:
    """A selector's answer for an error text: a URL with its password masked, else only its type."""
    if isinstance(answer, str):
        try:
            return repr(mask_url(answer))
        except ValueError:
            return "a str that is no URL"
    return f"a {type(answer).__name__}"
