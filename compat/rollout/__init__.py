"""Guarded rollouts: raise the staged share one step at a time and halt (or step back) when
what the cohort just moved says is wrong — after LaunchDarkly's guarded rollouts.

A step moves the threads the next share assigns to ``middleware`` (each in its own move
transaction, like ``memshift rollout move``), waits ``interval`` seconds (default
``DEFAULT_INTERVAL``, 5 minutes: long enough for the moved threads to see traffic and fold, and
for every app server's shadow to have written what it found), then reads the evidence. Shadow
evidence is read from the store the fleet shares (``memshift_evidence``: every app server's
shadow writes there, ``adapters.stores.evidence``) and, when given, from a shadow log (JSONL);
a mismatch found in both is counted once.

- ``mismatch_rate``: of the moved threads a shadow compared (while classic still served
  them), the share with a *counted* mismatch (a class not ignored: ``adapters.diff_classes``;
  candidate failures count);
- ``mismatches``: counted mismatches recorded since the run began, on any thread (the
  shadowed threads still on classic included);
- ``fold_failure_rate`` / ``fold_failures``: fold records of the moved threads written since
  the run began that carry an error, over all of them.

A guard with no evidence — no moved thread compared by any shadow (mismatch guards), no fold
of the moved threads since the run began (fold guards) — does not pass: the step halts and
says ``no evidence`` (a rollout never walks past a step nobody measured; wait longer, or check
that the shadow writes to this store). A step whose moved threads are fewer than
``min_threads`` is not judged and says so. Every decision is returned and, on a SQL store,
recorded in the run log (``memshift history``).
"""

from __future__ import annotations

import operator
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from adapters.errors import ConfigError, CorruptDataError, StoreError
from adapters.shadow_record import read_log
from adapters.stores.evidence import EvidenceLog, EvidenceRow

__all__ = ["DEFAULT_INTERVAL", "Evidence", "Guard", "Journal", "Step", "advance", "gather",
           "parse_guards"]

DEFAULT_INTERVAL = 300.0  # seconds a step waits for traffic before its guards are read
LOST_AFTER = 3  # store errors in a row that mean the store, not one thread, is gone
METRICS = ("mismatch_rate", "mismatches", "fold_failure_rate", "fold_failures")
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
_GUARD = re.compile(r"^\s*([a-z_]+)\s*(<=|<|>=|>)\s*([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*$")


@dataclass(frozen=True)
class Guard:
    """``metric op value``: the rollout may go on while it holds."""

    metric: str
    op: str
    value: float

    def holds(self, evidence: Evidence) -> bool | None:
        """``None``: there is no evidence to judge it on."""
        value = evidence.get(self.metric)
        return None if value is None else _OPS[self.op](value, self.value)

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.value:g}"


def parse_guards(spec: str) -> list[Guard]:
    """``"mismatch_rate<0.01,fold_failure_rate<0.05"`` -> guards (a ``ConfigError`` names
    what is wrong: an unknown metric, a missing bound)."""
    guards = []
    for part in filter(str.strip, spec.split(",")):
        match = _GUARD.match(part)
        if match is None:
            raise ConfigError(f"guard {part.strip()!r}: write metric<value, e.g. "
                              "mismatch_rate<0.01")
        metric, op, value = match.groups()
        if metric not in METRICS:
            raise ConfigError(f"guard {part.strip()!r}: unknown metric {metric!r}; use one of "
                              f"{', '.join(METRICS)}")
        guards.append(Guard(metric, op, float(value)))
    if not guards:
        raise ConfigError("--guard needs at least one guard, e.g. mismatch_rate<0.01")
    return guards


@dataclass
class Evidence:
    threads: int = 0  # threads moved by this run so far (the judged cohort)
    compared: int = 0  # of them, compared by a shadow (the store's or the log's record)
    mismatching_threads: int = 0
    mismatches: int = 0
    ignored: int = 0  # ignored mismatches of the cohort: recorded, never counted
    folds: int = 0
    fold_failures: int = 0
    sources: list[str] = field(default_factory=list)  # "store", "log"

    def get(self, metric: str) -> float | None:
        """The metric's value; ``None`` when nothing was measured (never a 0 that looks
        measured)."""
        if metric == "mismatch_rate":
            return self.mismatching_threads / self.compared if self.compared else None
        if metric == "mismatches":
            return float(self.mismatches) if self.compared or self.mismatches else None
        if metric == "fold_failure_rate":
            return self.fold_failures / self.folds if self.folds else None
        if metric == "fold_failures":
            return float(self.fold_failures) if self.folds else None
        raise ConfigError(f"unknown metric {metric!r}")

    def missing(self, metric: str) -> str:
        """Why ``metric`` has no evidence."""
        if metric.startswith("mismatch"):
            where = " or the shadow log" if "log" in self.sources else ""
            return (f"no evidence: no shadow comparison of the {self.threads} moved thread(s) "
                    f"is recorded in the store{where}")
        return f"no evidence: no fold of the {self.threads} moved thread(s) since the run began"

    def as_dict(self) -> dict[str, Any]:
        rates = {m: None if (v := self.get(m)) is None else round(v, 6)
                 for m in ("mismatch_rate", "fold_failure_rate")}
        return {**self.__dict__, "sources": list(self.sources), **rates}


@dataclass
class Step:
    """One step's decision: ``advanced``, ``reached`` (the target), ``unjudged`` (too few
    threads), ``halted`` or ``rolled_back`` (a guard tripped, or had no evidence: named in
    ``no_evidence``)."""

    share_from: float
    share_to: float
    moved: int
    failed: int
    decision: str
    evidence: dict[str, Any] = field(default_factory=dict)
    tripped: list[str] = field(default_factory=list)
    no_evidence: list[str] = field(default_factory=list)


def gather(cohort: set[str], since: str, shadow_log: str | None,
           folds_of: Callable[[str], list[dict[str, Any]]],
           stores: Iterable[EvidenceLog] = ()) -> Evidence:
    """The evidence on ``cohort`` (and, for ``mismatches``, every thread since ``since``),
    from the stores' shadow evidence and the shadow log."""
    stores = list(stores)
    evidence = Evidence(threads=len(cohort),
                        sources=["store"] * bool(stores) + ["log"] * bool(shadow_log))
    of: list[EvidenceRow] = []  # the cohort's rows, then every row since the run began
    recent: list[EvidenceRow] = []
    for store in stores:
        of += store.evidence_of(sorted(cohort))
        recent += store.evidence_since(since)
    for record in read_log(shadow_log) if shadow_log else ():
        if record is not None:
            row = EvidenceRow(record.thread_id, record.kind, record.cls, record.ignored,
                              record.turn, record.at)
            of += [row] if row.thread_id in cohort else []
            recent += [row] if row.at >= since else []
    of, recent = list(dict.fromkeys(of)), list(dict.fromkeys(recent))  # in both: once
    evidence.compared = len({r.thread_id for r in of})
    evidence.mismatching_threads = len({r.thread_id for r in of if r.counted})
    evidence.ignored = sum(r.ignored for r in of)
    evidence.mismatches = sum(r.counted for r in recent)
    for thread_id in cohort:
        for fold in folds_of(thread_id):
            if str(fold.get("at", "")) >= since and fold.get("trigger") != "migrated":
                evidence.folds += 1
                evidence.fold_failures += bool(fold.get("error"))
    return evidence


def shares(start: float, target: float, step: float) -> list[float]:
    """The shares the rollout passes through, up or down, ending exactly at ``target``."""
    if not 0 < step <= 1:
        raise ConfigError(f"--step must be in (0, 1], got {step}")
    out, share = [], start
    sign = 1 if target >= start else -1
    while abs(target - share) > 1e-9:
        share = min(share + step, target) if sign > 0 else max(share - step, target)
        out.append(round(share, 9))
    return out


class Journal(Protocol):
    """Where each step's record goes (the CLI: the run log). ``begin`` runs before the step
    moves anything, naming every thread it is about to move, so a step cut off at any point
    leaves a record of every thread it moved; ``end`` and ``cut`` complete it."""

    def begin(self, share_from: float, share_to: float, moving: list[str]) -> None: ...

    def end(self, step: Step, moved: set[str]) -> None: ...

    def cut(self, moved: set[str], exc: BaseException) -> None: ...


class _NoJournal:
    def begin(self, share_from: float, share_to: float, moving: list[str]) -> None:
        return None

    def end(self, step: Step, moved: set[str]) -> None:
        return None

    def cut(self, moved: set[str], exc: BaseException) -> None:
        return None


def advance(memory_at: Callable[[float], Any], thread_ids: Callable[[Any], Iterable[str]], *,
            start: float, target: float, step: float, guards: list[Guard],
            shadow_log: str | None = None, min_threads: int = 1,
            interval: float = DEFAULT_INTERVAL,
            rollback_on_trip: bool = False, journal: Journal | None = None,
            between: Callable[[], None] = lambda: None,
            sleep: Callable[[float], None] = time.sleep) -> list[Step]:
    """Walk the share from ``start`` to ``target``. ``memory_at(share)`` opens a staged
    memory at that share (a context manager); ``thread_ids(memory)`` lists its threads;
    ``between()`` runs after each thread moved (a stop request raises there). A store that
    goes away mid-step halts the rollout there (a ``halted`` step), like a tripped guard.
    Shadow evidence: the memory's stores (``memshift_evidence``) and ``shadow_log``."""
    from compat.admin import summary_history

    journal = journal or _NoJournal()
    since = datetime.now(timezone.utc).isoformat()
    forward, backward = ("middleware", "classic") if target >= start else ("classic", "middleware")
    cohort: set[str] = set()
    steps: list[Step] = []
    previous = start
    for share in shares(start, target, step):
        moved: set[str] = set()
        failed, lost = 0, ""
        evidence = Evidence()
        try:
            with memory_at(share) as memory:
                moving = _cohort(memory, thread_ids(memory), forward)
                journal.begin(previous, share, moving)
                failed = _move(memory, moving, forward, moved, between)
                cohort |= moved
                if interval and not failed:  # (a thread that did not move halts the step)
                    sleep(interval)
                evidence = gather(cohort, since, shadow_log,
                                  lambda tid: summary_history(memory, tid),
                                  _evidence_stores(memory))
        except StoreError as exc:  # the store went away: halt here, as a tripped guard does
            cohort |= moved
            evidence = Evidence(threads=len(cohort))
            lost = f"the store was lost mid-step ({exc})"
        except BaseException as exc:
            journal.cut(moved, exc)
            raise
        judged = evidence.threads >= min_threads and not lost
        verdicts = [(g, g.holds(evidence)) for g in guards] if judged else []
        blind = [str(g) for g, held in verdicts if held is None]
        tripped = [str(g) for g, held in verdicts if held is False]
        tripped += [f"{g}: {evidence.missing(g.metric)}" for g, held in verdicts if held is None]
        if failed:  # judged or not: a thread that did not move is never walked past
            tripped.append(f"{failed} thread(s) failed to move")
        if lost:
            tripped.append(lost)
        decision = "reached" if share == target else "advanced" if judged else "unjudged"
        if tripped:
            decision = "halted"
            if rollback_on_trip and not lost:
                with memory_at(previous) as back:
                    stuck = _move(back, _cohort(back, sorted(moved), backward), backward,
                                  set(), between)
                cohort -= moved
                decision = "rolled_back"
                if stuck:
                    tripped.append(f"{stuck} thread(s) failed to move back")
                    decision = "halted"
        result = Step(previous, share, len(moved), failed, decision, evidence.as_dict(), tripped,
                      blind)
        steps.append(result)
        journal.end(result, moved)
        if tripped:
            break
        previous = share
    return steps


def _evidence_stores(memory: Any) -> list[EvidenceLog]:
    """The memory's stores that keep shadow evidence (each once)."""
    found: dict[int, EvidenceLog] = {}
    for store in memory.backend_impl.homes():
        if isinstance(store, EvidenceLog):
            found.setdefault(id(store), store)
    return list(found.values())


def _cohort(memory: Any, thread_ids: Iterable[str], to: str) -> list[str]:
    """The listed threads this memory's share assigns to ``to`` that live elsewhere now (a
    thread with no placement yet lives on classic)."""
    engine = memory.backend_impl
    out = []
    for thread_id in thread_ids:
        if engine.desired(thread_id) != to:
            continue
        before = engine.placement_of(thread_id)
        if (before.backend if before is not None else "classic") != to:
            out.append(thread_id)
    return out


def _move(memory: Any, thread_ids: Iterable[str], to: str, moved: set[str],
          between: Callable[[], None]) -> int:
    """Place the threads (into ``moved``, the ids that landed on ``to``); the number that
    failed. A lost store is raised, not counted: no later thread could move either."""
    engine = memory.backend_impl
    failed = unreachable = 0
    for thread_id in thread_ids:
        try:
            after = engine.place(thread_id)
            unreachable = 0
        except CorruptDataError:  # one thread's bad row: counted
            failed += 1
            continue
        except StoreError:  # the store, not the thread: a few in a row and the step halts
            failed += 1
            unreachable += 1
            if unreachable == LOST_AFTER:
                raise
            continue
        except Exception:  # noqa: BLE001 - one bad thread never stops the step; counted
            failed += 1
            continue
        if after is not None and after.backend == to:
            moved.add(thread_id)
        between()
    return failed
