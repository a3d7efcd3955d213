"""The offline summarizer: extractive, deterministic, English and Chinese.

It keeps sentences that carry names, numbers, decisions, corrections, todos, risks and
preferences, drops greetings and repetition, applies corrections (the later statement
wins: ``not X`` / ``不是X`` removes what said X) and final decisions (they replace the
options), and removes finished todos. Output is the structured rendering, so the same
summarizer serves ``summary_format="text"`` and ``"structured"``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from langchain_core.messages import BaseMessage, HumanMessage

from adapters.structured import FIELDS, Item, StructuredSummary, parse_rendered, render
from adapters.tokens import count_tokens_cjk, message_text

__all__ = ["ExtractiveSummarizer"]

_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_GREETING = re.compile(
    r"^(hi|hello|hey|thanks|thank you|ok|okay|sure|great|got it|you're welcome|"
    r"你好|您好|谢谢|好的|嗯|收到|不客气)[\s!,.！，。~]*$", re.I)

_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("final", re.compile(r"final decision|we decided|we've decided|decided to|we'll go with|"
                         r"we will go with|let's go with|最终决定|最终选择|决定用|决定采用|就用|定了", re.I)),
    ("option", re.compile(r"\boption [a-z0-9]\b|\boptions?\b|alternatively|\beither\b|could use|"
                          r"方案|备选|可选|要么", re.I)),
    ("done", re.compile(r"^done\b|\bis (now )?(done|written|finished|complete)|\bfinished\b|"
                        r"\bcompleted\b|已完成|完成了|搞定|已经写好|写好了", re.I)),
    ("todo", re.compile(r"\btodo\b|to-do|need to|next step|remember to|action item|"
                        r"待办|下一步|需要|记得|要做", re.I)),
    ("risk", re.compile(r"\brisk|concern|danger|might break|careful|warning|"
                        r"风险|注意|担心|隐患", re.I)),
    ("preference", re.compile(r"i prefer|i'd prefer|i like|please always|from now on|by default|"
                              r"偏好|喜欢|以后回答|默认|请总是|请一直", re.I)),
]
_NEGATION = re.compile(r"(?:,|，)?\s*(?:\bnot\b|\binstead of\b|\brather than\b|而不是|不是|并非)", re.I)
_CLAUSE_END = re.compile(r"[,;:!?()，。；：！？（）]|\.(?=\s|$)")
_LATIN_WORD = re.compile(r"[A-Za-z0-9][\w.+#-]*")
_CJK_TARGET = re.compile(r"\s*([\u4e00-\u9fffA-Za-z0-9.+#-]{1,12})")
_CORRECTION = re.compile(r"actually|correction|i was wrong|my mistake|更正|其实|纠正|搞错|说错", re.I)
_FACTY = re.compile(r"\d|FACT-|my name|\bi am\b|\bi'm\b|\bwe use|\bour\b|\buses?\b|\bworks? (at|on|as)\b|"
                    r"我叫|我是|我们用|我们的|用的是|是", re.I)
_CHITCHAT = re.compile(r"^(hi|hello|hey|thanks|thank you|nice to meet|glad|great|sure|happy to|"
                       r"good (morning|evening)|你好|您好|谢谢|很高兴|好的|没问题)\b", re.I)
_CHITCHAT_LEAD = re.compile(r"^(hi|hello|hey|你好|您好)[\s!,.！，。~]+", re.I)


def _short(text: str) -> bool:
    """Too short to carry a fact: a few words, or a few CJK characters."""
    cjk = len(_CJK.findall(text))
    return cjk <= 8 if cjk else len(text.split()) <= 6


_LEADING = re.compile(r"^(actually|correction|also|so|and|but|well|ok|okay|got it|noted)[,:：，\s]+|"
                      r"^(更正一下|更正|其实|纠正一下)[,:：，\s]*", re.I)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SPLIT.split(text) if s and s.strip()]


def _tokens(text: str) -> set[str]:
    words = {w for w in re.findall(r"[a-z0-9][a-z0-9.+#-]{2,}", text.lower())}
    cjk = "".join(_CJK.findall(text))
    return words | {cjk[i:i + 2] for i in range(len(cjk) - 1)}


_ARTICLE = re.compile(r"^(a|an|the|our|my|your|its|their|just|only|one)\s+", re.I)
_STOP = {"only", "just", "that", "this", "really", "sure", "yet", "now", "all", "too", "very",
         "much", "enough", "needed", "necessary", "possible", "bad", "good", "true", "so"}


def _term(raw: str) -> str:
    """The thing a ``not X`` negates, or ``""`` when it is too vague to forget anything by."""
    term = _ARTICLE.sub("", raw.strip(".,;:!?。，；：")).strip()
    if _CJK.search(term):
        return term if len(term) >= 2 else ""
    return term if len(term) >= 3 and term.lower() not in _STOP else ""


def _named(sentence: str) -> bool:
    """A capitalised word past the first: a name, product or place."""
    return any(w[:1].isupper() for w in sentence.split()[1:])


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


class ExtractiveSummarizer:
    """Deterministic extractive summaries; bounded by ``max_chars`` (oldest facts go first)."""

    async def asummarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        """Pure computation: the async twin calls the same code."""
        return self.summarize(summary, messages)

    def __init__(self, max_chars: int = 2400, max_tokens: int | None = None,
                 counter: Callable[[list[BaseMessage]], int] | None = None) -> None:
        self.max_chars = max_chars
        self.max_tokens = max_tokens
        self.counter = counter or count_tokens_cjk

    def _too_big(self, text: str) -> bool:
        if len(text) > self.max_chars:
            return True
        if self.max_tokens is None:
            return False
        return self.counter([HumanMessage(content=text)]) > self.max_tokens

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        doc = parse_rendered(summary)
        for message in messages:
            for sentence in _sentences(message_text(message)):
                self._apply(doc, sentence)
        return self._bound(doc) or "(nothing to keep)"

    # -- rules -------------------------------------------------------------------------
    def _apply(self, doc: StructuredSummary, sentence: str) -> None:
        if len(sentence) < 2 or _GREETING.match(sentence):
            return
        if _CHITCHAT.match(sentence):
            rest = _CHITCHAT_LEAD.sub("", sentence)
            if _short(rest) and not re.search(r"\d", rest):
                return
            sentence = rest
        negated = [t for t in (_term(m.group(1)) for m in _NEGATION.finditer(sentence)) if t]
        if negated and (_CORRECTION.search(sentence) or "instead of" in sentence.lower()
                        or "而不是" in sentence or "不是" in sentence):
            self._forget(doc, negated)
            sentence = _NEGATION.sub("", sentence).strip(" ,，。.")
            sentence = _LEADING.sub("", sentence).strip()
            if sentence:
                self._add(doc, "facts", sentence)
            return
        kind = next((name for name, rule in _RULES if rule.search(sentence)), None)
        if kind == "final":
            doc.decisions = [d for d in doc.decisions if d.key != "option"]
            self._add(doc, "decisions", sentence)
        elif kind == "option":
            self._add(doc, "decisions", sentence, key="option")
        elif kind == "done":
            self._finish(doc, sentence)
        elif kind == "todo":
            self._add(doc, "todos", sentence)
        elif kind == "risk":
            self._add(doc, "risks", sentence)
        elif kind == "preference":
            self._add(doc, "preferences", sentence)
        elif _FACTY.search(sentence) or _named(sentence):
            self._add(doc, "facts", sentence)

    @staticmethod
    def _add(doc: StructuredSummary, field: str, sentence: str, key: str = "") -> None:
        items = getattr(doc, field)
        if any(_norm(i.value) == _norm(sentence) for name in FIELDS for i in getattr(doc, name)):
            return  # repetition
        items.append(Item(key=key, value=sentence))

    @staticmethod
    def _forget(doc: StructuredSummary, terms: list[str]) -> None:
        lowered = [t.lower() for t in terms if t.strip()]
        for name in FIELDS:
            kept = [i for i in getattr(doc, name)
                    if not any(t in i.value.lower() for t in lowered)]
            setattr(doc, name, kept)

    @staticmethod
    def _finish(doc: StructuredSummary, sentence: str) -> None:
        words = _tokens(sentence)
        best, score = None, 1
        for item in doc.todos:
            overlap = len(words & _tokens(item.value))
            if overlap > score:
                best, score = item, overlap
        if best is not None:
            doc.todos = [t for t in doc.todos if t is not best]

    def _bound(self, doc: StructuredSummary) -> str:
        """Over ``max_chars``: drop the oldest fact without a number or name first, then the
        oldest item of the least valuable section."""
        text = render(doc)
        while self._too_big(text):
            weak = next((i for i in doc.facts if not re.search(r"\d", i.value)
                         and not _named(i.value)), None)
            if weak is not None:
                doc.facts.remove(weak)
            else:
                name = next((n for n in ("facts", "risks", "decisions", "preferences", "todos")
                             if getattr(doc, n)), None)
                if name is None:
                    break
                getattr(doc, name).pop(0)
            text = render(doc)
        return text
