"""``SummarizerChatModel``: a memshift summarizer wearing a chat model's face.

Apart from ``adapters.summarizer`` because defining a ``BaseChatModel`` subclass imports
LangChain's runnables and tracers (about a second): a command that never builds one — a
re-run of a finished migration — never pays for it.
"""

from __future__ import annotations

from typing import Any, Literal, overload

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, BaseLanguageModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from adapters.tokens import TokenCounter, count_tokens_cjk, message_text

__all__ = ["SummarizerChatModel", "model_or_stand_in"]


class SummarizerChatModel(BaseChatModel):
    """A chat model face for a memshift summarizer.

    The classic class validates ``llm`` as a ``BaseLanguageModel`` and the middleware
    calls ``model.with_retry``: a plain summarizer is wrapped, never passed as the model.
    Counting tokens uses the policy's offline counter (never a download).
    """

    summarizer: Any
    token_counter: Any = None

    @property
    def _llm_type(self) -> str:
        return "memshift-summarizer"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = self.summarizer.summarize("", [HumanMessage(content=message_text(messages[-1]))])
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Any = None) -> int:
        counter: TokenCounter = self.token_counter or count_tokens_cjk
        return counter(messages)

    def get_num_tokens(self, text: str) -> int:
        return self.get_num_tokens_from_messages([HumanMessage(content=text)])


@overload
def model_or_stand_in(llm: Any, counter: TokenCounter, *, chat: Literal[True]) -> BaseChatModel:
    ...


@overload
def model_or_stand_in(llm: Any, counter: TokenCounter,
                      *, chat: Literal[False]) -> BaseLanguageModel:
    ...


def model_or_stand_in(llm: Any, counter: TokenCounter, *, chat: bool) -> BaseLanguageModel:
    """``llm`` when it is a LangChain model (a chat model, with ``chat``), else a stand-in
    whose token count is ``counter``: the classic class validates ``llm`` as a
    ``BaseLanguageModel`` and the middleware takes a chat model; folds never call it."""
    kind = BaseChatModel if chat else BaseLanguageModel
    if isinstance(llm, kind):
        return llm
    return SummarizerChatModel(summarizer=None, token_counter=counter)
