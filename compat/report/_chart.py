"""The per-thread prompt-token chart: an inline SVG with ticked, labelled axes and a legend.

The classic and middleware lines often coincide (same memory, a few tokens apart), so each
series has its own dash pattern and width: the thick light line under the dashed one stays
visible where they overlap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from compat.report._text import text
from compat.replay import TurnResult

__all__ = ["SERIES_STYLE", "chart_svg", "fold_marks", "nice_ticks", "overlap_note",
           "series_style"]

# series -> (colour, stroke width, stroke-dasharray, opacity, legend words)
SERIES_STYLE: dict[str, tuple[str, float, str, float, str]] = {
    "full": ("#c0392b", 2, "none", 1.0, "solid"),
    "classic": ("#2471a3", 6, "none", 0.45, "thick, light"),
    "middleware": ("#145a32", 2, "7 5", 1.0, "dashed"),
    "shadow": ("#8e44ad", 2, "2 4", 1.0, "dotted"),
    "trim": ("#d68910", 2, "10 3 2 3", 1.0, "dash-dot"),
    "filter": ("#5d6d7e", 2, "1 5", 1.0, "sparse dots"),
}
_SPARE = ["12 4", "4 2 4 8", "3 3", "8 2 2 2 2 2"]
MAX_POINTS = 400  # per series; longer threads are sampled (the page size stays bounded)

_W, _H = 760, 290
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 610, 14, 236  # the plot area; the legend sits right of it


def series_style(key: str, index: int) -> tuple[str, float, str, float, str]:
    """A known series' style, or a spare dash pattern so unknown series stay distinct."""
    if key in SERIES_STYLE:
        return SERIES_STYLE[key]
    dash = _SPARE[index % len(_SPARE)]
    return "#555555", 2, dash, 1.0, f"dashes {dash}"


def _nice_step(raw: float) -> int:
    exponent = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for factor in (1, 2, 5, 10):
        if factor * exponent >= raw:
            return max(1, int(factor * exponent))
    return max(1, int(10 * exponent))


def nice_ticks(top: float, minimum: int = 4) -> list[int]:
    """Round-numbered ticks from 0 covering ``top``: at least ``minimum`` of them."""
    top = max(top, minimum)
    step = _nice_step(top / 5)
    ticks = list(range(0, step * math.ceil(top / step) + 1, step))
    while len(ticks) < minimum:
        ticks.append(ticks[-1] + step)
    return ticks


def _sample(count: int) -> list[int]:
    if count <= MAX_POINTS:
        return list(range(count))
    stride = math.ceil(count / MAX_POINTS)
    picks = list(range(0, count, stride))
    return picks if picks[-1] == count - 1 else [*picks, count - 1]


def fold_marks(turns: Sequence[TurnResult], backends: Sequence[str]) -> list[tuple[int, str]]:
    """(turn, backends that folded at it): where a backend's fold count grew."""
    marks: list[tuple[int, str]] = []
    before = dict.fromkeys(backends, 0)
    for t in turns:
        grew = [b for b in backends if t.folds.get(b, 0) > before[b]]
        before = {b: t.folds.get(b, 0) for b in backends}
        if grew:
            marks.append((t.turn, ", ".join(grew)))
    return marks


def chart_svg(turns: Sequence[TurnResult], keys: Sequence[str],
              backends: Sequence[str] = ()) -> str:
    """One SVG: a line per series (prompt tokens sent with each turn's question), and a
    marker at each turn where a backend folded."""
    xt = nice_ticks(max((t.turn for t in turns), default=1))
    yt = nice_ticks(max((t.prompt_tokens[k] for t in turns for k in keys), default=0))

    def x_of(turn: float) -> float:
        return _LEFT + (_RIGHT - _LEFT) * turn / xt[-1]

    def y_of(value: float) -> float:
        return _BOTTOM - (_BOTTOM - _TOP) * value / yt[-1]

    parts = [f"<rect x='{_LEFT}' y='{_TOP}' width='{_RIGHT - _LEFT}' height='{_BOTTOM - _TOP}' "
             "fill='#fbfcfc' stroke='#bbb'/>"]
    for v in xt:
        x = x_of(v)
        parts.append(f"<g class='tick tick-x'><line x1='{x:.1f}' y1='{_BOTTOM}' x2='{x:.1f}' "
                     f"y2='{_BOTTOM + 5}' stroke='#666'/><line x1='{x:.1f}' y1='{_TOP}' "
                     f"x2='{x:.1f}' y2='{_BOTTOM}' stroke='#eee'/><text x='{x:.1f}' "
                     f"y='{_BOTTOM + 18}' text-anchor='middle'>{v}</text></g>")
    for v in yt:
        y = y_of(v)
        parts.append(f"<g class='tick tick-y'><line x1='{_LEFT - 5}' y1='{y:.1f}' x2='{_LEFT}' "
                     f"y2='{y:.1f}' stroke='#666'/><line x1='{_LEFT}' y1='{y:.1f}' x2='{_RIGHT}' "
                     f"y2='{y:.1f}' stroke='#eee'/><text x='{_LEFT - 8}' y='{y + 4:.1f}' "
                     f"text-anchor='end'>{v:,}</text></g>")
    parts.append(f"<text class='axis-label' x='{(_LEFT + _RIGHT) / 2:.0f}' y='{_H - 18}' "
                 "text-anchor='middle'>turn (within the thread)</text>"
                 f"<text class='axis-label' transform='rotate(-90)' x='{-(_TOP + _BOTTOM) / 2:.0f}' "
                 "y='16' text-anchor='middle'>prompt tokens</text>")
    picks = _sample(len(turns))
    legend = []
    for i, key in enumerate(keys):
        colour, width, dash, opacity, words = series_style(key, i)
        pts = " ".join(f"{x_of(turns[j].turn):.1f},{y_of(turns[j].prompt_tokens[key]):.1f}"
                       for j in picks)
        stroke = (f"stroke='{colour}' stroke-width='{width}' stroke-dasharray='{dash}' "
                  f"stroke-opacity='{opacity}'")
        parts.append(f"<polyline class='series' data-series='{text(key)}' fill='none' {stroke} "
                     f"stroke-linejoin='round' points='{pts}'><title>{text(key)}</title></polyline>")
        y = _TOP + 10 + 22 * i
        legend.append(f"<g class='legend-item' data-series='{text(key)}'><line x1='{_RIGHT + 14}' "
                      f"y1='{y}' x2='{_RIGHT + 50}' y2='{y}' {stroke}/><text x='{_RIGHT + 56}' "
                      f"y='{y + 4}'>{text(key)}</text><title>{text(words)}</title></g>")
    marks = fold_marks(turns, backends)
    for turn, who in marks:
        x = x_of(turn)
        parts.append(f"<g class='fold-marker' data-turn='{turn}' data-backends='{text(who)}'>"
                     f"<line x1='{x:.1f}' y1='{_TOP}' x2='{x:.1f}' y2='{_BOTTOM}' "
                     "stroke='#b9770e' stroke-width='1' stroke-dasharray='3 3'/>"
                     f"<path d='M{x - 5:.1f},{_TOP} L{x + 5:.1f},{_TOP} L{x:.1f},{_TOP + 8}Z' "
                     f"fill='#b9770e'/><title>fold at turn {turn} ({text(who)})</title></g>")
    if marks:
        y = _TOP + 10 + 22 * len(keys)
        legend.append(f"<g class='legend-fold'><line x1='{_RIGHT + 32}' y1='{y - 8}' "
                      f"x2='{_RIGHT + 32}' y2='{y + 8}' stroke='#b9770e' stroke-dasharray='3 3'/>"
                      f"<text x='{_RIGHT + 56}' y='{y + 4}'>fold</text></g>")
    parts.append(f"<g class='legend'>{''.join(legend)}</g>")
    return (f"<svg class='chart' role='img' aria-label='prompt tokens per turn' width='{_W}' "
            f"height='{_H}' viewBox='0 0 {_W} {_H}' font-size='11'>{''.join(parts)}</svg>")


def overlap_note(turns: Sequence[TurnResult], backends: Sequence[str]) -> str:
    """Plain words under the chart when backend lines lie on top of each other."""
    if len(backends) < 2 or not turns:
        return ""
    gap = max(abs(t.prompt_tokens[b] - t.prompt_tokens[backends[0]])
              for t in turns for b in backends[1:])
    styles = "; ".join(f"{b}: {series_style(b, i)[4]}" for i, b in enumerate(backends))
    if gap == 0:
        return f"The backend lines coincide on every turn ({styles})."
    return (f"The backends differ by at most {gap} tokens on a turn, so their lines nearly "
            f"coincide ({styles}); the per-turn notes below say why they differ.")
