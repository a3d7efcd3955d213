"""The HTML replay report: self-contained, escaped, and rendered by a real browser."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from compat import cli
from compat.replay import replay_file
from compat.report import render_html
from tests.conftest import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _hostile(tmp_path: Path) -> Path:
    rows = []
    for i in range(12):
        rows.append({"thread_id": "<b>t&1</b>", "role": "human",
                     "content": f"<script>alert({i})</script> question {i} " + "word " * 30})
        rows.append({"thread_id": "<b>t&1</b>", "role": "ai", "content": f"answer {i} " + "word " * 30})
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


def test_report_is_self_contained_and_escaped(tmp_path: Path) -> None:
    html = render_html(replay_file(_hostile(tmp_path)))
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "http://" not in html and "https://" not in html and " src=" not in html
    assert html.count("<svg") == 1 and "<polyline" in html
    assert html.count("<tr>") == (12 + 1) + (1 + 3)  # turn table + facts table (full, 2 backends)


def test_cli_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "reports" / "long.html"
    code = cli.main(["replay", "--quiet", str(ROOT / "examples/conversations/long_multithread.jsonl"),
                     "--report", str(out)])
    assert code == 0 and out.exists() and f"report: {out}" in capsys.readouterr().out
    html = out.read_text()
    assert html.count("<svg") == 6 and "EQUIVALENT" in html


@pytest.mark.skipif(CHROMIUM is None and os.environ.get("MEMSHIFT_REQUIRE_BROWSER") != "1",
                    reason="headless Chromium not installed (apt-get install chromium)")
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    assert CHROMIUM, "MEMSHIFT_REQUIRE_BROWSER=1 but chromium is missing"
    page = tmp_path / "report.html"
    page.write_text(render_html(replay_file(ROOT / "examples/conversations/flask_migration.jsonl")))
    base = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    assert "EQUIVALENT" in dom and "<polyline" in dom and dom.count("<tr>") >= 12
    shot = tmp_path / "shot.png"
    subprocess.run([*base, f"--screenshot={shot}", "--window-size=1280,1000", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 1000)
    assert len(data) > 30_000, "the screenshot is nearly blank"
