"""A self-contained HTML replay report: a summary first (verdict, counts, the policy), then
a table of contents, then per thread a prompt-token chart and collapsible turns.

Operators open it from CI artifacts, offline: everything is inline, every piece of
conversation text is escaped (it is untrusted), and the size is bounded per thread.
The layout pieces live in ``compat/_report_*.py``.
"""

from __future__ import annotations

from pathlib import Path

from compat.report._assets import CSS, SCRIPT
from compat.report._text import policy_rows, policy_sentence, text
from compat.report._tokens import TokenExplainer
from compat.report._turns import MAX_INLINE_TURNS, status_label, thread_html, turn_anchor
from compat.replay import ReplayReport, TurnResult

__all__ = ["render_html", "run_meta", "write_html"]

_LISTED_MISMATCHES = 50  # linked from the summary; the thread sections hold the rest


def _by_thread(report: ReplayReport) -> dict[str, list[TurnResult]]:
    grouped: dict[str, list[TurnResult]] = {t: [] for t in report.threads}
    for turn in report.turns:
        grouped[turn.thread_id].append(turn)
    return grouped


def _verdict(report: ReplayReport) -> str:
    if report.divergences:
        words = f"<span class='diff'>DIVERGED on {len(report.divergences)} turn(s)</span>"
    else:
        words = "<span class='ok'>EQUIVALENT</span>"
    if report.nondeterministic:
        words += (f" <span class='note'>({len(report.nondeterministic)} turn(s) differ only "
                  "because the model answered the same input differently)</span>")
    return f"<p class='verdict' id='verdict'>{words}</p>"


def _stats_table(report: ReplayReport, threads: dict[str, list[TurnResult]]) -> str:
    full = report.total_prompt_tokens("full") or 1
    rows: list[tuple[str, str]] = [
        ("turns", f"{len(report.turns):,}"),
        ("threads", f"{len(threads):,}"),
        ("mismatching turns (backend divergence)", f"{len(report.divergences):,}"),
        ("turns differing by model nondeterminism", f"{len(report.nondeterministic):,}"),
    ]
    rows += [(f"differing turns, class {name}{' (ignored)' if name in report.ignored else ''}",
              f"{count:,}") for name, count in sorted(report.classes.items())]
    for backend in report.backends:
        folds = sum(turns[-1].folds[backend] for turns in threads.values() if turns)
        rows.append((f"folds ({backend})", f"{folds:,}"))
    rows += [("summarizer calls", f"{report.summarizer_calls:,}"),
             ("folds shared between backends", f"{report.shared_folds:,}")]
    for key in report.strategies:
        total = report.total_prompt_tokens(key)
        rows.append((f"prompt tokens, all turns ({key})", f"{total:,} ({100 * total / full:.0f}% of full)"))
    body = "".join(f"<tr><th>{text(k)}</th><td class='num'>{text(v)}</td></tr>" for k, v in rows)
    return f"<table class='stats'>{body}</table>"


def _token_gaps(explainer: TokenExplainer) -> str:
    rows = "".join(f"<li><b>{text(b)}</b>: {text(how)}</li>" for b, how in explainer.renderings())
    return ("<h3 id='token-gaps'>Why prompt tokens can differ on a matching turn</h3>"
            "<p class='note'>Every backend holds the same summary but sends it in its own message; "
            "the turn notes below say how many tokens that rendering accounts for.</p>"
            f"<ul class='note'>{rows}</ul>")


def _facts_table(report: ReplayReport) -> str:
    if not report.facts:
        return ""
    rows = "".join(f"<tr><td>{text(k)}</td><td class='num'>{report.facts[k][0]} / {report.facts[k][1]}"
                   f"</td><td class='num'>{report.total_prompt_tokens(k):,}</td></tr>"
                   for k in report.strategies if k in report.facts)
    return ("<h3>What each strategy still shows the model at the end</h3><table class='facts'>"
            "<tr><th>strategy</th><th>early facts visible</th><th>prompt tokens (all turns)</th></tr>"
            f"{rows}</table>")


def _policy_html(report: ReplayReport) -> str:
    sentence = policy_sentence(report.policy)
    rows = "".join(f"<tr><th>{text(name)}</th><td>{text(value)}</td><td class='note'>{text(meaning)}"
                   "</td></tr>" for name, value, meaning in policy_rows(report.policy))
    return ("<h3>Policy (the same for both backends)</h3>"
            + (f"<p class='sum'>{text(sentence)}</p>" if sentence else "")
            + f"<table class='policy'><tr><th>field</th><th>value</th><th>meaning</th></tr>{rows}</table>")


def _mismatch_list(report: ReplayReport, threads: dict[str, list[TurnResult]]) -> str:
    index = {name: i for i, name in enumerate(threads, start=1)}
    bad = [t for t in report.turns if not t.match]
    if not bad:
        return "<p class='note' id='mismatch-list'>No turn mismatched.</p>"
    items = []
    for turn in bad[:_LISTED_MISMATCHES]:
        words = f"{text(turn.thread_id)} turn {turn.turn} ({text(status_label(turn)[1])})"
        inline = turn.turn <= MAX_INLINE_TURNS
        items.append(f"<li><a href='#{turn_anchor(index[turn.thread_id], turn)}'>{words}</a></li>"
                     if inline else f"<li>{words} (not inline)</li>")
    more = (f"<p class='note'>… and {len(bad) - _LISTED_MISMATCHES} more in the thread sections.</p>"
            if len(bad) > _LISTED_MISMATCHES else "")
    return f"<h3>Mismatching turns</h3><ul id='mismatch-list'>{''.join(items)}</ul>{more}"


def _toc(report: ReplayReport, threads: dict[str, list[TurnResult]]) -> str:
    rows = []
    for i, (name, turns) in enumerate(threads.items(), start=1):
        bad = sum(not t.match for t in turns)
        folds = " / ".join(str(turns[-1].folds[b]) for b in report.backends)
        rows.append(f"<tr><td><a href='#thread-{i}'>{text(name)}</a></td><td class='num'>{len(turns)}</td>"
                    f"<td class='num {'diff' if bad else 'ok'}'>{bad}</td><td class='num'>{folds}</td></tr>")
    return ("<nav id='toc'><h2>Threads</h2><table><tr><th>thread</th><th>turns</th>"
            f"<th>mismatches</th><th>folds ({text(' / '.join(report.backends))})</th></tr>"
            f"{''.join(rows)}</table></nav>")


def _toolbar() -> str:
    return ("<div id='toolbar'><label><input type='checkbox' id='only-mismatches'> "
            "mismatches only</label> <span class='note'>(or open this page with "
            "<code>#mismatches</code> at the end of its address)</span>"
            "<noscript><span class='note'> Without JavaScript the filter needs a browser with "
            "CSS :has(); mismatching turns are open and red either way.</span></noscript></div>")


def run_meta(command: str | None = None, source: str | Path | None = None) -> dict[str, str]:
    """What the report's header says about the run: memshift's version, the command, a hash
    of the input file and the time (UTC)."""
    import hashlib
    from datetime import datetime, timezone
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("memshift")
    except PackageNotFoundError:
        ours = "unknown"
    meta = {"memshift": ours}
    if command:
        meta["command"] = command
    if source is not None:
        digest = hashlib.sha256(Path(source).read_bytes()).hexdigest()
        meta["input"] = f"{Path(source).name} (sha256 {digest[:16]}…)"
    meta["generated"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return meta


def _run_header(meta: dict[str, str]) -> str:
    rows = "".join(f"<dt>{text(k)}</dt><dd>{text(v)}</dd>" for k, v in meta.items())
    return f"<header id='run'><dl>{rows}</dl></header>"


def render_html(report: ReplayReport, title: str = "memshift replay",
                meta: dict[str, str] | None = None) -> str:
    """The whole page as one string (no external resources); ``meta`` (``run_meta``) heads
    it."""
    threads = _by_thread(report)
    explainer = TokenExplainer(report)
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{text(title)}</title><style>{CSS}</style></head><body>",
        _run_header(meta if meta is not None else run_meta()),
        f"<section id='summary'><h1>{text(title)}</h1>{_verdict(report)}",
        "<p class='note'>Prompt tokens are what each strategy sends with a turn's question: "
        "the memory before that turn's save plus the question.</p>",
        _stats_table(report, threads), _mismatch_list(report, threads), _token_gaps(explainer),
        _facts_table(report),
        _policy_html(report), "</section>",
        _toc(report, threads), _toolbar(),
    ]
    for i, (name, turns) in enumerate(threads.items(), start=1):
        parts.append(thread_html(report, i, name, turns, explainer))
    parts.append(f"<script>{SCRIPT}</script></body></html>")
    return "".join(parts)


def write_html(report: ReplayReport, path: str | Path, title: str = "memshift replay",
               meta: dict[str, str] | None = None) -> Path:
    """Write :func:`render_html` to ``path`` (parent directories created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(report, title, meta), encoding="utf-8")
    return path
