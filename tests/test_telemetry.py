"""OpenTelemetry: memshift's metrics and spans, read with the SDK's in-memory reader and
exporter — and never a message, a summary or a thread id in an attribute."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adapters import MemoryPolicy, telemetry
from compat import SummaryMemory, admin
from compat.testing import filler_turn

POLICY = MemoryPolicy(max_tokens=120, keep_tokens=60)
SECRET = "ZEBRA-7731-PASSPORT"


class Read:
    def __init__(self) -> None:
        self.reader, self.spans = InMemoryMetricReader(), InMemorySpanExporter()
        tracer = TracerProvider()
        tracer.add_span_processor(SimpleSpanProcessor(self.spans))
        telemetry.configure(MeterProvider(metric_readers=[self.reader]), tracer)

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        return [p for rm in (data.resource_metrics if data else []) for sm in rm.scope_metrics
                for m in sm.metrics if m.name == name for p in m.data.data_points]

    def total(self, name: str, **attrs: Any) -> float:
        return sum(getattr(p, "sum", getattr(p, "value", 0)) for p in self.points(name)
                   if all(p.attributes.get(k) == v for k, v in attrs.items()))

    def count(self, name: str) -> int:
        return sum(p.count for p in self.points(name))


@pytest.fixture
def otel() -> Iterator[Read]:
    yield Read()
    telemetry.configure()  # back to the global (no-op) providers


@pytest.mark.parametrize("store_kind", ["memory", "sqlite", "postgres"])
def test_saves_loads_and_folds_are_measured(otel: Read, store_kind: str, fresh_store) -> None:
    with SummaryMemory(store=fresh_store(store_kind), policy=POLICY) as memory:
        for i in range(10):
            memory.save("user-1", *filler_turn("user-1", i, 8))
            memory.load("user-1")
        folds = memory.load("user-1").folds
    assert folds >= 2
    assert otel.count("memshift.save.duration") == 10
    assert otel.count("memshift.load.duration") == 11
    assert otel.count("memshift.fold.duration") == folds == otel.total("memshift.summarizer.calls")
    assert otel.total("memshift.summarizer.tokens") > 0
    kinds = {p.attributes["memshift.store"] for p in otel.points("memshift.save.duration")}
    assert kinds == {"memory" if store_kind == "memory" else
                     "sqlite" if store_kind == "sqlite" else "postgresql"}
    names = [s.name for s in otel.spans.get_finished_spans()]
    assert names.count("memshift.save") == 10 and names.count("memshift.fold") == folds


def test_failures_moves_mismatches_and_pending_folds(otel: Read) -> None:
    class Down:
        def summarize(self, summary: str, messages: list) -> str:
            raise RuntimeError("the model is down")

    failing = SummaryMemory(policy=POLICY, summarizer=Down())
    for i in range(8):
        failing.save("t", *filler_turn("t", i, 8))
    assert otel.total("memshift.fold.failures") >= 1
    assert all(p.attributes["error.type"] for p in otel.points("memshift.fold.failures"))

    staged = SummaryMemory(backend="staged", rollout=0.0, policy=POLICY)
    staged.save("m", "q", "a")
    admin.pin(staged, "m", "middleware")
    assert otel.total("memshift.moves", **{"from": "classic", "to": "middleware"}) == 1

    shadow = SummaryMemory(backend="shadow", policy=POLICY, ignore=["whitespace"])
    candidate = shadow.backend_impl.candidate_backend
    real = candidate.load
    candidate.load = lambda t, *a, **k: replace(  # type: ignore[method-assign]
        v := real(t, *a, **k), summary=v.summary + "  ")
    for i in range(8):
        shadow.save("s", *filler_turn("s", i, 8))
        shadow.load("s")
    shadow.drain(30)
    assert otel.total("memshift.shadow.mismatches", kind="view", ignored=True) == \
        len(shadow.mismatches) > 0

    import threading

    gate, entered = threading.Event(), threading.Event()

    class Held:
        def summarize(self, summary: str, messages: list) -> str:
            entered.set()
            gate.wait(30)
            return "held summary"

    background = SummaryMemory(policy=replace(POLICY, fold="background"), summarizer=Held())
    for i in range(6):  # the sixth turn hands a fold to the background (within the lag bound)
        background.save("b", *filler_turn("b", i, 8))
    assert entered.wait(30)
    assert otel.total("memshift.folds.pending") == 1
    gate.set()
    background.drain(30)
    assert otel.total("memshift.folds.pending") == 0


def test_no_text_and_no_thread_id_in_any_attribute(otel: Read) -> None:
    with SummaryMemory(backend="shadow", policy=POLICY,
                       candidate_policy=MemoryPolicy(max_tokens=60, keep_tokens=30)) as memory:
        for i in range(8):
            human, ai = filler_turn("alice@example.com", i, 8)
            memory.save("alice@example.com", f"{human} {SECRET}", ai)
            memory.load("alice@example.com")
        memory.drain(30)
    attributes = [dict(s.attributes or {}) for s in otel.spans.get_finished_spans()]
    data = otel.reader.get_metrics_data()
    dumped = json.dumps(attributes) + (data.to_json() if data else "")
    assert attributes and SECRET not in dumped and "alice@example.com" not in dumped
    assert telemetry.thread_hash("alice@example.com") in dumped


def test_without_the_api_nothing_is_imported_and_steps_go_bare() -> None:
    code = ("import sys; sys.modules['opentelemetry'] = None\n"
            "from adapters import telemetry\n"
            "from compat import SummaryMemory\n"
            "m = SummaryMemory(); m.save('t', 'q', 'a'); m.load('t')\n"
            "steps = iter(())\n"
            "assert telemetry.observed('save', None, 't', steps) is steps\n"
            "assert not telemetry.TELEMETRY.on\n"
            "print('ok', 'opentelemetry' in sys.modules and sys.modules['opentelemetry'] is not None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "False"]


def test_memshift_otel_0_turns_it_off() -> None:
    code = ("from adapters import telemetry; import sys\n"
            "print(telemetry.TELEMETRY.on)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**__import__("os").environ, "MEMSHIFT_OTEL": "0"})
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


_GLOBAL_SDK = ("from opentelemetry import metrics\n"
               "from opentelemetry.sdk.metrics import MeterProvider\n"
               "from opentelemetry.sdk.metrics.export import InMemoryMetricReader\n"
               "reader = InMemoryMetricReader()\n"
               "metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))\n")
_SAVE_AND_REPORT = ("from compat import SummaryMemory\n"
                    "m = SummaryMemory(); m.save('t', 'q', 'a'); m.load('t')\n"
                    "names = [x.name for rm in reader.get_metrics_data().resource_metrics\n"
                    "         for sm in rm.scope_metrics for x in sm.metrics]\n"
                    "print('memshift.save.duration' in names)\n")


def _reaches_a_global_sdk(code: str) -> None:
    """``code`` (it installs ``_GLOBAL_SDK`` and ends with ``_SAVE_AND_REPORT``) in a fresh
    process: a global provider can be set once per process."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_the_api_alone_costs_nothing_and_a_global_sdk_is_picked_up() -> None:
    """With the API but no SDK the drivers run bare; once the application installs an SDK
    globally (after memshift was imported, as apps do), memshift's metrics reach it."""
    _reaches_a_global_sdk(
        "import time\n"
        "from adapters import telemetry\n"
        "steps = iter(())\n"
        "assert telemetry.TELEMETRY.on and not telemetry.TELEMETRY.live()\n"
        "assert telemetry.observed('save', None, 't', steps) is steps\n"
        + _GLOBAL_SDK + "time.sleep(1.1)\n" + _SAVE_AND_REPORT)


@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
def test_the_command_line_is_measured_too(otel: Read, store_kind: str, fresh_store,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The commands run the same library: a replay's saves and folds, a rollout's moves."""
    from compat import cli
    from tests.conftest import ROOT

    assert cli.main(["replay", "--quiet", str(ROOT / "examples/conversations/lance_49ers.jsonl"),
                     "--max-tokens", "120"]) == 0
    assert otel.count("memshift.save.duration") > 0 and otel.total("memshift.summarizer.calls") > 0
    url = fresh_store(store_kind)
    with SummaryMemory(store=url, policy=POLICY) as memory:
        for thread in ("a", "b", "c"):
            memory.save(thread, "q", "a")
    assert cli.main(["rollout", "move", "--store", url, "--to", "middleware", "--share", "1",
                     "--quiet"]) == 0
    capsys.readouterr()
    assert otel.total("memshift.moves", **{"from": "classic", "to": "middleware"}) == 3


def test_an_sdk_meter_set_before_memshift_is_imported_is_used() -> None:
    """Only a meter provider, installed before memshift is imported (as
    ``opentelemetry-instrument`` does): memshift records on it."""
    _reaches_a_global_sdk(_GLOBAL_SDK + _SAVE_AND_REPORT)
