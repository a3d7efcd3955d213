"""One thread of the report: its chart, then one collapsible ``<details>`` per turn.

Each turn shows only what changed (the messages it added, the summary when a fold rewrote
it), not the whole window again, and at most :data:`MAX_INLINE_TURNS` turns per thread are
inline, so the page grows with the number of folds rather than quadratically with turns.
"""

from __future__ import annotations

from collections.abc import Sequence

from compat.report._chart import chart_svg, overlap_note
from compat.report._messages import (
    MESSAGE_CHARS,
    MISMATCH_MESSAGE_CHARS,
    Item,
    added_items,
    render_items,
    window_items,
)
from compat.report._text import clip, text
from compat.report._tokens import TokenExplainer
from compat.replay import ReplayReport, TurnResult

__all__ = ["MAX_INLINE_TURNS", "status_label", "summary_change", "thread_html", "turn_anchor"]

MAX_INLINE_TURNS = 200  # per thread; the rest is counted in a note
SUMMARY_CHARS = 400  # a fold's summary change on a matching turn; the final summary is whole
MISMATCH_SUMMARY_CHARS = 3000  # where the backends disagree, show (nearly) all of it
_LISTED = 20  # omitted mismatching turns named in the note


def turn_anchor(thread_index: int, turn: TurnResult) -> str:
    """A stable element id: thread ids are untrusted text, so they never become ids."""
    return f"t{thread_index}-{turn.turn}"


def status_label(turn: TurnResult) -> tuple[str, str]:
    """(css class, words) for a turn's outcome."""
    if turn.match:
        return "ok", "match"
    if turn.nondeterminism:
        return "diff", "differs (model nondeterminism)"
    return "diff", "MISMATCH"


def summary_change(old: str, new: str, limit: int = SUMMARY_CHARS) -> str:
    """What a fold changed in the summary: the whole text the first time, then only the
    lines it added (summaries are progressive, so repeating them made the page quadratic)."""
    if not old:
        return clip(new, limit)
    kept = set(new.splitlines())
    before = set(old.splitlines())
    added = [line for line in new.splitlines() if line not in before]
    dropped = sum(1 for line in old.splitlines() if line not in kept)
    head = f"[{len(added)} line(s) added, {dropped} dropped, {len(kept & before)} kept]"
    return clip("\n".join([head, *added]), limit)


def _summaries_html(report: ReplayReport, turn: TurnResult, previous: TurnResult | None) -> str:
    backends = report.backends
    old = {b: previous.summaries[b] if previous else "" for b in backends}
    if all(turn.summaries[b] == old[b] for b in backends):
        return ""
    if len({turn.summaries[b] for b in backends}) == 1 and len(set(old.values())) == 1:
        label, shown = "all backends", [backends[0]]
    else:
        label, shown = "", list(backends)
    limit = SUMMARY_CHARS if turn.match else MISMATCH_SUMMARY_CHARS
    return "".join(f"<div class='note'>summary after this turn ({text(label or b)}):</div>"
                   f"<div class='sum'>{text(summary_change(old[b], turn.summaries[b], limit))}</div>"
                   for b in shown)


def _turn_html(report: ReplayReport, anchor: str, turn: TurnResult, previous: TurnResult | None,
               added: tuple[int, list[Item]], explainer: TokenExplainer) -> str:
    css, words = status_label(turn)
    backends = report.backends
    tokens = " · ".join(f"{text(k)} {turn.prompt_tokens[k]:,}" for k in report.strategies)
    badges = []
    note = explainer.explain(turn, previous)
    if note is not None:
        badges.append(f"<span class='badge{'' if note.explained else ' warn'}'>"
                      f"{text(note.badge)}</span>")
    before = previous.folds if previous else dict.fromkeys(backends, 0)
    if any(turn.folds[b] > before[b] for b in backends):
        badges.append(f"<span class='badge fold'>fold ({' / '.join(str(turn.folds[b]) for b in backends)})"
                      "</span>")
    body = []
    if turn.diffs:
        body.append("<ul class='diffs'>" + "".join(f"<li>{text(clip(d, 400))}</li>"
                                                   for d in turn.diffs) + "</ul>")
    if note is not None:
        body.append(f"<p class='token-note'>{text(note.detail)}</p>")
    carried, new = added
    body.append(render_items(new, MESSAGE_CHARS if turn.match else MISMATCH_MESSAGE_CHARS))
    windows = " / ".join(f"{turn.windows[b]}" for b in backends)
    folds = " / ".join(f"{turn.folds[b]}" for b in backends)
    body.append(f"<p class='note'>{len(new)} message(s) added; window after the save {windows} "
                f"({carried} carried over); folds {folds}; file line {turn.line}</p>")
    body.append(_summaries_html(report, turn, previous))
    is_open = "" if turn.match else " open"
    return (f"<details class='turn {'match' if turn.match else 'mismatch'}' id='{anchor}'"
            f"{is_open}><summary><b>turn {turn.turn}</b> <span class='{css}'>{text(words)}</span>"
            f"<span class='tok'>prompt tokens: {tokens}</span>{''.join(badges)}</summary>"
            f"{''.join(body)}</details>")


def _omitted_html(turns: Sequence[TurnResult]) -> str:
    if not turns:
        return ""
    bad = [t.turn for t in turns if not t.match]
    named = ", ".join(str(n) for n in bad[:_LISTED]) + (" …" if len(bad) > _LISTED else "")
    return (f"<p class='omitted'>{len(turns)} more turn(s) (turns {turns[0].turn}–{turns[-1].turn}) "
            f"are not shown inline, to keep this report small (at most {MAX_INLINE_TURNS} turns "
            f"per thread). {len(bad)} of them did not match"
            + (f" (turns {named})" if bad else "")
            + ". The chart above covers every turn; the text output of memshift replay lists "
            "them all.</p>")


def _final_summary_html(report: ReplayReport, last: TurnResult) -> str:
    summaries = {b: last.summaries[b] for b in report.backends if last.summaries[b]}
    if not summaries:
        return "<p class='note'>No fold happened on this thread: there is no summary.</p>"
    if len(set(summaries.values())) == 1 and len(summaries) == len(report.backends):
        return ("<details class='final'><summary>final summary (all backends)</summary>"
                f"<div class='sum'>{text(next(iter(summaries.values())))}</div></details>")
    return "".join(f"<details class='final'><summary>final summary ({text(b)})</summary>"
                   f"<div class='sum'>{text(s)}</div></details>" for b, s in summaries.items())


def thread_html(report: ReplayReport, index: int, thread: str, turns: list[TurnResult],
                explainer: TokenExplainer) -> str:
    """The section for one thread (``turns`` in order, all of one thread)."""
    mismatches = sum(not t.match for t in turns)
    last = turns[-1]
    folds = ", ".join(f"{text(b)} {last.folds[b]}" for b in report.backends)
    parts = [f"<section class='thread{'' if mismatches else ' clean'}' id='thread-{index}'>"
             f"<h2>thread {text(thread)}</h2>"
             f"<p class='note'>{len(turns)} turn(s), <span class='{'diff' if mismatches else 'ok'}'>"
             f"{mismatches} mismatch(es)</span>, folds: {folds}. <a href='#toc'>back to threads</a></p>",
             chart_svg(turns, report.strategies, report.backends),
             f"<p class='note'>{text(overlap_note(turns, report.backends))}</p>",
             "<p class='clean-note'>No mismatches in this thread.</p>"]
    previous: TurnResult | None = None
    before: list[Item] = []
    for turn in turns[:MAX_INLINE_TURNS]:
        items = window_items(turn)
        added = added_items(before, items)
        parts.append(_turn_html(report, turn_anchor(index, turn), turn, previous, added, explainer))
        previous, before = turn, items
    parts.append(_omitted_html(turns[MAX_INLINE_TURNS:]))
    parts.append(_final_summary_html(report, last))
    parts.append("</section>")
    return "".join(parts)
