"""``memshift eval --fidelity --report FILE``: the facts kept by fold depth as a self-contained
HTML page (inline SVG, no script, no network): one chart per language, one bar per prompt in
each depth bucket, its height the share of that bucket's planted facts kept."""

from __future__ import annotations

from html import escape
from pathlib import Path

from compat.fidelity import BUCKETS, FidelityRun

__all__ = ["fidelity_html"]

_COLOURS = ("#2471a3", "#c0392b", "#145a32", "#8e44ad", "#d68910", "#5d6d7e")
_W, _H, _LEFT, _TOP, _BOTTOM = 760, 300, 56, 16, 240


def _chart(language: str, runs: list[FidelityRun]) -> str:
    names = [name for _, _, name in BUCKETS
             if any(name in next(iter(r.kept.values()), {}) for r in runs)]
    slot = (_W - _LEFT - 180) / max(len(names), 1)
    bar = slot * 0.8 / max(len(runs), 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img" '
             f'aria-label="facts kept by fold depth, {escape(language)}">']
    for pct in (0, 25, 50, 75, 100):  # the y axis, in per cent of the bucket's facts
        y = _BOTTOM - (_BOTTOM - _TOP) * pct / 100
        parts.append(f'<line x1="{_LEFT}" x2="{_W - 180}" y1="{y:.1f}" y2="{y:.1f}" '
                     f'stroke="#ddd"/><text x="{_LEFT - 6}" y="{y + 4:.1f}" font-size="11" '
                     f'text-anchor="end">{pct}%</text>')
    for i, name in enumerate(names):
        x0 = _LEFT + i * slot + slot * 0.1
        parts.append(f'<text x="{x0 + slot * 0.4:.1f}" y="{_BOTTOM + 16}" font-size="11" '
                     f'text-anchor="middle">{escape(name)}</text>')
        for j, run in enumerate(runs):
            kept, total = next(iter(run.kept.values())).get(name, (0, 0))
            share = kept / total if total else 0.0
            height = (_BOTTOM - _TOP) * share
            parts.append(
                f'<rect x="{x0 + j * bar:.1f}" y="{_BOTTOM - height:.1f}" width="{bar - 2:.1f}" '
                f'height="{height:.1f}" fill="{_COLOURS[j % len(_COLOURS)]}">'
                f'<title>{escape(run.prompt)}, depth {escape(name)}: {kept}/{total}</title></rect>')
    parts.append(f'<text x="{(_LEFT + _W - 180) / 2:.0f}" y="{_BOTTOM + 34}" font-size="12" '
                 'text-anchor="middle">fold depth (window = still verbatim)</text>')
    for j, run in enumerate(runs):  # the legend
        y = _TOP + 18 * j
        parts.append(f'<rect x="{_W - 170}" y="{y}" width="12" height="12" '
                     f'fill="{_COLOURS[j % len(_COLOURS)]}"/><text x="{_W - 152}" y="{y + 11}" '
                     f'font-size="12">{escape(run.prompt)} '
                     f'({next(iter(run.facts_kept.values()), 0)}/{run.facts})</text>')
    parts.append("</svg>")
    return "".join(parts)


def fidelity_html(runs: list[FidelityRun], path: str, summarizer: str, table: str) -> Path:
    """Write the page; ``table`` is the terminal table, shown under the charts."""
    languages = list(dict.fromkeys(r.language for r in runs))
    body = [f"<h1>memshift eval --fidelity</h1><p>summarizer: {escape(summarizer)}; both "
            "backends agree: " + ("yes" if all(r.backends_agree for r in runs) else "NO")
            + "</p>"]
    for language in languages:
        mine = [r for r in runs if r.language == language]
        body.append(f"<h2>{escape(language)}: planted facts kept, by fold depth</h2>"
                    + _chart(language, mine))
    body.append(f"<h2>Table</h2><pre>{escape(table)}</pre>")
    out = Path(path)
    out.write_text("<!doctype html><html><head><meta charset='utf-8'><title>memshift "
                   "fidelity</title></head><body style='font-family:sans-serif'>"
                   + "".join(body) + "</body></html>", encoding="utf-8")
    return out
