"""HEAD read from a repository's files agrees with git, or defers to it.

``harness.git_head.head_commit`` answers a commit id only where the files settle it; for
each repository shape below its answer is compared with what ``git rev-parse --verify
--quiet HEAD^{commit}`` says (run under onstation's git policy), and the shapes it must not
judge by itself give ASK_GIT.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from onstation.harness.evidence import git
from onstation.harness.git_head import ASK_GIT, head_commit

IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}  # fmt: skip


def _git(cwd: Path, *args: str) -> str:
    return git(cwd, *args, check=True, env=IDENTITY)


def _repo(path: Path, commits: int = 1) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", "-b", "main")
    for n in range(commits):
        (path / f"f{n}.txt").write_text(f"{n}\n")
        _git(path, "add", ".")
        _git(path, "commit", "-q", "-m", f"c{n}")
    return path


def _gits_answer(workspace: Path) -> str | None:
    return git(workspace, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")


def _branch(tmp: Path) -> Path:
    return _repo(tmp / "r", commits=2)


def _subdirectory(tmp: Path) -> Path:
    repo = _repo(tmp / "r")
    (repo / "a" / "b").mkdir(parents=True)
    return repo / "a" / "b"


def _packed(tmp: Path) -> Path:
    repo = _repo(tmp / "r", commits=2)
    _git(repo, "checkout", "-q", "-b", "feature/x")
    _git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "feature" / "x").exists()
    return repo


def _detached(tmp: Path) -> Path:
    repo = _repo(tmp / "r", commits=2)
    _git(repo, "checkout", "-q", "--detach", "HEAD~1")
    return repo


def _worktree(tmp: Path) -> Path:
    repo = _repo(tmp / "r", commits=2)
    _git(repo, "branch", "side", "HEAD~1")
    _git(repo, "worktree", "add", "-q", str(tmp / "wt"), "side")
    return tmp / "wt"


def _separate_git_dir(tmp: Path) -> Path:  # as a submodule's work tree has it: .git a file
    work = tmp / "w"
    work.mkdir()
    _git(work, "init", "-q", "-b", "main", f"--separate-git-dir={tmp / 'store.git'}")
    (work / "x").write_text("x\n")
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "x")
    return work


def _no_repository(tmp: Path) -> Path:
    plain = tmp / "plain" / "deeper"
    plain.mkdir(parents=True)
    return plain


#: Shapes the files settle: the reader's answer must be git's.
SETTLED: dict[str, Callable[[Path], Path]] = {
    "branch, loose ref": _branch,
    "a subdirectory of the work tree": _subdirectory,
    "branch in packed-refs": _packed,
    "detached HEAD": _detached,
    "linked worktree (commondir)": _worktree,
    "gitfile (separate git dir)": _separate_git_dir,
    "no repository": _no_repository,
}


@pytest.mark.parametrize("shape", list(SETTLED))
def test_the_files_give_gits_answer(tmp_path: Path, shape: str) -> None:
    workspace = SETTLED[shape](tmp_path)
    if shape == "no repository" and _gits_answer(workspace) is not None:
        pytest.skip("the scratch directory is itself inside a repository")
    answer = head_commit(str(workspace))
    assert answer is not ASK_GIT
    assert answer == _gits_answer(workspace)


def _unborn(tmp: Path) -> Path:
    repo = tmp / "r"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    return repo


def _bare(tmp: Path) -> Path:
    source = _repo(tmp / "src")
    _git(tmp, "clone", "-q", "--bare", str(source), str(tmp / "b.git"))
    return tmp / "b.git"


def _extensions(tmp: Path) -> Path:
    repo = _repo(tmp / "r")
    _git(repo, "config", "extensions.worktreeConfig", "true")
    return repo


def _symlinked_dotgit(tmp: Path) -> Path:
    repo = _repo(tmp / "r")
    os.rename(repo / ".git", tmp / "moved.git")
    os.symlink(tmp / "moved.git", repo / ".git")
    return repo


def _another_owner(tmp: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("changing a repository's owner needs root")
    repo = _repo(tmp / "r")
    for root, dirs, files in os.walk(repo):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), 65534, 65534)
    os.chown(repo, 65534, 65534)
    return repo


def _odd_head(tmp: Path) -> Path:
    repo = _repo(tmp / "r")
    (repo / ".git" / "HEAD").write_text("ref: refs/remotes/origin/main\n")
    return repo


#: Shapes the reader must leave to git.
DEFERRED: dict[str, Callable[[Path], Path]] = {
    "unborn branch": _unborn,
    "bare repository": _bare,
    "an [extensions] section": _extensions,
    ".git a symlink": _symlinked_dotgit,
    "owned by another user": _another_owner,
    "HEAD outside refs/heads": _odd_head,
}


@pytest.mark.parametrize("shape", list(DEFERRED))
def test_what_the_files_do_not_settle_is_left_to_git(tmp_path: Path, shape: str) -> None:
    workspace = DEFERRED[shape](tmp_path)
    assert head_commit(str(workspace)) is ASK_GIT


def test_a_missing_workspace_is_left_to_git(tmp_path: Path) -> None:
    assert head_commit(str(tmp_path / "gone")) is ASK_GIT


def test_a_moved_branch_is_read_anew(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r")
    first = head_commit(str(repo))
    (repo / "g.txt").write_text("g\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "g")
    second = head_commit(str(repo))
    assert first != second and second == _gits_answer(repo)
    shutil.rmtree(repo / ".git" / "refs" / "heads")  # neither loose nor packed: unborn
    (repo / ".git" / "refs" / "heads").mkdir()
    assert head_commit(str(repo)) is ASK_GIT


def test_a_fifo_named_head_is_left_to_git_without_waiting_on_it(tmp_path: Path) -> None:
    """A FIFO where HEAD should be: opened for reading it would wait for a writer forever
    (the session's start with it); it is refused unopened, in a child process here so that a
    regression fails instead of hanging the suite."""
    repo = _repo(tmp_path / "r")
    head = repo / ".git" / "HEAD"
    head.unlink()
    os.mkfifo(head)
    probe = ("import sys\nfrom onstation.harness.git_head import ASK_GIT, head_commit\n"
             "print(head_commit(sys.argv[1]) is ASK_GIT)\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe, str(repo)], capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    assert done.stdout.strip() == "True"
