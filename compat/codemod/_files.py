"""Which files a codemod run may touch, and touching them safely: a run rewrites files *in the
tree it was given* and nowhere else. A symlink is never followed (a file symlink would let
``--write`` rewrite a file outside the tree), and a write goes through the folder the file
was read from, pinned by a descriptor, into a temporary file that replaces the original, so
a symlink or folder swapped in during the run is not written through."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Candidate", "Identity", "Unsafe", "read_file", "walk", "write_file"]

# folders a repository walk never enters
SKIP_DIRS = {".git", ".hg", ".venv", "venv", "env", "__pycache__", "node_modules", ".tox",
             ".nox", "site-packages", "build", "dist", ".mypy_cache", ".ruff_cache"}
SUFFIXES = (".py", ".pyi", ".ipynb")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
# descriptors for folders: POSIX; elsewhere the checks are by path (a narrower guard)
_PINNED = (os.open in os.supports_dir_fd and os.replace in os.supports_dir_fd
           and os.stat in os.supports_dir_fd and bool(_NOFOLLOW) and bool(_DIRECTORY))


class Unsafe(Exception):
    """The file is not (or is no longer) a regular file inside the tree: not read or not
    written; the message is the reason the report gives."""


@dataclass(frozen=True)
class Candidate:
    """A file found under a root: ``reason`` set when it must be skipped without reading."""

    path: Path
    root: Path  # the resolved folder the file must stay inside
    reason: str | None = None


@dataclass(frozen=True)
class Identity:
    """What was read: the folder and file inodes, checked again just before the write."""

    folder: tuple[int, int]
    file: tuple[int, int]
    mode: int


def _inside(path: Path, root: Path) -> bool:
    resolved = Path(os.path.realpath(path))
    return resolved == root or root in resolved.parents


def _check(path: Path, root: Path) -> str | None:
    """Why a found file must not be touched, or ``None``."""
    if path.is_symlink():
        target = os.readlink(path)
        return (f"symlink to {target}: not followed, not rewritten (run the codemod on the "
                "file it points to if that file is yours)")
    if not _inside(path, root):
        return f"resolves to {os.path.realpath(path)}, outside {root}: not rewritten"
    return None


def walk(paths: Iterable[Path]) -> Iterator[Candidate]:
    """Every candidate file under ``paths`` (a file given directly is its own tree)."""
    for given in paths:
        if given.is_symlink() or not given.is_dir():
            root = Path(os.path.realpath(given.parent))
            reason = _check(given, root) if given.is_symlink() else None
            yield Candidate(given, root, reason)
            continue
        root = Path(os.path.realpath(given))
        for child in sorted(given.rglob("*")):
            parts = child.relative_to(given).parts
            if any(p in SKIP_DIRS or p.startswith(".") for p in parts[:-1]):
                continue
            if child.suffix not in SUFFIXES or not (child.is_file() or child.is_symlink()):
                continue
            yield Candidate(child, root, _check(child, root))


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _open_folder(path: Path, root: Path) -> int:
    """A descriptor on the file's folder, which must be inside ``root`` (where the descriptor
    really points, on Linux; else where the path resolves)."""
    try:
        fd = os.open(path.parent, os.O_RDONLY | _DIRECTORY)
    except OSError as exc:
        raise Unsafe(f"its folder cannot be opened: {exc}") from exc
    proc = f"/proc/self/fd/{fd}"
    where = Path(os.readlink(proc)) if os.path.islink(proc) else Path(
        os.path.realpath(path.parent))
    if not (where == root or root in where.parents):
        os.close(fd)
        raise Unsafe(f"its folder resolves outside {root}: not touched")
    return fd


def read_file(path: Path, root: Path) -> tuple[bytes, Identity]:
    """The bytes of a regular file inside ``root``, never through a symlink."""
    if not _PINNED:
        if path.is_symlink() or not _inside(path, root):
            raise Unsafe("symlink or outside the tree: not read")
        st = path.stat()
        return path.read_bytes(), Identity((0, 0), _identity(st), st.st_mode)
    folder = _open_folder(path, root)
    try:
        try:
            fd = os.open(path.name, os.O_RDONLY | _NOFOLLOW, dir_fd=folder)
        except OSError as exc:
            raise Unsafe(f"not a regular file (a symlink?): not read: {exc}") from exc
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise Unsafe("not a regular file: not read")
            data = handle.read()
        return data, Identity(_identity(os.fstat(folder)), _identity(st), st.st_mode)
    finally:
        os.close(folder)


def write_file(path: Path, root: Path, data: bytes, seen: Identity) -> None:
    """Replace the file read as ``seen`` with ``data``: via a temporary file in the same folder
    and ``os.replace``, after checking that the folder and the file are still the ones read
    (a swapped-in symlink or folder raises ``Unsafe`` and nothing is written)."""
    changed = "changed during the run (a symlink or another file swapped in): not written"
    if not _PINNED:
        if path.is_symlink() or not _inside(path, root) or _identity(path.stat()) != seen.file:
            raise Unsafe(changed)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(tmp, stat.S_IMODE(seen.mode))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return
    try:
        folder = _open_folder(path, root)
    except Unsafe as exc:
        raise Unsafe(changed) from exc
    try:
        try:
            now = os.stat(path.name, dir_fd=folder, follow_symlinks=False)
        except OSError as exc:
            raise Unsafe(changed) from exc
        if (_identity(os.fstat(folder)) != seen.folder or not stat.S_ISREG(now.st_mode)
                or _identity(now) != seen.file):
            raise Unsafe(changed)
        tmp = _temporary(path.name, folder, data, seen.mode)
        try:
            os.replace(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            os.unlink(tmp, dir_fd=folder)
            raise
    finally:
        os.close(folder)


def _temporary(name: str, folder: int, data: bytes, mode: int) -> str:
    """A new file beside ``name`` (created exclusively, never through a symlink) holding
    ``data`` with the original's permission bits."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
    for attempt in range(100):
        tmp = f".{name}.{os.getpid()}.{attempt}.memshift-tmp"
        try:
            fd = os.open(tmp, flags, 0o600, dir_fd=folder)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                os.fchmod(handle.fileno(), stat.S_IMODE(mode))
        except BaseException:
            os.unlink(tmp, dir_fd=folder)
            raise
        return tmp
    raise Unsafe("no temporary file name free beside it: not written")
