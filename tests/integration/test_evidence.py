"""The one git runner's policy, git evidence from real repositories, and a plan layer that
runs no git (it takes the evidence as data)."""

from __future__ import annotations

import hashlib
import http.server
import os
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from onstation.core.errors import BadInput
from onstation.harness.evidence import (
    GIT_TIMEOUT,
    DiffEntry,
    GitEvidence,
    WorkTreeDiff,
    collect,
    git,
    git_environment,
)
from onstation.ledger import Ledger

NOW = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
IDENTITY = {
    "GIT_AUTHOR_NAME": "T",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@example.org",
}


def sh(cwd: Path, *args: str) -> str:
    """Test-side git (setup and the answers to compare against)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    done = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
        env={**env, **IDENTITY},
    )  # fmt: skip
    return done.stdout.strip()


def commit(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    sh(repo, "add", name)
    sh(repo, "commit", "-q", "-m", name)
    return sh(repo, "rev-parse", "HEAD")


def alive(pid: int) -> bool:
    """Running (a zombie left to an init that does not reap counts as dead)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] not in {"Z", "X"}


def wait_dead(pid: int, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)


def sleeper(path: Path, pidfile: Path) -> Path:
    """An executable that writes its pid and then sleeps a minute (a hung prompt)."""
    path.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    sh(path, "init", "-q", "-b", "main")
    commit(path, "a.txt", "one\n")
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "plain"
    path.mkdir()
    probe = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--is-inside-work-tree"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if probe.stdout.strip() == "true":
        pytest.skip("the temporary directory is inside a git work tree")
    return path


# --------------------------------------------------------------------------------------------
# the runner's policy


def test_environment_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", "/elsewhere/.git")
    monkeypatch.setenv("GIT_ASKPASS", "/bin/hang")
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "1")
    monkeypatch.setenv("ONSTATION_PROBE", "kept")
    env = git_environment({"GIT_AUTHOR_NAME": "fixed"})
    assert "GIT_DIR" not in env
    assert "GIT_ASKPASS" not in env
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["GIT_PAGER"] == "cat"
    assert env["GIT_OPTIONAL_LOCKS"] == "0"
    assert env["LC_ALL"] == "C"
    assert env["ONSTATION_PROBE"] == "kept"
    assert env["GIT_AUTHOR_NAME"] == "fixed"  # explicit only
    assert GIT_TIMEOUT > 0


def test_inherited_git_dir_does_not_redirect_git(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    sh(other, "init", "-q", "-b", "main")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    assert git(repo, "rev-parse", "--show-toplevel") == str(repo.resolve())
    assert collect(repo).head == sh(repo, "rev-parse", "HEAD")


def test_answers_failures_and_checked_mode(repo: Path) -> None:
    assert git(repo, "rev-parse", "HEAD") == sh(repo, "rev-parse", "HEAD")
    assert git(repo, "rev-parse", "HEAD", strip=False) == sh(repo, "rev-parse", "HEAD") + "\n"
    assert git(repo, "rev-parse", "--verify", "--quiet", "no-such-ref") is None
    assert git(repo / "missing", "status") is None
    ident = git(repo, "var", "GIT_AUTHOR_IDENT", check=True, env={"GIT_AUTHOR_NAME": "Fixed"})
    assert ident.startswith("Fixed <")
    with pytest.raises(subprocess.CalledProcessError) as failed:
        git(repo, "rev-parse", "--verify", "no-such-ref", check=True)
    assert failed.value.returncode != 0
    assert failed.value.stderr  # git's own message, for the setup's error


def test_a_configured_pager_is_never_run(repo: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "pager.pid"
    pager = sleeper(tmp_path / "pager.sh", pidfile)
    sh(repo, "config", "core.pager", str(pager))
    sh(repo, "config", "pager.log", "true")
    started = time.monotonic()
    out = git(repo, "--paginate", "log", "--format=%s", timeout=20)
    assert out == "a.txt"
    assert git(repo, "var", "GIT_PAGER") == "cat"
    assert time.monotonic() - started < 15
    assert not pidfile.exists()


def test_timeout_kills_git_and_what_it_started(repo: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "alias.pid"
    slow = f"!echo $$ > {pidfile}; exec sleep 60"
    started = time.monotonic()
    assert git(repo, "-c", f"alias.slow={slow}", "slow", timeout=1) is None
    assert time.monotonic() - started < 10
    assert pidfile.exists()
    assert wait_dead(int(pidfile.read_text()))
    pidfile.unlink()
    with pytest.raises(subprocess.TimeoutExpired):
        git(repo, "-c", f"alias.slow={slow}", "slow", timeout=1, check=True)
    assert wait_dead(int(pidfile.read_text()))


class _Unauthorized(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="test"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def needs_password() -> Iterator[str]:
    """A local HTTP remote that answers every request with 401 (asks for a password)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Unauthorized)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/repo.git"
    finally:
        server.shutdown()
        server.server_close()


def test_a_credential_prompt_fails_at_once(
    repo: Path, tmp_path: Path, needs_password: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An inherited askpass that would hang is not inherited; no terminal prompt is possible.
    pidfile = tmp_path / "inherited.pid"
    monkeypatch.setenv("GIT_ASKPASS", str(sleeper(tmp_path / "inherited.sh", pidfile)))
    monkeypatch.delenv("SSH_ASKPASS", raising=False)
    started = time.monotonic()
    assert git(repo, "ls-remote", needs_password, timeout=20) is None
    assert time.monotonic() - started < 15
    assert not pidfile.exists()


def test_a_configured_askpass_that_hangs_is_cut_off(
    repo: Path, tmp_path: Path, needs_password: str
) -> None:
    pidfile = tmp_path / "askpass.pid"
    sh(repo, "config", "core.askPass", str(sleeper(tmp_path / "askpass.sh", pidfile)))
    started = time.monotonic()
    assert git(repo, "ls-remote", needs_password, timeout=2) is None
    assert time.monotonic() - started < 12
    assert pidfile.exists()  # git did ask (askpass comes before any terminal prompt)...
    assert wait_dead(int(pidfile.read_text()))  # ...and the helper died with the call


# --------------------------------------------------------------------------------------------
# collect


def test_collect_outside_a_repository(outside: Path) -> None:
    ev = collect(outside, "main")
    assert ev == GitEvidence(workspace=str(outside), repository=False, requested_base="main")
    assert ev.head is None and ev.diff is None and ev.dirty is None
    assert ev.changed_files == () and ev.untracked_files == ()


def test_collect_unborn_repository(tmp_path: Path) -> None:
    path = tmp_path / "new"
    path.mkdir()
    sh(path, "init", "-q", "-b", "main")
    (path / "draft.txt").write_text("x\n")
    ev = collect(path)
    assert ev.repository is True
    assert ev.branch == "main"
    assert ev.head is None and ev.tree is None
    assert ev.base_ref is None and ev.merge_base is None
    assert ev.diff is None
    assert ev.untracked_files == ("draft.txt",)
    assert ev.dirty is True
    assert ev.remote_name is None and ev.remote_url is None


@pytest.fixture
def team(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A clone on a feature branch tracking origin/main: two commits ahead, one behind,
    a modified, a staged-new and an untracked file."""
    origin = tmp_path / "origin.git"
    sh(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    seed = tmp_path / "seed"
    sh(tmp_path, "init", "-q", "-b", "main", str(seed))
    fork = commit(seed, "a.txt", "one\n")
    sh(seed, "remote", "add", "origin", str(origin))
    sh(seed, "push", "-q", "origin", "main")
    work = tmp_path / "work"
    sh(tmp_path, "clone", "-q", str(origin), str(work))
    sh(work, "checkout", "-q", "-b", "feature", "--track", "origin/main")
    commit(work, "b.txt", "two\n")
    sh(work, "tag", "mid")
    commit(work, "c.txt", "three\n")
    commit(seed, "upstream.txt", "later\n")  # origin/main moves on: the work is behind
    sh(seed, "push", "-q", "origin", "main")
    sh(work, "fetch", "-q", "origin")
    sh(work, "remote", "add", "backup", "https://bot:s3cret@example.org/x.git")
    (work / "a.txt").write_text("one changed\n")
    (work / "d.txt").write_text("staged\n")
    sh(work, "add", "d.txt")
    (work / "notes.txt").write_text("untracked\n")
    (work / ".gitignore").write_text("*.log\n")
    (work / "build.log").write_text("ignored\n")
    return work, {"fork": fork, "mid": sh(work, "rev-parse", "mid")}


def test_collect_feature_branch_against_its_upstream(team: tuple[Path, dict[str, str]]) -> None:
    work, oids = team
    ev = collect(work)
    head = sh(work, "rev-parse", "HEAD")
    assert ev.workspace == str(work)
    assert ev.repository is True
    assert ev.branch == "feature"
    assert ev.head == head
    assert ev.tree == sh(work, "rev-parse", "HEAD^{tree}")
    assert ev.base_ref == "origin/main"  # the upstream, although it moved on
    assert ev.merge_base == oids["fork"]
    assert ev.changed_files == ("a.txt", "b.txt", "c.txt", "d.txt")
    assert ev.untracked_files == (".gitignore", "notes.txt")
    assert ev.dirty is True
    assert ev.remote_name == "origin"
    assert ev.remote_url == str(work.parent / "origin.git")
    assert ev.requested_base is None and ev.requested_base_commit is None
    # Without a requested base the capsule's diff is the work tree against HEAD.
    assert ev.diff is not None
    assert ev.diff.against == head
    assert ev.diff.files == (DiffEntry("a.txt", "M"), DiffEntry("d.txt", "A"))
    assert ev.diff.stat == subprocess.run(
        ["git", "-C", str(work), "diff", "--stat", head], capture_output=True, text=True,
        check=True,
    ).stdout  # fmt: skip
    assert ev.diff.stat is not None and ev.diff.stat.endswith("\n")  # verbatim
    patch = subprocess.run(
        ["git", "-C", str(work), "diff", "--binary", head], capture_output=True, check=True
    ).stdout
    assert ev.diff.patch_sha256 == hashlib.sha256(patch).hexdigest()


def test_collect_with_a_requested_base(team: tuple[Path, dict[str, str]]) -> None:
    work, oids = team
    ev = collect(work, "mid")
    assert ev.requested_base == "mid"
    assert ev.requested_base_commit == oids["mid"]
    assert ev.base_ref == "mid"
    assert ev.merge_base == oids["mid"]
    assert ev.changed_files == ("a.txt", "c.txt", "d.txt")
    assert ev.diff is not None and ev.diff.against == oids["mid"]
    assert {e.path for e in ev.diff.files} == {"a.txt", "c.txt", "d.txt"}


def test_collect_with_a_base_that_names_no_commit(team: tuple[Path, dict[str, str]]) -> None:
    work, _ = team
    head = sh(work, "rev-parse", "HEAD")
    for base in ("no-such-ref", "--all", "-x"):
        ev = collect(work, base)
        assert ev.requested_base == base
        assert ev.requested_base_commit is None  # recorded, not refused; never an option
        assert ev.base_ref == base and ev.merge_base == head  # the brief falls back to HEAD
        assert ev.diff is not None and ev.diff.against == head


def test_collect_without_upstream_uses_main(repo: Path) -> None:
    main = sh(repo, "rev-parse", "HEAD")
    sh(repo, "checkout", "-q", "-b", "topic")
    commit(repo, "t.txt", "topic\n")
    sh(repo, "remote", "add", "fork", "https://bot:s3cret@example.org/x.git")
    ev = collect(repo)
    assert ev.base_ref == "main" and ev.merge_base == main
    assert ev.changed_files == ("t.txt",)
    assert ev.dirty is False and ev.untracked_files == ()
    # No origin: the first remote, its credentials scrubbed where they are collected.
    assert ev.remote_name == "fork"
    assert ev.remote_url == "https://[redacted: url-credentials]@example.org/x.git"


# --------------------------------------------------------------------------------------------
# the plan layer takes evidence as data


def _ledger(tmp_path: Path) -> Ledger:
    led = Ledger.open(str(tmp_path / "l.db"))
    led.register_node("executor-7")
    led.open_episode("executor-7", "Add rate limiting to POST /login")
    led.acquire_lease("executor-7")
    return led


def test_plan_build_runs_no_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from onstation.plan import build

    assert not hasattr(build, "subprocess")
    ledger = _ledger(tmp_path)
    evidence = GitEvidence(
        workspace="/nowhere/ws",
        repository=True,
        branch="feature",
        head="a" * 40,
        tree="b" * 40,
        base_ref="origin/main",
        merge_base="c" * 40,
        requested_base="v1",
        requested_base_commit="c" * 40,
        remote_name="origin",
        remote_url="https://bot:s3cret@github.com/example/webapp.git",
        changed_files=("x.py",),
        dirty=True,
        diff=WorkTreeDiff(
            against="c" * 40,
            stat=" x.py | 1 +\n",
            files=(DiffEntry("x.py", "M"),),
            patch_sha256=None,
        ),
    )

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a process was started: {args!r}")

    for name in ("Popen", "run", "call", "check_call", "check_output"):
        monkeypatch.setattr(subprocess, name, refuse)
    for name in ("system", "posix_spawn", "posix_spawnp", "fork", "execv", "execvp"):
        monkeypatch.setattr(os, name, refuse)
    payload = build.build_payload(ledger, "executor-7", evidence=evidence, agent=None, now=NOW)
    repository = payload["repository"]
    assert repository["head"] == "a" * 40
    assert repository["tree"] == "b" * 40
    assert repository["base"] == "c" * 40
    assert (
        repository["remote"] == "https://[redacted: url-credentials]@github.com/example/webapp.git"
    )
    assert repository["dirty"] is True
    # git could not produce the patch: no diff is claimed (never an empty patch's digest).
    assert repository["diff"] is None
    assert {"part": "repository.diff", "reason": "git could not produce the patch of the work"} in (
        payload["omissions"]
    )
    assert {f["type"] for f in payload["facts"]} >= {"repository.head", "repository.tree"}
    assert "repository.base" not in {o["part"] for o in payload["omissions"]}

    unresolved = GitEvidence(workspace="/nowhere/ws", repository=True, requested_base="nope")
    with pytest.raises(BadInput, match=r"--base: 'nope' does not name a commit in /nowhere/ws"):
        build.build_payload(ledger, "executor-7", evidence=unresolved, agent=None, now=NOW)
    option = GitEvidence(workspace="/nowhere/ws", repository=True, requested_base="--all")
    with pytest.raises(BadInput, match="is not a git revision"):
        build.build_payload(ledger, "executor-7", evidence=option, agent=None, now=NOW)
    outside = GitEvidence(workspace="/nowhere/ws", repository=False)
    payload = build.build_payload(ledger, "executor-7", evidence=outside, agent=None, now=NOW)
    assert payload["repository"]["head"] is None
    assert {"part": "repository", "reason": "/nowhere/ws is not a git work tree"} in payload[
        "omissions"
    ]


def test_plan_build_from_collected_evidence(repo: Path, tmp_path: Path) -> None:
    from onstation.plan.build import build_payload

    sh(repo, "tag", "base")
    commit(repo, "b.txt", "two\n")
    evidence = collect(repo, "base")
    ledger = _ledger(tmp_path)
    payload = build_payload(ledger, "executor-7", evidence=evidence, agent=None, now=NOW)
    assert payload["repository"]["head"] == sh(repo, "rev-parse", "HEAD")
    assert payload["repository"]["base"] == sh(repo, "rev-parse", "base")
    assert payload["repository"]["dirty"] is False
    assert [f["path"] for f in payload["repository"]["diff"]["files"]] == ["b.txt"]


def test_one_status_call_reads_branch_head_upstream_and_changes(repo: Path, tmp_path: Path) -> None:
    """collect() reads the branch, HEAD, the upstream, whether anything changed and the
    untracked files from one `git status --porcelain=v2 -z` (issue 14: fewer git processes per
    relief), with the answers the separate calls gave."""
    head = sh(repo, "rev-parse", "HEAD")
    (repo / "dir with space").mkdir()
    (repo / "dir with space" / "new\nline.txt").write_text("x")  # -z keeps the name exact
    (repo / ".gitignore").write_text("ignored.log\n")
    (repo / "ignored.log").write_text("x")
    sh(repo, "mv", "a.txt", "b.txt")  # a rename record carries its origin as a second record
    ev = collect(repo)
    assert (ev.repository, ev.branch, ev.head, ev.dirty) == (True, "main", head, True)
    assert ev.tree == sh(repo, "rev-parse", "HEAD^{tree}")
    assert ev.untracked_files == (".gitignore", "dir with space/new\nline.txt")
    assert (ev.base_ref, ev.merge_base) == ("HEAD", head)  # no upstream, main is the branch
    # An upstream counts only while its ref exists.
    origin = tmp_path / "origin.git"
    sh(tmp_path, "init", "-q", "--bare", str(origin))
    sh(repo, "remote", "add", "origin", str(origin))
    sh(repo, "commit", "-q", "-m", "rename")
    sh(repo, "push", "-q", "-u", "origin", "main")
    ev = collect(repo)
    assert (ev.base_ref, ev.remote_name, ev.remote_url) == ("origin/main", "origin", str(origin))
    sh(repo, "update-ref", "-d", "refs/remotes/origin/main")
    assert collect(repo).base_ref == "HEAD"
    # Detached HEAD, and a repository without a commit.
    sh(repo, "checkout", "-q", "--detach")
    detached = collect(repo)
    assert detached.branch is None and detached.head == sh(repo, "rev-parse", "HEAD")
    empty = tmp_path / "empty"
    empty.mkdir()
    sh(empty, "init", "-q", "-b", "trunk")
    unborn = collect(empty)
    assert (unborn.repository, unborn.branch, unborn.head, unborn.tree) == (True, "trunk", None,
                                                                          None)  # fmt: skip
    assert unborn.dirty is False


def test_one_diff_call_gives_what_three_gave(repo: Path) -> None:
    """The work tree's stat, name-status and patch come from one `git diff --raw --stat -p`
    (issue 14); each part is byte for byte what git prints for it alone, so the patch digest
    of a capsule is unchanged."""
    from onstation.harness.evidence import _work_diff

    head = sh(repo, "rev-parse", "HEAD")
    (repo / "a.txt").write_text("one\n\ntwo\n")  # a blank line inside the patch
    (repo / "bin.dat").write_bytes(bytes(range(256)) * 4)
    (repo / "naïve name.txt").write_text("x\n")
    commit(repo, "gone.txt", "bye\n")
    base = sh(repo, "rev-parse", "HEAD")
    (repo / "gone.txt").unlink()
    sh(repo, "add", "-A")
    (repo / "a.txt").chmod(0o755)
    for against in (head, base):
        stat, files, patch = _work_diff(str(repo), against)
        alone = [git(repo, "diff", *args, against, strip=False) for args in (
            ("--stat",), ("--name-status", "--no-renames"), ("--binary",))]  # fmt: skip
        assert stat == alone[0]
        assert [f"{f.status}\t{f.path}" for f in files] == (alone[1] or "").splitlines()
        assert patch == alone[2]
        assert hashlib.sha256((patch or "").encode()).hexdigest() == hashlib.sha256(
            (alone[2] or "").encode()).hexdigest()  # fmt: skip
    assert _work_diff(str(repo), sh(repo, "rev-parse", "HEAD"))[1]  # staged deletion shows
    clean = repo.parent / "clean"
    sh(repo.parent, "clone", "-q", str(repo), str(clean))
    assert _work_diff(str(clean), "HEAD") == ("", [], "")


@pytest.mark.parametrize("pidfd", [True, False])
def test_a_process_that_closes_its_pipes_and_lingers_is_still_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pidfd: bool
) -> None:
    """run_captured waits for the exit on the process's pidfd, not in sleeps of a
    millisecond and more (issue 14); the wait stays bounded by the timeout, and without
    pidfds the ordinary wait does it."""
    from onstation.harness.evidence import run_captured

    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    env = git_environment()
    assert run_captured(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=20,
                        env=env) == (3, "out\n", "err\n")  # fmt: skip
    pidfile = tmp_path / "linger.pid"
    script = f"echo $$ > {pidfile}; exec >/dev/null 2>&1; exec sleep 60"
    with pytest.raises(subprocess.TimeoutExpired):
        run_captured(["sh", "-c", script], timeout=1, env=env)
    assert wait_dead(int(pidfile.read_text()))
