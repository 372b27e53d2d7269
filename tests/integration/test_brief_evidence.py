"""The turnover brief from evidence alone (issue 13): the body's commits and files since its
generation's base, the tests it ran, the task in progress, the open tasks and the effects
done, in a compact Markdown; with real git, a real ledger and a bound workspace.

An emergency brief (the agent silent) is exactly this: ``write_brief`` with nothing supplied.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from onstation.harness.evidence import commit_of, commits_since
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.ledger.relief_records import ReliefLedger
from onstation.relief.brief_render import SHOW_COMMITS, SHOW_EFFECTS_DONE
from onstation.relief.documents import _BRIEF_KEYS, Supplied, write_brief

NODE = "exec-1"
GIT = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "T",
       "GIT_COMMITTER_EMAIL": "t@e"}  # fmt: skip
TOKEN = "ghp_" + "C0mm1tSubj3ctT0ken" * 2
SUBJECTS = [
    "Add the login handler",
    "Add cookie() for the session id",
    f"Configure the deploy bot (token {TOKEN})",
    "Test the session cookie flags",
    "Document the login flow",
    "Tidy the session store",
]


def sh(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT})  # fmt: skip
    return done.stdout.strip()


def commit(repo: Path, path: str, subject: str) -> str:
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"{subject}\n")
    sh(repo, "add", path)
    sh(repo, "commit", "-q", "-m", subject)
    return sh(repo, "rev-parse", "HEAD")


def project(tmp_path: Path) -> tuple[Path, str]:
    """A workspace with one commit pushed to a bare origin (its upstream); (path, that id)."""
    origin, repo = tmp_path / "origin.git", tmp_path / "app"
    sh(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    sh(tmp_path, "init", "-q", "-b", "main", str(repo))
    base = commit(repo, "README.md", "init")
    sh(repo, "remote", "add", "origin", str(origin))
    sh(repo, "push", "-q", "-u", "origin", "main")
    return repo, base


def ledger_for(tmp_path: Path, repo: Path) -> Ledger:
    ledger = Ledger.open(str(tmp_path / "ledger.db"))
    ledger.register_node(NODE)
    ledger.open_episode(NODE, "ship the login page")
    ledger.acquire_lease(NODE)  # generation 1
    HarnessLedger(ledger).bind_workspace(str(repo), NODE, harness="claude-code", by="t")
    return ledger


def journal(ledger: Ledger, command: str, outcome: str, exit_code: int | None) -> None:
    HarnessLedger(ledger).record_tool_outcome(
        NODE, generation=1, session_id="s-1", tool_use_id=None, tool="Bash",
        call_summary=command, outcome=outcome, exit_code=exit_code,
    )  # fmt: skip


def committed_effect(ledger: Ledger, operation: str, destination: str, ref: str) -> str:
    effect, _ = ledger.intend_effect(NODE, generation=1, operation=operation,
                                     destination=destination, arguments={"ref": ref})  # fmt: skip
    ledger.dispatch_effect(effect.effect_id, generation=1)
    ledger.observe_effect(effect.effect_id, generation=1, result={"ok": True})
    ledger.commit_effect(effect.effect_id, generation=1)
    return effect.effect_id


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    """A typical body's work: 6 commits since its generation's base (3 of them pushed, one
    with a token in its subject), a file changed and one untracked, 4 tasks, 2 tests run (one
    of them twice), 3 effects done and 1 open."""
    repo, base = project(tmp_path)
    ledger = ledger_for(tmp_path, repo)
    HarnessLedger(ledger).record_base(NODE, 1, base, source="session-start")
    paths = ["src/app/login.py", "src/app/cookie.py", "deploy/bot.yml", "tests/test_cookie.py",
             "docs/login.md", "src/app/session_store.py"]  # fmt: skip
    shas = [commit(repo, p, s) for p, s in zip(paths, SUBJECTS, strict=True)]
    sh(repo, "push", "-q", "origin", f"{shas[2]}:refs/heads/main")  # the first three pushed
    (repo / "README.md").write_text("app, changed\n")
    (repo / "notes.txt").write_text("untracked\n")
    tasks = ReliefLedger(ledger)
    ids = [
        tasks.create_task(title, owner=NODE, status=status, by="t").task_id
        for title, status in (
            ("write the login handler", "completed"),
            ("set the session cookie on login", "in_progress"),
            ("document the cookie settings in docs/login.md", "pending"),
            ("rotate the deploy token", "blocked"),
        )
    ]
    journal(ledger, "pytest tests/test_login.py", "failed", 1)
    journal(ledger, "ls src", "succeeded", 0)
    journal(ledger, "pytest tests/test_cookie.py", "failed", 1)
    journal(ledger, "pytest tests/test_login.py", "succeeded", 0)
    done = [
        committed_effect(ledger, "git.push", "origin", "main"),
        committed_effect(ledger, "github.pr.create", "example/app", "feature"),
        committed_effect(ledger, "git.push", "origin", "feature"),
    ]
    pending, _ = ledger.intend_effect(NODE, generation=1, operation="git.push",
                                      destination="mirror", arguments={"ref": "main"})  # fmt: skip
    return {"repo": repo, "ledger": ledger, "base": base, "shas": shas, "paths": paths,
            "tasks": ids, "done": done, "pending": pending.effect_id}  # fmt: skip


def emergency(ledger: Ledger) -> tuple[str, dict[str, Any]]:
    path, content = write_brief(
        ledger, NODE, Supplied({"reason": "emergency brief built from evidence alone"}),
        notify_spawner=False,
    )  # fmt: skip
    assert path.read_text() == content["markdown"]
    return content["markdown"], content


def section(markdown: str, title: str) -> list[str]:
    """The lines of the Markdown section ``title`` (up to the blank line that ends it)."""
    rest = markdown.split(f"\n{title}\n", 1)[1]
    return rest.split("\n\n", 1)[0].splitlines()


def test_the_commits_since_the_generations_base_newest_first(world: dict[str, Any]) -> None:
    markdown, content = emergency(world["ledger"])
    git = content["evidence"]["git"]
    assert (git["base_source"], git["base_generation"]) == ("generation", 1)
    assert git["base_commit"] == world["base"]
    subjects = [c["subject"] for c in git["commits"]]
    assert subjects[0] == SUBJECTS[-1] and subjects[-1] == SUBJECTS[0]  # newest first
    assert [c["id"] for c in git["commits"]] == [s[:12] for s in reversed(world["shas"])]
    assert git["commits_total"] == 6
    lines = section(markdown, f"### Commits Since generation 1's base {world['base'][:12]}")
    assert lines[0] == f"- {world['shas'][-1][:12]} {SUBJECTS[-1]}"
    assert len(lines) == 6 and f"- {world['shas'][0][:12]} {SUBJECTS[0]}" in lines


def test_files_pushed_since_the_base_still_count_and_untracked_ones_too(
    world: dict[str, Any],
) -> None:
    _markdown, content = emergency(world["ledger"])
    # Against the upstream, the three pushed commits' files would be gone.
    assert content["files_modified"] == sorted([*world["paths"], "README.md", "notes.txt"])


def test_the_tests_run_last_run_per_name_wins(world: dict[str, Any]) -> None:
    markdown, content = emergency(world["ledger"])
    assert content["evidence"]["tests"] == [
        {"name": "pytest tests/test_cookie.py", "status": "failed"},
        {"name": "pytest tests/test_login.py", "status": "passed"},
    ]
    assert section(markdown, "### Tests Run") == [
        "- pytest tests/test_cookie.py — failed",
        "- pytest tests/test_login.py — passed",
    ]


def test_the_current_task_is_the_one_in_progress_and_the_open_ones_are_listed(
    world: dict[str, Any],
) -> None:
    markdown, content = emergency(world["ledger"])
    t1, t2, t3, t4 = world["tasks"]
    assert content["current_task"] == {
        "id": str(t2), "description": "set the session cookie on login", "status": "in_progress",
    }  # fmt: skip
    assert section(markdown, "### Open Tasks") == [
        f"- #{t2} set the session cookie on login (in_progress)",
        f"- #{t3} document the cookie settings in docs/login.md (pending)",
        f"- #{t4} rotate the deploy token (blocked)",
    ]
    assert f"#{t1} " not in markdown


def test_without_a_task_in_progress_the_newest_open_one_is_current(tmp_path: Path) -> None:
    repo, _base = project(tmp_path)
    ledger = ledger_for(tmp_path, repo)
    tasks = ReliefLedger(ledger)
    tasks.create_task("older", owner=NODE, status="pending", by="t")
    newest = tasks.create_task("newest", owner=NODE, status="blocked", by="t")
    _markdown, content = emergency(ledger)
    assert content["current_task"]["id"] == str(newest.task_id)


def test_the_effects_done_are_listed_and_the_open_one_is_not_among_them(
    world: dict[str, Any],
) -> None:
    markdown, _content = emergency(world["ledger"])
    first, second, third = world["done"]
    assert section(markdown, "### Effects Done (never repeat them)") == [
        f"- git.push -> origin ({first})",
        f"- github.pr.create -> example/app ({second})",
        f"- git.push -> origin ({third})",
    ]
    assert section(markdown, "### Effects Not Yet Settled") == [
        f"- {world['pending']} INTENDED git.push -> mirror"
    ]


def test_a_typical_brief_stays_compact(world: dict[str, Any]) -> None:
    markdown, _content = emergency(world["ledger"])
    assert len(markdown) <= 4000, len(markdown)


def test_a_token_in_a_commit_subject_reaches_no_form_of_the_brief(world: dict[str, Any]) -> None:
    markdown, content = emergency(world["ledger"])
    kept = HarnessLedger(world["ledger"]).latest_document(NODE, "brief")
    assert kept is not None
    for text in (markdown, json.dumps(content), json.dumps(kept.content)):
        assert TOKEN not in text and "C0mm1tSubj3ct" not in text
    subject = next(c["subject"] for c in content["evidence"]["git"]["commits"]
                   if c["id"] == world["shas"][2][:12])  # fmt: skip
    assert subject == "Configure the deploy bot (token [redacted: github-token])"
    assert content["redactions"]["kinds"].get("github-token") == 1


def test_a_base_rewritten_away_falls_back_to_the_upstream(tmp_path: Path) -> None:
    repo, _base = project(tmp_path)
    ledger = ledger_for(tmp_path, repo)
    HarnessLedger(ledger).record_base(NODE, 1, "ab" * 20, source="session-start")  # not here
    pushed = commit(repo, "pushed.py", "pushed already")
    sh(repo, "push", "-q", "origin", "main")
    local = commit(repo, "local.py", "not pushed yet")
    markdown, content = emergency(ledger)
    git = content["evidence"]["git"]
    assert (git["base_source"], git["base"], git["base_commit"]) == (
        "default", "origin/main", pushed,
    )  # fmt: skip
    assert [c["id"] for c in git["commits"]] == [local[:12]]
    assert content["files_modified"] == ["local.py"]
    assert f"### Commits Since origin/main ({pushed[:12]})" in markdown


def test_no_recorded_base_and_nothing_new_lists_no_commit(tmp_path: Path) -> None:
    repo, base = project(tmp_path)
    markdown, content = emergency(ledger_for(tmp_path, repo))
    git = content["evidence"]["git"]
    assert (git["base_source"], git["base_commit"], git["commits"]) == ("default", base, [])
    assert section(markdown, f"### Commits Since origin/main ({base[:12]})") == ["- none"]
    assert section(markdown, "### Tests Run") == ["- none journaled"]
    assert "### Effects Done" not in markdown and "### Open Tasks" not in markdown


def test_an_explicit_base_is_the_callers_choice(world: dict[str, Any]) -> None:
    _path, content = write_brief(world["ledger"], NODE, Supplied.load(None, _BRIEF_KEYS),
                                 base=world["shas"][3], notify_spawner=False)  # fmt: skip
    git = content["evidence"]["git"]
    assert git["base_source"] == "argument" and git["base_generation"] is None
    assert [c["subject"] for c in git["commits"]] == [SUBJECTS[5], SUBJECTS[4]]


def test_the_lists_are_bounded_and_say_how_many_more(tmp_path: Path) -> None:
    repo, base = project(tmp_path)
    ledger = ledger_for(tmp_path, repo)
    HarnessLedger(ledger).record_base(NODE, 1, base, source="session-start")
    for i in range(35):
        commit(repo, f"f{i}.py", f"change {i}")
    done = [committed_effect(ledger, "git.push", "origin", f"b{i}") for i in range(25)]
    markdown, content = emergency(ledger)
    git = content["evidence"]["git"]
    assert len(git["commits"]) == 30 and git["commits_total"] == 35
    assert git["commits"][0]["subject"] == "change 34"
    commits = section(markdown, f"### Commits Since generation 1's base {base[:12]}")
    assert len(commits) == SHOW_COMMITS + 1 and commits[-1] == f"- and {35 - SHOW_COMMITS} more"
    effects = section(markdown, "### Effects Done (never repeat them)")
    assert effects[0] == f"- git.push -> origin ({done[25 - SHOW_EFFECTS_DONE]})"  # the newest
    assert effects[-1] == f"- and {25 - SHOW_EFFECTS_DONE} more"


def test_commits_since_reads_git_and_refuses_what_is_no_commit(tmp_path: Path) -> None:
    repo, base = project(tmp_path)
    first = commit(repo, "a.py", "first\twith a tab")
    second = commit(repo, "b.py", "x" * 300)
    log = commits_since(repo, base, limit=1)
    assert log is not None and log.base == base and log.total == 2
    (only,) = log.commits
    assert only.commit == second and len(only.subject) == 160 and only.subject.endswith("…")
    log = commits_since(repo, base)
    assert log is not None and [c.subject for c in log.commits][1] == "first with a tab"
    assert log.commits[1].commit == first
    tree = sh(repo, "rev-parse", "HEAD^{tree}")
    for bad in (tree, "ab" * 20, "--all", "", "no-such-ref"):
        assert commit_of(repo, bad) is None
        assert commits_since(repo, bad) is None
    assert commit_of(repo, "HEAD") == second


def test_a_brief_does_not_list_the_briefs_and_reports_before_it(tmp_path: Path) -> None:
    """onstation's own documents are not the body's work (issue 14): a second brief in a
    clean workspace does not call it dirty for the first brief, a report or a successor's
    log; a file of the user's under .bridge still counts."""
    from onstation.harness.files import write_inside

    repo, _ = project(tmp_path)
    ledger = ledger_for(tmp_path, repo)
    emergency(ledger)
    assert (repo / ".bridge" / "turnovers").is_dir()
    write_inside(repo, [".bridge", "reports", f"{NODE}-relief-1.md"], "a report")
    write_inside(repo, [".bridge", "bodies", f"{NODE}-g2.log"], "a successor's log")
    _markdown, content = emergency(ledger)
    assert content["files_modified"] == []
    assert content["evidence"]["git"]["dirty"] is False
    write_inside(repo, [".bridge", "plan.md"], "the user's own")
    _markdown, content = emergency(ledger)
    assert content["files_modified"] == [".bridge/plan.md"]
