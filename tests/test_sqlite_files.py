"""SQLite files an attacker cannot redirect: no symbolic link is followed unless the caller opts
in, a database wider than 0600 is tightened, the directories memshift creates are 0700 under
any umask, and a database deleted or replaced under a running writer is a StoreError, never a
save that returns ok and is gone."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat import ConfigError, StoreError, SummaryMemory


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def test_a_symlinked_database_is_refused_unless_allowed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.db"
    link = tmp_path / "m.db"
    link.symlink_to(target)
    with pytest.raises(ConfigError, match="symbolic link"):
        SummaryMemory(store=f"sqlite:///{link}")
    assert not target.exists()  # nothing was created through the link
    with SummaryMemory(store=f"sqlite:///{link}?allow_symlinks=1") as memory:
        memory.save("t", "q", "a")
    assert target.exists()


def test_a_dangling_lock_link_creates_no_victim(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    (tmp_path / "m.db.memshift-lock").symlink_to(victim)
    with pytest.raises(ConfigError, match="lock file .* symbolic link"):
        SummaryMemory(store=f"sqlite:///{tmp_path}/m.db")
    assert not victim.exists()


def test_a_wide_database_and_its_wal_are_tightened(tmp_path: Path, open_umask: None) -> None:
    db = tmp_path / "m.db"
    with SummaryMemory(store=f"sqlite:///{db}") as memory:
        memory.save("t", "secret", "reply")
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        if path.exists():
            os.chmod(path, 0o666)
    with SummaryMemory(store=f"sqlite:///{db}") as memory:
        assert [m.text for m in memory.transcript("t")] == ["secret", "reply"]
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        if path.exists():
            assert _mode(path) == 0o600, path


def test_directories_memshift_creates_are_private(tmp_path: Path, open_umask: None) -> None:
    db = tmp_path / "a" / "b" / "m.db"
    with SummaryMemory(store=f"sqlite:///{db}") as memory:
        memory.save("t", "q", "a")
    assert _mode(tmp_path / "a") == 0o700 and _mode(tmp_path / "a" / "b") == 0o700
    assert _mode(db) == 0o600


@pytest.mark.parametrize("how", ["deleted", "replaced"])
@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_a_database_gone_under_a_running_writer_is_a_store_error(tmp_path: Path, how: str,
                                                                 backend: str) -> None:
    db = tmp_path / "m.db"
    memory = SummaryMemory(store=f"sqlite:///{db}", backend=backend)
    memory.save("t", "before", "ok")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    if how == "replaced":
        db.write_bytes(b"")
    with pytest.raises(StoreError, match=f"was {how} while memshift had it open"):
        memory.save("t", "after", "lost?")
    # (a new connection may recreate an empty file at the path: still not the one opened)
    with pytest.raises(StoreError, match="was (deleted|replaced) while"):
        asyncio.run(memory.asave("t", "after", "async"))
    with pytest.raises(StoreError, match="was (deleted|replaced) while"):
        memory.load("t")
    memory.close()


def test_a_relative_database_stays_the_same_file_after_chdir(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    monkeypatch.chdir(tmp_path)
    memory = SummaryMemory(store="sqlite:///rel.db")
    memory.save("t", "before", "chdir")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # a daemon's chdir("/") after start
    memory.save("t", "after", "chdir")
    asyncio.run(memory.asave("t", "async", "too"))
    assert len(memory.transcript("t")) == 6 and not (elsewhere / "rel.db").exists()
    memory.close()
