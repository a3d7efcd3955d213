"""Running the ``memshift`` command in tests: in this process by default (the command's own
``main``, with its stdout, stderr, log lines, environment and working directory as a process
would have them), or as a real ``python -m compat`` process where the test needs one (the
entry point itself, an import that must fail, signals). In-process runs save the ~1.5 s a
process spends importing LangChain."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

__all__ = ["run_memshift"]


def run_memshift(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
                 check: int | None = None, process: bool = False
                 ) -> subprocess.CompletedProcess[str]:
    """``memshift *args``: its exit code, stdout and stderr (``check``: the expected code)."""
    if process or "PYTHONPATH" in (env or {}):
        done = subprocess.run([sys.executable, "-m", "compat", *args], capture_output=True,
                              text=True, timeout=300, cwd=cwd or ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    else:
        done = _in_process(list(args), env or {}, cwd or ROOT)
    if check is not None:
        assert done.returncode == check, (done.returncode, done.stdout[-2000:], done.stderr)
    return done


def _in_process(args: list[str], env: dict[str, str], cwd: Path
                ) -> subprocess.CompletedProcess[str]:
    from compat import cli
    from compat.cli import _ScrubSecrets

    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)  # what main's basicConfig gives a fresh process
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_ScrubSecrets())
    handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.update(env)
    os.chdir(cwd)
    root.addHandler(handler)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(args)
    finally:
        root.removeHandler(handler)
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["memshift", *args], code, out.getvalue(),
                                       err.getvalue())
