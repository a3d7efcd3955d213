"""``SummaryMemoryContract``: what every configured ``SummaryMemory`` must do.

Subclass it and override what differs from the defaults: ``summarizer`` (your chat model or
LLM, a ``Summarizer``, or a plain ``fn(summary, messages) -> str``; default memshift's
offline one), ``policy``, ``store`` (default a fresh SQLite file) and ``backend`` (default
both) — or the whole ``memory`` fixture (``summarizer_settings(summarizer)`` gives the
``SummaryMemory`` keywords for the ``summarizer`` fixture). Optional behaviour is declared
by ``capabilities`` (``"persistent"``: state survives reopening the store; default: unless
``store`` is ``"memory"``). Opt out of a test only with ``pytest.mark.xfail(reason=...)``:
a removed or overridden test fails the guard.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from adapters import MemoryPolicy, compare_views
from adapters.errors import InvalidThreadId, SummarizerError, ThreadIdRequired
from compat.memory import SummaryMemory
from compat.testing._guard import assert_no_silent_overrides
from compat.testing.conversations import FlakySummarizer, agent_turn, filler_turn
from compat.testing.summarizers import summarizer_settings
from compat import admin

__all__ = ["SummaryMemoryContract"]


def _let_backoff_pass(memory: SummaryMemory) -> None:
    """Move every engine's clock past the longest retry backoff (``MemoryPolicy.retry_backoff``
    doubles per failed fold, capped at 300 s): the next save may fold again."""
    pending = [memory.backend_impl]
    while pending:
        engine = pending.pop()
        inner = getattr(engine, "engines", None)
        inner = inner() if callable(inner) else inner
        if inner:
            pending.extend(inner.values() if isinstance(inner, dict) else inner)
        elif hasattr(engine, "clock"):
            now = engine.clock
            engine.clock = lambda now=now: now() + 3_600.0


def _turn_size(memory: SummaryMemory) -> int:
    """Words per message so that about three turns exceed the policy's token trigger."""
    policy = memory.active_policy
    return max(4, (policy.max_tokens or 120) // 8)


def _text(memory: SummaryMemory, thread: str) -> str:
    view = memory.load(thread)
    return view.summary + "\n" + "\n".join(str(m.content) for m in view.messages)


class SummaryMemoryContract:
    """The behaviour contract. Override ``summarizer``/``policy``/``store``/``backend``, or
    ``memory`` itself; every test uses a fresh memory."""

    @pytest.fixture
    def summarizer(self) -> Any:
        """Your summarizer as you have it: a chat model or LLM (prompted with the policy's
        prompt), a ``Summarizer``, a ``fn(summary, messages) -> str``, or ``None``."""
        return None

    @pytest.fixture
    def policy(self) -> MemoryPolicy:
        return MemoryPolicy(max_tokens=120, keep_tokens=60)

    @pytest.fixture
    def store(self, tmp_path: Path) -> Any:
        """A fresh store per test (a URL or a ``Store``); ``"memory"`` is not persistent."""
        return f"sqlite:///{tmp_path}/memshift.db"

    @pytest.fixture(params=["classic", "middleware"])
    def backend(self, request: pytest.FixtureRequest) -> str:
        return request.param

    @pytest.fixture
    def memory(self, backend: str, policy: MemoryPolicy, summarizer: Any,
               store: Any) -> Iterator[SummaryMemory]:
        with SummaryMemory(backend=backend, policy=policy, store=store,
                           **summarizer_settings(summarizer)) as memory:
            yield memory

    @pytest.fixture
    def capabilities(self, store: Any) -> set[str]:
        """What the configured memory supports beyond the core: ``{"persistent"}``."""
        return set() if store in ("memory", "memory://") else {"persistent"}

    def _fill(self, memory: SummaryMemory, thread: str, turns: int, start: int = 0) -> None:
        size = _turn_size(memory)
        for i in range(start, start + turns):
            memory.save(thread, *filler_turn(thread, i, size))

    # -- basics ------------------------------------------------------------------------
    def test_unknown_thread_is_empty(self, memory: SummaryMemory) -> None:
        view = memory.load("never-seen")
        assert (view.summary, view.messages, view.folds) == ("", [], 0)
        assert memory.transcript("never-seen") == []

    def test_save_then_load_returns_the_turn(self, memory: SummaryMemory) -> None:
        memory.save("t1", "hello there", "hi, how can I help?")
        view = memory.load("t1")
        assert [(m.type, m.content) for m in view.messages] == [
            ("human", "hello there"), ("ai", "hi, how can I help?")]

    def test_loaded_view_is_a_copy(self, memory: SummaryMemory) -> None:
        memory.save("t1", "keep me", "kept")
        view = memory.load("t1")
        view.messages[0].content = "tampered"
        view.messages.clear()
        assert [m.content for m in memory.load("t1").messages] == ["keep me", "kept"]

    # -- folding -------------------------------------------------------------------------
    def test_folds_when_the_window_exceeds_the_limit(self, memory: SummaryMemory) -> None:
        self._fill(memory, "t1", 12)
        view = memory.load("t1")
        assert view.folds >= 1, "12 turns of ~1/3 of the limit each never triggered a fold"
        assert view.summary, "a fold happened but the summary is empty"
        assert view.summary_message is not None

    def test_window_stays_within_keep_after_many_turns(self, memory: SummaryMemory) -> None:
        """Right after every fold the window fits ``keep_tokens`` / ``keep_messages`` (or is
        only the newest turn); between folds it never exceeds the trigger."""
        policy, size, folds = memory.active_policy, _turn_size(memory), 0
        for i in range(30):
            memory.save("t1", *filler_turn("t1", i, size))
            view = memory.load("t1")
            window = view.messages
            only_newest = max(j for j, m in enumerate(window) if isinstance(m, HumanMessage)) == 0
            if view.folds > folds and not only_newest:
                if policy.keep_tokens is not None:
                    assert policy.count(window) <= policy.keep_tokens, (
                        f"after a fold the window holds {policy.count(window)} tokens "
                        f"> keep_tokens={policy.keep_tokens}")
                if policy.keep_messages is not None:
                    assert len(window) <= policy.keep_messages, (
                        f"after a fold {len(window)} messages > keep_messages={policy.keep_messages}")
            elif not only_newest:
                assert not policy.trigger_reason(window), f"window over the trigger: {policy.trigger_reason(window)}"
            folds = view.folds
        assert folds >= 1, "30 turns never folded"

    def test_newest_turn_stays_verbatim_even_when_oversize(self, memory: SummaryMemory) -> None:
        self._fill(memory, "t1", 3)
        huge = "oversize " * ((memory.active_policy.max_tokens or 100) * 2)
        memory.save("t1", huge, "noted")
        window = memory.load("t1").messages
        assert [m.content for m in window[-2:]] == [huge, "noted"]

    def test_tool_call_pairs_are_never_split(self, memory: SummaryMemory) -> None:
        size = _turn_size(memory)
        for i in range(14):
            memory.save("t1", *agent_turn("t1", i, size))
            window = memory.load("t1").messages
            assert window and not isinstance(window[0], ToolMessage), "window starts with a ToolMessage"
            call_ids = {c["id"] for m in window if isinstance(m, AIMessage) for c in m.tool_calls}
            for m in window:
                if isinstance(m, ToolMessage):
                    assert m.tool_call_id in call_ids, "ToolMessage kept without its AI tool call"
        assert memory.load("t1").folds >= 1

    def test_summarizer_failure_loses_no_message(self, memory: SummaryMemory) -> None:
        backend = memory.backend_impl
        flaky = FlakySummarizer(backend.summarizer)
        backend.summarizer = flaky
        raises = memory.active_policy.on_summary_error == "raise"
        try:
            for i in range(8):
                # with on_summary_error="raise" the save raises after storing the turn
                with suppress(SummarizerError) if raises else nullcontext():
                    memory.save("t1", *filler_turn("t1", i, _turn_size(memory)))
            assert flaky.attempts >= 1, "8 turns never asked for a fold"
            text = _text(memory, "t1")
            for i in range(8):
                assert f"FACT-t1-{i} " in text, f"turn {i} lost while the summarizer was down"
            assert memory.load("t1").folds == 0
            flaky.failing = False
            _let_backoff_pass(memory)
            memory.save("t1", *filler_turn("t1", 8, _turn_size(memory)))
            assert memory.load("t1").folds >= 1, \
                "the next save after recovery (and after the retry backoff) did not fold"
        finally:
            backend.summarizer = flaky.inner  # type: ignore[assignment]

    # -- persistence ----------------------------------------------------------------------
    def test_state_survives_a_restart(self, memory: SummaryMemory, capabilities: set[str]) -> None:
        if "persistent" not in capabilities:
            pytest.skip("capability 'persistent' not declared (an in-process store)")
        self._fill(memory, "t1", 20)
        before = memory.load("t1")
        reopened = admin.reopen(memory)
        try:
            after = reopened.load("t1")
            assert not compare_views(before, after), compare_views(before, after)
            assert before.folds >= 1 and after.summary == before.summary
            assert len(reopened.transcript("t1")) == 40
            reopened.save("t1", *filler_turn("t1", 20, _turn_size(memory)))
            assert str(reopened.load("t1").messages[-2].content).startswith("question 20 ")
        finally:
            reopened.close()

    # -- isolation and the transcript --------------------------------------------------------
    def test_threads_never_see_each_other(self, memory: SummaryMemory) -> None:
        threads = [f"t{n:02d}" for n in range(5)]
        for i in range(8):
            for t in threads:
                memory.save(t, *filler_turn(t, i, _turn_size(memory)))
        for t in threads:
            text = _text(memory, t)
            for other in threads:
                if other != t:
                    assert f"FACT-{other}-" not in text, f"{other}'s data visible in {t}"

    def test_transcript_keeps_every_message_in_order(self, memory: SummaryMemory) -> None:
        self._fill(memory, "t1", 10)
        contents = [m.content for m in memory.transcript("t1")]
        assert len(contents) == 20
        assert all(f"FACT-t1-{i // 2} " in c for i, c in enumerate(contents))

    # -- thread ids ----------------------------------------------------------------------
    def test_missing_thread_id(self, memory: SummaryMemory, capabilities: set[str]) -> None:
        """Persistent store: a clear ``ThreadIdRequired``. In memory: the object's own private
        thread (the stock class's one-object-one-conversation), never a shared one."""
        unbound = memory.model_copy(update={"thread_id": None})
        if "persistent" in capabilities:
            with pytest.raises(ThreadIdRequired, match="stable id"):
                unbound.load_memory_variables({"input": "hi"})
            with pytest.raises(ThreadIdRequired):
                unbound.save_context({"input": "hi"}, {"output": "there"})
            with pytest.raises(ThreadIdRequired):
                unbound.save(None, "hi", "there")
            return
        unbound.save_context({"input": "hi"}, {"output": "there"})
        assert [m.content for m in unbound.load().messages] == ["hi", "there"]
        assert memory.load("t1").messages == [], "the private thread leaked into a named one"

    @pytest.mark.parametrize("bad", ["", 42, "a\x00b", b"bytes"])
    def test_invalid_thread_id_is_an_error(self, memory: SummaryMemory, bad: object) -> None:
        with pytest.raises(InvalidThreadId):
            memory.save(bad, "q", "a")  # type: ignore[arg-type]

    def test_thread_ids_are_data(self, memory: SummaryMemory) -> None:
        odd = ["../../etc/passwd", "x'; DROP TABLE t;--", "租户:用户/1", "a b\nc"]
        for t in odd:
            memory.save(t, f"q {t}", "a")
        for t in odd:
            assert [m.content for m in memory.load(t).messages] == [f"q {t}", "a"]

    # -- classic drop-in -------------------------------------------------------------------
    def test_clear_forgets_the_view_keeps_the_transcript(self, memory: SummaryMemory) -> None:
        self._fill(memory, "t1", 6)
        memory.clear("t1")
        view = memory.load("t1")
        assert (view.summary, view.messages) == ("", [])
        assert len(memory.transcript("t1")) == 12

    def test_string_rendering_matches_stock_before_any_summary(self, memory: SummaryMemory) -> None:
        """Same keys, prefixes and ``return_messages``: byte-identical to the stock class."""
        from langchain_classic.memory import ConversationSummaryBufferMemory

        from adapters.summarizer import SummarizerChatModel

        with warnings.catch_warnings():  # the stock class is deprecated; this test compares with it
            warnings.simplefilter("ignore", DeprecationWarning)
            stock = ConversationSummaryBufferMemory(
                llm=SummarizerChatModel(summarizer=None), max_token_limit=10**6,
                memory_key=memory.memory_key, return_messages=memory.return_messages,
                human_prefix=memory.human_prefix, ai_prefix=memory.ai_prefix)
        bound = memory.for_thread("t1")
        for target in (stock, bound):
            target.save_context({"input": "aaa"}, {"output": "dummy"})
        ours = bound.load_memory_variables({})[bound.memory_key]
        theirs = stock.load_memory_variables({})[stock.memory_key]
        if memory.return_messages:
            assert [(m.type, m.content) for m in ours] == [(m.type, m.content) for m in theirs]
        else:
            assert ours == theirs
        for target in (stock, bound):
            target.clear()
        assert bound.load_memory_variables({})[bound.memory_key] == \
            stock.load_memory_variables({})[stock.memory_key]

    def test_thread_key_is_not_taken_for_the_input(self, memory: SummaryMemory) -> None:
        inputs = {"query": "what is memshift?", memory.thread_key: "t7"}
        memory.save_context(inputs, {"output": "a migration tool"})
        assert [m.content for m in memory.load("t7").messages] == ["what is memshift?", "a migration tool"]

    def test_chat_history_for_runnable_with_message_history(self, memory: SummaryMemory) -> None:
        history = memory.chat_history("s1")
        history.add_messages([HumanMessage("one"), AIMessage("1"), HumanMessage("two"), AIMessage("2")])
        assert [m.content for m in history.messages] == ["one", "1", "two", "2"]
        assert len(memory.transcript("s1")) == 4

    def test_async_twins_match_sync(self, memory: SummaryMemory) -> None:
        async def run() -> None:
            await memory.asave("a1", "async question", "async answer")
            view = await memory.aload("a1")
            assert [m.content for m in view.messages] == ["async question", "async answer"]
            await memory.asave_context({"input": "ctx", memory.thread_key: "a1"}, {"output": "ok"})
            loaded = await memory.aload_memory_variables({memory.thread_key: "a1"})
            assert memory.load_memory_variables({memory.thread_key: "a1"}) == loaded
            await admin.arelease(memory)  # this loop ends here; the memory lives on

        asyncio.run(run())

    def test_no_overrides_DO_NOT_OVERRIDE(self) -> None:
        """Standard tests may not be silently overridden or removed; mark them xfail instead."""
        assert_no_silent_overrides(type(self), SummaryMemoryContract)
