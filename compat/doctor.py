"""``diagnose(url)``: where a store's threads live, and any thread a path would read wrong.

Read-only (SQLite ``mode=ro``, PostgreSQL read-only sessions): placements per backend and
pinned, threads with state on both backends and no record saying which one serves them (a
path would have to guess: the one place memshift can show a stale memory), threads no side
holds anything of (cleared: fine), stock ``SQLChatMessageHistory`` tables and how many of
their sessions memshift has adopted, memshift's tables and columns, and the versions of
memshift, LangChain and LangGraph. ``memshift doctor`` prints it; ``problems`` (each with the
command that fixes it) make it exit 1.
"""

from __future__ import annotations

from compat import admin
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Diagnosis", "diagnose"]

LEGACY_TABLES = ("message_store",)
VERSIONS = ("memshift", "langchain", "langchain-core", "langchain-classic", "langgraph",
            "langgraph-checkpoint")


@dataclass
class Diagnosis:
    store: str
    threads: int = 0
    placements: dict[str, int] = field(default_factory=dict)  # backend -> threads recorded
    pinned: dict[str, int] = field(default_factory=dict)
    moved_at_least_once: int = 0
    unrecorded: dict[str, int] = field(default_factory=dict)  # where unrecorded threads live
    ambiguous: list[str] = field(default_factory=list)  # state on both sides, no record
    empty: list[str] = field(default_factory=list)  # a transcript, no state where it lives
    fallback: list[str] = field(default_factory=list)  # newest fold: the offline fallback
    rejected: list[str] = field(default_factory=list)  # newest fold: a summary rejected
    lagging: list[str] = field(default_factory=list)  # newest record: past the lag bound
    legacy: dict[str, dict[str, int]] = field(default_factory=dict)  # table -> counts
    schema: dict[str, list[str]] = field(default_factory=dict)  # table -> columns
    schema_problems: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    problems: list[dict[str, str]] = field(default_factory=list)  # what, thread, fix

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"store": self.store, "ok": self.ok, "threads": self.threads,
                "placements": self.placements, "pinned": self.pinned,
                "moved_at_least_once": self.moved_at_least_once,
                "unrecorded": self.unrecorded, "ambiguous": self.ambiguous,
                "empty": self.empty, "fallback": self.fallback, "rejected": self.rejected,
                "lagging": self.lagging, "legacy": self.legacy,
                "schema": self.schema,
                "schema_problems": self.schema_problems, "versions": self.versions,
                "problems": self.problems}


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in VERSIONS:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def _schema(engine: Any, diagnosis: Diagnosis) -> set[str]:
    from sqlalchemy import inspect

    from adapters.stores.schema import metadata
    from adapters.stores.versions import CURRENT, read_status

    with engine.connect() as conn:
        status = read_status(conn)
    if not status.current:
        diagnosis.schema_problems.append(
            f"{status.describe()}; this memshift's is {CURRENT} (an upgrade is pending)")
    inspector = inspect(engine)
    tables = set(inspector.get_table_names())
    for table in metadata.sorted_tables:
        if table.name not in tables:
            diagnosis.schema_problems.append(f"{table.name}: missing")
            continue
        have = {c["name"] for c in inspector.get_columns(table.name)}
        diagnosis.schema[table.name] = sorted(have)
        for column in table.columns:
            if column.name not in have:
                diagnosis.schema_problems.append(
                    f"{table.name}.{column.name}: missing (a store from an older memshift)")
    return tables


def _behind(url: str, diagnosis: Diagnosis) -> bool:
    """A store whose tables are behind this memshift's: the one problem to report (its
    threads cannot be read until it is upgraded)."""
    from adapters.stores.readonly import read_engine
    from adapters.stores.versions import CURRENT, read_status

    engine = read_engine(url)
    try:
        with engine.connect() as conn:
            status = read_status(conn)
    finally:
        engine.dispose()
    if not status.behind:
        return False
    diagnosis.problems.append({
        "what": f"schema: {status.describe()}; this memshift's is {CURRENT} (an upgrade is "
                "pending, threads not examined)", "thread": "",
        "fix": "memshift schema upgrade --store URL (or open the store once with this "
               "memshift version)"})
    return True


def _legacy(engine: Any, tables: set[str], store: Any, diagnosis: Diagnosis) -> None:
    from compat._adopt import held, legacy_sessions

    for name in LEGACY_TABLES:
        if name not in tables:
            continue
        sessions = legacy_sessions(engine, name)
        adopted = sum(held(store, session) for session in sessions)
        diagnosis.legacy[name] = {"sessions": len(sessions), "adopted": adopted,
                                  "not_yet": len(sessions) - adopted}


def _has_state(view: Any) -> bool:
    return bool(view.messages or view.summary)


def _unfolded(history: list[dict[str, Any]], shown: str, diagnosis: Diagnosis) -> None:
    """A thread whose newest fold records are rejected summaries (``check_summaries``), or
    a save past the lag bound the fold did not land for: its window stays verbatim and grows."""
    from adapters.fold_check import REJECTED

    rejected, why = 0, ""
    for record in reversed(history):  # the newest run of rejections (lag records between)
        error = str(record.get("error") or "")
        if record.get("trigger") == "lag":
            continue
        if not error.startswith(REJECTED):
            break
        rejected, why = rejected + 1, why or error.split(":")[0]
    newest = history[-1] if history else {}
    if rejected:
        diagnosis.rejected.append(shown)
        diagnosis.problems.append({
            "what": f"the newest {rejected} fold(s) were rejected, the last as {why}: the "
                    "window stays verbatim and grows until a summary passes the checks",
            "thread": shown,
            "fix": "fix the summarizer (model, prompt, max_summary_tokens); the reasons are in "
                   "admin.summary_history; MemoryPolicy(check_summaries=False) accepts such "
                   "summaries as before"})
    elif (newest.get("lag") or {}).get("landed") is False:
        diagnosis.lagging.append(shown)
        diagnosis.problems.append({
            "what": "the window is past the lag bound and the fold in flight had not landed "
                    "at the newest record (a slow or failing summarizer)", "thread": shown,
            "fix": "check the summarizer's latency and the fold records (admin.summary_history); "
                   "raise max_lag_tokens / max_lag_seconds, or fold inline"})


def diagnose(url: str, *, limit: int | None = None,
             on_thread: Callable[[str], None] | None = None) -> Diagnosis:
    """Read ``url`` (a sqlite:/// or postgresql:// memshift store) and report; ``limit``:
    look at the first N threads only. Nothing is written."""
    from adapters.stores.url import show_url
    from adapters.stores.readonly import open_read_only, read_engine, table_names
    from compat.memory import SummaryMemory

    diagnosis = Diagnosis(store=show_url(url), versions=_versions())
    if _behind(url, diagnosis):
        return diagnosis
    store = open_read_only(url)
    if store is None:
        tables = table_names(url)
        diagnosis.schema_problems.append("no memshift tables: nothing stored by memshift yet")
        if set(LEGACY_TABLES) & tables:
            diagnosis.problems.append({
                "what": "stock chat histories and no memshift tables",
                "thread": "", "fix": "open the store with SummaryMemory (threads are adopted "
                                     "at first touch) or: memshift migrate --from classic ..."})
        return diagnosis
    engine = read_engine(url)
    try:
        tables = _schema(engine, diagnosis)
        _legacy(engine, tables, store, diagnosis)
    finally:
        engine.dispose()
    for backend, pinned, threads, moved in store.placement_counts():
        diagnosis.placements[backend] = diagnosis.placements.get(backend, 0) + threads
        if pinned:
            diagnosis.pinned[backend] = diagnosis.pinned.get(backend, 0) + threads
        diagnosis.moved_at_least_once += moved
    memory = SummaryMemory(backend="classic", store=store)
    classic, middleware = memory.backend_impl.leaves()[:2]
    unrecorded: Counter[str] = Counter()
    try:
        # ``thread_id``: what the stores keep; ``shown``: the id the application passed
        for n, (thread_id, shown) in enumerate(admin.iter_listed_threads(memory)):
            if limit is not None and n >= limit:
                break
            diagnosis.threads += 1
            if on_thread is not None:
                on_thread(shown)
            leaves = {"classic": classic, "middleware": middleware}
            history = admin.summary_history(memory, thread_id)
            if history and history[-1].get("summarizer") == "fallback":
                diagnosis.fallback.append(shown)
                diagnosis.problems.append({
                    "what": "the summarizer kept failing: the newest fold used the offline "
                            "fallback (the messages are in the transcript)", "thread": shown,
                    "fix": f"memshift resummarize --backend <backend> --thread {shown!r} "
                           f"--store {diagnosis.store}"})
            _unfolded(history, shown, diagnosis)
            placement = admin.placement(memory, thread_id)
            if placement is not None:  # the record decides: is there anything where it says?
                if not _has_state(leaves[placement.backend].load(thread_id)):
                    diagnosis.empty.append(shown)
                continue
            sides = [name for name, leaf in leaves.items() if _has_state(leaf.load(thread_id))]
            if len(sides) == 2:
                diagnosis.ambiguous.append(shown)
                diagnosis.problems.append({
                    "what": "state on both backends and no placement record: a path would "
                            "guess which one serves the thread", "thread": shown,
                    "fix": f"memshift rollout move --to <backend> --thread {shown!r} "
                           f"--store {diagnosis.store}"})
            elif sides:
                unrecorded[sides[0]] += 1
            else:
                diagnosis.empty.append(shown)
    finally:
        memory.close()
    diagnosis.unrecorded = dict(unrecorded)
    for problem in diagnosis.schema_problems:
        diagnosis.problems.append({"what": f"schema: {problem}", "thread": "",
                                   "fix": "memshift schema upgrade --store URL (or open the "
                                          "store once with this memshift version)"})
    return diagnosis


def shadow_counts(path: str) -> dict[str, Any]:
    """A shadow log (``shadow_log=`` / ``$MEMSHIFT_SHADOW_LOG``) counted by class of difference:
    ``{"mismatches": n, "counted": n, "ignored": n, "classes": {class: {"counted", "ignored"}},
    "unreadable_lines": n}``. Lines from before classes existed count by their kind."""
    from adapters.shadow import read_log

    classes: dict[str, dict[str, int]] = {}
    unreadable = 0
    for record in read_log(path):
        if record is None:
            unreadable += 1
            continue
        slot = classes.setdefault(record.cls, {"counted": 0, "ignored": 0})
        slot["ignored" if record.ignored else "counted"] += 1
    counted = sum(c["counted"] for c in classes.values())
    ignored_total = sum(c["ignored"] for c in classes.values())
    return {"mismatches": counted + ignored_total, "counted": counted, "ignored": ignored_total,
            "classes": dict(sorted(classes.items())), "unreadable_lines": unreadable}
