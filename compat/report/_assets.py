"""The report's inline CSS and JavaScript: no CDN, no fonts, nothing fetched, so the page
works offline and from a CI artifact.

The "mismatches only" filter works three ways: the inline script toggles a class on
``<body>`` and the ``hidden`` attribute on matching turns (and reads ``#mismatches`` or
``?mismatches`` in the URL to start filtered); without JavaScript, the ``:has()`` rules do
the same in current browsers; in older ones the checkbox does nothing but mismatching turns
are still open, red, and linked from the summary and the table of contents.
"""

from __future__ import annotations

__all__ = ["CSS", "SCRIPT"]

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:20px auto;color:#222;max-width:1200px;padding:0 16px}
h1{font-size:22px;margin-bottom:4px} h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:16px 0 4px}
table{border-collapse:collapse;margin:6px 0 14px}
td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top;text-align:left}
th{background:#f4f6f7;font-weight:600}
.ok{color:#1e8449;font-weight:600} .diff{color:#c0392b;font-weight:700}
.verdict{font-size:18px;margin:6px 0 10px}
td.num{text-align:right;font-variant-numeric:tabular-nums}
#toolbar{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:6px 0;z-index:1}
details.turn{border:1px solid #e5e8e8;border-radius:4px;margin:3px 0;padding:2px 8px}
details.turn.mismatch{border-color:#c0392b;background:#fdf2f1}
details.turn>summary{cursor:pointer}
.tok{font-variant-numeric:tabular-nums;color:#444;margin-left:8px}
.badge{font-size:12px;padding:0 5px;border-radius:3px;background:#eaf2f8;color:#1b4f72;margin-left:6px}
.badge.fold{background:#fef5e7;color:#7e5109} .badge.warn{background:#fdedec;color:#922b21}
table.msgs{width:100%;font-size:12.5px;margin:4px 0} table.msgs th{width:120px;white-space:nowrap}
.arg{display:inline-block;margin-right:12px} .arg i{color:#555;font-style:normal}
code.tool{font-weight:600;margin-right:8px}
.callid{font:11px monospace;color:#777;margin-left:4px}
.sum{white-space:pre-wrap;font-size:12px;color:#333;background:#f8f9f9;padding:6px;margin:4px 0}
.note{font-size:12.5px;color:#555;margin:4px 0}
.token-note{font-size:12.5px;background:#eef6fb;padding:4px 6px;border-left:3px solid #2471a3;margin:4px 0}
.diffs{color:#922b21;font-size:12.5px}
.omitted{background:#fef9e7;padding:6px 8px;border-left:3px solid #d68910}
svg.chart{max-width:100%;height:auto}
header#run{font-size:12.5px;color:#444;border-bottom:1px solid #ddd;padding-bottom:4px}
header#run dl{display:grid;grid-template-columns:max-content 1fr;gap:0 10px;margin:4px 0}
header#run dt{font-weight:600} header#run dd{margin:0;overflow-wrap:anywhere}
@media (max-width:640px){
body{margin:8px auto;padding:0 8px;font-size:13px}
table{display:block;max-width:100%;overflow-x:auto}
table.msgs th{width:auto;white-space:normal}
.sum,dd,code{overflow-wrap:anywhere} td{overflow-wrap:break-word}
#toolbar .note{display:none}
}
.clean-note{display:none;color:#1e8449}
body.mismatches-only details.turn.match{display:none}
body.mismatches-only .thread.clean .clean-note{display:block}
body:has(#only-mismatches:checked) details.turn.match{display:none}
body:has(#only-mismatches:checked) .thread.clean .clean-note{display:block}
svg.chart{max-width:100%;height:auto;display:block}
svg.chart text{fill:#333}
"""

SCRIPT = """
(function () {
  var box = document.getElementById('only-mismatches');
  if (!box) { return; }
  function apply() {
    var on = box.checked;
    document.body.classList.toggle('mismatches-only', on);
    var turns = document.querySelectorAll('details.turn.match');
    for (var i = 0; i < turns.length; i++) {
      if (on) { turns[i].setAttribute('hidden', ''); } else { turns[i].removeAttribute('hidden'); }
    }
  }
  if (location.hash === '#mismatches' || /[?&]mismatches\\b/.test(location.search)) {
    box.checked = true;
  }
  box.addEventListener('change', apply);
  apply();
})();
"""
