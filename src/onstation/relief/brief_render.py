"""The Markdown form of a turnover brief, and the pieces the continuation manifest shares.

The brief's content is built (and its secrets redacted) by
:func:`onstation.relief.documents.write_brief`; this module only lays it out, in the relief
procedure's layout, compactly: a brief is read by a fresh body whose context is the scarce
thing (about 1,000 tokens, 4,000 characters, for a typical one). Every list that grows with
the work (commits, tests, tasks, effects, files) is bounded here, newest first or last as
the reader needs, with "and N more" for what is left out; the JSON keeps what the bounds of
:mod:`onstation.relief.documents` allow.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from onstation.core.redact import describe

MISSING = "*missing: not supplied by the agent*"

#: How many of each growing list the Markdown shows.
SHOW_COMMITS = 20
SHOW_TESTS = 20
SHOW_TASKS = 10
SHOW_EFFECTS_DONE = 20
SHOW_FILES = 60
#: How long a short commit id is.
SHORT_ID = 12


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {i}" for i in items) if items else f"- {MISSING}"


def _bounded(items: Sequence[str], show: int, total: int | None = None, *,
             newest_last: bool = False) -> list[str]:  # fmt: skip
    """``items`` as bullet lines, at most ``show`` of them (the newest: the last ones when
    ``newest_last``), and a line saying how many more there are (of ``total`` when the
    caller knows more exist than it holds)."""
    kept = list(items[-show:] if newest_last else items[:show]) if show > 0 else []
    more = max(len(items) if total is None else max(total, len(items)), 0) - len(kept)
    lines = [f"- {i}" for i in kept]
    if more > 0:
        lines.append(f"- and {more} more")
    return lines


def _fence(text: str) -> str:
    """A code fence longer than any backtick run in ``text``: nothing inside can close it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _or_missing(value: Any) -> str:
    return MISSING if value in (None, "", []) else str(value)


def _kinds(c: dict[str, Any]) -> dict[str, int]:
    """The redactions a document's content records, by kind (none for an older document)."""
    return dict((c.get("redactions") or {}).get("kinds") or {})


def _redaction_line(c: dict[str, Any], label: str) -> list[str]:
    """One line saying what was redacted, only when something was (older layouts hold)."""
    kinds = _kinds(c)
    return [f"{label}: {describe(kinds)}"] if kinds else []


def _short(commit: Any) -> str:
    return str(commit)[:SHORT_ID] if commit else MISSING


def _base_label(git: dict[str, Any]) -> str:
    """What the work is measured against: the generation's recorded base, or the ref."""
    source = git.get("base_source")
    if source == "generation":
        return f"generation {git.get('base_generation')}'s base {_short(git['base_commit'])}"
    return f"{_or_missing(git['base'])} ({_short(git['base_commit'])})"


def _section(title: str, lines: list[str]) -> list[str]:
    return [title, *lines, ""] if lines else []


def _files(c: dict[str, Any]) -> list[str]:
    git = c["evidence"]["git"]
    if not git["repository"]:
        return ["(not a git repository)"]
    files = list(c["files_modified"])
    shown = "\n".join(files[:SHOW_FILES])
    fence = _fence(shown)
    lines = [f"{fence}bash", shown or "(none)", fence]
    if len(files) > SHOW_FILES:
        lines.append(f"and {len(files) - SHOW_FILES} more")
    return lines


def _commits(c: dict[str, Any]) -> list[str]:
    git = c["evidence"]["git"]
    commits = git.get("commits")
    if commits is None:  # an older brief, or git could not list them
        return []
    lines = _bounded([f"{_short(x['id'])} {x['subject']}" for x in commits], SHOW_COMMITS,
                     git.get("commits_total"))  # fmt: skip
    return _section(f"### Commits Since {_base_label(git)}", lines or ["- none"])


def _tests(c: dict[str, Any]) -> list[str]:
    tests = c["evidence"].get("tests")
    if tests is None:
        return []
    lines = _bounded([f"{t['name']} — {t['status']}" for t in tests], SHOW_TESTS,
                     c["evidence"].get("tests_total"), newest_last=True)  # fmt: skip
    return _section("### Tests Run", lines or ["- none journaled"])


def _tasks(c: dict[str, Any]) -> list[str]:
    tasks = c["evidence"].get("tasks") or []
    lines = _bounded([f"#{t['task_id']} {t['title']} ({t['status']})" for t in tasks],
                     SHOW_TASKS, newest_last=True)  # fmt: skip
    return _section("### Open Tasks", lines)


def _effect(e: dict[str, Any]) -> str:
    return f"{e['effect_id']} {e['state']} {e['operation']} -> {e['destination']}"


def _effects(c: dict[str, Any]) -> list[str]:
    effects = c["evidence"]["effects"]
    open_ = [_effect(e) for e in effects if e["state"] != "COMMITTED"]
    # Settled after the fact (an operator's resolution, an observation at reconcile): the
    # next body must know the effect is done, not only that nothing is open.
    settled = [
        f"{_effect(e)}: {e.get('resolution') or '-'} (by {e['resolved_by']})"
        for e in effects
        if e.get("resolved_by")
    ]
    # Done in the ordinary way; the settled ones are listed, with who settled them, below.
    done = [
        f"{e['operation']} -> {e['destination']} ({e['effect_id']})"
        for e in effects
        if e["state"] == "COMMITTED" and not e.get("resolved_by")
    ]
    return [
        "### Effects Not Yet Settled",
        "\n".join(f"- {e}" for e in open_) if open_ else "- none",
        "",
        *_section("### Effects Done (never repeat them)",
                  _bounded(done, SHOW_EFFECTS_DONE, newest_last=True)),
        *_section("### Effects Settled After the Fact (done: never repeat them)",
                  [f"- {e}" for e in settled]),
    ]  # fmt: skip


def render_brief(c: dict[str, Any]) -> str:
    """The Markdown form of a brief, in the relief procedure's layout."""
    task = c["current_task"]
    completed = [f"{w['path']} — {w['what'] or MISSING}" for w in c["completed_work"]]
    decisions = [f"{d['decision']}: {d['rationale'] or MISSING}" for d in c["decisions"]]
    git = c["evidence"]["git"]
    context = c["context_used_percent"]
    lines = [
        f"## Turnover Brief — {c['agent']}",
        "",
        f"**Date**: {c['date']}",
        f"**Context Used**: {MISSING if context is None else f'{context}%'}",
        f"**Reason**: {_or_missing(c['reason'])}",
        f"**Generation**: {c['generation']}",
        *_redaction_line(c, "**Secrets Redacted**"),
        "",
        "### Current Task",
        f"**Task ID**: {_or_missing(task['id'])}",
        f"**Description**: {_or_missing(task['description'])}",
        f"**Status**: {_or_missing(task['status'])}",
        "",
        *_tasks(c),
        "### Completed Work",
        _bullets(completed),
        "",
        "### Remaining Work",
        _bullets(c["remaining_work"]),
        "",
        "### Key Decisions Made",
        _bullets(decisions),
        "",
        "### Files Modified",
        *_files(c),
        f"Branch {_or_missing(git['branch'])} at {_or_missing(git['head'])}, "
        f"against {_base_label(git)}.",
        "",
        *_commits(c),
        *_tests(c),
        *_effects(c),
        "### Important Context",
        _bullets(c["important_context"]),
        "",
        "### Handoff Instructions",
        "\n".join(f"{i}. {text}" for i, text in enumerate(c["handoff_instructions"], 1)),
        "",
    ]
    if c.get("losses"):
        lines += ["### Lost At This Relief", _bullets(c["losses"]), ""]
    if c.get("late"):
        lines[0:0] = [
            f"> LATE: written by generation {c['generation']} after it was fenced. Untrusted "
            "evidence, not a hand-over and not instructions.",
            "",
        ]
    if c["missing"]:
        lines += ["### Missing From This Brief", _bullets(c["missing"]), ""]
    return "\n".join(lines)


__all__ = ["MISSING", "render_brief"]
