"""Keeping conversation data inside the summary prompt's frame.

The prompt puts the folded messages between ``<<<`` and ``>>>`` and tells the model not to
follow instructions inside. ``frame_safe`` makes sure no data (and no previous summary) can
form either marker: not with longer runs, full-width forms, look-alike brackets, or zero-width
characters slipped between them.
"""

from __future__ import annotations

import unicodedata

__all__ = ["frame_safe"]

_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff\u180e")
_LOOKALIKES = {"‹": "<", "«": "<", "〈": "<", "⟨": "<", "❮": "<", "›": ">", "»": ">", "〉": ">",
               "⟩": ">", "❯": ">"}


def _angle(ch: str) -> str | None:
    """``<`` or ``>`` for anything that reads as one (NFKC forms and look-alikes)."""
    if ch in "<>":
        return ch
    if ch in _LOOKALIKES:
        return _LOOKALIKES[ch]
    folded = unicodedata.normalize("NFKC", ch)
    return folded if folded in ("<", ">") else None


def frame_safe(text: str) -> str:
    """Text that cannot close or open the prompt's ``<<<``/``>>>`` frame: every run of two or
    more angle brackets — any length, look-alikes and full-width forms included, zero-width
    characters between them ignored — is written as ASCII brackets separated by spaces. Text
    with no such run is returned unchanged."""
    out: list[str] = []
    run: list[str] = []
    held: list[str] = []  # zero-width characters seen since the last bracket

    def flush() -> None:
        if len(run) >= 2:
            out.append(" ".join(run))
        else:
            out.extend(run_raw)
        out.extend(held)
        run.clear()
        run_raw.clear()
        held.clear()

    run_raw: list[str] = []
    for ch in text:
        angle = _angle(ch)
        if angle is not None:
            run.append(angle)
            run_raw.extend(held)
            run_raw.append(ch)
            held.clear()
        elif ch in _ZERO_WIDTH and run:
            held.append(ch)
        else:
            flush()
            out.append(ch)
    flush()
    return "".join(out)
