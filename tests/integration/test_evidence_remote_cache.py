"""``git remote -v`` kept across reliefs (issue 14) only while every file git reads to answer
is proven unchanged (harness.git_kept.RemoteAnswers): reused with no git process when nothing
changed; asked again after any change to what git reads (the repository's configuration, a
worktree's, the global and system files, a legacy remotes/ file, HOME), never kept from a
file with an include directive or one changed too recently to be proven. Every answer is
compared with a fresh ``git remote -v``."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from git_work import sh

from onstation.harness import evidence, git_kept
from onstation.harness.evidence import EvidenceCache
from onstation.harness.git_kept import GitBatches, RemoteAnswers

URL = "https://example.org/one.git"


def settled() -> int:
    """A clock well past every file's last change: all of them count as settled."""
    return time.time_ns() + 60 * 10**9


@pytest.fixture
def repo(tmp_path: Path, home: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    sh(path, "init", "-q", "-b", "main")
    sh(path, "commit", "-q", "--allow-empty", "-m", "one")
    sh(path, "remote", "add", "origin", URL)
    (path / "sub").mkdir()
    return path


def fresh(ws: Path) -> tuple[str | None, str | None]:
    """What a new ``git remote -v`` says now (not counted)."""
    return evidence._parse_remotes(sh(ws, "remote", "-v"))


def test_the_answer_is_reused_with_no_git_process_while_nothing_changed(
    repo: Path, calls: Counter[str]
) -> None:
    answers = RemoteAnswers(clock=settled)
    ws = str(repo / "sub")
    assert answers.answer(ws) == ("origin", URL)
    assert calls["remote"] == 1
    for _ in range(3):
        assert answers.answer(ws) == ("origin", URL)
    assert calls["remote"] == 1


def test_reliefs_sharing_batches_ask_git_once(
    repo: Path, calls: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = GitBatches()
    assert batches.remotes is not None
    monkeypatch.setattr(batches.remotes, "_clock", settled)
    try:
        for _ in range(3):  # three reliefs, each with its own cache and two collections
            cache = EvidenceCache(keep_open=True, batches=batches)
            assert cache.collect(repo).remote_url == URL
            assert cache.collect(repo).remote_url == URL
            cache.close()
    finally:
        batches.close()
    assert calls["remote"] == 1


def test_a_relief_of_its_own_keeps_no_remote_beyond_itself(repo: Path) -> None:
    cache = EvidenceCache(keep_open=True)
    try:
        assert cache.collect(repo).remote_url == URL
        assert cache._batch is not None and cache._batch.remotes is None
    finally:
        cache.close()


def _kept_then(repo: Path, calls: Counter[str], change: Callable[[], object]) -> RemoteAnswers:
    """An answer kept, then ``change``: the next answer is git's again, and right."""
    answers = RemoteAnswers(clock=settled)
    ws = str(repo / "sub")
    answers.answer(ws)
    answers.answer(ws)
    assert calls["remote"] == 1
    change()
    assert answers.answer(ws) == fresh(repo / "sub")
    assert calls["remote"] == 2
    return answers


def test_git_remote_set_url_is_seen(repo: Path, calls: Counter[str]) -> None:
    _kept_then(repo, calls, lambda: sh(repo, "remote", "set-url", "origin", "https://x.test/2"))
    assert fresh(repo) == ("origin", "https://x.test/2")


def test_a_new_remote_is_seen(repo: Path, calls: Counter[str]) -> None:
    _kept_then(repo, calls, lambda: sh(repo, "remote", "rename", "origin", "upstream"))
    assert fresh(repo) == ("upstream", URL)


def _append(path: Path, text: str) -> Callable[[], None]:
    def change() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as handle:
            handle.write(text)

    return change


REWRITE = '[url "https://mirror.test/"]\n\tinsteadOf = https://example.org/\n'


def test_an_edit_of_the_repository_config_is_seen(repo: Path, calls: Counter[str]) -> None:
    _kept_then(repo, calls, _append(repo / ".git" / "config", REWRITE))
    assert fresh(repo) == ("origin", "https://mirror.test/one.git")


def test_an_edit_of_the_global_config_is_seen(repo: Path, home: Path, calls: Counter[str]) -> None:
    _kept_then(repo, calls, _append(home / ".gitconfig", REWRITE))
    assert fresh(repo) == ("origin", "https://mirror.test/one.git")


def test_an_edit_of_the_xdg_config_is_seen(repo: Path, home: Path, calls: Counter[str]) -> None:
    _kept_then(repo, calls, _append(home / ".config" / "git" / "config", REWRITE))
    assert fresh(repo) == ("origin", "https://mirror.test/one.git")


def test_an_edit_of_xdg_config_home_is_seen(
    repo: Path, tmp_path: Path, calls: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    _kept_then(repo, calls, _append(tmp_path / "xdg" / "git" / "config", REWRITE))
    assert fresh(repo) == ("origin", "https://mirror.test/one.git")


def test_an_edit_of_the_system_config_is_seen(
    repo: Path, tmp_path: Path, calls: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The system file is the one git names (checked here); a change to it is seen. The
    file edited stands in for it: /etc/gitconfig is not the test's to edit."""
    executable, identity = git_kept._git_executable()
    named = git_kept._system_config(executable, identity)
    assert named is not None and os.path.isabs(named)
    stand_in = tmp_path / "gitconfig"
    stand_in.write_text("[core]\n\tquotePath = true\n")
    monkeypatch.setitem(git_kept._SYSTEM_CONFIG, (executable, identity), str(stand_in))
    _kept_then(repo, calls, _append(stand_in, "[core]\n\tautocrlf = false\n"))


def test_a_worktree_config_is_seen(repo: Path, calls: Counter[str]) -> None:
    sh(repo, "config", "extensions.worktreeConfig", "true")
    _kept_then(
        repo, calls,
        lambda: sh(repo, "config", "--worktree", "url.https://w/.insteadOf", "https://example.org/"),
    )  # fmt: skip
    assert (repo / ".git" / "config.worktree").exists()
    assert fresh(repo) == ("origin", "https://w/one.git")


def test_a_linked_worktree_sees_its_common_config(
    repo: Path, tmp_path: Path, calls: Counter[str]
) -> None:
    linked = tmp_path / "linked"
    sh(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    answers = RemoteAnswers(clock=settled)
    assert answers.answer(str(linked)) == ("origin", URL)
    assert answers.answer(str(linked)) == ("origin", URL)
    assert calls["remote"] == 1
    sh(repo, "remote", "set-url", "origin", "https://x.test/4")
    assert answers.answer(str(linked)) == ("origin", "https://x.test/4") == fresh(linked)
    assert calls["remote"] == 2


def test_a_new_legacy_remotes_file_is_seen(repo: Path, calls: Counter[str]) -> None:
    _kept_then(repo, calls, _append(repo / ".git" / "remotes" / "old", "URL: https://o.test/\n"))


def test_a_different_home_is_seen(
    repo: Path, tmp_path: Path, calls: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other-home"
    other.mkdir()
    (other / ".gitconfig").write_text(REWRITE)
    _kept_then(repo, calls, lambda: monkeypatch.setenv("HOME", str(other)))
    assert fresh(repo) == ("origin", "https://mirror.test/one.git")


def test_an_include_directive_is_never_kept(repo: Path, home: Path, calls: Counter[str]) -> None:
    (home / "more.gitconfig").write_text(REWRITE)
    (home / ".gitconfig").write_text("[include]\n\tpath = more.gitconfig\n")
    answers = RemoteAnswers(clock=settled)
    ws = str(repo / "sub")
    for _ in range(3):
        assert answers.answer(ws) == ("origin", "https://mirror.test/one.git") == fresh(repo)
    assert calls["remote"] == 3


def test_a_file_changed_just_before_the_fill_is_not_trusted(
    repo: Path, calls: Counter[str]
) -> None:
    """The racily-clean rule: the clock reads the very moment the config last changed, so
    a change in the same timestamp tick could go unseen: nothing is kept."""
    config = repo / ".git" / "config"
    changed = max(config.stat().st_mtime_ns, config.stat().st_ctime_ns)
    answers = RemoteAnswers(clock=lambda: changed)
    ws = str(repo / "sub")
    for _ in range(2):
        assert answers.answer(ws) == ("origin", URL)
    assert calls["remote"] == 2


def test_what_cannot_be_followed_asks_git_each_time(
    tmp_path: Path, home: Path, calls: Counter[str]
) -> None:
    """A directory that could itself be a bare repository on the way up, and no repository
    at all: git is calls each time and its answer (or its failure) is never kept."""
    answers = RemoteAnswers(clock=settled)
    plain = tmp_path / "plain"
    (plain / "HEAD").mkdir(parents=True)
    for _ in range(2):
        assert answers.answer(str(plain)) == (None, None)  # not a repository: git failed
    assert calls["remote"] == 2


def test_two_workspaces_of_one_work_tree_ask_git_once(repo: Path, calls: Counter[str]) -> None:
    """Subdirectories of one work tree read the very same files: one answer serves both, and
    a change to them is seen from either."""
    (repo / "other").mkdir()
    answers = RemoteAnswers(clock=settled)
    for ws in (repo / "sub", repo / "other", repo, repo / "sub"):
        assert answers.answer(str(ws)) == ("origin", URL)
    assert calls["remote"] == 1
    sh(repo, "remote", "set-url", "origin", "https://x.test/5")
    assert answers.answer(str(repo / "other")) == ("origin", "https://x.test/5")
    assert answers.answer(str(repo / "sub")) == ("origin", "https://x.test/5") == fresh(repo)
    assert calls["remote"] == 2


def test_two_repositories_keep_answers_of_their_own(
    repo: Path, tmp_path: Path, calls: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each repository's answer is its own; past the bound the oldest answer is let go (and
    calls of git again when needed)."""
    second = tmp_path / "second"
    second.mkdir()
    sh(second, "init", "-q", "-b", "main")
    sh(second, "remote", "add", "origin", "https://example.org/two.git")
    third = tmp_path / "third"
    third.mkdir()
    sh(third, "init", "-q", "-b", "main")
    answers = RemoteAnswers(clock=settled)
    monkeypatch.setattr(git_kept, "_REMOTES_KEPT", 2)
    assert answers.answer(str(repo)) == ("origin", URL)
    assert answers.answer(str(second)) == ("origin", "https://example.org/two.git")
    assert answers.answer(str(repo)) == ("origin", URL)
    assert calls["remote"] == 2
    assert answers.answer(str(third)) == (None, None)  # a third: the oldest (repo's) goes
    assert answers.answer(str(second)) == ("origin", "https://example.org/two.git")
    assert calls["remote"] == 3
    assert answers.answer(str(repo)) == ("origin", URL)
    assert calls["remote"] == 4


def test_two_repositories_with_the_same_files_share_one_answer(
    repo: Path, tmp_path: Path, calls: Counter[str]
) -> None:
    """Where a repository lies is not among git's inputs (issue 14: each simulated seed's
    repository is a new copy of one template): a copy with the same bytes is answered from
    the first's proof, and a change to either is seen in that one alone."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, symlinks=True)
    answers = RemoteAnswers(clock=settled)
    assert answers.answer(str(repo / "sub")) == ("origin", URL)
    assert answers.answer(str(copy / "sub")) == ("origin", URL) == fresh(copy)
    assert calls["remote"] == 1
    sh(copy, "remote", "set-url", "origin", "https://x.test/6")
    assert answers.answer(str(copy)) == ("origin", "https://x.test/6") == fresh(copy)
    assert answers.answer(str(repo)) == ("origin", URL) == fresh(repo)
    assert calls["remote"] == 2


def _git_says(ws: Path) -> tuple[str | None, str | None]:
    """What ``git remote -v`` answers as the evidence module runs it (a refusal: nothing)."""
    return evidence._parse_remotes(evidence.git(ws, "remote", "-v"))


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's repository needs root")
def test_another_users_repositories_are_kept_by_their_paths(
    repo: Path, tmp_path: Path, home: Path, calls: Counter[str]
) -> None:
    """Two copies with the same bytes, both owned by another user, one of them listed in
    ``safe.directory``: git reads that one and refuses the other (dubious ownership), so
    neither is answered from the other's proof."""
    import shutil

    trusted, untrusted = tmp_path / "trusted", tmp_path / "untrusted"
    for copy in (trusted, untrusted):
        shutil.copytree(repo, copy, symlinks=True)
        for path in (copy, *copy.rglob("*")):
            os.lchown(path, 4242, 4242)
    (home / ".gitconfig").write_text(f"[safe]\n\tdirectory = {trusted}\n")
    assert (_git_says(trusted), _git_says(untrusted)) == (("origin", URL), (None, None))
    calls.clear()
    answers = RemoteAnswers(clock=settled)
    for _ in range(2):
        assert answers.answer(str(trusted)) == ("origin", URL)
        assert answers.answer(str(untrusted)) == (None, None)
    assert calls["remote"] == 1 + 2  # the trusted one's fill; the refusal is never kept
