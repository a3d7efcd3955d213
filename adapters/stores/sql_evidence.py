"""A SQL store's shadow evidence (``adapters.stores.evidence``): ``memshift_evidence``.

Why a module of its own: ``adapters.stores.sql`` runs the thread's transactions; evidence is
written by a shadow's background worker and read by a rollout, each in a short transaction
of its own that takes no thread lock (a served request never waits for it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, delete, select

from adapters.stores.evidence import COMPARED, PER_THREAD, EvidenceRow
from adapters.stores.schema import evidence_table

__all__ = ["SqlEvidence"]

_c = evidence_table.c
_INSERT = evidence_table.insert().values(
    thread_id=bindparam("tid"), kind=bindparam("kind"), cls=bindparam("cls"),
    ignored=bindparam("ignored"), turn=bindparam("turn"), recorded_at=bindparam("at"))
# the bound: every row of the thread older than its newest PER_THREAD goes
_OLDEST_KEPT = (select(_c.id).where(_c.thread_id == bindparam("tid"))
                .order_by(_c.id.desc()).limit(1).offset(PER_THREAD - 1).scalar_subquery())
_TRIM = delete(evidence_table).where(_c.thread_id == bindparam("tid"), _c.id < _OLDEST_KEPT)
_COLUMNS = (_c.thread_id, _c.kind, _c.cls, _c.ignored, _c.turn, _c.recorded_at)
_OF = select(*_COLUMNS).where(_c.thread_id.in_(bindparam("tids", expanding=True))) \
    .order_by(_c.id)
_SINCE = select(*_COLUMNS).where(_c.recorded_at >= bindparam("since"), _c.kind != COMPARED) \
    .order_by(_c.id)
PAGE = 500  # threads per read


class SqlEvidence:
    """``EvidenceLog`` for ``SqlStore``."""

    engine: Any
    guard: Any  # SqlStore's: driver errors as StoreError

    def record_evidence(self, rows: Sequence[EvidenceRow]) -> None:
        if not rows:
            return
        params = [{"tid": r.thread_id, "kind": r.kind, "cls": r.cls, "ignored": r.ignored,
                   "turn": r.turn, "at": r.at} for r in rows]
        with self.guard("record shadow evidence"), self.engine.connect() as conn:
            conn.execution_options(memshift_write=True)  # SQLite: BEGIN IMMEDIATE
            with conn.begin():
                conn.execute(_INSERT, params)
                for tid in dict.fromkeys(r.thread_id for r in rows):
                    conn.execute(_TRIM, {"tid": tid})

    def evidence_of(self, thread_ids: Sequence[str]) -> list[EvidenceRow]:
        ids = list(dict.fromkeys(thread_ids))
        out: list[EvidenceRow] = []
        with self.guard("read shadow evidence"), self.engine.connect() as conn:
            for start in range(0, len(ids), PAGE):
                out += [_row(r) for r in conn.execute(_OF, {"tids": ids[start:start + PAGE]})]
        return out

    def evidence_since(self, since: str) -> list[EvidenceRow]:
        with self.guard("read shadow evidence"), self.engine.connect() as conn:
            return [_row(r) for r in conn.execute(_SINCE, {"since": since})]


def _row(r: Any) -> EvidenceRow:
    return EvidenceRow(str(r[0]), str(r[1]), str(r[2]), bool(r[3]), int(r[4]), str(r[5]))
