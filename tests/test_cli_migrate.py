"""``memshift migrate`` end to end, including legacy stores, dry runs and failures."""

from __future__ import annotations

import re

import pytest

from adapters import MemoryPolicy, compare_views
from compat import SummaryMemory, cli
from compat.testing.conversations import filler_turn
from compat import admin

POLICY = MemoryPolicy(max_tokens=2000)  # the CLI's default policy


def _seed(url: str, backend: str = "classic", threads: int = 3, turns: int = 40) -> SummaryMemory:
    memory = SummaryMemory(backend=backend, store=url, policy=POLICY)
    for t in range(threads):
        for i in range(turns):
            memory.save(f"t{t}", *filler_turn(f"t{t}", i, 25))
    return memory


def test_classic_sqlite_to_middleware_postgres(fresh_store, capsys: pytest.CaptureFixture[str]) -> None:
    source_url, target_url = fresh_store("sqlite"), fresh_store("postgres")
    source = _seed(source_url)
    code = cli.main(["migrate", "--from", "classic", "--from-store", source_url,
                     "--to", "middleware", "--to-store", target_url])
    out, err = capsys.readouterr()
    assert code == 0 and "RESULT: OK" in out and "threads" in err
    assert "memshift-test-secret" not in out + err and "postgres:***@" in out
    with SummaryMemory(backend="middleware", store=target_url, policy=POLICY) as target:
        for t in ("t0", "t1", "t2"):
            assert not compare_views(source.load(t), target.load(t))
    assert cli.main(["migrate", "--from", "classic", "--from-store", source_url, "--to",
                     "middleware", "--to-store", target_url, "--quiet"]) == 0
    rerun = capsys.readouterr().out
    assert re.search(r"migrated\s+0\s", rerun) and re.search(r"skipped\s+3\s", rerun)
    assert re.search(r"failed\s+0\s", rerun) and "summary rebuilt: 0" in rerun
    source.close()


def test_dry_run_and_threads_file(tmp_path, fresh_store, capsys: pytest.CaptureFixture[str]) -> None:
    source_url, target_url = fresh_store("sqlite"), fresh_store("sqlite")
    _seed(source_url, turns=3).close()
    listing = tmp_path / "threads.txt"
    listing.write_text("t1\n\nt2\n")
    code = cli.main(["migrate", "--from", "classic", "--from-store", source_url, "--to", "middleware",
                     "--to-store", target_url, "--threads", str(listing), "--dry-run", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and re.search(r"would migrate\s+2\s", out) and "(dry run)" in out
    with SummaryMemory(backend="middleware", store=target_url) as target:
        assert admin.thread_ids(target) == []


def test_failed_threads_make_the_exit_code_non_zero(tmp_path, fresh_store,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    source_url = fresh_store("sqlite")
    _seed(source_url, turns=2).close()
    listing = tmp_path / "threads.txt"
    listing.write_text("t0\n" + "x" * 2000 + "\n")
    code = cli.main(["migrate", "--from", "classic", "--from-store", source_url, "--to", "middleware",
                     "--to-store", fresh_store("sqlite"), "--threads", str(listing), "--quiet"])
    out = capsys.readouterr().out
    assert code == 1 and "FAILED" in out and "RESULT: FAILED" in out


def test_stock_classic_history_table_from_the_cli(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from langchain_community.chat_message_histories import SQLChatMessageHistory

    url = f"sqlite:///{tmp_path}/legacy.db"
    history = SQLChatMessageHistory(session_id="legacy-1", connection=url)
    for i in range(30):
        human, ai = filler_turn("legacy-1", i, 25)
        history.add_user_message(human)
        history.add_ai_message(ai)
    target_url = f"sqlite:///{tmp_path}/new.db"
    code = cli.main(["migrate", "--from", "classic", "--from-store", url, "--to", "middleware",
                     "--to-store", target_url, "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and "summary rebuilt: 1 of the migrated" in out and "never persisted" in out
    with SummaryMemory(backend="middleware", store=target_url, policy=POLICY) as target:
        view = target.load("legacy-1")
        assert view.folds >= 1 and "FACT-legacy-1-" in view.summary
        assert "FACT-legacy-1-29 " in view.messages[-1].content
        assert len(target.transcript("legacy-1")) == 60


def test_bad_store_urls_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["migrate", "--from", "graph", "--from-store", "mysql://u:hunter2@h/db",
                     "--to", "middleware", "--to-store", "memory"])
    err = capsys.readouterr().err
    assert code == 2 and "hunter2" not in err and "u:***@" in err
