"""memshift's SQL tables and the statements the stores run on them, written once as
SQLAlchemy Core constructs with named parameters (the same construct runs through
SQLAlchemy or, compiled, through a PostgreSQL batch), and the message codec.

- ``memshift_transcript``: append-only raw messages, unique per (thread, message id);
- ``memshift_window``: the classic verbatim window (64-bit row ids);
- ``memshift_classic``: the running summary and fold count per thread;
- ``memshift_folds``: fold records, written in the transaction of the state they describe;
- ``memshift_placement``: which backend serves a thread (staged cutover);
- ``memshift_long_ids``: the id the application passed, for a thread kept under the key of
  an id over the byte budget (``adapters.thread_keys``), so listings can show it;
- ``memshift_evidence``: what the fleet's shadows found, for rollout guards
  (``adapters.stores.evidence``: no text, newest rows per thread kept).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from sqlalchemy import (
    BigInteger, Boolean, Column, Float, Index, Integer, MetaData, Table, Text, UniqueConstraint,
    bindparam, delete, false, func, literal_column, select, union_all,
)

from adapters.errors import corrupt
from adapters.stores.base import Placement
from adapters.view import detach

__all__ = ["COUNT_TRANSCRIPT", "DELETE_CLASSIC", "DELETE_FOLDED", "DELETE_WINDOW",
           "ERASE_EVIDENCE", "ERASE_FOLDS", "ERASE_LONG_ID", "ERASE_PLACEMENT",
           "ERASE_TRANSCRIPT", "INSERT_FOLD", "INSERT_WINDOW", "LAST_IDS", "READ_CLASSIC",
           "READ_FOLDS", "READ_LONG_IDS", "READ_PLACEMENT", "classic_table", "dump_message",
           "evidence_table", "folds_table", "forget_decoded", "load_message", "long_ids_table",
           "metadata", "placement_table", "transcript_table", "window_table"]

_ID = BigInteger().with_variant(Integer, "sqlite")  # SQLite: INTEGER keys are 64-bit rowids

metadata = MetaData()
transcript_table = Table(
    "memshift_transcript", metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("thread_id", Text, nullable=False),
    Column("message_id", Text, nullable=False),
    Column("message", Text, nullable=False),
    UniqueConstraint("thread_id", "message_id", name="uq_memshift_transcript_message"),
    Index("ix_memshift_transcript_thread", "thread_id", "id"),
)
window_table = Table(
    "memshift_window", metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("session_id", Text),
    Column("message", Text),
    Index("ix_memshift_window_session", "session_id", "id"),
)
folds_table = Table(
    "memshift_folds", metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("thread_id", Text, nullable=False),
    Column("record", Text, nullable=False),
    Index("ix_memshift_folds_thread", "thread_id", "id"),
)
classic_table = Table(
    "memshift_classic", metadata,
    Column("thread_id", Text, primary_key=True),
    Column("summary", Text, nullable=False, default=""),
    Column("folds", Integer, nullable=False, default=0),
)

placement_table = Table(
    "memshift_placement", metadata,
    Column("thread_id", Text, primary_key=True),
    Column("backend", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("since", Float, nullable=False),
    Column("pinned", Boolean, nullable=False, default=False, server_default=false()),
)

long_ids_table = Table(
    "memshift_long_ids", metadata,
    Column("thread_id", Text, primary_key=True),  # the key (adapters.thread_keys)
    Column("original", Text, nullable=False),  # the id the application passed: data only
)

evidence_table = Table(
    "memshift_evidence", metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("thread_id", Text, nullable=False),  # as the stores keep it: erased with the thread
    Column("kind", Text, nullable=False),
    Column("cls", Text, nullable=False),
    Column("ignored", Boolean, nullable=False),
    Column("turn", Integer, nullable=False),
    Column("recorded_at", Text, nullable=False),  # ISO 8601 UTC, as the shadow log
    Index("ix_memshift_evidence_thread", "thread_id", "id"),
    Index("ix_memshift_evidence_recorded", "recorded_at"),
)

READ_CLASSIC = union_all(
    select(literal_column("0").label("kind"), classic_table.c.summary.label("text"),
           classic_table.c.folds.label("n")).where(classic_table.c.thread_id == bindparam("tid")),
    select(literal_column("1"), window_table.c.message, window_table.c.id)
    .where(window_table.c.session_id == bindparam("tid")),
).order_by("kind", "n")
INSERT_WINDOW = window_table.insert().values(session_id=bindparam("tid"),
                                              message=bindparam("message"))
DELETE_WINDOW = delete(window_table).where(window_table.c.session_id == bindparam("tid"))
DELETE_FOLDED = DELETE_WINDOW.where(window_table.c.id <= bindparam("upto"))
DELETE_CLASSIC = delete(classic_table).where(classic_table.c.thread_id == bindparam("tid"))
# erasure (``Store.erase``): every memshift row of a thread
ERASE_TRANSCRIPT = delete(transcript_table).where(transcript_table.c.thread_id == bindparam("tid"))
ERASE_FOLDS = delete(folds_table).where(folds_table.c.thread_id == bindparam("tid"))
ERASE_PLACEMENT = delete(placement_table).where(placement_table.c.thread_id == bindparam("tid"))
ERASE_LONG_ID = delete(long_ids_table).where(long_ids_table.c.thread_id == bindparam("tid"))
ERASE_EVIDENCE = delete(evidence_table).where(evidence_table.c.thread_id == bindparam("tid"))
COUNT_TRANSCRIPT = select(func.count()).select_from(transcript_table).where(
    transcript_table.c.thread_id == bindparam("tid"))
INSERT_FOLD = folds_table.insert().values(thread_id=bindparam("tid"), record=bindparam("record"))
LAST_IDS = (select(transcript_table.c.message_id)
            .where(transcript_table.c.thread_id == bindparam("tid"))
            .order_by(transcript_table.c.id.desc()).limit(bindparam("n")))
READ_FOLDS = (select(folds_table.c.record, folds_table.c.id)
              .where(folds_table.c.thread_id == bindparam("tid")).order_by(folds_table.c.id))
READ_LONG_IDS = select(long_ids_table.c.thread_id, long_ids_table.c.original).where(
    long_ids_table.c.thread_id.in_(bindparam("tids", expanding=True)))
READ_PLACEMENT = select(
    placement_table.c.backend, placement_table.c.version, placement_table.c.since,
    placement_table.c.pinned).where(placement_table.c.thread_id == bindparam("tid"))


def dump_message(message: BaseMessage) -> str:
    return _encode(message_to_dict(message))


# ``json.dumps(value, ensure_ascii=False)``: the same text, without building an encoder per
# call (``json.dumps`` does for any non-default option: half the cost of a short message)
_encode = json.JSONEncoder(ensure_ascii=False).encode


DECODED_CHARS = 2_000_000  # stored text of the rows kept decoded, at most
DECODED_ROW = 8_192  # a longer row is decoded every time (it would crowd out the rest)
_decoded: dict[str, BaseMessage] = {}
_decoded_chars = 0


def load_message(raw: str, thread_id: str | None = None, table: str = "memshift_transcript",
                 row: object = None, *, keep: bool = False) -> BaseMessage:
    """A stored message; a row that does not decode is a ``CorruptDataError`` naming it.

    ``keep``: a window row. Every load and save reads the thread's window again, so the
    same rows are decoded turn after turn (JSON, then pydantic validation of each message).
    The text decodes to the same message every time, so a window row is kept decoded by its
    text (bounded by ``DECODED_CHARS``) and handed out as a copy that shares nothing
    (``detach``). Transcript reads (exports, migrations) do not repeat, so are not kept."""
    global _decoded_chars
    cacheable = keep and type(raw) is str and len(raw) <= DECODED_ROW
    held = _decoded.get(raw) if cacheable else None
    if held is not None:
        return detach(held)
    try:
        message = messages_from_dict([json.loads(raw)])[0]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise corrupt(thread_id, table, row, exc) from None
    if not cacheable:
        return message
    if _decoded_chars + len(raw) > DECODED_CHARS:
        forget_decoded()  # a bound, not an LRU: a miss costs one decode
    _decoded[raw] = message
    _decoded_chars += len(raw)
    return detach(message)


def forget_decoded() -> None:
    """Drop every kept row (an erasure leaves no decoded text of the thread in memory)."""
    global _decoded_chars
    _decoded.clear()
    _decoded_chars = 0


def load_record(raw: str, thread_id: str | None, row: object) -> dict[str, Any]:
    """A stored fold record (a JSON object)."""
    try:
        record = json.loads(raw)
    except (ValueError, TypeError) as exc:
        raise corrupt(thread_id, "memshift_folds", row, exc) from None
    if not isinstance(record, dict):
        raise corrupt(thread_id, "memshift_folds", row, TypeError("not a JSON object"))
    return record


def load_placement(row: Sequence[Any] | None, thread_id: str | None) -> Placement | None:
    """A stored placement; a backend memshift does not know, or a non-numeric version or
    time, is a ``CorruptDataError``."""
    if row is None:
        return None
    backend, version, since, pinned = row[0], row[1], row[2], row[3]
    if backend not in ("classic", "middleware") or not isinstance(version, int) or \
            isinstance(version, bool) or not isinstance(since, (int, float)):
        raise corrupt(thread_id, "memshift_placement", thread_id,
                      ValueError(f"backend={backend!r} version={version!r} since={since!r}"))
    return Placement(backend, version, float(since), bool(pinned))
