"""The ``memshift`` command (``tests._cli``: in this process, and through its real entry point
``python -m compat`` where that matters): version,
help, JSON output, exit codes, URL mistakes, dry runs that write nothing, re-run counters,
recorded policies, the run log, and secrets that never reach the terminal."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from adapters import MemoryPolicy
from compat import SummaryMemory
from compat.testing.conversations import filler_turn
from compat import admin
from tests._cli import run_memshift
from tests.conftest import ROOT

APP = MemoryPolicy(max_tokens=200, keep_tokens=100)  # what "the app" used: not the 2000 default
SECRET = "memshift-test-secret"


def memshift(*args: str, env: dict | None = None, cwd: Path | None = None,
             check: int | None = None, process: bool = False) -> subprocess.CompletedProcess:
    return run_memshift(*args, env=env, cwd=cwd, check=check, process=process)


def seed(url: str, threads: int = 3, turns: int = 8, policy: MemoryPolicy = APP,
         prefix: str = "t") -> list[str]:
    ids = [f"{prefix}{n}" for n in range(threads)]
    with SummaryMemory(backend="classic", store=url, policy=policy) as memory:
        for tid in ids:
            for i in range(turns):
                memory.save(tid, *filler_turn(tid, i, 12))
    return ids


def errors(stderr: str) -> list[str]:
    """stderr lines that are not warnings, notes or progress."""
    return [line for line in stderr.splitlines()
            if line.strip() and not line.startswith(("memshift: warning:", "memshift: note:"))]


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def test_version_and_help() -> None:
    version = memshift("--version", check=0, process=True)  # the real entry point
    assert version.stdout.startswith("memshift 0.1.0 (langchain ")
    top = memshift("--help", check=0).stdout
    assert "Exit codes:" in top and "130" in top and "MEMSHIFT_FROM_STORE" in top
    from click.testing import CliRunner

    from compat.cli import root

    runner = CliRunner()  # the same click group in-process: a subprocess per help page is slow
    for command in ("replay", "migrate", "resummarize", "eval", "history", "rollout move"):
        done = runner.invoke(root, [*command.split(), "--help"], prog_name="memshift")
        text = done.output
        assert done.exit_code == 0, (command, text)
        assert "``" not in text and ":class:" not in text, command  # no raw rST
        assert "--json" in text or command == "replay" and "--report" in text
    words = " ".join(runner.invoke(root, ["migrate", "--help"], prog_name="memshift").output.split())
    assert "[default: the policy recorded in the store, else max_tokens=2000" in words


@pytest.mark.parametrize(("url", "expected"), [
    ("sqlite:/legacy.db", "write sqlite:///legacy.db"),
    ("sqlite://legacy.db", "write sqlite:///legacy.db"),
    ("legacy.db", "is a file path, not a store URL: write sqlite:///legacy.db"),
    ("mysql://app:hunter2@db/app", "unsupported store scheme 'mysql'"),
    ("sqlite:///legacy.db", "no such SQLite file 'legacy.db'"),
    ("postgresql://app:hunter2@127.0.0.1:notaport/app", "postgresql://user@host:5432/db"),
    ("postgresql://app:hunter2@[::1/app", "is not a valid URL"),
    ("postgresql://app:hunter2@db/app?sslmode=bogus", "sslmode must be one of disable"),
    ("postgresql://app:hunter2@db/app?sslmod=require", "unknown store option 'sslmod'"),
])
def test_url_mistakes_get_one_line_with_the_right_form(tmp_path: Path, url: str,
                                                       expected: str) -> None:
    done = memshift("migrate", "--from", "classic", "--from-store", url, "--to", "middleware",
                    "--to-store", f"sqlite:///{tmp_path}/new.db", cwd=tmp_path, check=2)
    lines = errors(done.stderr)
    assert len(lines) == 1 and lines[0].startswith("memshift: error: "), done.stderr
    assert expected in lines[0] and "Traceback" not in done.stderr
    assert "hunter2" not in done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []  # neither the source nor the target was created


@pytest.mark.parametrize(("module", "url", "extra"), [
    ("psycopg", "postgresql://app@127.0.0.1/app", "pip install 'memshift[postgres]'"),
    ("aiosqlite", "sqlite:///x.db", "pip install 'memshift[sqlite]'"),
])
def test_a_missing_extra_names_the_install(tmp_path: Path, module: str, url: str,
                                           extra: str) -> None:
    shim = tmp_path / "shim" / module
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(f'raise ImportError("No module named {module}")\n')
    done = memshift("migrate", "--from", "classic", "--from-store", "memory", "--to",
                    "middleware", "--to-store", url, cwd=tmp_path, check=2,
                    env={"PYTHONPATH": f"{tmp_path / 'shim'}{os.pathsep}{ROOT}"})
    lines = errors(done.stderr)
    assert len(lines) == 1 and extra in lines[0] and "Traceback" not in done.stderr


def test_json_results_and_exit_codes_per_command(tmp_path: Path) -> None:
    conversation = str(ROOT / "examples" / "conversations" / "lance_49ers.jsonl")
    replay = json.loads(memshift("replay", conversation, "--json", check=0).stdout)
    assert replay["result"] == "EQUIVALENT" and replay["exit_code"] == 0
    assert replay["turns"] > 0 and replay["policy"]["effective"]["max_tokens"] == 400
    assert memshift("replay", str(tmp_path / "missing.jsonl"), check=2).stdout == ""
    error = json.loads(memshift("replay", str(tmp_path / "missing.jsonl"), "--json",
                                check=2).stdout)
    assert error["ok"] is False and error["exit_code"] == 2 and "missing.jsonl" in error["error"]

    report = tmp_path / "eval.json"
    evaluated = json.loads(memshift("eval", "--json", "--output", str(report), check=0).stdout)
    assert len(evaluated["cases"]) == 12 and evaluated["score"] >= 0.9
    assert json.loads(report.read_text()) == evaluated

    source, target = f"sqlite:///{tmp_path}/app.db", f"sqlite:///{tmp_path}/new.db"
    ids = seed(source)
    (tmp_path / "threads.txt").write_text("\n".join([*ids, "x" * 2000]))
    failed = json.loads(memshift("migrate", "--from", "classic", "--from-store", source, "--to",
                                 "middleware", "--to-store", target, "--threads",
                                 str(tmp_path / "threads.txt"), "--json", check=1).stdout)
    assert failed["counts"] == {"total": 4, "migrated": 3, "skipped": 0, "failed": 1,
                                "verified": 3, "rebuilt": 0, "target_newer": 0, "changed_during_migration": 0, "caught_up": 0,
                     "unchanged_since_migrated": 0, "incomplete": 0}
    assert failed["exit_code"] == 1 and failed["threads"]["failed"][0]["reason"]
    assert set(failed) == {"command", "run_id", "dry_run", "ok", "exit_code", "shard", "source",
                           "target", "policy", "counts", "skipped_by_reason", "threads",
                           "notes", "stats"}
    assert set(failed["stats"]) == {"elapsed_s", "per_s", "cpu_s", "max_rss_mb"}
    runs = json.loads(memshift("history", "--store", target, "--json", check=0).stdout)["runs"]
    assert [(r["command"], r["status"]) for r in runs] == [("migrate", "failed")]
    assert runs[0]["counts"]["migrated"] == 3 and runs[0]["policy"]["effective"]["max_tokens"] \
        == 200 and runs[0]["memshift_version"] == "0.1.0"
    assert set(runs[0]) == {"run_id", "command", "source", "target", "shard", "policy",
                            "counts", "status", "started_at", "finished_at", "memshift_version"}
    status = json.loads(memshift("rollout", "status", "--store", target, "--json",
                                 check=0).stdout)
    assert status["command"] == "rollout status" and set(status["threads"]) == {"classic",
                                                                                "middleware"}
    human = memshift("history", "--store", target, check=0).stdout
    assert runs[0]["run_id"][:12] in human and "migrate" in human


def test_rerun_counts_each_thread_once(tmp_path: Path) -> None:
    """A stock history table: summaries are rebuilt, and the second run says nothing moved."""
    from langchain_community.chat_message_histories import SQLChatMessageHistory

    legacy = f"sqlite:///{tmp_path}/legacy.db"
    for tid in ("a", "b", "c"):
        history = SQLChatMessageHistory(session_id=tid, connection=legacy)
        for i in range(6):
            human, ai = filler_turn(tid, i, 12)
            history.add_user_message(human)
            history.add_ai_message(ai)
    args = ("migrate", "--from", "classic", "--from-store", legacy, "--to", "middleware",
            "--to-store", f"sqlite:///{tmp_path}/new.db", "--max-tokens", "200", "--json")
    first = json.loads(memshift(*args, check=0).stdout)["counts"]
    assert first == {"total": 3, "migrated": 3, "skipped": 0, "failed": 0, "verified": 3,
                     "rebuilt": 3, "target_newer": 0, "changed_during_migration": 0, "caught_up": 0,
                     "unchanged_since_migrated": 0, "incomplete": 0}
    second = json.loads(memshift(*args, check=0).stdout)  # by fingerprint: nothing rebuilt
    assert second["counts"] == {"total": 3, "migrated": 0, "skipped": 3, "failed": 0,
                                "verified": 3, "rebuilt": 0, "target_newer": 0, "changed_during_migration": 0, "caught_up": 0,
                                "unchanged_since_migrated": 3, "incomplete": 0}
    assert second["skipped_by_reason"] == {"already migrated (identical)": 3}


def test_dry_runs_write_nothing_to_the_filesystem(tmp_path: Path) -> None:
    source, target = f"sqlite:///{tmp_path}/app.db", f"sqlite:///{tmp_path}/new.db"
    ids = seed(source)
    migrate = ("migrate", "--from", "classic", "--from-store", source, "--to", "middleware",
               "--to-store", target)
    before = listing(tmp_path)
    dry = json.loads(memshift(*migrate, "--dry-run", "--json", check=0).stdout)
    assert dry["dry_run"] and dry["counts"]["migrated"] == 3 and dry["run_id"] is None
    assert listing(tmp_path) == before  # no target file, no -wal/-shm, no lock file

    memshift(*migrate, check=0)
    with SummaryMemory(backend="classic", store=source, policy=APP) as memory:
        memory.save(ids[0], "one more question", "one more answer")
    before = listing(tmp_path)
    dry = memshift(*migrate, "--dry-run", check=0).stdout
    assert re.search(r"would migrate\s+1\s", dry) and "RESULT: OK (dry run)" in dry
    resummarize = memshift("resummarize", "--backend", "classic", "--store", source, "--all",
                           "--dry-run", "--json", "--max-tokens", "1000", "--policy-override",
                           check=0)
    rows = json.loads(resummarize.stdout)["threads"]  # a larger limit: no fold at all
    assert {r["status"] for r in rows} == {"would change"} and len(rows) == 3
    assert all(r["folds"][1] == 0 < r["folds"][0] and r["delta_tokens"] > 0 for r in rows)
    assert all(r["delta_tokens"] == r["memory_tokens"][1] - r["memory_tokens"][0] for r in rows)
    assert listing(tmp_path) == before
    runs = json.loads(memshift("history", "--store", target, "--json", check=0).stdout)["runs"]
    assert len(runs) == 1  # dry runs are not logged


def test_the_recorded_policy_is_used_and_a_contradiction_refused(tmp_path: Path) -> None:
    source, target = f"sqlite:///{tmp_path}/app.db", f"sqlite:///{tmp_path}/new.db"
    ids = seed(source)
    migrate = ("migrate", "--from", "classic", "--from-store", source, "--to", "middleware",
               "--to-store", target)
    refused = memshift(*migrate, "--max-tokens", "2000", check=2)
    lines = errors(refused.stderr)
    assert len(lines) == 1 and "--max-tokens 2000 contradicts the policy recorded" in lines[0]
    assert "max_tokens=200" in lines[0] and "--policy-override" in lines[0]
    assert not (tmp_path / "new.db").exists()

    done = memshift(*migrate, check=0).stdout
    assert "policy (recorded in sqlite:///" in done
    assert "fold when the window exceeds 200 tokens; keep 100" in done
    with SummaryMemory(backend="middleware", store=target, policy=APP) as memory:
        record = admin.summary_history(memory, ids[0])[-1]
    assert record["trigger"].startswith("migrated from") and record["policy"]["max_tokens"] == 200

    same = json.loads(memshift(*migrate, "--max-tokens", "200", "--json", check=0).stdout)
    assert same["policy"]["origin"] == "recorded+options"
    forced = json.loads(memshift("resummarize", "--backend", "classic", "--store", source,
                                 "--thread", ids[0], "--max-tokens", "2000", "--policy-override",
                                 "--json", check=0).stdout)
    assert forced["policy"]["origin"] == "override"
    assert forced["policy"]["effective"]["max_tokens"] == 2000


def test_mixed_policies_are_reported_and_each_thread_keeps_its_own(tmp_path: Path) -> None:
    source, target = f"sqlite:///{tmp_path}/app.db", f"sqlite:///{tmp_path}/new.db"
    seed(source, threads=2, prefix="small")
    seed(source, threads=1, prefix="wide", policy=MemoryPolicy(max_tokens=150, keep_tokens=60))
    result = json.loads(memshift("migrate", "--from", "classic", "--from-store", source, "--to",
                                 "middleware", "--to-store", target, "--json", check=0).stdout)
    assert result["policy"]["origin"] == "mixed"
    assert sorted(p["threads"] for p in result["policy"]["recorded"]) == [1, 2]
    with SummaryMemory(backend="middleware", store=target, policy=APP) as memory:
        assert admin.summary_history(memory, "wide0")[-1]["policy"]["max_tokens"] == 150
        assert admin.summary_history(memory, "small1")[-1]["policy"]["max_tokens"] == 200
    conversation = str(ROOT / "examples" / "conversations" / "lance_49ers.jsonl")
    refused = memshift("replay", conversation, "--store", source, check=2)
    assert "2 different policies" in errors(refused.stderr)[0]


@pytest.mark.postgres
def test_postgres_dry_run_env_dsn_and_no_password_anywhere(tmp_path: Path, fresh_store) -> None:
    target = fresh_store("postgres")
    source = f"sqlite:///{tmp_path}/app.db"
    seed(source)

    def tables() -> list[str]:
        import psycopg

        with psycopg.connect(target) as conn:
            return sorted(r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema='public'"))

    env = {"MEMSHIFT_TO_STORE": target}
    migrate = ("migrate", "--from", "classic", "--from-store", source, "--to", "middleware")
    assert tables() == []
    dry = memshift(*migrate, "--dry-run", env=env, check=0)
    assert tables() == [] and re.search(r"would migrate\s+3\s", dry.stdout)
    done = memshift(*migrate, env=env, check=0)
    assert "postgres:***@" in done.stdout and SECRET not in done.stdout + done.stderr
    after = tables()
    assert "memshift_runs" in after and "memshift_transcript" in after
    (tmp_path / "dsn").write_text(f"# the target\n{target}\n")
    again = memshift(*migrate, "--to-store-file", str(tmp_path / "dsn"), "--dry-run", check=0)
    assert re.search(r"would migrate\s+0\s", again.stdout) and tables() == after
    assert SECRET not in again.stdout + again.stderr

    bad = target.replace(SECRET, SECRET + "-wrong")
    for args in (("--from", "graph", "--from-store-env", "BAD"),
                 ("--from", "graph", "--from-store", bad),
                 ("--from", "classic", "--from-store", bad.rsplit("/", 1)[0] + "/no_such_db")):
        failed = memshift("migrate", *args, "--to", "middleware", "--to-store", "memory",
                          env={"BAD": bad}, check=2)
        assert SECRET not in failed.stdout + failed.stderr and "Traceback" not in failed.stderr
        assert len(errors(failed.stderr)) == 1
