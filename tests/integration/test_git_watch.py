"""``git status`` answers kept while an inotify watch proves the tree unchanged (issue 14).

Every reading is compared with a fresh :func:`collect` of the same moment (which asks git
itself), and the processes started are counted: a change git would report must always reach
the evidence, and an unchanged tree must not start git again."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from git_work import sh

from onstation.harness import git_watch
from onstation.harness.evidence import EvidenceCache, collect
from onstation.harness.git_kept import GitBatches
from onstation.harness.git_watch import StatusAnswers, WorkTreeWatch

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/self/mountinfo"), reason="inotify is Linux's"
)


@pytest.fixture
def repo(tmp_path: Path, home: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    sh(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("one\n")
    (path / "src").mkdir()
    (path / "src" / "b.txt").write_text("bee\n")
    sh(path, "add", "-A")
    sh(path, "commit", "-q", "-m", "start")
    return path


@pytest.fixture
def batches() -> Iterator[GitBatches]:
    kept = GitBatches(keep_statuses=True)
    yield kept
    kept.close()


def reading(batches: GitBatches, ws: Path, calls: Counter[str]) -> tuple[int, Any]:
    """(git statuses started, the evidence) of one collection through a new relief's cache
    over the controller's ``batches``, checked against a fresh collection of that moment."""
    before = calls["status"]
    got = EvidenceCache(keep_open=True, batches=batches).collect(ws)
    asked = calls["status"] - before
    assert got == collect(ws)
    return asked, got


def test_an_unchanged_tree_is_read_from_the_watch(
    repo: Path, batches: GitBatches, calls: Counter[str]
) -> None:
    assert reading(batches, repo, calls)[0] == 1
    for _ in range(3):
        assert reading(batches, repo, calls)[0] == 0
    assert batches.statuses is not None and batches.statuses.reused == 3


CHANGES: dict[str, Callable[[Path], None]] = {
    # The same size, and within the same second: only the content differs.
    "a tracked file's content": lambda r: (r / "a.txt").write_text("two\n"),
    "a new untracked file": lambda r: (r / "new.txt").write_text("x"),
    "a new directory holding a file": lambda r: (
        (r / "src" / "deep").mkdir(),
        (r / "src" / "deep" / "c.txt").write_text("c"),
    ),
    "a tracked file removed": lambda r: (r / "src" / "b.txt").unlink(),
    "a tracked file renamed": lambda r: (r / "a.txt").rename(r / "z.txt"),
    "a file made executable": lambda r: (r / "a.txt").chmod(0o755),
    "the index (git add)": lambda r: ((r / "a.txt").write_text("two\n"), sh(r, "add", "a.txt")),
    "HEAD (a commit)": lambda r: (
        (r / "a.txt").write_text("two\n"),
        sh(r, "commit", "-q", "-am", "two"),
    ),
    "HEAD (another branch)": lambda r: sh(r, "checkout", "-q", "-b", "side"),
    "the repository's excludes": lambda r: (r / ".git/info/exclude").write_text("loose.txt\n"),
    "a .gitignore": lambda r: (r / ".gitignore").write_text("src/\n"),
    "a file named like a document directory": lambda r: (r / ".bridge" / "turnovers").write_text(
        "not ours"
    ),
    "a note of the user's beside the documents": lambda r: (r / ".bridge" / "notes.md").write_text(
        "mine"
    ),
    "a directory of the user's beside the documents": lambda r: (
        (r / ".bridge" / "plans").mkdir(),
        (r / ".bridge" / "plans" / "p.md").write_text("p"),
    ),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_change_git_reports_is_read_again(
    change: str, repo: Path, batches: GitBatches, calls: Counter[str]
) -> None:
    (repo / "loose.txt").write_text("an untracked file from the start")
    (repo / ".bridge").mkdir()  # empty: nothing git reports, but watched from the start
    asked, first = reading(batches, repo, calls)
    assert asked == 1
    CHANGES[change](repo)
    asked, second = reading(batches, repo, calls)
    assert asked == 1, f"{change}: the watch must send the reading to git"
    assert second != first, f"{change}: the evidence must show it"
    assert reading(batches, repo, calls)[0] == 0  # and watched again from there


def test_a_change_of_the_global_ignore_file_is_seen_without_the_watch(
    repo: Path, home: Path, batches: GitBatches, calls: Counter[str]
) -> None:
    """Git reads ``~/.config/git/ignore``; the watch does not cover it, the inputs do."""
    (repo / "new.txt").write_text("x")
    asked, first = reading(batches, repo, calls)
    assert "new.txt" in first.untracked_files
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("new.txt\n")
    asked, second = reading(batches, repo, calls)
    assert asked == 1 and "new.txt" not in second.untracked_files


def test_a_change_of_the_global_configuration_is_seen(
    repo: Path, home: Path, batches: GitBatches, calls: Counter[str]
) -> None:
    (repo / "a.txt").chmod(0o755)
    asked, first = reading(batches, repo, calls)
    assert first.dirty
    # core.fileMode=false in the repository's own file would be seen by the watch; the
    # global one is outside it. (The repository's setting wins, so it is removed first.)
    sh(repo, "config", "--unset", "core.filemode")
    reading(batches, repo, calls)
    (home / ".gitconfig").write_text("[core]\n\tfileMode = false\n")
    asked, second = reading(batches, repo, calls)
    assert asked == 1 and not second.dirty


def test_onstations_own_documents_are_left_out_and_never_wake_the_watch(
    repo: Path, batches: GitBatches, calls: Counter[str]
) -> None:
    """Briefs, reports, logs and transcripts under any ``.bridge`` are not the body's work:
    the evidence leaves them out, and writing them does not send the next reading to git."""
    from onstation.harness.files import write_inside

    ws = repo / "src"
    write_inside(ws, [".bridge", "notes.md"], "the user's own")
    asked, first = reading(batches, ws, calls)
    assert asked == 1 and first.untracked_files == ("src/.bridge/notes.md",)
    for directory in git_watch.OWN_DOCUMENT_DIRS:
        write_inside(ws, [".bridge", directory, "n.md"], "onstation's")
        write_inside(ws, [".bridge", directory, "late", "n.md"], "onstation's")
        write_inside(repo, [".bridge", directory, "m.md"], "another workspace's")
    asked, second = reading(batches, ws, calls)
    # The repository's own .bridge appeared holding nothing but document directories: git
    # reports nothing of it, as of an empty directory, and the watch took it in.
    assert asked == 0 and second == first
    write_inside(ws, [".bridge", "turnovers", "o.md"], "the next brief")
    write_inside(repo, [".bridge", "reports", "r.md"], "another workspace's report")
    assert reading(batches, ws, calls) == (0, second)


def test_tracked_documents_are_left_out_of_the_diff_too(repo: Path) -> None:
    (repo / ".bridge" / "reports").mkdir(parents=True)
    (repo / ".bridge" / "reports" / "r.md").write_text("one\n")
    sh(repo, "add", "-A")
    sh(repo, "commit", "-q", "-m", "a report, committed")
    (repo / ".bridge" / "reports" / "r.md").write_text("two\n")
    got = collect(repo)
    assert not got.dirty and got.changed_files == ()
    assert got.diff is not None and got.diff.files == ()
    (repo / "a.txt").write_text("two\n")
    got = collect(repo)
    assert got.dirty and [f.path for f in got.diff.files] == ["a.txt"]  # type: ignore[union-attr]


def shapes() -> dict[str, Callable[[Path, Path], Path]]:
    """Trees a watch does not cover: each returns the workspace to read."""

    def nested(repo: Path, tmp: Path) -> Path:
        sh(repo, "init", "-q", "inner")
        return repo

    def linked(repo: Path, tmp: Path) -> Path:
        sh(repo, "worktree", "add", "-q", str(tmp / "linked"))
        return tmp / "linked"

    def separate_git_dir(repo: Path, tmp: Path) -> Path:
        # A .git file naming a git directory elsewhere, itself named .git.
        (tmp / "apart").mkdir()
        sh(tmp, "init", "-q", "--separate-git-dir", str(tmp / "apart" / ".git"), "separate")
        (tmp / "separate" / "a.txt").write_text("one\n")
        return tmp / "separate"

    def excludes_file(repo: Path, tmp: Path) -> Path:
        sh(repo, "config", "core.excludesFile", str(tmp / "ignore"))
        return repo

    def global_excludes_file(repo: Path, tmp: Path) -> Path:
        (Path(os.environ["HOME"]) / ".gitconfig").write_text(f"[core]\n\texcludesFile = {tmp}/x\n")
        return repo

    def include(repo: Path, tmp: Path) -> Path:
        sh(repo, "config", "include.path", str(tmp / "more"))
        return repo

    def too_many(repo: Path, tmp: Path) -> Path:
        (repo / "many").mkdir()
        for i in range(git_watch.MAX_ENTRIES):
            (repo / "many" / str(i)).write_text("")
        return repo

    return {"a nested repository": nested, "a linked worktree": linked,
            "core.excludesFile": excludes_file, "an include": include,
            "a global core.excludesFile": global_excludes_file,
            "a .git file naming a .git directory elsewhere": separate_git_dir,
            "more entries than a watch lists": too_many}  # fmt: skip


@pytest.mark.parametrize("shape", sorted(shapes()))
def test_a_tree_no_watch_covers_asks_git_every_time(
    shape: str, repo: Path, tmp_path: Path, batches: GitBatches, calls: Counter[str]
) -> None:
    ws = shapes()[shape](repo, tmp_path)
    assert reading(batches, ws, calls)[0] == 1
    assert reading(batches, ws, calls)[0] == 1


def test_a_change_while_git_reads_keeps_nothing(repo: Path) -> None:
    answers: StatusAnswers[str] = StatusAnswers()
    asked = Counter[str]()

    def racing() -> str:
        asked["git"] += 1
        if asked["git"] == 1:
            (repo / "a.txt").write_text("changed while git was reading\n")
        return f"answer {asked['git']}"

    try:
        assert answers.answer(str(repo), racing) == "answer 1"
        assert answers.answer(str(repo), racing) == "answer 2"  # not kept: asked again
        assert answers.answer(str(repo), racing) == "answer 2"  # quiet since: kept
    finally:
        answers.close()


def test_a_watch_that_ends_leaves_its_instance_for_the_next(repo: Path) -> None:
    first = WorkTreeWatch.start(str(repo))
    assert first.quiet() and first.watched >= 3  # the tree, src/ and the git directory's
    fd = first._fd
    first.close()
    first.close()  # idempotent
    second = WorkTreeWatch.start(str(repo))
    try:
        assert second._fd == fd  # taken back: closing an instance sleeps in the kernel
        assert second.quiet()  # nothing of the first watch's left in its queue
        (repo / "src" / "b.txt").write_text("changed\n")
        assert not second.quiet() and not second.quiet()  # and stays changed
    finally:
        second.close()


def test_a_removed_workspace_is_asked_again(
    repo: Path, batches: GitBatches, calls: Counter[str]
) -> None:
    ws = repo / "src"
    reading(batches, ws, calls)
    for path in ws.iterdir():
        path.unlink()
    ws.rmdir()
    ws.mkdir()
    assert reading(batches, ws, calls)[0] == 1


BRIDGES: dict[str, Callable[[Path, Path], None]] = {
    "a file named .bridge": lambda r, t: (r / "src" / ".bridge").write_text("not a directory"),
    "a .bridge moved in holding a file of the user's": lambda r, t: (
        (t / "elsewhere" / ".bridge" / "reports").mkdir(parents=True),
        (t / "elsewhere" / ".bridge" / "mine.md").write_text("mine"),
        (t / "elsewhere" / ".bridge").rename(r / "src" / ".bridge"),
    ),
    "a .bridge made, then a file of the user's in it": lambda r, t: (
        (r / "src" / ".bridge" / "turnovers").mkdir(parents=True),
        (r / "src" / ".bridge" / "mine.md").write_text("mine"),
    ),
    "a file of the user's named like a document directory in a new .bridge": lambda r, t: (
        (r / "src" / ".bridge").mkdir(),
        (r / "src" / ".bridge" / "reports").write_text("x"),
    ),
}


@pytest.mark.parametrize("case", sorted(BRIDGES))
def test_a_new_bridge_holding_anything_else_is_read_again(
    case: str, repo: Path, tmp_path: Path, batches: GitBatches, calls: Counter[str]
) -> None:
    asked, first = reading(batches, repo, calls)
    BRIDGES[case](repo, tmp_path)
    asked, second = reading(batches, repo, calls)
    assert asked == 1 and second != first, case


def test_a_new_bridge_of_documents_only_keeps_the_answer(
    repo: Path, tmp_path: Path, batches: GitBatches, calls: Counter[str]
) -> None:
    from onstation.harness.files import write_inside

    asked, first = reading(batches, repo, calls)
    assert asked == 1
    write_inside(repo / "src", [".bridge", "turnovers", "brief.md"], "a brief")
    (tmp_path / "moved" / ".bridge" / "reports").mkdir(parents=True)
    (tmp_path / "moved" / ".bridge" / "reports" / "r.md").write_text("a report")
    (tmp_path / "moved" / ".bridge").rename(repo / ".bridge")
    assert reading(batches, repo, calls) == (0, first)
    # Watched from there on, as any directory of the tree.
    (repo / ".bridge" / "notes.md").write_text("the user's")
    assert reading(batches, repo, calls)[0] == 1


def test_a_tree_no_watch_covers_is_walked_once(
    repo: Path, batches: GitBatches, calls: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused watch is not set up again in the same controller's life: the walk that
    finds a tree too large costs up to MAX_ENTRIES entries listed."""
    sh(repo, "init", "-q", "inner")
    started = Counter[str]()
    real = WorkTreeWatch.start.__func__  # type: ignore[attr-defined]

    def counting(cls: type[WorkTreeWatch], ws: str) -> WorkTreeWatch:
        started["watch"] += 1
        return real(cls, ws)  # type: ignore[no-any-return]

    monkeypatch.setattr(WorkTreeWatch, "start", classmethod(counting))
    for _ in range(3):
        assert reading(batches, repo, calls)[0] == 1
    assert started["watch"] == 1


def test_a_single_reliefs_reads_ask_git_each_time(repo: Path, calls: Counter[str]) -> None:
    """A relief's own kept things keep no status: its one reuse would save about a
    millisecond on a small tree, and a large tree costs more to watch than to ask."""
    cache = EvidenceCache(keep_open=True)
    try:
        for _ in range(2):
            assert cache.collect(repo) == collect(repo)
        assert calls["status"] == 4  # two readings, two fresh collections
    finally:
        cache.close()
    assert GitBatches().statuses is None


def test_the_remote_is_kept_with_the_status_and_read_again_with_it(
    repo: Path, home: Path, calls: Counter[str]
) -> None:
    """``git remote -v`` reads the repository's configuration (watched) and the global
    files (compared by the status's inputs): kept alongside the status, asked again when
    either changes. (No RemoteAnswers here: every remote read would be a process.)"""
    batches = GitBatches(keep_remotes=False, keep_statuses=True)
    try:
        sh(repo, "remote", "add", "origin", "https://example.org/one.git")
        assert reading(batches, repo, calls)[1].remote_url == "https://example.org/one.git"
        before = calls["remote"]
        assert reading(batches, repo, calls)[0] == 0
        assert calls["remote"] == before + 1  # the fresh collection's only
        sh(repo, "remote", "set-url", "origin", "https://example.org/two.git")
        assert reading(batches, repo, calls)[1].remote_url == "https://example.org/two.git"
        (home / ".gitconfig").write_text(
            '[url "https://mirror.example.org/"]\n\tinsteadOf = https://example.org/\n'
        )
        asked, got = reading(batches, repo, calls)
        assert asked == 1 and got.remote_url == "https://mirror.example.org/two.git"
    finally:
        batches.close()


def test_an_answer_alongside_is_read_again_once_the_watch_saw_a_change(repo: Path) -> None:
    answers: StatusAnswers[str] = StatusAnswers()
    computed = Counter[str]()

    def compute() -> tuple[str, bool]:
        computed["remote"] += 1
        return f"remote {computed['remote']}", True

    try:
        answers.answer(str(repo), lambda: "status")
        assert answers.alongside(str(repo), "remote", compute) == "remote 1"
        assert answers.alongside(str(repo), "remote", compute) == "remote 1"
        sh(repo, "remote", "add", "origin", "https://example.org/one.git")
        assert answers.alongside(str(repo), "remote", compute) == "remote 2"
        assert answers.alongside(str(repo), "other", compute) == "remote 3"  # none kept
    finally:
        answers.close()


def test_an_answer_alongside_not_to_be_kept_is_asked_again(repo: Path) -> None:
    """The simulator's shared remote answers prove an answer only once the repository's
    files are old enough: until then each collection asks them again, so that they can."""
    answers: StatusAnswers[str] = StatusAnswers()
    computed = Counter[str]()

    def compute() -> tuple[str, bool]:
        computed["remote"] += 1
        return f"remote {computed['remote']}", computed["remote"] >= 2

    try:
        answers.answer(str(repo), lambda: "status")
        assert answers.alongside(str(repo), "remote", compute) == "remote 1"
        assert answers.alongside(str(repo), "remote", compute) == "remote 2"  # kept from here
        assert answers.alongside(str(repo), "remote", compute) == "remote 2"
    finally:
        answers.close()


def test_shared_remote_answers_still_get_to_prove_theirs(repo: Path, calls: Counter[str]) -> None:
    """With the simulator's shared RemoteAnswers, a remote they have not proven yet (the
    repository's files too young) is not kept beside the status: the next collections ask
    them again, so that once the files are old enough they prove it, and every other
    seed's first reading is answered without git (a regression measured at 1.9 ``git
    remote`` a seed)."""
    import time

    from onstation.harness.git_kept import RemoteAnswers

    now = [time.time_ns()]
    remotes = RemoteAnswers(clock=lambda: now[0])
    batches = GitBatches(remotes=remotes, keep_statuses=True)
    sh(repo, "remote", "add", "origin", "https://example.org/one.git")
    try:
        for _ in range(2):
            before = calls["remote"]
            EvidenceCache(keep_open=True, batches=batches).collect(repo)
            assert calls["remote"] == before + 1  # not proven: git asked each time
        now[0] += 60 * 10**9  # the files are old enough now
        EvidenceCache(keep_open=True, batches=batches).collect(repo)
        before = calls["remote"]
        for _ in range(2):
            EvidenceCache(keep_open=True, batches=batches).collect(repo)
        assert calls["remote"] == before  # kept beside the status, and proven for others
        other = GitBatches(remotes=remotes, keep_statuses=True)
        try:
            EvidenceCache(keep_open=True, batches=other).collect(repo)
            assert calls["remote"] == before
        finally:
            other.close()
    finally:
        batches.close()


def _asking(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every question put to a kept ``git cat-file`` (the names asked), in order."""
    asked: list[list[str]] = []
    real = EvidenceCache._batch_answer

    def counting(self: EvidenceCache, ws: str, names: list[str]) -> str | None:
        asked.append(list(names))
        return real(self, ws, names)

    monkeypatch.setattr(EvidenceCache, "_batch_answer", counting)
    return asked


def test_a_branch_the_evidence_compares_with_is_kept_with_the_status_until_it_moves(
    repo: Path, batches: GitBatches, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The branch a work tree's changes are measured against (``master`` beside ``main``,
    no upstream) is a ref the status's watch covers: a later relief's collection takes its
    object with the kept status and asks git nothing; moved, it is read again, and every
    collection is what a fresh one says."""
    start = sh(repo, "rev-parse", "HEAD")
    sh(repo, "branch", "master", start)
    (repo / "a.txt").write_text("two\n")
    sh(repo, "commit", "-q", "-am", "two")
    asked = _asking(monkeypatch)
    first = EvidenceCache(keep_open=True, batches=batches).collect(repo)
    assert any("master" in names for names in asked) and first.merge_base == start
    asked.clear()
    second = EvidenceCache(keep_open=True, batches=batches).collect(repo)
    assert asked == [] and second == first  # neither a process nor a question
    assert second == collect(repo)
    sh(repo, "branch", "-f", "master", "HEAD")  # the ref moves: the watch sees it
    asked.clear()
    moved = EvidenceCache(keep_open=True, batches=batches).collect(repo)
    assert any("master" in names for names in asked)
    assert moved.merge_base == sh(repo, "rev-parse", "HEAD") and moved == collect(repo)


def test_head_is_read_from_a_kept_status_while_it_is_proven(
    repo: Path, batches: GitBatches, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HEAD's commit, asked of a relief's cache after a collection kept the status: the
    status's own, with no question to git; after a commit, the new one (the watch saw it,
    and git is asked)."""
    EvidenceCache(keep_open=True, batches=batches).collect(repo)
    asked = _asking(monkeypatch)
    cache = EvidenceCache(keep_open=True, batches=batches)
    assert cache.head(repo) == sh(repo, "rev-parse", "HEAD")
    assert asked == []
    (repo / "a.txt").write_text("two\n")
    sh(repo, "commit", "-q", "-am", "two")
    assert cache.head(repo) == sh(repo, "rev-parse", "HEAD")
    assert asked == [["HEAD"]]
    assert batches.statuses is not None and batches.statuses.proven(str(repo)) is None


def test_a_proven_answer_is_never_asked_of_git(repo: Path) -> None:
    """``StatusAnswers.proven``: nothing kept, None; kept and quiet, the answer; after a
    change, None, and the next answer asks git again."""
    answers: StatusAnswers[str] = StatusAnswers()
    try:
        assert answers.proven(str(repo)) is None
        assert answers.answer(str(repo), lambda: "first") == "first"
        assert answers.proven(str(repo)) == "first"
        (repo / "a.txt").write_text("changed\n")
        assert answers.proven(str(repo)) is None
        assert answers.answer(str(repo), lambda: "second") == "second"
    finally:
        answers.close()
