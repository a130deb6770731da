"""OpenTelemetry instrumentation of jsclient: spans, metrics and trace context in NATS headers.

``pip install 'jsclient[otel]'``, then either run the program under
``opentelemetry-instrument`` (this instrumentor is registered under the
``opentelemetry_instrumentor`` entry point group as ``jsclient``) or call
``JsclientInstrumentor().instrument()``.  Importing :mod:`jsclient` alone
never imports OpenTelemetry, and ``uninstrument()`` puts back the very
methods that ran before and clears :mod:`jsclient.observe`'s hooks, so an
uninstrumented program pays nothing (the dispatch hook is read once per
round of a callback subscription's messages, see :mod:`.dispatch`).  See
:doc:`/guides/observability`.

``instrument()`` and ``uninstrument()`` may be called from any thread; a
lock keeps them from interleaving.  The spans themselves are made on the
thread of each traced call (see :mod:`jsclient.instrumentation.telemetry`).
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined, unused-ignore]
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from ..errors import InvalidArgumentError
from . import core, dispatch, jetstream, metrics, micro, spark, stores
from .patches import Patches
from .telemetry import DEFAULT_SPAN_NAME, SPAN_NAME_FIELDS, Telemetry, check_span_name

__all__ = ["DEFAULT_SPAN_NAME", "SPAN_NAME_FIELDS", "JsclientInstrumentor"]

_KEYWORDS = frozenset({"tracer_provider", "meter_provider", "span_name"})
#: The modules whose ``install(patches, telemetry)`` wraps their layer's public methods, in this order
#: (jetstream after core: its wrappers of core methods go outside the core's).
_PARTS = (core, jetstream, stores, micro, dispatch, metrics, spark)
_lock = threading.Lock()


class JsclientInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Switches jsclient's OpenTelemetry spans and metrics on (:meth:`instrument`) and off.

    ``instrument(tracer_provider=None, meter_provider=None, span_name="{operation} {subject}")``:
    the providers default to the global ones; ``span_name`` is a template of ``{operation}``,
    ``{subject}`` and ``{pattern}`` (a subscription's subject, wildcards and all): NATS subjects
    often carry ids, and a tracing backend groups spans by name, so ``"{operation} {pattern}"``
    keeps the names few.  A bad keyword raises :class:`jsclient.InvalidArgumentError` and leaves
    nothing instrumented.
    """

    _patches: Patches | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        """What must be installed for :meth:`instrument` to work: nothing beyond jsclient itself.

        Returns:
            An empty collection: the instrumentation ships inside jsclient.

        Raises:
            : Nothing.
        """
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - _KEYWORDS)
        if unknown:
            raise InvalidArgumentError(
                f"instrument() got unknown keyword(s) {', '.join(unknown)}; it takes {', '.join(sorted(_KEYWORDS))}"
            )
        tracer_provider = kwargs.get("tracer_provider")
        if tracer_provider is not None and not isinstance(tracer_provider, TracerProvider):
            raise InvalidArgumentError(
                f"tracer_provider must be an opentelemetry.trace.TracerProvider, not {type(tracer_provider).__name__}"
            )
        meter_provider = kwargs.get("meter_provider")
        if meter_provider is not None and not isinstance(meter_provider, MeterProvider):
            raise InvalidArgumentError(
                f"meter_provider must be an opentelemetry.metrics.MeterProvider, not {type(meter_provider).__name__}"
            )
        span_name = check_span_name(kwargs.get("span_name", DEFAULT_SPAN_NAME))
        with _lock:
            tel = Telemetry(tracer_provider, meter_provider, span_name)
            patches = Patches()
            try:
                for part in _PARTS:
                    part.install(patches, tel)
            except BaseException:
                patches.undo()
                raise
            JsclientInstrumentor._patches = patches

    def _uninstrument(self, **kwargs: Any) -> None:
        with _lock:
            patches, JsclientInstrumentor._patches = JsclientInstrumentor._patches, None
            if patches is not None:
                patches.undo()
