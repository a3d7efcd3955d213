"""The replay main job: file format, equivalence table, exit codes."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from compat import cli
from compat.conversations import ReplayFormatError, iter_turns, read_messages
from compat.replay import replay_file

CONVERSATIONS = Path(__file__).resolve().parents[1] / "examples" / "conversations"
BUNDLED = sorted(CONVERSATIONS.glob("*.jsonl"))


def test_bundled_conversations_exist() -> None:
    names = {p.name for p in BUNDLED}
    assert {"lance_49ers.jsonl", "young_langgraph.jsonl", "flask_migration.jsonl",
            "long_multithread.jsonl"} <= names
    long_turns = list(iter_turns(read_messages(CONVERSATIONS / "long_multithread.jsonl")))
    assert len(long_turns) >= 200
    assert len({t.thread_id for t in long_turns}) >= 4


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_conversations_replay_equivalent(path: Path) -> None:
    report = replay_file(path)
    assert report.turns and not report.divergences
    assert report.total_prompt_tokens("classic") <= report.total_prompt_tokens("full")


def test_long_conversation_folds_and_saves_tokens() -> None:
    report = replay_file(CONVERSATIONS / "long_multithread.jsonl")
    assert report.summarizer_calls > 10
    assert report.shared_folds == report.summarizer_calls  # the second backend reused each fold
    assert report.total_prompt_tokens("classic") < 0.6 * report.total_prompt_tokens("full")


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ('["a"]', "expected a JSON object"),
        ('{"role": "human", "content": "x"}', "thread_id"),
        ('{"thread_id": "t", "role": "robot", "content": "x"}', "role must be"),
        ('{"thread_id": "t", "role": "human", "content": 5}', "content must be a string"),
        ('{"thread_id": "t", "role": "tool", "content": "x"}', "tool_call_id"),
        ('{"thread_id": "t", "role": "ai", "content": "x", "tool_calls": [{"name": 1}]}', "tool_calls"),
    ],
)
def test_bad_lines_name_their_line_number(tmp_path: Path, line: str, fragment: str) -> None:
    good = json.dumps({"thread_id": "t", "role": "human", "content": "hi"})
    path = _write(tmp_path, [good, line])
    with pytest.raises(ReplayFormatError, match=rf"c\.jsonl:2: .*{fragment}"):
        list(read_messages(path))
    assert cli.main(["replay", "--quiet", str(path)]) == 2


def test_turn_grouping_with_tools_and_interleaving(tmp_path: Path) -> None:
    rows = [
        {"thread_id": "a", "role": "human", "content": "q1"},
        {"thread_id": "b", "role": "human", "content": "b1"},
        {"thread_id": "a", "role": "ai", "content": "", "tool_calls": [{"name": "f", "args": {}, "id": "c"}]},
        {"thread_id": "a", "role": "tool", "content": "r", "tool_call_id": "c"},
        {"thread_id": "a", "role": "ai", "content": "a1"},
        {"thread_id": "b", "role": "human", "content": "b2"},
    ]
    path = _write(tmp_path, [json.dumps(r) for r in rows])
    turns = [(t.thread_id, [m.content for m in t.messages]) for t in iter_turns(read_messages(path))]
    assert turns == [("a", ["q1", "", "r", "a1"]), ("b", ["b1"]), ("b", ["b2"])]


def test_cli_prints_table_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["replay", str(CONVERSATIONS / "lance_49ers.jsonl"), "--max-tokens", "120",
                     "--keep-tokens", "60"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "RESULT: EQUIVALENT" in out and "prompt tokens (full history)" in out
    assert "lance-49ers" in out and "turns" in err  # progress bar on stderr


def test_no_share_labels_model_nondeterminism(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A model that answers the same input differently makes summaries differ: with
    --no-share that is reported as model nondeterminism, not as backend divergence."""
    counter = itertools.count()

    class Drifting:
        def summarize(self, summary: str, messages: list) -> str:
            return f"summary #{next(counter)}"

    monkeypatch.setattr("compat.replay.build_summarizer", lambda *a, **k: Drifting())
    code = cli.main(["replay", "--quiet", "--no-share", "--max-tokens", "100",
                     str(CONVERSATIONS / "lance_49ers.jsonl")])
    out = capsys.readouterr().out
    assert code == 0
    assert "model nondeterminism" in out and "divergent turns: 0" in out
    assert "RESULT: EQUIVALENT" in out and " MODEL" in out


def test_cli_exits_one_on_backend_divergence(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A backend bug (the middleware cut ignoring its summary message) is a divergence."""
    from adapters.backends.middleware import MemshiftSummarizationMiddleware, split_summary

    def buggy(self: object, messages: list) -> int:
        _, _, window = split_summary(messages)
        return self.policy.plan_fold(window).cutoff  # type: ignore[attr-defined]

    monkeypatch.setattr(MemshiftSummarizationMiddleware, "_determine_cutoff_index", buggy)
    for share in ([], ["--no-share"]):
        code = cli.main(["replay", "--quiet", *share, "--max-tokens", "100",
                         str(CONVERSATIONS / "lance_49ers.jsonl")])
        out = capsys.readouterr().out
        assert code == 1 and "RESULT: DIVERGED" in out and "DIFF" in out


def test_ignored_classes_are_counted_not_divergences(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A whitespace-only summary difference on one backend diverges; ``--ignore whitespace``
    makes it an expected class, counted by class in the table and the JSON."""
    from dataclasses import replace

    from compat.memory import SummaryMemory

    real = SummaryMemory.load

    def padded(self: SummaryMemory, thread_id: str | None = None):  # type: ignore[no-untyped-def]
        view = real(self, thread_id)
        return replace(view, summary=view.summary + "  ") if \
            view.summary and self.backend_name == "middleware" else view

    monkeypatch.setattr(SummaryMemory, "load", padded)
    args = ["replay", "--quiet", "--max-tokens", "100", str(CONVERSATIONS / "lance_49ers.jsonl")]
    assert cli.main(args) == 1
    out = capsys.readouterr().out
    assert "RESULT: DIVERGED" in out and "differing turns by class: whitespace" in out
    assert cli.main([*args, "--ignore", "whitespace", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["result"] == "EQUIVALENT" and document["divergent_turns"] == 0
    assert document["classes"]["whitespace"] == document["expected_turns"] > 0
    assert cli.main([*args, "--ignore", "summary_text"]) == 1  # another class still counts
