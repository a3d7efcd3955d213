"""What the summarizer sees of images and other blocks: what stock ``SummarizationMiddleware``
sends (a URL as ``<image url=... />``, base64 data and provider tool blocks left out), on both
backends, stock side by side in the same run."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from compat import MemoryPolicy, SummaryMemory

BLOCKS = [
    {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
    {"type": "image", "url": "https://example.com/dog.png"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "QUJD" * 50}},
    {"type": "audio", "url": "https://example.com/voice.mp3"},
    {"type": "file", "url": "https://example.com/report.pdf"},
    {"type": "tool_use", "id": "toolu_1", "name": "zoom", "input": {"x": 2}},
]
TAG = re.compile(r"<(?:image|audio|file|video)[^>]*/>")


class Recording(GenericFakeChatModel):
    prompts: list[str] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.prompts.append("\n".join(str(m.content) for m in messages))
        return super()._generate(messages, *args, **kwargs)


def recording() -> Recording:
    return Recording(messages=(AIMessage("summary") for _ in range(100)), prompts=[])


def turn(i: int) -> list[BaseMessage]:
    return [HumanMessage(content=[{"type": "text", "text": f"look {i}"}, BLOCKS[i]]),
            AIMessage(f"seen {i}")]


def test_stock_middleware_shows_urls_and_leaves_data_out() -> None:
    model = recording()
    stock = SummarizationMiddleware(model=model, trigger=("messages", 13), keep=("messages", 1))
    messages = [m for i in range(len(BLOCKS)) for m in turn(i)] + [HumanMessage("now")]
    assert stock.before_model({"messages": messages}, None) is not None  # type: ignore[arg-type]
    shown = TAG.findall(model.prompts[0])
    assert shown == ['<image url="https://example.com/cat.png" />',
                     '<image url="https://example.com/dog.png" />',
                     '<audio url="https://example.com/voice.mp3" />']  # a file: left out


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_memshift_shows_the_summarizer_what_stock_shows(backend: str) -> None:
    stock_model = recording()
    stock = SummarizationMiddleware(model=stock_model, trigger=("messages", 13),
                                    keep=("messages", 1))
    messages = [m for i in range(len(BLOCKS)) for m in turn(i)] + [HumanMessage("now")]
    stock.before_model({"messages": messages}, None)  # type: ignore[arg-type]

    model = recording()
    memory = SummaryMemory(llm=model, backend=backend, store="memory",
                           policy=MemoryPolicy(max_messages=12, keep_messages=1, cut="message"))
    for i in range(len(BLOCKS)):
        memory.save_messages("t", turn(i))
    memory.save("t", "now", "ok")
    assert memory.load("t").folds >= 1
    assert TAG.findall("\n".join(model.prompts)) == TAG.findall(stock_model.prompts[0])
    sent = "\n".join(model.prompts)
    assert "base64" not in sent and "toolu_1" not in sent and "look 2" in sent
