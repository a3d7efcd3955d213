"""The HTML replay report: self-contained, escaped, bounded, navigable, and rendered by a
real browser whose DOM must match the checked-in layout (tests/data/report_layout.json)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from compat.replay import DEFAULT_REPLAY_POLICY, ReplayReport, TurnResult, replay_file
from compat.report import render_html, write_html
from tests.conftest import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LAYOUT = json.loads((ROOT / "tests/data/report_layout.json").read_text())
FLASK = ROOT / "examples/conversations/flask_migration.jsonl"
BEFORE_BYTES = 768_671  # the old report of long_multithread.jsonl


# -- a small DOM and selector engine (tag, #id, .class, [attr], [attr=v], [attr^=v], ' ', '>') --
class Node:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node] = []
        self.text = ""  # text nodes only (tag "#text"), so text keeps its document order

    @property
    def kids(self) -> list[Node]:
        return [c for c in self.children if not c.tag.startswith("#")]

    def walk(self) -> list[Node]:
        out = [self]
        for child in self.children:
            out += child.walk()
        return out

    def all_text(self) -> str:
        return self.text + "".join(c.all_text() for c in self.children)


_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.node = Node("#document", {}, None)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.node)
        self.node.children.append(node)
        if tag not in _VOID:
            self.node = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.node.children.append(Node(tag, {k: v or "" for k, v in attrs}, self.node))

    def handle_endtag(self, tag: str) -> None:
        node: Node | None = self.node
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.node = node.parent

    def handle_data(self, data: str) -> None:
        leaf = Node("#text", {}, self.node)
        leaf.text = data
        self.node.children.append(leaf)


def parse(html: str) -> Node:
    builder = _Builder()
    builder.feed(html)
    return builder.root


_COMPOUND = re.compile(r"^([a-z][\w-]*|\*)?((?:[#.][\w-]+|\[[^\]]+\])*)$")


def _matches(node: Node, compound: str) -> bool:
    found = _COMPOUND.match(compound)
    assert found, f"unsupported selector part {compound!r}"
    tag, rest = found.groups()
    if tag not in (None, "*") and node.tag != tag:
        return False
    for kind, name in re.findall(r"([#.])([\w-]+)", re.sub(r"\[[^\]]+\]", "", rest)):
        if kind == "#" and node.attrs.get("id") != name:
            return False
        if kind == "." and name not in node.attrs.get("class", "").split():
            return False
    for attr, op, value in re.findall(r"\[([\w-]+)(\^?=)?([^\]]*)\]", rest):
        value = value.strip("'\"")
        if attr not in node.attrs or (op == "=" and node.attrs[attr] != value) \
                or (op == "^=" and not node.attrs[attr].startswith(value)):
            return False
    return True


def _chain(node: Node | None, parts: list[str]) -> bool:
    """Does ``node`` match ``parts`` (compounds and '>' read right to left)?"""
    if node is None or not _matches(node, parts[-1]):
        return False
    rest = parts[:-1]
    if not rest:
        return True
    if rest[-1] == ">":
        return _chain(node.parent, rest[:-1])
    ancestor = node.parent
    while ancestor is not None:
        if _chain(ancestor, rest):
            return True
        ancestor = ancestor.parent
    return False


def select(root: Node, selector: str) -> list[Node]:
    parts = selector.replace(">", " > ").split()
    return [n for n in root.walk() if not n.tag.startswith("#") and _chain(n, parts)]


def check_layout(root: Node) -> None:
    """Compare a DOM against the reference layout: element counts, then section order."""
    for rule in LAYOUT["elements"]:
        found = len(select(root, rule["selector"]))
        if "count" in rule:
            assert found == rule["count"], f"{rule['selector']}: {found} != {rule['count']}"
        else:
            assert found >= rule["min"], f"{rule['selector']}: {found} < {rule['min']}"
    nodes = root.walk()
    firsts = [nodes.index(select(root, s)[0]) for s in LAYOUT["order"]]
    assert firsts == sorted(firsts), f"sections out of order: {LAYOUT['order']}"


# -- reports to render ------------------------------------------------------------------------
def _hostile(tmp_path: Path) -> Path:
    rows = []
    for i in range(12):
        rows.append({"thread_id": "<b>t&1</b>", "role": "human",
                     "content": f"<script>alert({i})</script> question {i} " + "word " * 30})
        rows.append({"thread_id": "<b>t&1</b>", "role": "ai", "content": f"answer {i} <img src=x "
                     "onerror=alert(1)> see postgresql://admin:s3cret@db.internal:5432/app " + "word " * 30})
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


def _flask_with_mismatches(turns: tuple[int, ...] = (3, 7)) -> ReplayReport:
    """The bundled Flask replay with two turns marked as diverged (the layout's page)."""
    report = replay_file(FLASK)
    report.turns = [dataclasses.replace(t, diffs=["classic vs middleware: summary differs"])
                    if t.turn in turns else t for t in report.turns]
    return report


@dataclasses.dataclass(frozen=True)
class _TurnWithMessages(TurnResult):
    """A turn carrying its window's message objects (the optional field the report reads)."""

    window_messages: list[BaseMessage] = dataclasses.field(default_factory=list)


def _turn(number: int, thread: str = "t", *, diffs: list[str] | None = None, tokens: int = 100,
          gap: int = 0, summary: str = "", **extra: Any) -> TurnResult:
    both = ("classic", "middleware")
    fields: dict[str, Any] = dict(
        index=number - 1, thread_id=thread, turn=number, line=2 * number - 1, diffs=diffs or [],
        windows=dict.fromkeys(both, 2), folds=dict.fromkeys(both, number // 10),
        summaries=dict.fromkeys(both, summary),
        window=[("human", f"question {number}"), ("ai", f"answer {number}")],
        prompt_tokens={"full": 40 * number, "classic": tokens, "middleware": tokens + gap})
    fields.update(extra)
    return _TurnWithMessages(**fields) if "window_messages" in fields else TurnResult(**fields)


def _report(turns: list[TurnResult]) -> ReplayReport:
    return ReplayReport(backends=("classic", "middleware"), policy=DEFAULT_REPLAY_POLICY, turns=turns)


# -- structure, without a browser ------------------------------------------------------------
def test_report_is_self_contained_and_escaped(tmp_path: Path) -> None:
    html = render_html(replay_file(_hostile(tmp_path)))
    assert "<script>alert" not in html and "&lt;script&gt;alert(0)&lt;/script&gt;" in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<b>t&1</b>" not in html and "&lt;b&gt;t&amp;1&lt;/b&gt;" in html
    assert "s3cret" not in html and "admin:***@db.internal" in html
    assert html.count("<script") == 1, "only the report's own inline script"
    assert "http://" not in html and "https://" not in html
    refs = re.findall(r"<[a-z][^>]*?\s(?:src|href)=['\"]?([^'\" >]*)", html)
    assert refs and all(r.startswith("#") for r in refs), "only in-page links, nothing fetched"
    assert "<link" not in html and "@import" not in html and "url(" not in html
    assert html.count("<svg") == 1 and html.count("<details class='turn") == 12


def test_rendered_page_matches_reference_layout() -> None:
    check_layout(parse(render_html(_flask_with_mismatches())))


def test_summary_first_and_navigation_resolves() -> None:
    report = replay_file(ROOT / "examples/conversations/long_multithread.jsonl")
    report.turns = [dataclasses.replace(t, diffs=["x"]) if (t.thread_id, t.turn) == ("trip", 5)
                    else t for t in report.turns]
    root = parse(render_html(report))
    ids = {n.attrs["id"] for n in root.walk() if "id" in n.attrs}
    links = [n.attrs["href"] for n in select(root, "a[href^='#']")]
    assert links and all(href[1:] in ids for href in links), "every in-page link has its anchor"
    toc = {row[0].all_text(): row for row in
           ([c for c in tr.kids if c.tag == "td"] for tr in select(root, "nav#toc tr")) if row}
    assert set(toc) == set(report.threads)
    assert toc["trip"][2].all_text() == "1" and toc["schema"][2].all_text() == "0"
    trip = select(root, f"section{toc['trip'][0].kids[0].attrs['href']}")[0]
    assert "clean" not in trip.attrs["class"] and len(select(trip, "details.turn.mismatch")) == 1
    summary = select(root, "section#summary")[0]
    assert "DIVERGED on 1 turn" in summary.all_text()
    stats = {tr.kids[0].all_text(): tr.kids[1].all_text()
             for tr in select(summary, "table.stats tr")}
    assert stats["turns"] == "213" and stats["threads"] == "6"
    assert stats["folds (classic)"] == stats["folds (middleware)"] != "0"
    policy = {tr.kids[0].all_text(): tr.kids[1].all_text()
              for tr in select(summary, "table.policy tr")}
    assert policy["max_tokens"] == "400" and policy["keep_tokens"] == "200" and policy["cut"] == "turn"
    assert "MemoryPolicy(" not in summary.all_text(), "the policy is a table, not a repr"


def test_filter_checkbox_works_with_and_without_script() -> None:
    html = render_html(_flask_with_mismatches())
    root = parse(html)
    assert len(select(root, "input#only-mismatches[type=checkbox]")) == 1
    assert "location.hash === '#mismatches'" in html and "setAttribute('hidden'" in html
    assert "body:has(#only-mismatches:checked) details.turn.match{display:none}" in html
    assert len(select(root, "details.turn.mismatch[open]")) == 2 and not select(root, "details.turn.match[open]")


def test_chart_lines_are_distinguishable_and_ticked() -> None:
    root = parse(render_html(replay_file(FLASK)))
    svg = select(root, "svg.chart")[0]
    lines = {n.attrs["data-series"]: n for n in select(svg, "polyline.series")}
    assert set(lines) == {"full", "classic", "middleware"}
    dashes = {k: (n.attrs["stroke-dasharray"], n.attrs["stroke-width"]) for k, n in lines.items()}
    assert dashes["classic"] != dashes["middleware"]
    assert lines["classic"].attrs["stroke-dasharray"] != lines["middleware"].attrs["stroke-dasharray"]
    assert {n.attrs["data-series"] for n in select(svg, "g.legend-item")} == set(lines)
    for axis in ("x", "y"):
        labels = [int(t.all_text().replace(",", "")) for t in select(svg, f"g.tick-{axis} text")]
        assert len(labels) >= 4 and labels == sorted(labels) and labels[0] == 0
    assert {t.all_text() for t in select(svg, "text.axis-label")} == {
        "turn (within the thread)", "prompt tokens"}
    ys = [float(p.split(",")[1]) for p in lines["full"].attrs["points"].split()]
    assert len(ys) == 12 and ys[-1] < ys[0], "full history grows upwards"


def test_token_gap_on_a_matching_turn_is_explained() -> None:
    report = replay_file(FLASK)
    gapped = [t for t in report.turns if t.match
              and t.prompt_tokens["classic"] != t.prompt_tokens["middleware"]]
    assert gapped, "the bundled replay has turns whose token counts differ"
    root = parse(render_html(report))
    for turn in gapped:
        details = select(root, f"details#t1-{turn.turn}")[0]
        note = select(details, "p.token-note")[0].all_text()
        gap = turn.prompt_tokens["middleware"] - turn.prompt_tokens["classic"]
        assert f"middleware {gap:+d}" in details.all_text()
        assert "Message 1, the summary" in note and "is the whole gap" in note, note
        classic, middleware = map(int, re.findall(r"(?:classic|middleware) (\d+)", note)[:2])
        assert middleware - classic == gap
    summary = select(root, "#token-gaps")[0].parent
    assert summary is not None and "HumanMessage" in summary.all_text() \
        and "SystemMessage" in summary.all_text()
    plain = [t for t in report.turns if t.prompt_tokens["classic"] == t.prompt_tokens["middleware"]]
    assert not select(select(root, f"details#t1-{plain[0].turn}")[0], "p.token-note")


def test_a_gap_the_summary_does_not_explain_points_at_the_window() -> None:
    root = parse(render_html(_report([_turn(1), _turn(2, gap=30)])))
    details = select(root, "details#t1-2")[0]
    assert select(details, "span.badge.warn")
    note = select(details, "p.token-note")[0].all_text()
    assert "No backend sends a summary message yet" in note and "middleware +30" in note
    assert "verbatim window" in note and "window messages differently" in note


def test_tool_calls_and_results_render_as_rows_not_json() -> None:
    call = {"name": "run_sql", "args": {"target": "prod-readonly", "sql": "SELECT version();"},
            "id": "call_flask_pgversion_01"}
    messages = [HumanMessage("which postgres?"), AIMessage("checking", tool_calls=[call]),
                ToolMessage('{"rows": [["PostgreSQL 15.6"]]}', tool_call_id=call["id"]),
                AIMessage("15.6")]
    window = [(m.type, str(m.content)) for m in messages]
    root = parse(render_html(_report([_turn(1, window=window, window_messages=messages)])))
    row = select(root, "details.turn table.msgs tr.toolcall")[0]
    assert select(row, "code.tool")[0].all_text() == "run_sql"
    assert [a.all_text() for a in select(row, "span.arg")] == [
        "sql=SELECT version();", "target=prod-readonly"]
    callid = select(row, "span.callid")[0]
    assert callid.all_text() == "call…ion_01" and callid.attrs["title"] == call["id"]
    result = select(root, "details.turn tr.tool-result")[0]
    assert [a.all_text() for a in select(result, "span.arg")] == ['rows=[["PostgreSQL 15.6"]]']
    real = parse(render_html(replay_file(FLASK)))  # real data: tool results as key=value too
    cells = " ".join(t.all_text() for t in select(real, "table.msgs"))
    assert '{"rows"' not in cells and '{"exit_code"' not in cells
    assert {"rows", "exit_code", "stdout"} <= {i.all_text() for i in select(real, "tr.tool-result i")}


def test_size_is_bounded_per_thread() -> None:
    turns = [_turn(n, "long", tokens=100 + n % 37, summary=f"fact {n // 10}",
                   diffs=["classic vs middleware: summary differs"] if n in (150, 250, 420) else None)
             for n in range(1, 501)]
    html = render_html(_report(turns))
    root = parse(html)
    assert len(select(root, "details.turn")) == 200
    assert select(root, "details#t1-200") and not select(root, "details#t1-201")
    note = select(root, "p.omitted")[0].all_text()
    assert "300 more turn(s) (turns 201–500)" in note and "2 of them did not match (turns 250, 420)" in note
    listed = select(root, "#mismatch-list li")
    assert [bool(select(li, "a")) for li in listed] == [True, False, False], "only inline turns link"
    assert len(select(root, "polyline.series")[0].attrs["points"].split()) <= 401
    assert len(html.encode()) < 200_000


def test_cli_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from compat import cli  # here, so the report tests still collect while the CLI changes

    out = tmp_path / "reports" / "long.html"
    code = cli.main(["replay", "--quiet", str(ROOT / "examples/conversations/long_multithread.jsonl"),
                     "--report", str(out)])
    assert code == 0 and out.exists() and f"report: {out}" in capsys.readouterr().out
    html = out.read_text()
    assert html.count("<svg") == 6 and "EQUIVALENT" in html
    assert out.stat().st_size < BEFORE_BYTES // 2, "the report must stay far below the old 768 KB"


# -- a real browser ---------------------------------------------------------------------------
@pytest.mark.skipif(CHROMIUM is None and os.environ.get("MEMSHIFT_REQUIRE_BROWSER") != "1",
                    reason="headless Chromium not installed (apt-get install chromium)")
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    assert CHROMIUM, "MEMSHIFT_REQUIRE_BROWSER=1 but chromium is missing"
    page = write_html(_flask_with_mismatches(), tmp_path / "report.html")
    base = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]

    def dump(url: str) -> Node:
        done = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=120)
        assert "<section" in done.stdout, f"no DOM dumped: {done.stderr[-500:]}"
        return parse(done.stdout)

    dom = dump(page.as_uri())
    check_layout(dom)
    assert "EQUIVALENT" not in select(dom, "#verdict")[0].all_text()
    assert not select(dom, "details.turn[hidden]"), "the filter is off by default"

    filtered = LAYOUT["filtered"]
    dom = dump(page.as_uri() + filtered["url_fragment"])
    body = select(dom, "body")[0]
    assert filtered["body_class"] in body.attrs.get("class", "").split(), "the inline script ran"
    assert len(select(dom, filtered["hidden"])) == len(select(dom, "details.turn.match")) == 10
    visible = select(dom, filtered["visible"])
    assert len(visible) == 2 and not any("hidden" in n.attrs for n in visible)

    shot = tmp_path / "shot.png"
    subprocess.run([*base, f"--screenshot={shot}", "--window-size=1280,1000", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 1000)
    assert len(data) > 30_000, "the screenshot is nearly blank"


# -- a header for the run, fold markers, and a 400-pixel screen -------------------------------
def test_cli_report_header_names_version_command_input_and_time(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import hashlib
    from importlib.metadata import version

    from compat import cli

    source = ROOT / "examples/conversations/lance_49ers.jsonl"
    out = tmp_path / "r.html"
    assert cli.main(["replay", "--quiet", str(source), "--max-tokens", "120", "--report",
                     str(out)]) == 0
    capsys.readouterr()
    dom = parse(out.read_text())
    header = select(dom, "header#run")
    assert header, "the run header is missing"
    words = header[0].all_text()
    assert version("memshift") in words
    assert f"memshift replay {source}" in words and "--max-tokens 120" in words
    assert hashlib.sha256(source.read_bytes()).hexdigest()[:16] in words
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", words)
    nodes = list(dom.walk())
    assert nodes.index(header[0]) < nodes.index(select(dom, "#summary")[0]), "header first"


def test_fold_points_are_marked_on_every_chart() -> None:
    from compat.report._chart import fold_marks

    report = replay_file(ROOT / "examples/conversations/long_multithread.jsonl")
    dom = parse(render_html(report))
    by_thread: dict[str, list[TurnResult]] = {}
    for t in report.turns:
        by_thread.setdefault(t.thread_id, []).append(t)
    charts = select(dom, "svg.chart")
    assert len(charts) == len(by_thread)
    for chart, turns in zip(charts, by_thread.values(), strict=True):
        events = sum(1 for before, t in zip([None, *turns], turns)
                     if t.folds["classic"] > (before.folds["classic"] if before else 0))
        markers = select(chart, "g.fold-marker")
        assert len(markers) == len(fold_marks(turns, report.backends)) >= events
        assert [int(m.attrs["data-turn"]) for m in markers] == \
            [t for t, _ in fold_marks(turns, report.backends)]
    assert any(select(c, "g.fold-marker") for c in charts), "the bundled file folds"


@pytest.mark.skipif(CHROMIUM is None and os.environ.get("MEMSHIFT_REQUIRE_BROWSER") != "1",
                    reason="headless Chromium not installed (apt-get install chromium)")
def test_report_is_readable_on_a_400_pixel_screen(tmp_path: Path) -> None:
    """In a real browser 400 px wide nothing is wider than the screen: the page does not
    scroll sideways and the charts shrink to fit."""
    assert CHROMIUM, "MEMSHIFT_REQUIRE_BROWSER=1 but chromium is missing"
    html = render_html(_flask_with_mismatches())
    probe = ("<script>window.addEventListener('load',function(){var d=document.documentElement;"
             "var w=0;document.querySelectorAll('svg.chart').forEach(function(s){"
             "w=Math.max(w,s.getBoundingClientRect().width)});parent.postMessage("
             "[d.clientWidth,d.scrollWidth,Math.round(w)].join(','),'*');});</script></body>")
    (tmp_path / "narrow.html").write_text(html.replace("</body>", probe), encoding="utf-8")
    # a 400-pixel frame: headless windows have a minimum width, a frame does not
    frame = tmp_path / "phone.html"
    frame.write_text("<!doctype html><html><body style='margin:0'><iframe src='narrow.html' "
                     "style='width:400px;height:900px;border:0'></iframe><script>"
                     "window.addEventListener('message',function(e){"
                     "document.body.setAttribute('data-result',e.data)});</script></body></html>",
                     encoding="utf-8")
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                           "--allow-file-access-from-files", "--window-size=800,1000",
                           "--virtual-time-budget=5000", "--dump-dom", frame.as_uri()],
                          capture_output=True, text=True, timeout=120)
    result = select(parse(done.stdout), "body")[0].attrs.get("data-result")
    assert result, f"the probe did not report: {done.stderr[-400:]}"
    client, scroll, chart = (int(x) for x in result.split(","))
    assert client <= 400 and scroll <= client, f"the page scrolls sideways: {scroll} > {client}"
    assert 0 < chart <= client
