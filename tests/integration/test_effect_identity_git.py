"""The logical identity of pushes (and gh calls), resolved against real git repositories.

Every test builds a bare "remote" and a clone in tmp_path; nothing touches the network or
the user's git configuration (global and system config are switched off for the test and
for the classifier's own git queries, which inherit the environment).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from onstation.core.effects import fingerprint, normalize_destination, normalize_operation
from onstation.harness.effects import EffectCall, classify_all, classify_tool_call

READ_ONLY_GIT = {"rev-parse", "remote", "config", "symbolic-ref", "for-each-ref"}


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{key}_NAME", "Test")
        monkeypatch.setenv(f"GIT_{key}_EMAIL", "test@example.invalid")
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(key, raising=False)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout.strip()


def commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", name)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A clone with one pushed commit on main, tracking origin/main of a bare remote."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    git(work, "remote", "add", "origin", "../remote.git")
    commit(work, "one")
    git(work, "push", "-q", "-u", "origin", "main")
    return work


def push(command: str, cwd: Path | str) -> EffectCall:
    found = classify_tool_call("Bash", {"command": command}, str(cwd))
    assert found is not None, command
    assert found.operation == "git.push"
    return found


def identity(effect: EffectCall) -> tuple[str, str, Any]:
    return effect.operation, effect.destination, effect.arguments


def fp(effect: EffectCall) -> str:
    return fingerprint(
        node="n",
        operation=effect.operation,
        destination=effect.destination,
        arguments=effect.arguments,
        approval_slot=None,
    )


def test_plain_push_and_explicit_push_of_the_same_commit_are_one_effect(repo: Path) -> None:
    head = commit(repo, "two")
    remote_url = "file://" + str((repo.parent / "remote.git").resolve())
    spellings = [
        "git push",
        "git push origin",
        "git push origin main",
        "git push origin HEAD",
        "git push origin main:main",
        "git push origin refs/heads/main:refs/heads/main",
        f"git push {repo.parent / 'remote.git'} main",
        f"git push {remote_url} main",
        "git push -u origin main",
        "git push --set-upstream origin main",
        "GIT_TRACE=0 LANG=C git push origin main",
        "git -c color.ui=never push origin main",
    ]
    effects = [push(cmd, repo) for cmd in spellings]
    first = effects[0]
    assert first.arguments == {"ref": "refs/heads/main", "commit": head, "force": False}
    assert first.destination == normalize_destination(remote_url)
    assert first.operation == normalize_operation(first.operation)
    for cmd, effect in zip(spellings, effects, strict=True):
        assert identity(effect) == identity(first), cmd
        assert fp(effect) == fp(first), cmd


def test_a_later_push_of_new_commits_is_a_new_effect(repo: Path) -> None:
    before = push("git push", repo)
    new_head = commit(repo, "three")
    after = push("git push", repo)
    assert after.arguments["commit"] == new_head
    assert before.arguments["commit"] != new_head
    assert fp(before) != fp(after)
    assert before.destination == after.destination


def test_directory_from_git_dash_c_and_cd_is_followed(repo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    reference = push("git push origin main", repo)
    for cmd in (
        f"git -C {repo} push",
        f"git -C {repo.parent} -C work push origin main",
        f"cd {repo} && git push",
        f"cd {repo}; git status && git push origin main",
        f"(cd {repo} && git push)",
        f"cd '{repo}' && git push origin HEAD",
        "cd ../work && git push",
        f"bash -c 'cd {repo} && git push'",
    ):
        effect = push(cmd, elsewhere)
        assert identity(effect) == identity(reference), cmd
    assert push(f"cd {repo} && git push", elsewhere).evidence["cwd"] == str(repo)


def test_a_cd_inside_a_subshell_does_not_leak(repo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    effect = push(f"(cd {repo}) && git push origin main", elsewhere)
    assert effect.arguments["commit"] is None
    assert effect.evidence["cwd"] == str(elsewhere)


def test_cd_to_an_unknowable_directory_resolves_nothing(repo: Path) -> None:
    effect = push('cd "$SOME_UNSET_VARIABLE_XYZ/sub" && git push origin main', repo)
    assert effect.arguments["commit"] is None
    assert effect.evidence["cwd"] is None


def test_cd_to_the_toplevel_substitution_is_resolved(repo: Path) -> None:
    sub = repo / "sub"
    sub.mkdir()
    effect = push('cd "$(git rev-parse --show-toplevel)" && git push', sub)
    assert identity(effect) == identity(push("git push", repo))


@pytest.mark.parametrize(
    "cmd",
    [
        "git push -f",
        "git push --force",
        "git push --force-with-lease",
        "git push --force-with-lease=main",
        "git push -uf origin main",
        "git push origin +main",
        "git push origin +HEAD:refs/heads/main",
    ],
)
def test_force_is_part_of_the_identity(repo: Path, cmd: str) -> None:
    forced = push(cmd, repo)
    plain = push("git push origin main", repo)
    assert forced.arguments == {**plain.arguments, "force": True}
    assert fp(forced) != fp(plain)
    assert identity(forced) == identity(push("git push --force origin main", repo))


def test_tags_are_pushed_as_fully_qualified_tag_refs(repo: Path) -> None:
    git(repo, "tag", "v1")
    git(repo, "tag", "-a", "v2", "-m", "annotated")
    v1 = push("git push origin v1", repo)
    assert v1.arguments == {
        "ref": "refs/tags/v1",
        "commit": git(repo, "rev-parse", "HEAD"),
        "force": False,
    }
    v2 = push("git push origin v2", repo)
    # An annotated tag is pushed as its tag object: retagging the same commit is another effect.
    assert v2.arguments["commit"] == git(repo, "rev-parse", "refs/tags/v2")
    assert v2.arguments["commit"] != git(repo, "rev-parse", "HEAD")
    both = push("git push --tags", repo)
    assert both.arguments == {"refs": sorted([v1.arguments, v2.arguments], key=lambda a: a["ref"])}
    assert identity(push("git push origin refs/tags/v1", repo)) == identity(v1)
    assert identity(push("git push origin v1:v1", repo)) == identity(v1)


def test_push_tags_with_a_single_tag_equals_pushing_that_tag(repo: Path) -> None:
    git(repo, "tag", "v1")
    assert identity(push("git push --tags", repo)) == identity(push("git push origin v1", repo))


def test_several_refspecs_give_a_sorted_list_in_any_order(repo: Path) -> None:
    git(repo, "branch", "feature")
    feature_head = commit(repo, "main-only")
    a = push("git push origin main feature", repo)
    b = push("git push origin feature main", repo)
    assert identity(a) == identity(b)
    assert a.arguments == {
        "refs": [
            {
                "ref": "refs/heads/feature",
                "commit": git(repo, "rev-parse", "feature"),
                "force": False,
            },
            {"ref": "refs/heads/main", "commit": feature_head, "force": False},
        ]
    }


def test_head_to_another_branch_and_detached_head(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    x = push("git push origin HEAD:refs/heads/x", repo)
    assert x.arguments == {"ref": "refs/heads/x", "commit": head, "force": False}
    assert identity(push("git push origin HEAD:x", repo)) == identity(x)
    git(repo, "checkout", "-q", "--detach")
    assert identity(push("git push origin HEAD:refs/heads/x", repo)) == identity(x)
    detached = push("git push", repo)
    assert detached.arguments["commit"] is None
    assert any("current branch" in n for n in detached.evidence["notes"])


def test_unknown_ref_is_still_an_effect_with_a_null_commit(repo: Path) -> None:
    effect = push("git push origin no-such-branch", repo)
    assert effect.arguments["commit"] is None
    assert any("no-such-branch" in n for n in effect.evidence["notes"])
    assert effect.destination == push("git push", repo).destination


def test_not_a_repository_is_an_effect_with_nothing_resolved(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    effect = push("git push origin main", plain)
    assert effect.arguments == {"ref": "main", "commit": None, "force": False}
    assert any("not a git repository" in n for n in effect.evidence["notes"])
    assert effect.destination.startswith("git-remote:")
    missing = push("git -C does-not-exist push", plain)
    assert missing.arguments["commit"] is None


def test_deleting_a_branch_is_its_own_effect(repo: Path) -> None:
    git(repo, "branch", "feature")
    a = push("git push origin --delete feature", repo)
    b = push("git push origin :feature", repo)
    c = push("git push -d origin refs/heads/feature", repo)
    assert a.arguments == {
        "ref": "refs/heads/feature",
        "commit": None,
        "force": False,
        "delete": True,
    }
    assert identity(a) == identity(b) == identity(c)


def test_push_default_current_and_no_upstream(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "topic")
    head = commit(repo, "topic")
    simple = push("git push", repo)  # simple, no upstream: git may refuse, identity is the same
    assert simple.arguments == {"ref": "refs/heads/topic", "commit": head, "force": False}
    assert any("upstream" in n for n in simple.evidence["notes"])
    git(repo, "config", "push.default", "current")
    current = push("git push", repo)
    assert identity(current) == identity(push("git push origin topic", repo))
    assert identity(current) == identity(push("git -c push.default=current push", repo))


def test_upstream_with_another_name_is_followed(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "local-name")
    git(repo, "config", "push.default", "upstream")
    git(repo, "config", "branch.local-name.remote", "origin")
    git(repo, "config", "branch.local-name.merge", "refs/heads/remote-name")
    effect = push("git push", repo)
    assert effect.arguments["ref"] == "refs/heads/remote-name"
    assert identity(effect) == identity(push("git push origin local-name:remote-name", repo))


def test_push_remote_configuration_chooses_the_destination(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(other))
    git(repo, "remote", "add", "fork", str(other))
    to_origin = push("git push", repo)
    to_fork = push("git push fork main", repo)
    assert to_fork.destination != to_origin.destination
    assert fp(to_fork) != fp(to_origin)
    git(repo, "config", "remote.pushDefault", "fork")
    assert identity(push("git push", repo)) == identity(to_fork)


def test_scp_and_https_remotes_normalize_to_one_destination(repo: Path) -> None:
    git(repo, "remote", "set-url", "origin", "git@github.com:Owner/Repo.git")
    scp = push("git push", repo)
    assert scp.destination == "ssh://git@github.com/Owner/Repo"
    assert (
        scp.destination == push("git push ssh://git@github.com/Owner/Repo main", repo).destination
    )


def test_dry_run_is_not_an_effect_and_compounds_list_all(repo: Path) -> None:
    assert classify_tool_call("Bash", {"command": "git push --dry-run"}, str(repo)) is None
    assert classify_tool_call("Bash", {"command": "git push -n origin main"}, str(repo)) is None
    git(repo, "tag", "v1")
    cmd = "git push origin main && git push origin v1 | cat"
    found = classify_all("Bash", {"command": cmd}, str(repo))
    assert [e.arguments["ref"] for e in found] == ["refs/heads/main", "refs/tags/v1"]
    first = classify_tool_call("Bash", {"command": cmd}, str(repo))
    assert first is not None
    assert [e["arguments"]["ref"] for e in first.evidence["all"]] == [
        "refs/heads/main",
        "refs/tags/v1",
    ]


def test_git_alias_for_push_is_recognized(repo: Path) -> None:
    git(repo, "config", "alias.pub", "push origin")
    assert identity(push("git pub main", repo)) == identity(push("git push origin main", repo))


def test_evidence_names_only_read_only_git_commands(repo: Path) -> None:
    effect = push("git push --tags origin main", repo)
    calls = effect.evidence["git"]
    assert calls
    for call in calls:
        argv = call["argv"]
        sub = next(a for a in argv[1:] if not a.startswith("-") and "=" not in a)
        assert sub in READ_ONLY_GIT
        if sub == "remote":
            assert "get-url" in argv


def test_codex_argv_and_workdir(repo: Path, tmp_path: Path) -> None:
    effect = classify_tool_call(
        "shell",
        {"command": ["bash", "-lc", "git push origin main"], "workdir": str(repo)},
        str(tmp_path),
    )
    assert effect is not None
    assert identity(effect) == identity(push("git push", repo))


def test_gh_pr_create_resolves_repo_and_head_from_git(repo: Path) -> None:
    git(repo, "remote", "set-url", "origin", "https://github.com/Owner/Repo.git")
    git(repo, "checkout", "-q", "-b", "feature")
    effect = classify_tool_call("Bash", {"command": "gh pr create -t 'Add x' -B main"}, str(repo))
    assert effect is not None
    assert effect.operation == "gh.pr.create"
    assert effect.destination == "github.com/owner/repo"
    assert effect.arguments == {"head": "feature", "base": "main", "title": "Add x"}
    explicit = classify_tool_call(
        "Bash",
        {"command": "gh pr create --repo owner/repo --head feature --base main --title 'Add x'"},
        str(repo),
    )
    assert explicit is not None
    assert identity(explicit) == identity(effect)


def test_gh_pr_merge_without_number_uses_the_current_branch(repo: Path) -> None:
    git(repo, "remote", "set-url", "origin", "git@github.com:owner/repo.git")
    git(repo, "checkout", "-q", "-b", "feature")
    implicit = classify_tool_call("Bash", {"command": "gh pr merge --squash"}, str(repo))
    named = classify_tool_call("Bash", {"command": "gh pr merge feature -s"}, str(repo))
    assert implicit is not None and named is not None
    assert implicit.arguments == {"pr": "feature", "method": "squash"}
    assert identity(implicit) == identity(named)


def test_gh_repo_set_default_is_honoured(repo: Path) -> None:
    git(repo, "remote", "set-url", "origin", "git@github.com:me/fork.git")
    git(repo, "remote", "add", "upstream", "git@github.com:org/project.git")
    git(repo, "config", "remote.upstream.gh-resolved", "base")
    effect = classify_tool_call("Bash", {"command": "gh release create v1"}, str(repo))
    assert effect is not None
    assert effect.destination == "github.com/org/project"
    assert effect.arguments == {"tag": "v1"}


def test_gh_with_a_local_remote_does_not_invent_a_github_repo(repo: Path) -> None:
    effect = classify_tool_call("Bash", {"command": "gh pr merge 3"}, str(repo))
    assert effect is not None
    assert effect.destination.startswith("github:unresolved:")
    assert any("unresolved" in n for n in effect.evidence["notes"])


def test_all_branches_and_glob_refspecs_expand_to_the_same_refs(repo: Path) -> None:
    git(repo, "branch", "feature")
    every = push("git push --all", repo)
    glob = push("git push origin 'refs/heads/*:refs/heads/*'", repo)
    named = push("git push origin main feature", repo)
    assert identity(every) == identity(glob) == identity(named)


def test_env_chdir_pushd_and_shell_alias(repo: Path, tmp_path: Path) -> None:
    reference = push("git push origin main", repo)
    assert identity(push(f"env -C {repo} git push", tmp_path)) == identity(reference)
    assert identity(push(f"pushd {repo} && git push", tmp_path)) == identity(reference)
    git(repo, "config", "alias.shipit", "!git push origin")
    assert identity(push("git shipit main", repo)) == identity(reference)
