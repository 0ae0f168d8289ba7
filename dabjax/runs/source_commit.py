"""The commit of the code that is running: what a shipped agent or a benchmark's log records beside its figures."""

from __future__ import annotations

import pathlib
import subprocess

_PACKAGE = pathlib.Path(__file__).resolve().parent.parent


def source_commit(where: pathlib.Path | str = _PACKAGE) -> str | None:
    """The short commit of the git checkout that holds ``where`` (default: the dabjax package itself, whatever the
    caller's working directory), with ``+`` when tracked files differ from it; None outside a git checkout or
    without git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=where)
        # no optional locks: a status beside another git command (a commit) must not take the index's lock
        dirty = subprocess.run(["git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True, cwd=where)
    except (OSError, subprocess.CalledProcessError):
        return None
    commit = head.stdout.strip()
    if not commit:
        return None
    return commit + ("+" if dirty.stdout.strip() else "")
