"""The one summarization routine both backends call, and the summarizers it can drive.

Each fold calls ``summarize(previous_summary, folded_messages)``: the classic adapter
from ``predict_new_summary``, the middleware adapter from the ``summarizer=`` hook of
``SummarizationMiddleware``. Same input, same routine, same retries.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage, get_buffer_string

from adapters.workers import WorkersBusy, run_on_worker
from adapters._upstream import summary_call_config
from adapters.errors import ConfigError, SummarizerError
from adapters.extractive import ExtractiveSummarizer
from adapters.fold_check import SummaryRejected, check_reply
from adapters.framing import frame_safe
from adapters.io import IO, Steps, run_async, run_sync
from adapters.structured import is_rendered, merge, parse_delta, parse_rendered, render
from adapters.tokens import TokenCounter, count_tokens_cjk, message_text
from adapters.workers import call_with_timeout

if TYPE_CHECKING:  # a chat model or a prompt means LangChain's runnables: ~1 s of imports
    from langchain_core.language_models import BaseLanguageModel
    from langchain_core.prompts import PromptTemplate

__all__ = [
    "CachingSummarizer",
    "CallableSummarizer",
    "ChatModelSummarizer",
    "DeterministicSummarizer",
    "ExtractiveSummarizer",
    "StructuredSummarizer",
    "Summarizer",
    "build_summarizer",
    "frame_safe",
    "resolve_summarizer",
    "run_summarizer",
    "summarize_steps",
    "summarizer_io",
    "summarizer_name",
]

logger = logging.getLogger("memshift.summarizer")


@runtime_checkable
class Summarizer(Protocol):
    """Writes the new running summary from the previous one and the messages being folded."""

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str: ...


class CallableSummarizer:
    """Adapts ``fn(summary, messages) -> str``."""

    def __init__(self, fn: Callable[[str, Sequence[BaseMessage]], str]) -> None:
        self.fn = fn

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        return self.fn(summary, messages)


class ChatModelSummarizer:
    """Prompts a chat model with the progressive summary prompt (classic's variables)."""

    def __init__(
        self,
        llm: BaseLanguageModel,
        prompt: PromptTemplate,
        *,
        human_prefix: str = "Human",
        ai_prefix: str = "AI",
        max_tokens: int | None = None,
    ) -> None:
        self.llm = llm
        self.prompt = prompt
        self.human_prefix = human_prefix
        self.ai_prefix = ai_prefix
        self.max_tokens = max_tokens
        self._bound = _with_output_cap(llm, max_tokens)

    def render(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        if self.prompt.input_variables == ["messages"]:
            return _render_stock_middleware(self.prompt, summary, messages)
        new_lines = get_buffer_string(
            list(messages), human_prefix=self.human_prefix, ai_prefix=self.ai_prefix
        )
        # Data (and the previous summary) can never form a delimiter run: see frame_safe.
        return self.prompt.format(summary=frame_safe(summary), new_lines=frame_safe(new_lines))

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        # stock's config: no summary tokens in the caller's stream, the trace marks the call
        reply = self._bound.invoke(self.render(summary, messages), config=summary_call_config())
        return reply if isinstance(reply, str) else reply.text

    async def asummarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        reply = await self._bound.ainvoke(self.render(summary, messages),
                                          config=summary_call_config())
        return reply if isinstance(reply, str) else reply.text


def _render_stock_middleware(prompt: PromptTemplate, summary: str,
                             messages: Sequence[BaseMessage]) -> str:
    """A ``{messages}`` prompt, filled as stock ``SummarizationMiddleware`` fills it: the
    previous summary (its summary message) and the folded messages, as XML."""
    from adapters._upstream import build_summary_message

    shown = [build_summary_message(summary), *messages] if summary else list(messages)
    return prompt.format(messages=get_buffer_string(shown, format="xml")).rstrip()


def _with_output_cap(llm: Any, max_tokens: int | None) -> Any:
    """Ask the model for at most ``max_tokens`` in the form its client honours.

    langchain-openai sends ``max_completion_tokens``, which OpenAI-compatible local servers
    (llama.cpp, vLLM, Ollama) ignore: for a custom ``base_url`` ``max_tokens`` also goes in
    ``extra_body``. The cap is enforced again on the reply (see ``run_summarizer``)."""
    if not max_tokens:
        return llm
    # Ask for a little less than the cap: the model's tokenizer and the policy's counter differ.
    max_tokens = max(1, int(max_tokens * 0.8))
    kind = type(llm).__name__
    if kind in ("ChatOpenAI", "AzureChatOpenAI"):
        extra = dict(getattr(llm, "extra_body", None) or {})
        if getattr(llm, "openai_api_base", None):  # a custom base URL: a compatible server
            extra["max_tokens"] = max_tokens
        return llm.bind(max_tokens=max_tokens, **({"extra_body": extra} if extra else {}))
    try:
        return llm.bind(max_tokens=max_tokens)
    except Exception:  # a model without bind: rely on the check after the call
        return llm


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*")  # "3.8" and "e.g" stay whole
_GREETING = re.compile(r"^(hi|hello|hey|thanks|thank you|你好|谢谢|好的)\b[!,.！，。 ]*$", re.I)


class _Inline:
    """For summarizers that only compute (no I/O): the async twin calls the same code."""

    async def asummarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        return self.summarize(summary, messages)  # type: ignore[attr-defined]


class DeterministicSummarizer(_Inline):
    """Offline, deterministic summarizer: keeps the first sentence of each folded message.

    Bounded: past ``max_chars`` the oldest summary lines are dropped, so a summary can
    never grow without limit. Good enough to compare memory behaviour; not a model.
    """

    def __init__(self, max_chars: int = 2000, sentence_chars: int = 160) -> None:
        self.max_chars = max_chars
        self.sentence_chars = sentence_chars

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        lines = [line for line in summary.splitlines() if line.strip()]
        for message in messages:
            text = " ".join(message_text(message).split())
            if not text or _GREETING.match(text):
                continue
            first = _SENTENCE_END.split(text, maxsplit=1)[0][: self.sentence_chars]
            line = f"{message.type}: {first}"
            if line not in lines:
                lines.append(line)
        while len(lines) > 1 and sum(len(x) + 1 for x in lines) > self.max_chars:
            lines.pop(0)
        return "\n".join(lines) or "(nothing to keep)"


class StructuredSummarizer:
    """Structured mode: the inner summarizer returns a JSON delta (or a rendered document);
    it is validated and merged into the previous document by code, then rendered.
    A malformed reply raises, so the fold is retried and then fails cleanly."""

    def __init__(self, inner: Summarizer, *, json_summary: bool = False) -> None:
        self.inner = inner
        self.json_summary = json_summary  # hand the previous document over as JSON (chat models)

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        return run_sync(self._steps(summary, messages))

    async def asummarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        return await run_async(self._steps(summary, messages))

    def _steps(self, summary: str, messages: Sequence[BaseMessage]) -> Steps[str]:
        previous = parse_rendered(summary)
        given = previous.model_dump_json(exclude_defaults=True) if self.json_summary else summary
        reply = yield summarizer_io(self.inner, given, messages)
        if not self.json_summary and isinstance(reply, str) and (
                is_rendered(reply) or not reply.lstrip().startswith(("{", "`"))):
            return render(parse_rendered(reply))  # a summarizer that writes documents or text
        return render(merge(previous, parse_delta(reply)))


def summarizer_name(summarizer: Any) -> str:
    """A label for fold records: the model name when there is one."""
    inner = getattr(summarizer, "inner", None)
    if inner is not None and inner is not summarizer:
        return summarizer_name(inner)
    llm = getattr(summarizer, "llm", None)
    if llm is not None:
        name = getattr(llm, "model_name", None) or getattr(llm, "model", None)
        return f"{type(llm).__name__}:{name}" if name else type(llm).__name__
    return type(summarizer).__name__


def resolve_summarizer(
    llm: Any = None,
    summarizer: Any = None,
    *,
    prompt: PromptTemplate | None,
    human_prefix: str = "Human",
    ai_prefix: str = "AI",
    structured: bool = False,
    max_tokens: int | None = None,
    counter: TokenCounter | None = None,
) -> Summarizer:
    """Pick the summarizer: explicit ``summarizer`` first, then ``llm``, else the offline one
    (extractive, which writes structured documents in both formats)."""
    if summarizer is not None:
        if isinstance(summarizer, Summarizer):
            chosen: Summarizer = summarizer
        elif callable(summarizer):
            chosen = CallableSummarizer(summarizer)
        else:
            raise ConfigError(f"summarizer must be a callable or have .summarize(), got {summarizer!r}")
        if structured and not isinstance(chosen, (ExtractiveSummarizer, StructuredSummarizer)):
            chosen = StructuredSummarizer(chosen)
        return chosen
    if llm is None:
        return ExtractiveSummarizer(max_tokens=max_tokens, counter=counter)
    from langchain_core.language_models import BaseLanguageModel

    from adapters.summarizer_model import SummarizerChatModel

    if isinstance(llm, SummarizerChatModel):
        return llm.summarizer
    if isinstance(llm, BaseLanguageModel):
        if prompt is None:
            raise ConfigError("a chat model summarizer needs the policy's prompt")
        chat = ChatModelSummarizer(llm, prompt, human_prefix=human_prefix, ai_prefix=ai_prefix,
                                   max_tokens=max_tokens)
        return StructuredSummarizer(chat, json_summary=True) if structured else chat
    raise ConfigError(f"llm must be a LangChain chat model, got {type(llm).__name__}")


def build_summarizer(policy: Any, llm: Any = None, summarizer: Any = None, *,
                     human_prefix: str = "Human", ai_prefix: str = "AI") -> Summarizer:
    """The one place a summarizer is built from a policy and an ``llm`` or callable: the
    facade, resummarize, replay and the CLI's ``--model`` all come through here, so one model
    always gets the same prompt, format and cap."""
    # the prompt only matters to a chat model (reading it builds a PromptTemplate)
    prompt = policy.prompt if llm is not None and summarizer is None else None
    return resolve_summarizer(
        llm, summarizer, prompt=prompt, human_prefix=human_prefix, ai_prefix=ai_prefix,
        structured=policy.summary_format == "structured", max_tokens=policy.max_summary_tokens,
        counter=policy.counter)


def summarizer_io(summarizer: Any, summary: str, messages: Sequence[BaseMessage],
                  timeout: float | None = None) -> IO:
    """One summarizer call as an I/O request: ``asummarize`` when the summarizer has one
    (chat models: ``ainvoke``), else its blocking ``summarize`` on a worker thread so the
    event loop never waits; ``timeout`` seconds at most either way."""
    return IO(_call, _acall, summarizer, summary, list(messages), timeout)


def _call(summarizer: Any, summary: str, messages: list[BaseMessage], timeout: float | None) -> Any:
    if timeout is None:
        return summarizer.summarize(summary, messages)
    # a reused daemon thread: a hung provider cannot hold the caller
    return call_with_timeout(summarizer.summarize, summary, messages, timeout=timeout)


async def _acall(summarizer: Any, summary: str, messages: list[BaseMessage],
                 timeout: float | None) -> Any:
    native = getattr(summarizer, "asummarize", None)
    call = native(summary, messages) if native is not None else run_on_worker(
        summarizer.summarize, summary, messages)  # memshift's bounded pool, not the loop's
    if timeout is None:
        return await call
    try:
        return await asyncio.wait_for(call, timeout)
    except asyncio.TimeoutError:
        raise TimeoutError(f"summarizer gave no answer within {timeout:g} s") from None


def summarize_steps(
    summarizer: Summarizer,
    summary: str,
    messages: Sequence[BaseMessage],
    *,
    retries: int,
    thread_id: str | None = None,
    timeout: float | None = None,
    max_tokens: int | None = None,
    counter: TokenCounter | None = None,
    give_up_on: Callable[[BaseException], bool] | None = None,
) -> Steps[str]:
    """Call the summarizer with retries; a non-text or empty reply counts as a failure, and
    so does one over ``max_tokens`` (a model that ignores the cap must not poison the next
    fold's prompt) or one that takes longer than ``timeout``. An error ``give_up_on``
    accepts (an input overflow: retrying the same input is pointless) ends the retries."""
    attempts = retries + 1
    last: BaseException | None = None
    for attempt in range(1, attempts + 1):
        try:
            result = yield summarizer_io(summarizer, summary, messages, timeout)
            if not isinstance(result, str):
                raise TypeError(f"summarizer returned {type(result).__name__}, not str")
            return check_reply(result, max_tokens, counter or count_tokens_cjk)
        except Exception as exc:  # translated below; every attempt is logged
            last = exc
            logger.warning(
                "summarizer attempt %d/%d failed for a thread: %s", attempt, attempts,
                type(exc).__name__,
            )
            if isinstance(exc, WorkersBusy) or (give_up_on is not None and give_up_on(exc)):
                attempts = attempt  # retrying at once cannot help
                break
    why = f"{last} ({attempts} attempt(s))" if isinstance(last, SummaryRejected) else \
        f"summarizer failed {attempts} time(s): {type(last).__name__}: {last}"
    raise SummarizerError(
        why,
        thread_id=thread_id,
        attempts=attempts,
    ) from last


def run_summarizer(summarizer: Summarizer, summary: str, messages: Sequence[BaseMessage],
                   **kwargs: Any) -> str:
    """``summarize_steps`` on the blocking driver."""
    return run_sync(summarize_steps(summarizer, summary, messages, **kwargs))


class CachingSummarizer:
    """Calls the inner summarizer once per distinct input and hands back the same text.

    Used by replay and shadow so that model nondeterminism is never reported as
    backend divergence: both backends folding the same messages get one summary.
    """

    def __init__(self, inner: Summarizer, max_entries: int = 4096) -> None:
        from collections import OrderedDict

        self.inner = inner
        self.max_entries = max_entries
        self.cache: OrderedDict[tuple, str] = OrderedDict()
        self.calls = 0  # calls that reached the inner summarizer
        self.hits = 0  # folds served from the cache
        self._lock = threading.Lock()

    @staticmethod
    def key(summary: str, messages: Sequence[BaseMessage]) -> tuple:
        return (summary, tuple((m.type, message_text(m), getattr(m, "tool_call_id", None))
                               for m in messages))

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        return run_sync(self._steps(summary, messages))

    async def asummarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        return await run_async(self._steps(summary, messages))

    def _steps(self, summary: str, messages: Sequence[BaseMessage]) -> Steps[str]:
        key = self.key(summary, messages)
        with self._lock:
            if key in self.cache:
                self.hits += 1
                self.cache.move_to_end(key)
                return self.cache[key]
            self.calls += 1
        result = yield summarizer_io(self.inner, summary, messages)
        if isinstance(result, str) and result.strip():
            with self._lock:
                self.cache[key] = result
                if len(self.cache) > self.max_entries:
                    self.cache.popitem(last=False)
        return result


def __getattr__(name: str) -> Any:
    # defined on first use: a BaseChatModel subclass brings LangChain's runnables (~1 s)
    if name == "SummarizerChatModel":
        from adapters.summarizer_model import SummarizerChatModel

        return SummarizerChatModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
