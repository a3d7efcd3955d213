"""The fidelity set and ``memshift eval --fidelity``: planted facts kept by fold depth, both
backends scoring alike, corrections counted only in their corrected form."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from compat.fidelity import FIDELITY_SET, run_fidelity
from tests._cli import run_memshift
from tests.conftest import ROOT


def test_the_shipped_set_is_what_the_script_makes(tmp_path: Path) -> None:
    before = {p.name: p.read_bytes() for p in FIDELITY_SET.iterdir()}
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_fidelity_set.py")], check=True)
    assert {p.name: p.read_bytes() for p in FIDELITY_SET.iterdir()} == before
    meta = json.loads((FIDELITY_SET / "fidelity_zh.json").read_text(encoding="utf-8"))
    kinds = {f["kind"] for f in meta["facts"]}
    assert {"name", "number", "date", "identifier", "path", "url", "email", "decision"} <= kinds
    assert sum("corrected" in f for f in meta["facts"]) == 2


def test_eval_fidelity_reports_depths_for_both_prompts_and_backends() -> None:
    done = run_memshift("eval", "--fidelity", "--json")
    result = json.loads(done.stdout)
    runs = result["runs"]
    assert {(r["language"], r["prompt"]) for r in runs} == {
        (lang, prompt) for lang in ("en", "zh") for prompt in ("stock", "memshift")}
    for run in runs:
        assert run["backends_agree"], run
        assert set(run["kept"]) == {"classic", "middleware"}
        assert sum(total for _, total in run["kept"]["classic"].values()) == run["facts"] == 16
        assert run["summarizer_calls"] > 0 and run["facts_per_1k_prompt_tokens"] > 0
        assert len(run["kept"]["classic"]) >= 3  # facts at several fold depths
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_correction_counts_only_in_its_corrected_form() -> None:
    class Stale:
        """Keeps every planted value it sees, and the stale one of each correction."""

        def summarize(self, summary: str, messages: list) -> str:
            return (summary + " " + " ".join(str(m.content) for m in messages)).replace(
                "2210", "1840").replace("48500", "42000")[-6000:]

    run = run_fidelity(summarizer=Stale(), languages=("en",), backends=("classic",))[0]
    missing = set(run.missing)
    assert any(m.startswith("number@") for m in missing)  # the corrected number is not kept
