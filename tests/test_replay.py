"""The replay main job: file format, equivalence table, exit codes."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

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
    from adapters.backends.agent_middleware import MemshiftSummarizationMiddleware
    from adapters.backends.middleware import split_summary

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


# -- the forms a replay line may take -----------------------------------------------------------
def _conversation() -> list[tuple[str, Any]]:
    """(thread, message): a system line, an agent turn with a tool call, interleaved threads."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from compat.testing.conversations import filler_turn

    rows: list[tuple[str, Any]] = [("a", SystemMessage("answer briefly"))]
    for i in range(4):
        for thread in ("a", "b"):
            human, ai = filler_turn(thread, i, 14)
            rows.append((thread, HumanMessage(human)))
            if thread == "a" and i % 2:
                call = f"call-{i}"
                rows += [(thread, AIMessage("", tool_calls=[
                             {"name": "lookup", "args": {"q": str(i), "n": i}, "id": call}])),
                         (thread, ToolMessage(f"result {i} FACT-a-{i}-r", tool_call_id=call))]
            rows.append((thread, AIMessage(ai)))
    return rows


def _canonical(thread: str, m: Any) -> dict[str, Any]:
    line = {"thread_id": thread, "role": m.type, "content": m.content}
    if m.type == "ai" and m.tool_calls:
        line["tool_calls"] = [{"name": c["name"], "args": c["args"], "id": c["id"]}
                              for c in m.tool_calls]
    if m.type == "tool":
        line["tool_call_id"] = m.tool_call_id
    return line


def _aliases(thread: str, m: Any) -> dict[str, Any]:
    line = _canonical(thread, m)
    line["role"] = {"human": "user", "ai": "assistant"}.get(line["role"], line["role"])
    return line


def _langchain(thread: str, m: Any) -> dict[str, Any]:
    from langchain_core.messages import messages_to_dict

    return {"thread_id": thread, **messages_to_dict([m])[0]}


def _openai(thread: str, m: Any) -> dict[str, Any]:
    role = {"human": "user", "ai": "assistant"}.get(m.type, m.type)
    line: dict[str, Any] = {"thread_id": thread, "role": role, "content": m.content}
    if m.type == "ai" and m.tool_calls:
        line["content"] = None  # as the OpenAI API writes an assistant turn that only calls
        line["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
            "name": c["name"], "arguments": json.dumps(c["args"])}} for c in m.tool_calls]
    if m.type == "tool":
        line["tool_call_id"] = m.tool_call_id
    return line


FORMS = {"canonical": _canonical, "aliases": _aliases, "langchain": _langchain,
         "openai": _openai}


def _key(thread: str, m: Any) -> tuple[Any, ...]:
    calls = [(c["name"], c["args"], c["id"]) for c in getattr(m, "tool_calls", None) or []]
    return thread, m.type, m.content, calls, getattr(m, "tool_call_id", None)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_reads_as_the_conversation(tmp_path: Path, form: str) -> None:
    rows = _conversation()
    path = _write(tmp_path, [json.dumps(FORMS[form](t, m)) for t, m in rows])
    read = [_key(t, m) for _n, t, m in read_messages(path)]
    assert read == [_key(t, m) for t, m in rows]


def test_every_form_of_one_conversation_replays_identically(tmp_path: Path) -> None:
    from adapters import MemoryPolicy

    policy = MemoryPolicy(max_tokens=90, keep_tokens=45)
    rows = _conversation()
    results = {}
    for form, shape in FORMS.items():
        path = tmp_path / f"{form}.jsonl"
        path.write_text("".join(json.dumps(shape(t, m)) + "\n" for t, m in rows), "utf-8")
        report = replay_file(path, policy=policy)
        assert report.turns and not report.divergences, form
        results[form] = ([(r.thread_id, r.turn, r.windows, r.folds, r.summaries, r.window,
                           r.prompt_tokens) for r in report.turns], report.summarizer_calls)
    assert results["canonical"][1] > 0  # the policy folded: summaries are compared too
    assert all(result == results["canonical"] for result in results.values())


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ('{"thread_id": "t", "type": "human", "data": "x"}', "data must be an object"),
        ('{"thread_id": "t", "type": "robot", "data": {"content": "x"}}', "type must be one of"),
        ('{"thread_id": "t", "type": "human", "data": {"content": 3}}', "content must be"),
        ('{"thread_id": "t", "type": "tool", "data": {"content": "x"}}', "tool_call_id"),
        ('{"thread_id": "t", "role": "assistant", "content": null}', "content must be"),
        ('{"thread_id": "t", "role": "assistant", "content": null, "tool_calls": [{"id": "c", '
         '"type": "function", "function": {"name": "f", "arguments": "{oops"}}]}',
         r"tool_calls\[0\]\.function\.arguments"),
        ('{"thread_id": "t", "role": "assistant", "content": "", "tool_calls": [{"id": "c", '
         '"type": "function", "function": {"name": "f", "arguments": "[1]"}}]}',
         r"tool_calls\[0\]\.function\.arguments"),
        ('{"thread_id": "t", "role": "assistant", "content": "", "tool_calls": [{"id": "c", '
         '"type": "function", "function": {"arguments": "{}"}}]}', r"tool_calls\[0\]"),
        ('{"thread_id": "t", "role": "tool", "content": "x"}', "tool_call_id"),
        ('{"thread_id": "t", "role": "function", "content": "x"}', "role must be"),
        ('{"thread_id": "t", "role": "user", "content": [1, 2]}', "content must be"),
    ],
)
def test_bad_shapes_of_every_form_name_their_line(tmp_path: Path, line: str,
                                                  fragment: str) -> None:
    good = json.dumps({"thread_id": "t", "role": "user", "content": "hi"})
    path = _write(tmp_path, [good, line])
    with pytest.raises(ReplayFormatError, match=rf"c\.jsonl:2: .*{fragment}"):
        list(read_messages(path))


def test_content_blocks_are_read_as_they_are(tmp_path: Path) -> None:
    blocks = [{"type": "text", "text": "look at FACT-t-1"}]
    path = _write(tmp_path, [json.dumps({"thread_id": "t", "role": "user", "content": blocks}),
                             json.dumps({"thread_id": "t", "role": "assistant", "content": "ok"})])
    (_, _, human), (_, _, ai) = read_messages(path)
    assert human.content == blocks and ai.content == "ok"
