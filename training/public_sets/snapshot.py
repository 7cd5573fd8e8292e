"""Files of a public repository at a pinned commit, read from a bare git mirror (what the `fetch`
tool brings: MIRROR/owner+name/repo) or from an ordinary clone: `git show COMMIT:PATH`."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

Reader = Callable[[str], str]  # a file's path in the repository -> its text


def git_dir(mirror: Path, repo: str) -> Path:
    """The git directory of ``owner/name`` under ``mirror``: a fetched bare mirror or a clone."""
    for candidate in (mirror / repo.replace("/", "+") / "repo", mirror / repo.replace("/", "+"),
                      mirror / repo.split("/")[1] / ".git"):
        if (candidate / "HEAD").is_file():
            return candidate
    raise FileNotFoundError(f"no git directory of {repo} under {mirror}: fetch it (github:{repo}) or "
                            f"`git clone https://github.com/{repo} {mirror / repo.split('/')[1]}`")


def reader(mirror: Path, repo: str, commit: str) -> Reader:
    directory = git_dir(mirror, repo)

    def read(path: str) -> str:
        done = subprocess.run(["git", f"--git-dir={directory}", "show", f"{commit}:{path}"],
                              capture_output=True, check=False)
        if done.returncode != 0:
            raise FileNotFoundError(f"{repo}@{commit[:10]}:{path}: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout.decode("utf-8")

    return read
