"""Metrics and traces through OpenTelemetry's API (``pip install 'memshift[otel]'``).

Without ``opentelemetry-api`` nothing is imported and every hook is a constant check: the
drivers get their steps back untouched. With it, memshift records on the global providers
once the application installs an SDK (checked at most once a second; until then the hooks
stay as cheap as without the API, and OpenTelemetry is not even imported), or on the
providers given to :func:`configure`. ``MEMSHIFT_OTEL=0`` turns it off.

Attributes are numbers and names only: a thread is its hash (``thread_hash``), never its id;
no message text, summary or secret is ever an attribute. Metric names (meter ``memshift``):

=================================  =========  ==============================================
``memshift.save.duration``         histogram  seconds per ``save`` (attrs: engine, store)
``memshift.load.duration``         histogram  seconds per ``load``
``memshift.fold.duration``         histogram  seconds per summarizer fold (attrs: backend)
``memshift.fold.failures``         counter    failed folds (attr ``error.type``; a summary the
                                             fold checks refused: ``summary rejected (<reason>)``)
``memshift.summarizer.calls``      counter    folds attempted (one summary each)
``memshift.summarizer.tokens``     counter    tokens of the summaries produced
``memshift.moves``                 counter    threads moved (attrs ``from``, ``to``)
``memshift.shadow.mismatches``     counter    shadow mismatches (attrs kind, class, ignored)
``memshift.shadow.queue_drops``    counter    candidate writes dropped (queue full)
``memshift.folds.pending``         gauge      background folds not yet landed
=================================  =========  ==============================================

Spans: ``memshift.save``, ``memshift.load``, ``memshift.fold``, ``memshift.move``.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Generator
from typing import Any

__all__ = ["TELEMETRY", "configure", "observed", "thread_hash"]


def thread_hash(thread_id: str) -> str:
    """How telemetry and audits name a thread: its id may itself be personal data. Keyed
    with ``$MEMSHIFT_HASH_KEY`` (HMAC-SHA256) when set, so a guessable id (an e-mail, a
    number) cannot be found by hashing candidates; else a plain SHA-256."""
    data = thread_id.encode("utf-8", "surrogatepass")
    key = os.environ.get("MEMSHIFT_HASH_KEY")
    digest = hmac.new(key.encode(), data, hashlib.sha256) if key else hashlib.sha256(data)
    return digest.hexdigest()[:16]


_OFF = ("0", "false", "no", "off")
# providers named in the environment: the API builds them on its first use, no import needed
_PROVIDER_ENV = ("OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER")


def _api_found() -> bool:
    """Whether OpenTelemetry's API is installed and not turned off, found without importing
    it (``import compat`` must not load it for an application that never uses it)."""
    if os.environ.get("MEMSHIFT_OTEL", "1").strip() in _OFF:
        return False
    try:
        return importlib.util.find_spec("opentelemetry") is not None
    except (ImportError, ValueError):
        return False


def _api() -> tuple[Any, Any] | None:
    try:
        from opentelemetry import metrics, trace
    except ImportError:
        return None
    return metrics, trace


def _global_sdk_possible() -> bool:
    """An application that installs an SDK globally has imported the API's ``trace`` or
    ``metrics`` module (or names a provider in the environment): without either, nothing
    could receive a record, and OpenTelemetry stays unimported."""
    return "opentelemetry.trace" in sys.modules or "opentelemetry.metrics" in sys.modules \
        or any(name in os.environ for name in _PROVIDER_ENV)


class _Telemetry:
    """The instruments, made on first need per provider pair: ``configure``'s providers at
    once, the global ones when an SDK is first seen there. ``on`` is False without the API."""

    def __init__(self) -> None:
        self.on = self._live = self._explicit = self._ready = False
        self._next_check = 0.0
        self._pending: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()

    def setup(self, meter_provider: Any = None, tracer_provider: Any = None) -> None:
        """Record on these providers (made now), or with none, on the global ones once an SDK
        is installed there (nothing is imported until then)."""
        with self._lock:
            self.on = _api_found()
            self._explicit = meter_provider is not None or tracer_provider is not None
            self._ready = self._live = False
            self._next_check = 0.0
            if self.on and self._explicit:
                self._instruments(meter_provider, tracer_provider)

    def _instruments(self, meter_provider: Any = None, tracer_provider: Any = None) -> None:
        api = _api()
        if api is None:  # found but not importable (a partial install)
            self.on = False
            return
        metrics, trace = api
        version = _version()
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("memshift", version)
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer("memshift",
                                                                                  version)
        self.status = trace.Status, trace.StatusCode
        histogram, counter = meter.create_histogram, meter.create_counter
        self.durations = {kind: histogram(f"memshift.{kind}.duration", unit="s",
                                          description=f"seconds per {kind}")
                          for kind in ("save", "load", "fold")}
        self.fold_failures = counter("memshift.fold.failures", description="failed folds")
        self.calls = counter("memshift.summarizer.calls", description="summaries asked for")
        self.tokens = counter("memshift.summarizer.tokens", unit="{token}",
                              description="tokens of the summaries produced")
        self.moves = counter("memshift.moves", description="threads moved between backends")
        self.mismatches = counter("memshift.shadow.mismatches", description="shadow mismatches")
        self.drops = counter("memshift.shadow.queue_drops",
                             description="candidate writes dropped (queue full)")
        meter.create_observable_gauge("memshift.folds.pending", callbacks=[self._observe],
                                      description="background folds not yet landed")
        self._ready = True

    def live(self) -> bool:
        """Whether anything would receive what memshift records: providers given to
        ``configure``, or an SDK installed globally (checked at most once a second). With the
        API alone, the drivers run bare: no hash, no span, no clock read, no import."""
        if not self.on:
            return False
        if self._explicit:
            return True
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + 1.0
            self._live = _global_sdk_possible() and self._global_sdk()
        return self._live

    def _global_sdk(self) -> bool:
        from adapters._upstream import otel_sdk_installed

        if not otel_sdk_installed():
            return False
        with self._lock:
            if not self._ready and not self._explicit:
                self._instruments()
        return self.on

    # -- what the library reports -----------------------------------------------------------
    def watch(self, engine: Any) -> None:
        """``engine.pending_folds()`` counts towards ``memshift.folds.pending`` (kept weakly,
        also while off: a later ``configure`` sees engines made before it)."""
        self._pending.add(engine)

    def _observe(self, _options: Any) -> list[Any]:
        from opentelemetry.metrics import Observation

        return [Observation(sum(e.pending_folds() for e in list(self._pending)))]

    def span(self, name: str, attributes: dict[str, Any]) -> Any:
        return self.tracer.start_span(f"memshift.{name}", attributes=attributes)

    def end(self, span: Any, error: BaseException | str | None) -> None:
        if error is not None:
            status, code = self.status
            span.set_attribute("error.type", _error_type(error))
            span.set_status(status(code.ERROR))
        span.end()

    def fold(self, record: Any) -> None:
        """One fold record (``FoldRecord.log``): latency, the call, tokens, failures."""
        if not self.live():
            return
        attrs = {"memshift.backend": record.backend or "", "memshift.trigger": record.trigger}
        seconds = record.duration_ms / 1000
        self.durations["fold"].record(seconds, attrs)
        self.calls.add(1, attrs)
        end = time.time_ns()
        span = self.tracer.start_span("memshift.fold", start_time=end - int(seconds * 1e9),
                                      attributes={**attrs, "memshift.thread.hash":
                                                  thread_hash(record.thread_id)})
        if record.error:
            self.fold_failures.add(1, {**attrs, "error.type": _error_type(record.error)})
            self.end(span, record.error)
        else:
            self.tokens.add(record.summary_tokens, attrs)
            span.end(end_time=end)

    def move(self, thread_id: str, source: str, target: str) -> None:
        if self.live():
            attrs = {"from": source, "to": target}
            self.moves.add(1, attrs)
            self.tracer.start_span("memshift.move", attributes={
                **attrs, "memshift.thread.hash": thread_hash(thread_id)}).end()

    def mismatch(self, kind: str, cls: str, ignored: bool) -> None:
        if self.live():
            self.mismatches.add(1, {"kind": kind, "class": cls, "ignored": ignored})

    def drop(self) -> None:
        if self.live():
            self.drops.add(1)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memshift")
    except PackageNotFoundError:
        return "0"


def _error_type(error: BaseException | str) -> str:
    return type(error).__name__ if isinstance(error, BaseException) else \
        error.split(":")[0].strip()[:60]


TELEMETRY = _Telemetry()
TELEMETRY.setup()


def configure(meter_provider: Any = None, tracer_provider: Any = None) -> None:
    """Record on these providers instead of the global ones (tests, or an application that
    keeps its own)."""
    TELEMETRY.setup(meter_provider, tracer_provider)


Steps = Generator[Any, Any, Any]


def observed(kind: str, engine: Any, thread_id: str, steps: Steps) -> Steps:
    """``steps`` timed and traced as one ``save``/``load`` (``steps`` itself when off, or
    when nothing would receive it)."""
    if not TELEMETRY.live():
        return steps
    return _observed(kind, engine, thread_id, steps, time.perf_counter)


def _observed(kind: str, engine: Any, thread_id: str, steps: Steps,
              clock: Callable[[], float]) -> Steps:
    attrs = {"memshift.engine": engine.name, "memshift.store": _store_kind(engine)}
    span = TELEMETRY.span(kind, {**attrs, "memshift.thread.hash": thread_hash(thread_id)})
    start = clock()
    try:
        result = yield from steps
    except BaseException as exc:
        TELEMETRY.durations[kind].record(clock() - start, {**attrs, "error.type":
                                                           type(exc).__name__})
        TELEMETRY.end(span, exc)
        raise
    TELEMETRY.durations[kind].record(clock() - start, attrs)
    TELEMETRY.end(span, None)
    return result


def _store_kind(engine: Any) -> str:
    try:
        url = str(engine.store.url)
    except Exception:  # noqa: BLE001 - an engine without one store
        return "mixed"
    return "memory" if url.startswith("memory") else url.split(":", 1)[0]
