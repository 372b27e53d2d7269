"""One relief reads its workspace once (issue 14): the brief and the capsule share one
:class:`EvidenceCache`, which asks git each question once, batches what it must resolve into
one process, and reuses an answer only while ``git status`` still proves it. Every answer is
compared with a fresh :func:`collect` of the same moment."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from git_work import sh

from onstation.harness import evidence, git_kept
from onstation.harness.evidence import EvidenceCache, collect, commits_since


def commit(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    sh(repo, "add", name)
    sh(repo, "commit", "-q", "-m", name)
    return sh(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    sh(path, "init", "-q", "-b", "main")
    commit(path, "a.txt", "one\n")
    return path


def test_the_capsule_reuses_the_briefs_collection_while_status_proves_it(
    repo: Path, calls: Counter[str]
) -> None:
    base = commit(repo, "b.txt", "two\n")
    (repo / "b.txt").write_text("two, staged\n")
    sh(repo, "add", "b.txt")
    cache = EvidenceCache()
    first = cache.collect(repo, base)
    assert sum(calls.values()) == 4  # status, one cat-file for every name, diff, remote
    assert calls["cat-file"] == 1
    # The brief the relief writes is a new untracked file: nothing else changed.
    (repo / "brief.md").write_text("# brief\n")
    calls.clear()
    again = cache.collect(repo, base)
    assert dict(calls) == {"status": 1}  # the proof, and nothing more
    fresh = collect(repo, base)
    assert again == fresh
    assert again.untracked_files == ("brief.md",) and first.untracked_files == ()
    assert again.diff == first.diff and again.diff is not None and again.diff.files


def test_a_work_tree_file_that_differs_from_the_index_is_read_again(
    repo: Path, calls: Counter[str]
) -> None:
    (repo / "a.txt").write_text("changed\n")
    cache = EvidenceCache()
    first = cache.collect(repo)
    # Same status record (" M a.txt" with the same index id): only the content tells.
    (repo / "a.txt").write_text("changed again\n")
    calls.clear()
    again = cache.collect(repo)
    assert calls["diff"] >= 1
    assert again == collect(repo)
    assert first.diff is not None and again.diff is not None
    assert again.diff.patch_sha256 != first.diff.patch_sha256


def test_a_staged_change_or_a_new_commit_is_read_again(repo: Path) -> None:
    cache = EvidenceCache()
    clean = cache.collect(repo)
    assert clean.diff is not None and clean.diff.files == () and clean.changed_files == ()
    (repo / "a.txt").write_text("staged\n")
    sh(repo, "add", "a.txt")
    staged = cache.collect(repo)
    assert staged == collect(repo) and staged.diff is not None and staged.diff.files
    sh(repo, "commit", "-q", "-m", "staged")
    committed = cache.collect(repo)
    assert committed == collect(repo) and committed.head != clean.head


def test_an_untracked_gitattributes_is_never_trusted_to_leave_the_diff_alone(
    repo: Path,
) -> None:
    (repo / "a.txt").write_text("one\ntwo\n")
    sh(repo, "add", "a.txt")
    cache = EvidenceCache()
    cache.collect(repo)
    (repo / ".gitattributes").write_text("*.txt -diff\n")  # the patch now reads "Binary"
    before = cache.collect(repo)
    assert before == collect(repo)
    (repo / ".gitattributes").write_text("*.md -diff\n")  # same name, other content
    assert cache.collect(repo) == collect(repo)


def test_names_that_move_are_resolved_again(repo: Path) -> None:
    sh(repo, "checkout", "-q", "-b", "topic")
    commit(repo, "t.txt", "topic\n")
    cache = EvidenceCache()
    first = cache.collect(repo)  # no upstream: measured from main
    assert first.base_ref == "main"
    sh(repo, "branch", "-f", "main", "topic")  # main moves: the merge base with it too
    again = cache.collect(repo)
    assert again == collect(repo)
    assert again.merge_base != first.merge_base and again.changed_files == ()


def test_one_batch_resolves_every_name_and_never_passes_an_option(
    repo: Path, calls: Counter[str]
) -> None:
    head = sh(repo, "rev-parse", "HEAD")
    cache = EvidenceCache()
    found = cache.resolve(repo, ["HEAD", f"{head}^{{tree}}", "-x", "a\nb", "no-such", "main"])
    assert calls["cat-file"] == 1
    assert found == {"HEAD": head, f"{head}^{{tree}}": sh(repo, "rev-parse", "HEAD^{tree}"),
                     "-x": None, "a\nb": None, "no-such": None, "main": head}  # fmt: skip
    calls.clear()
    # What a full id names never changes: asked again, it is not asked of git.
    assert cache.resolve(repo, [f"{head}^{{tree}}"]) == {f"{head}^{{tree}}": found[
        f"{head}^{{tree}}"]}  # fmt: skip
    assert calls == Counter()
    assert cache.commit_of(repo, "--all") is None and calls == Counter()


def test_the_cached_log_is_the_log_of_the_evidence_head(repo: Path, calls: Counter[str]) -> None:
    base = sh(repo, "rev-parse", "HEAD")
    for i in range(3):
        commit(repo, f"f{i}.txt", f"{i}\n")
    head = sh(repo, "rev-parse", "HEAD")
    cache = EvidenceCache()
    log = cache.commits_since(repo, base, head=head)
    assert log == commits_since(repo, base)
    calls.clear()
    assert cache.commits_since(repo, base, head=head) == log and calls == Counter()
    assert cache.commits_since(repo, head, head=head) == evidence.CommitLog(head, (), 0)
    assert calls == Counter()  # nothing lies between HEAD and itself


def test_a_relief_runs_a_handful_of_git_processes(calls: Counter[str]) -> None:
    """A simulated seed's reliefs each read the workspace once for brief and capsule, and
    the controller's watch of the work tree spares most statuses: fewer git processes than
    reliefs that reached their capsule (issue 14: was about 16 each)."""
    from onstation.relief.relieve import Relief
    from onstation.sim import simulate

    sealed = Counter[str]()
    real = Relief._decide

    def counted(self: Relief, *args: Any) -> Any:
        sealed["reliefs"] += 1
        return real(self, *args)

    kept: list[git_kept._BatchCheck] = []
    real_init = git_kept._BatchCheck.__init__

    def tracked(self: git_kept._BatchCheck, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        kept.append(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Relief, "_decide", counted)
        patch.setattr(git_kept._BatchCheck, "__init__", tracked)
        result = simulate(3)
    assert result.ok
    assert sealed["reliefs"] >= 3
    # A status where the controller's watch of the tree cannot prove the last one (its first
    # reading of each workspace, the reading after the relief made the workspace's .bridge,
    # each after a restart of the controller); every name (the brief's, the capsule's, the
    # launch's HEAD) from the controller's kept git cat-file of the workspace.
    assert 1 <= calls["status"] < sealed["reliefs"], calls  # was two a relief
    assert calls["cat-file"] == 0 and calls["rev-parse"] == 0, calls
    # Read at most once by each relief: the controller keeps it while its files are proven
    # unchanged (tests/integration/test_evidence_remote_cache.py).
    assert calls["remote"] <= sealed["reliefs"], calls
    # (The scratch repository's init and commit, when the template is first made; where git
    # reads its system configuration, asked once per process.)
    assert set(calls) <= {"status", "remote", "init", "commit", "config"}, calls
    assert calls["config"] <= 1, calls
    assert 1 <= len(kept) < sealed["reliefs"] and not any(k.broken for k in kept)
    assert all(k.proc is None for k in kept)  # every kept process ended with the seed


def test_shared_cat_files_outlive_each_relief_and_end_with_their_owner(
    repo: Path, calls: Counter[str]
) -> None:
    """Two reliefs' caches over one GitBatches ask one kept process: closing a cache leaves
    it running, and each still answers as git does at that moment; the owner ends it."""
    batches = git_kept.GitBatches()
    first = EvidenceCache(keep_open=True, batches=batches)
    head = sh(repo, "rev-parse", "HEAD")
    assert first.head(repo) == head
    kept = batches.of(str(repo))
    first.close()
    assert kept.proc is not None  # not the cache's to end
    moved = commit(repo, "c.txt", "three\n")
    second = EvidenceCache(keep_open=True, batches=batches)
    assert second.head(repo) == moved and second.collect(repo) == collect(repo)
    assert batches.of(str(repo)) is kept and calls["cat-file"] == 1  # only collect()'s own
    second.close()
    batches.close()
    assert kept.proc is None
    kept.broken = True  # as after a timeout: the next question gets a new process
    assert batches.of(str(repo)) is not kept
    batches.close()


def test_a_kept_cat_file_answers_as_a_new_process_would(repo: Path, calls: Counter[str]) -> None:
    """A relief's one git cat-file (keep_open) sees every ref as it is when asked: a branch
    made, moved or deleted after it started, a new commit at HEAD."""
    cache = EvidenceCache(keep_open=True)
    try:
        sh(repo, "checkout", "-q", "-b", "topic")
        first = cache.collect(repo)
        assert first.base_ref == "main" and first == collect(repo)
        commit(repo, "t.txt", "topic\n")
        assert cache.head(repo) == sh(repo, "rev-parse", "HEAD")
        sh(repo, "branch", "-f", "main", "topic")
        again = cache.collect(repo)
        assert again == collect(repo) and again.merge_base != first.merge_base
        sh(repo, "checkout", "-q", "main")
        sh(repo, "branch", "-D", "topic")
        sh(repo, "pack-refs", "--all")
        assert cache.resolve(repo, ["topic", "main"]) == {
            "topic": None, "main": sh(repo, "rev-parse", "main")}  # fmt: skip
        # Only the two fresh collect()s started one: the cache asked its one kept process.
        assert calls["cat-file"] == 2
        assert cache._batch is not None and not cache._batch.of(str(repo)).broken
    finally:
        cache.close()
    assert cache.resolve(repo, ["main"])["main"] == sh(repo, "rev-parse", "main")  # anew
    cache.close()


def test_a_kept_cat_file_that_fails_gives_way_to_a_process_of_its_own(
    repo: Path, tmp_path: Path, calls: Counter[str]
) -> None:
    import signal

    cache = EvidenceCache(keep_open=True)
    head = sh(repo, "rev-parse", "HEAD")
    assert cache.head(repo) == head
    batch = cache._batch.of(str(repo)) if cache._batch is not None else None
    assert batch is not None and batch.proc is not None
    os.killpg(batch.proc.pid, signal.SIGKILL)
    batch.proc.wait()
    assert cache.head(repo) == head  # the kept one is gone: one process of its own answers
    assert batch.broken and batch.proc is None and calls["cat-file"] == 1
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    assert cache.head(outside) is None and cache.resolve(outside, ["main"]) == {"main": None}
    cache.close()
