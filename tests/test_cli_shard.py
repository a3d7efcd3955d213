"""``memshift migrate --shard I/N``: shards in parallel on one PostgreSQL target equal one
unsharded run, each shard resumes, and the example splits a store four ways."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from adapters import compare_views
from adapters.view import message_signature
from compat import SummaryMemory
from compat.cli._common import in_shard
from tests.conftest import ROOT
from tests.test_cli import APP, memshift, seed

pytestmark = pytest.mark.postgres


def _migrate(source: str, target: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "compat", "migrate", "--from", "classic", "--from-store", source,
         "--to", "middleware", "--to-store-env", "TARGET", "--json", "--quiet", *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TARGET": target})


def _result(worker: subprocess.Popen) -> dict:
    out, err = worker.communicate(timeout=600)
    assert worker.returncode == 0, err
    return json.loads(out)


def _state(url: str, ids: list[str]) -> dict[str, tuple]:
    with SummaryMemory(backend="middleware", store=url, policy=APP) as memory:
        return {t: (memory.load(t), [message_signature(m) + (m.id,)
                                     for m in memory.transcript(t)]) for t in ids}


def test_two_parallel_shards_equal_one_unsharded_run(tmp_path, fresh_store) -> None:
    source = f"sqlite:///{tmp_path}/app.db"
    ids = seed(source, threads=24, turns=6)
    whole, split = fresh_store("postgres"), fresh_store("postgres")
    one = _result(_migrate(source, whole))
    workers = [_migrate(source, split, "--shard", f"{k}/2") for k in (1, 2)]
    shards = [_result(w) for w in workers]

    assert sorted(one["threads"]["migrated"]) == sorted(ids)
    halves = [set(s["threads"]["migrated"]) for s in shards]
    assert halves[0] | halves[1] == set(ids) and not halves[0] & halves[1]
    assert all(h for h in halves)  # the hash spreads 24 threads over both shards
    assert halves[0] == {t for t in ids if in_shard(t, (1, 2))}
    expected, got = _state(whole, ids), _state(split, ids)
    for tid in ids:
        assert not compare_views(expected[tid][0], got[tid][0]), tid
        assert expected[tid][1] == got[tid][1], tid

    again = _result(_migrate(source, split, "--shard", "1/2"))  # a shard resumes: nothing left
    assert again["counts"]["migrated"] == 0 and again["counts"]["failed"] == 0
    assert again["counts"]["skipped"] == len(halves[0])
    runs = json.loads(memshift("history", "--store-env", "TARGET", "--json", check=0,
                               env={"TARGET": split}).stdout)["runs"]
    assert sorted(r["shard"] for r in runs) == ["1/2", "1/2", "2/2"]
    assert all(r["status"] == "ok" for r in runs)


def test_the_shard_example_splits_a_store_four_ways(fresh_store) -> None:
    target = fresh_store("postgres")
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "shard_migrate.py"), target,
                           "--threads", "40", "--turns", "4"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the union of the 4 shards equals the source: 40 threads" in done.stdout
    assert "memshift-test-secret" not in done.stdout + done.stderr
