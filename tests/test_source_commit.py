"""``source_commit``: the commit a shipped agent or a benchmark log records, marked when the checkout differs."""

import subprocess

from dabjax.runs.source_commit import source_commit


def _git(folder, *args):
    config = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", *config, *args], cwd=folder, check=True, capture_output=True,
                          text=True).stdout.strip()


def test_source_commit_names_the_checkout_and_marks_changed_files(tmp_path):
    assert source_commit(tmp_path) is None  # no checkout
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("one")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "commit", "-q", "-m", "one")
    head = _git(tmp_path, "rev-parse", "--short", "HEAD")
    (tmp_path / "new.txt").write_text("untracked files do not count")
    assert source_commit(tmp_path) == head
    (tmp_path / "a.txt").write_text("two")
    assert source_commit(tmp_path) == head + "+"
