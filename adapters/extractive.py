"""The offline summarizer: extractive, deterministic, English and Chinese.

It keeps sentences that carry names, numbers, paths, URLs, e-mails, identifiers, decisions, corrections, todos, risks and
preferences, drops greetings and repetition, applies corrections (the later statement
wins: ``not X`` / ``不是X`` removes what names X as a whole term, never by substring, and
"Actually my budget is 700" replaces the fact with the same key, "budget"; a correction
with no clear target, such as "Actually, not the.", changes nothing) and final decisions
(they replace the options), and removes finished todos. Output is the structured rendering, so the same
summarizer serves ``summary_format="text"`` and ``"structured"``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

from langchain_core.messages import BaseMessage, HumanMessage

from adapters.specifics import has_specifics
from adapters.structured import (
    FIELDS, Item, StructuredSummary, item_line, parse_rendered, render, section_header,
)
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


# Words a ``not ...`` may run through before its target ("not the theatre", "not in Paris").
_LEAD_IN = {"the", "my", "our", "your", "his", "her", "its", "their", "this", "that", "these",
            "those", "just", "only", "even", "really", "so", "very", "in", "on", "at", "to", "for",
            "from", "with", "by", "of", "about", "via", "using"}
# ... and words after which nothing definite follows ("instead of a day later", "not any").
_INDEFINITE = {"a", "an", "one", "some", "any", "every", "each", "no"}
# Words that are never a target: a correction naming only these names nothing.
_STOP = _LEAD_IN | _INDEFINITE | {
    "yet", "now", "all", "too", "much", "enough", "needed", "necessary", "possible", "bad",
    "good", "true", "false", "sure", "i", "me", "we", "us", "you", "he", "she", "it", "they",
    "them", "him", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did",
    "done", "have", "has", "had", "and", "or", "but", "if", "then", "than", "as", "there", "here",
    "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "yes", "not",
    "ok", "okay", "right", "wrong", "quite", "exactly", "anymore", "again", "either", "neither",
    "nor", "both", "more", "most", "less", "least", "same", "such", "other",
    "another", "thing", "things", "ones", "it's", "that's", "i'm", "we're", "you're", "they're",
    "correct", "mistake", "actually", "anything", "something", "everything", "nothing", "way",
    "like", "also", "many", "few", "will", "would", "can", "could", "should", "may", "might",
    "must", "shall", "going", "use", "uses", "used", "case", "anyway", "though", "still"}
_CJK_FILLER = set("的了吧啊呢吗哦呀嘛这那个样些里么什它他她我你们就是也都还")
_CJK_TAIL = "的了吧啊呢吗哦呀嘛"
_COPULA = re.compile(r"\b(?:is|are|was|were|will be)\b|=|是|定在|改到|改成|改为|定为", re.I)


def _term(raw: str) -> str:
    """The thing a ``not X`` negates, or ``""`` when it is too vague to forget anything by."""
    term = raw.strip(" .,;:!?。，；：").rstrip(_CJK_TAIL)
    if _CJK.search(term):
        return term if len(term) >= 2 and not set(term) <= _CJK_FILLER else ""
    if not term or term.lower() in _STOP:
        return ""
    long_enough = len(term) >= 3 or (len(term) == 2 and any(c.isdigit() for c in term))
    return term if long_enough else ""


def _targets(sentence: str) -> list[tuple[int, int, str]]:
    """Each ``not X`` / ``不是X``: the span to cut from the sentence and its term X (``""`` when
    X is a stopword, punctuation or missing: such a correction names nothing to forget)."""
    found: list[tuple[int, int, str]] = []
    for match in _NEGATION.finditer(sentence):
        tail = sentence[match.end():]
        if _CJK.search(match.group(0)) or _CJK.match(tail.lstrip()):
            cjk = _CJK_TARGET.match(tail)
            end = match.end() + (cjk.end() if cjk else 0)
            found.append((match.start(), end, _term(cjk.group(1)) if cjk else ""))
            continue
        stop = _CLAUSE_END.search(tail)
        clause = tail[:stop.start()] if stop else tail
        words = list(_LATIN_WORD.finditer(clause))
        while words and words[0].group(0).rstrip(".").lower() in _LEAD_IN:
            words.pop(0)
        if not words or words[0].group(0).lower() in _INDEFINITE:
            found.append((match.start(), match.end(), ""))
            continue
        first, last = words[0], words[0]
        if len(words) > 1 and words[1].group(0)[0].isdigit() \
                and clause[first.end():words[1].start()].isspace():
            last = words[1]  # "MySQL 8"
        term = clause[first.start():last.end()].rstrip(".")
        found.append((match.start(), match.end() + last.end(), _term(term)))
    return found


def _says_nothing(sentence: str) -> bool:
    """Only correction words, negations, stopwords and punctuation ("Actually, not the.",
    "其实不是的"): nothing to forget and nothing to keep."""
    rest = _NEGATION.sub(" ", _CORRECTION.sub(" ", sentence))
    words = re.findall(r"[A-Za-z0-9][\w'.+#-]*", rest)
    return all(w.rstrip(".").lower() in _STOP for w in words) \
        and set(_CJK.findall(rest)) <= _CJK_FILLER | set("一下")


def _mentions(value: str, term: str) -> bool:
    """Whole-term match: "cat" is in "the cat sat", never in "category" or "cat-5" (a term is
    a run of the characters a target is read from); CJK has no word gaps: substring."""
    if _CJK.search(term):
        return term.lower() in value.lower()
    return re.search(r"(?<![A-Za-z0-9_.+#-])" + re.escape(term)
                     + r"(?:e?s)?(?![A-Za-z0-9_+#-]|\.[A-Za-z0-9])", value, re.I) is not None


def _key(text: str) -> str:
    """What a statement is about, for keyed corrections: the content words before its verb
    ("My budget is 500" -> "budget"), or ``""`` when that is vague ("it is", "I am")."""
    verb = _COPULA.search(text)
    if verb is None:
        return ""
    subject = _LEADING.sub("", text[:verb.start()]).strip()
    if _CJK.search(subject):
        subject = re.sub(r"[的\s]", "", subject)
        return subject if 2 <= len(subject) <= 10 and not set(subject) <= _CJK_FILLER else ""
    words = re.findall(r"[a-z0-9][\w.+#-]*", subject.lower())
    content = sorted({w for w in words if w not in _STOP})
    return " ".join(content) if content and len(words) <= 5 else ""


def _item_key(item: Item) -> str:
    if item.key:
        return " ".join(sorted({w for w in re.findall(r"[a-z0-9][\w.+#-]*", item.key.lower())
                                if w not in _STOP})) or _norm(item.key)
    return _key(item.value)


def _named(sentence: str) -> bool:
    """A capitalised word past the first: a name, product or place."""
    return any(w[:1].isupper() for w in sentence.split()[1:])


# The same items are compared at every fold of a thread. Bounded at 8,192: a full
# 65,536-entry cache's dict is rebuilt (~5 MB, allocated anew) every ~9,000 threads a
# migration touches, and those rebuilds left holes in the C heap (RSS steps of ~9 MB).
@functools.lru_cache(maxsize=8_192)
def _norm(text: str) -> str:
    return " ".join(text.lower().split())


class ExtractiveSummarizer:
    """Deterministic extractive summaries; bounded by ``max_chars`` (oldest facts go first).

    Only the user retracts the user's facts: corrections ("not X", "actually ...") are applied
    from the message types in ``corrections_from`` (default: the human's own messages); a tool
    result or an AI reply that says "not PostgreSQL" is kept as what it says, and removes
    nothing. Widen it with ``corrections_from=("human", "ai")`` where the assistant's own
    corrections are trusted."""

    async def asummarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        """Pure computation: the async twin calls the same code."""
        return self.summarize(summary, messages)

    def __init__(self, max_chars: int = 2400, max_tokens: int | None = None,
                 counter: Callable[[list[BaseMessage]], int] | None = None,
                 corrections_from: tuple[str, ...] = ("human",)) -> None:
        self.corrections_from = tuple(corrections_from)
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
            may_correct = message.type in self.corrections_from
            for sentence in _sentences(message_text(message)):
                self._apply(doc, sentence, may_correct)
        return self._bound(doc) or "(nothing to keep)"

    # -- rules -------------------------------------------------------------------------
    def _apply(self, doc: StructuredSummary, sentence: str, may_correct: bool = True) -> None:
        if len(sentence) < 2 or _GREETING.match(sentence):
            return
        if _CHITCHAT.match(sentence):
            rest = _CHITCHAT_LEAD.sub("", sentence)
            if _short(rest) and not re.search(r"\d", rest):
                return
            sentence = rest
        targets = _targets(sentence)
        negated = [term for _, _, term in targets if term]
        correction = _CORRECTION.search(sentence) is not None
        if (targets or correction) and _says_nothing(sentence):
            return
        corrects = bool(negated) and (correction or "instead of" in sentence.lower()
                                      or "不是" in sentence)  # 而不是 too
        if not may_correct and (corrects or correction):
            return  # a tool's or the model's correction is not the user's: it changes nothing
        if corrects:
            self._forget(doc, negated)
            for start, end, _ in reversed(targets):
                sentence = sentence[:start] + sentence[end:]
            sentence = _LEADING.sub("", sentence.strip(" ,，。.")).strip()
            if sentence:
                self._supersede(doc, sentence)
                self._add(doc, "facts", sentence)
            return
        if correction:
            stated = _LEADING.sub("", sentence).strip()
            if stated and self._supersede(doc, stated):
                self._add(doc, "facts", stated)
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
        elif _FACTY.search(sentence) or _named(sentence) or has_specifics(sentence):
            self._add(doc, "facts", sentence)

    @staticmethod
    def _add(doc: StructuredSummary, field: str, sentence: str, key: str = "") -> None:
        items = getattr(doc, field)
        said = _norm(sentence)
        if any(_norm(i.value) == said for name in FIELDS for i in getattr(doc, name)):
            return  # repetition
        items.append(Item(key=key, value=sentence))

    @staticmethod
    def _forget(doc: StructuredSummary, terms: list[str]) -> None:
        """Drop items that name a corrected term as a whole term (never by substring)."""
        for name in FIELDS:
            kept = [i for i in getattr(doc, name)
                    if not any(_mentions(i.value, t) or _mentions(i.key, t) for t in terms)]
            setattr(doc, name, kept)

    @staticmethod
    def _supersede(doc: StructuredSummary, stated: str) -> bool:
        """A correction about the same key ("my budget is ...") replaces the facts with that
        key; a correction with no clear key replaces nothing. Did it replace any?"""
        key = _key(stated)
        if not key:
            return False
        kept = [i for i in doc.facts if _item_key(i) != key]
        replaced = len(kept) < len(doc.facts)
        doc.facts = kept
        return replaced

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
        if self.max_tokens is None:
            _trim_to_chars(doc, self.max_chars)  # the same drops, without a render per drop
        text = render(doc)
        while self._too_big(text):
            weak = next((i for i in doc.facts if _weak(i.value)), None)
            if weak is not None:
                doc.facts.remove(weak)
            else:
                name = next((n for n in _DROP_ORDER if getattr(doc, n)), None)
                if name is None:
                    break
                getattr(doc, name).pop(0)
            text = render(doc)
        return text


# what the size bound drops first: a fact without a number or name, then by section
_DROP_ORDER = ("facts", "risks", "decisions", "preferences", "todos")


def _weak(value: str) -> bool:
    return not re.search(r"\d", value) and not _named(value) and not has_specifics(value)


def _trim_to_chars(doc: StructuredSummary, limit: int) -> None:
    """What ``_bound``'s loop drops to fit ``limit`` characters, found from the line lengths
    (the rendered text is its lines joined by newlines): linear in the number of items."""
    sizes = {name: [len(item_line(i.key, i.value)) for i in getattr(doc, name)]
             for name in FIELDS}
    lines = {name: len(s) + 1 if s else 0 for name, s in sizes.items()}
    chars = {name: sum(s) + len(section_header(name)) if s else 0 for name, s in sizes.items()}

    def total() -> int:
        n = sum(lines.values())
        return sum(chars.values()) + n - 1 if n else 0

    gone: dict[str, set[int]] = {name: set() for name in FIELDS}

    def drop(name: str, k: int) -> None:
        gone[name].add(k)
        chars[name] -= sizes[name][k]
        lines[name] -= 1
        if lines[name] == 1:  # only the header is left: it goes too
            chars[name], lines[name] = 0, 0

    if total() <= limit:
        return
    for k, item in enumerate(doc.facts):  # weak facts first, oldest first
        if total() <= limit:
            break
        if _weak(item.value):
            drop("facts", k)
    for name in _DROP_ORDER:  # then by section
        for k in range(len(sizes[name])):
            if total() <= limit:
                break
            if k not in gone[name]:
                drop(name, k)
    for name, ks in gone.items():
        if ks:
            setattr(doc, name, [i for k, i in enumerate(getattr(doc, name)) if k not in ks])

