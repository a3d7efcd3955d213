"""A self-contained HTML replay report: per thread, a prompt-token chart and a turn table."""

from __future__ import annotations

from html import escape
from pathlib import Path

from compat.replay import ReplayReport, TurnResult

__all__ = ["render_html", "write_html"]

_COLORS = {"full": "#c0392b", "classic": "#2471a3", "middleware": "#27ae60", "shadow": "#8e44ad",
           "trim": "#d68910", "filter": "#7f8c8d"}
_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px} h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%;margin:8px 0 16px}
td,th{border:1px solid #ddd;padding:4px 6px;vertical-align:top;text-align:left}
th{background:#f4f6f7} .ok{color:#1e8449;font-weight:600} .diff{color:#c0392b;font-weight:700}
.sum{white-space:pre-wrap;max-width:420px;font-size:12px;color:#444}
.win{font-size:12px} .stat{display:inline-block;margin:0 18px 8px 0}
.legend span{display:inline-block;margin-right:14px} svg{background:#fbfcfc;border:1px solid #eee}
"""


def _chart(turns: list[TurnResult], keys: list[str], width: int = 720, height: int = 220) -> str:
    pad = 40
    top = max((t.prompt_tokens[k] for t in turns for k in keys), default=1) or 1
    n = max(len(turns) - 1, 1)

    def point(i: int, value: int) -> str:
        x = pad + (width - 2 * pad) * i / n
        y = height - pad - (height - 2 * pad) * value / top
        return f"{x:.1f},{y:.1f}"

    lines = []
    for key in keys:
        pts = " ".join(point(i, t.prompt_tokens[key]) for i, t in enumerate(turns))
        lines.append(f'<polyline fill="none" stroke="{_COLORS.get(key, "#555")}" stroke-width="2" '
                     f'points="{pts}"><title>{escape(key)}</title></polyline>')
    axes = (f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#999"/>'
            f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#999"/>'
            f'<text x="{pad}" y="{pad - 8}" font-size="11">{top} tokens</text>'
            f'<text x="{width - pad}" y="{height - 12}" font-size="11" text-anchor="end">turn {len(turns)}</text>')
    return (f'<svg role="img" aria-label="prompt tokens per turn" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">{axes}{"".join(lines)}</svg>')


def render_html(report: ReplayReport, title: str = "memshift replay") -> str:
    keys = report.strategies
    legend = "".join(f'<span style="color:{_COLORS.get(k, "#555")}">&#9632; {escape(k)}</span>'
                     for k in keys)
    verdict = ("<span class='ok'>EQUIVALENT</span>" if not report.divergences
               else f"<span class='diff'>DIVERGED on {len(report.divergences)} turn(s)</span>")
    stats = [("turns", len(report.turns)), ("threads", len(report.threads)),
             ("summarizer calls", report.summarizer_calls), ("folds shared", report.shared_folds)]
    stats += [(f"prompt tokens ({k})", report.total_prompt_tokens(k)) for k in keys]
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{escape(title)}: {verdict}</h1>",
             "".join(f"<div class='stat'><b>{escape(str(v))}</b> {escape(k)}</div>" for k, v in stats),
             f"<p>policy: <code>{escape(repr(report.policy))}</code></p>"]
    if report.facts:
        fact_rows = "".join(
            f"<tr><td>{escape(k)}</td><td>{report.facts[k][0]} / {report.facts[k][1]}</td>"
            f"<td>{report.total_prompt_tokens(k)}</td></tr>" for k in keys)
        parts.append("<h2>What each strategy still shows the model at the end</h2>"
                     "<table class='facts'><tr><th>strategy</th><th>early facts visible</th>"
                     f"<th>prompt tokens (all turns)</th></tr>{fact_rows}</table>")
    for thread in report.threads:
        turns = [t for t in report.turns if t.thread_id == thread]
        parts.append(f"<h2 id='{escape(thread)}'>thread {escape(thread)}</h2>"
                     f"<div class='legend'>{legend}</div>{_chart(turns, keys)}")
        head = "".join(f"<th>{escape(k)} tokens</th>" for k in keys)
        rows: list[str] = []
        for t in turns:
            folds = " / ".join(f"{t.folds[b]}" for b in report.backends)
            window = "<br>".join(f"<b>{escape(kind)}</b>: {escape(text[:140])}" for kind, text in t.window)
            status = ("<span class='ok'>match</span>" if t.match else
                      "<span class='diff'>MISMATCH</span><br>" + "<br>".join(escape(d) for d in t.diffs))
            rows.append(f"<tr><td>{t.turn}</td><td>{status}</td><td>{folds}</td>"
                        f"<td class='sum'>{escape(t.summaries[report.backends[0]])}</td>"
                        f"<td class='win'>{window}</td>"
                        + "".join(f"<td>{t.prompt_tokens[k]}</td>" for k in keys) + "</tr>")
        parts.append(f"<table><tr><th>turn</th><th>status</th><th>folds ({' / '.join(report.backends)})"
                     f"</th><th>summary</th><th>window</th>{head}</tr>{''.join(rows)}</table>")
    parts.append("</body></html>")
    return "".join(parts)


def write_html(report: ReplayReport, path: str | Path, title: str = "memshift replay") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(report, title), encoding="utf-8")
    return path
