"""``memshift adopt``: pre-adopt every stock history of a store before the deploy — resumable,
shardable, with a read-only dry run that says what the first requests would cost."""

from __future__ import annotations

import json

import pytest

from compat import SummaryMemory, admin
from tests._cli import run_memshift
from tests.test_adopt import _stock_store


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_adopt_dry_run_then_run_then_rerun(fresh_store, kind: str, tmp_path) -> None:
    url = fresh_store(kind)
    _stock_store(url, users=5, turns=12)
    dry = json.loads(run_memshift("adopt", "--store", url, "--max-tokens", "150",
                                  "--keep-tokens", "80", "--dry-run", "--json", check=0).stdout)
    assert dry["would_adopt"] == 5 and dry["adopted"] == 0
    assert dry["summarizer_calls_at_adoption"] == 0 and dry["first_fold_calls"] == 5
    with SummaryMemory(store=url) as memory:  # the dry run wrote nothing
        assert admin.thread_ids(memory) == []
    half = json.loads(run_memshift("adopt", "--store", url, "--shard", "1/2", "--max-tokens",
                                   "150", "--keep-tokens", "80", "--json", check=0).stdout)
    rest = json.loads(run_memshift("adopt", "--store", url, "--shard", "2/2", "--max-tokens",
                                   "150", "--keep-tokens", "80", "--json", check=0).stdout)
    assert half["adopted"] + rest["adopted"] == 5
    again = json.loads(run_memshift("adopt", "--store", url, "--max-tokens", "150",
                                    "--keep-tokens", "80", "--json", check=0).stdout)
    assert again["adopted"] == 0 and again["already"] == 5  # resumable: nothing twice
    with SummaryMemory(store=url) as memory:
        assert sorted(admin.thread_ids(memory)) == [f"user-{u}" for u in range(5)]
        assert all(len(memory.transcript(f"user-{u}")) == 24 for u in range(5))
    listed = tmp_path / "threads.txt"
    listed.write_text("user-1\nnobody\n")
    only = run_memshift("adopt", "--store", url, "--threads", str(listed), "--json")
    assert only.returncode == 1  # a listed thread the table does not hold is named
    assert "nobody" in json.loads(only.stdout)["not_found"]
