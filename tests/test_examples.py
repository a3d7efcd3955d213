"""The runnable examples, run as a user would (offline; PostgreSQL where they use it)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _run(script: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "examples" / script), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def test_migrate_classic_sqlite_to_postgres_and_continue_with_create_agent(fresh_store) -> None:
    done = _run("migrate_classic_to_agent.py", fresh_store("postgres"))
    assert done.returncode == 0, done.stderr
    assert "migrated 2 threads, verified 2, failed 0" in done.stdout
    assert "the first is the summary: True" in done.stdout
    assert "memshift-test-secret" not in done.stdout + done.stderr


def test_shadow_web_loop_same_policy_has_no_mismatch() -> None:
    done = _run("shadow_web_loop.py")
    assert done.returncode == 0, done.stderr
    assert "comparisons=60 mismatches=0" in done.stdout


def test_shadow_web_loop_records_a_different_candidate() -> None:
    done = _run("shadow_web_loop.py", "--candidate-keep", "50")
    assert done.returncode == 0, done.stderr
    assert "mismatches=0" not in done.stdout


def test_migrate_seed_graph() -> None:
    done = _run("migrate_seed_graph.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "RESULT: OK" in done.stdout and "continued:" in done.stdout


@pytest.mark.parametrize("script", ["make_long.py"])
def test_conversation_generator_is_reproducible(script: str, tmp_path) -> None:
    target = ROOT / "examples" / "conversations" / "long_multithread.jsonl"
    before = target.read_bytes()
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "conversations" / script)],
                          cwd=ROOT / "examples" / "conversations", capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert target.read_bytes() == before


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_lcel_dropin_example(backend: str) -> None:
    done = _run("lcel_dropin.py", env={"MEMSHIFT_BACKEND": backend})
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(f"{backend} tenant-1:") == 2 and "12 in the transcript" in done.stdout


def test_staged_cutover_of_the_bundled_conversation(fresh_store) -> None:
    done = _run("staged_cutover.py", fresh_store("postgres"))
    assert done.returncode == 0, done.stderr
    assert "rollout 1.0: 0 thread(s) on classic, 6 on middleware" in done.stdout
    assert "mismatches with the classic twin: 0" in done.stdout and "RESULT: EQUIVALENT" in done.stdout
