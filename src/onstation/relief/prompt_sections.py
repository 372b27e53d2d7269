"""The successor prompt's evidence sections taken from the capsule payload: the work since the
predecessor's base (commits, changed files), the tests run, the effects done, the plan
frontier, the decisions, the facts and what the agent stated with and without support.

Each section is a label and its quoted texts, for the evidence block of
:func:`onstation.relief.successor.successor_prompt`, which prefixes and redacts every line.
Each list is bounded and each item is one line, cut to a bounded length after its secrets
are redacted (a cut must not leave half a secret for the redaction to miss). An empty
section is left out. A payload part that is missing or malformed gives no section: a
capsule built by an older onstation still gives a prompt.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from typing import Any

from onstation.core.redact import redact

#: A prompt section: its label (the short name is the text before its first comma) and its
#: texts, each quoted as one or more evidence lines.
Section = tuple[str, list[str]]

MAX_ITEM = 240
MAX_FILES = 40
MAX_COMMITS = 30
MAX_TESTS = 30
MAX_EFFECTS_DONE = 20
MAX_FRONTIER = 20
MAX_DECISIONS = 15
MAX_STATEMENTS = 20
MAX_CLAIMS = 15
MAX_FACTS = 20
#: The transcript tail in a prompt: the last entries, each text cut (the capsule keeps 50
#: of up to 4,000 characters, too much to quote whole).
MAX_TAIL = 30
MAX_TAIL_TEXT = 1500

#: Labels (letters, spaces and commas only: a label line is told apart from quoted content).
WORK = "work since the base commit, with its commits and changed files"
TESTS = "tests run"
FRONTIER = "plan frontier"
DECISIONS = "decisions"
STATEMENTS = "agent statements, each supported by the artifact named, not verified facts"
CLAIMS = "unsupported claims, what the agent stated without any artifact supporting it"
FACTS = "facts from artifacts"
EFFECTS_DONE = "effects done, never repeat them"
TAIL = "transcript tail, one JSON entry per line"

_COMMIT_ID = re.compile(r"git-commit-(\d+)")
_UNTRACKED_ID = re.compile(r"untracked-(\d+)")
MAX_UNTRACKED = 20
#: Fact types another section shows already.
_SHOWN_ELSEWHERE = frozenset({"objective"})


def one_line(value: Any, limit: int = MAX_ITEM) -> str:
    """``value`` as one redacted line of at most ``limit`` characters."""
    text = " ".join(redact(str(value)).text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _dicts(payload: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = payload.get(key)
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


def _pick(
    items: list[dict[str, Any]], limit: int, first: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
    """At most ``limit`` of ``items`` in their order, those ``first`` holds for kept first."""
    if len(items) <= limit:
        return items
    chosen = {id(i) for i in [i for i in items if first(i)][:limit]}
    chosen |= {id(i) for i in [i for i in items if not first(i)][: limit - len(chosen)]}
    return [i for i in items if id(i) in chosen]


def _more(total: int, shown: int, noun: str) -> list[str]:
    return [f"… and {total - shown} more {noun}"] if total > shown else []


def _artifacts(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(a.get("id")): a for a in _dicts(payload, "artifacts")}


def _support(artifact: Any, artifacts: dict[str, dict[str, Any]]) -> str:
    if not artifact:
        return "no artifact supports it"
    ref = artifacts.get(str(artifact), {}).get("ref")
    return f"supported by {artifact}" + (f": {one_line(ref, 80)}" if ref else "")


def _numbered(payload: dict[str, Any], kind: str, pattern: re.Pattern[str]) -> list[Any]:
    """The artifacts of ``kind`` whose id is ``pattern`` (a number), in the number's order."""
    found = []
    for artifact in _dicts(payload, "artifacts"):
        match = pattern.fullmatch(str(artifact.get("id")))
        if artifact.get("kind") == kind and match:
            found.append((int(match.group(1)), artifact))
    return [artifact for _n, artifact in sorted(found, key=lambda pair: pair[0])]


def work_section(payload: dict[str, Any]) -> Section | None:
    """Base and head, the body's commits (``git-commit-N`` artifacts, newest first, and
    ``git-commits-more`` saying how many older ones the capsule left out), the changed files
    of the diff and the new files not yet added to git (``untracked-N`` artifacts)."""
    repo = payload.get("repository")
    repo = repo if isinstance(repo, dict) else {}
    texts: list[str] = []
    base, head = repo.get("base"), repo.get("head")
    if base or head:
        dirty = " (the work tree has uncommitted changes)" if repo.get("dirty") else ""
        texts.append(f"base {one_line(base or 'unknown')}, head {one_line(head or 'unknown')}"
                     + dirty)  # fmt: skip
    commits = _numbered(payload, "git", _COMMIT_ID)
    older = _artifacts(payload).get("git-commits-more", {}).get("ref")
    if commits:
        texts.append(f"commits ({len(commits)}):")
        texts += [f"- {one_line(a.get('ref'))}" for a in commits[:MAX_COMMITS]]
        texts += _more(len(commits), MAX_COMMITS, "commits (git log base..head)")
        texts += [f"… {one_line(older, 120)}"] if older else []
    elif base and head and base != head:
        texts.append("commits: not carried by the capsule (git log base..head lists them)")
    diff = repo.get("diff")
    files = diff.get("files") if isinstance(diff, dict) else None
    files = [f for f in files if isinstance(f, dict)] if isinstance(files, list) else []
    if files:
        texts.append(f"changed files ({len(files)}):")
        texts += [f"- {one_line(f.get('status'), 8)} {one_line(f.get('path'))}"
                  for f in files[:MAX_FILES]]  # fmt: skip
        texts += _more(len(files), MAX_FILES, "files (git diff --stat base)")
    untracked = _numbered(payload, "file", _UNTRACKED_ID)
    if untracked:
        texts.append(f"new files not yet added to git ({len(untracked)}):")
        texts += [f"- {one_line(str(a.get('ref')).removeprefix('untracked '))}"
                  for a in untracked[:MAX_UNTRACKED]]  # fmt: skip
        texts += _more(len(untracked), MAX_UNTRACKED, "files (git status)")
    return (WORK, texts) if texts else None


def tests_section(payload: dict[str, Any]) -> Section | None:
    """Each test and its status; past the bound, the ones not passed are kept first."""
    tests = _dicts(payload, "tests")
    shown = _pick(tests, MAX_TESTS, lambda t: t.get("status") != "passed")
    texts = [f"- {one_line(t.get('name'))} — {one_line(t.get('status'), 16)}" for t in shown]
    texts += _more(len(tests), len(shown), "tests")
    return (TESTS, texts) if texts else None


def effects_done_section(payload: dict[str, Any], skip: Collection[str] = ()) -> Section | None:
    """The last committed effects, but those in ``skip`` (listed as settled elsewhere)."""
    done = [e for e in _dicts(payload, "effects")
            if e.get("state") == "COMMITTED" and e.get("effectId") not in skip]  # fmt: skip
    shown = done[-MAX_EFFECTS_DONE:]
    texts = (
        [f"… and {len(done) - len(shown)} earlier effects done"] if len(done) > len(shown) else []
    )
    texts += [f"- {one_line(e.get('operation'), 80)} -> {one_line(e.get('destination'), 160)} "
              f"({one_line(e.get('effectId'), 130)})" for e in shown]  # fmt: skip
    return (EFFECTS_DONE, texts) if texts else None


def frontier_section(payload: dict[str, Any]) -> Section | None:
    """The plan frontier's items and states; past the bound, items not done are kept first."""
    items = _dicts(payload, "planFrontier")
    shown = _pick(items, MAX_FRONTIER, lambda i: i.get("state") != "done")
    texts = [f"- [{one_line(i.get('state'), 16)}] {one_line(i.get('text'))}" for i in shown]
    texts += _more(len(items), len(shown), "items")
    return (FRONTIER, texts) if texts else None


def decisions_section(payload: dict[str, Any]) -> Section | None:
    """Each decision, its rationale, and the artifact supporting it (or that none does)."""
    artifacts = _artifacts(payload)
    items = _dicts(payload, "decisions")
    texts = [f"- {one_line(d.get('decision'), 160)} — {one_line(d.get('rationale'), 160)} "
             f"({_support(d.get('artifact'), artifacts)})"
             for d in items[:MAX_DECISIONS]]  # fmt: skip
    texts += _more(len(items), MAX_DECISIONS, "decisions")
    return (DECISIONS, texts) if texts else None


def statements_section(payload: dict[str, Any]) -> Section | None:
    """The facts of trust ``agent-stated``: what the agent said, with what supports it. A
    decision the decisions section shows (with its support) is not repeated."""
    artifacts = _artifacts(payload)
    skip = {"agent.decision"} if _dicts(payload, "decisions") else set()
    items = [f for f in _dicts(payload, "facts")
             if f.get("trust") == "agent-stated" and f.get("type") not in skip]  # fmt: skip
    texts = [f"- the agent states: {one_line(f.get('statement'))} "
             f"({_support(f.get('artifact'), artifacts)})"
             for f in items[:MAX_STATEMENTS]]  # fmt: skip
    texts += _more(len(items), MAX_STATEMENTS, "statements")
    return (STATEMENTS, texts) if texts else None


def claims_section(payload: dict[str, Any]) -> Section | None:
    """The unsupported claims and who stated them."""
    items = _dicts(payload, "unsupportedClaims")
    texts = [f"- {one_line(c.get('claim'))} — stated by {one_line(c.get('source'), 120)}"
             for c in items[:MAX_CLAIMS]]  # fmt: skip
    texts += _more(len(items), MAX_CLAIMS, "claims")
    return (CLAIMS, texts) if texts else None


def facts_section(payload: dict[str, Any]) -> Section | None:
    """The facts artifacts establish (authoritative, observed) or an operator attests. Untrusted
    evidence is not listed here (the transcript tail is quoted as it is)."""
    prefix = {"authoritative": "", "observed": "observed: ",
              "operator-attested": "the operator attests: "}  # fmt: skip
    repo = payload.get("repository")
    shown = _SHOWN_ELSEWHERE | (
        {"repository.head"} if isinstance(repo, dict) and repo.get("head") else set()
    )  # the work section shows the head
    items = [f for f in _dicts(payload, "facts")
             if f.get("trust") in prefix and f.get("type") not in shown]  # fmt: skip
    texts = [f"- {prefix[str(f['trust'])]}{one_line(f.get('statement'))}"
             for f in items[:MAX_FACTS]]  # fmt: skip
    texts += _more(len(items), MAX_FACTS, "facts")
    return (FACTS, texts) if texts else None


def tail_section(payload: dict[str, Any]) -> Section | None:
    """The last :data:`MAX_TAIL` transcript entries, one JSON object per line, each text
    redacted then cut to :data:`MAX_TAIL_TEXT` characters."""
    import json

    transcript = payload.get("transcript")
    tail = transcript.get("tail") if isinstance(transcript, dict) else None
    if not isinstance(tail, list) or not tail:
        return None
    texts = []
    for entry in tail[-MAX_TAIL:]:
        quoted = entry
        if isinstance(entry, dict) and isinstance(entry.get("text"), str):
            text = redact(entry["text"]).text
            if len(text) > MAX_TAIL_TEXT:
                text = text[: MAX_TAIL_TEXT - 1] + "…"
            quoted = {**entry, "text": text}
        texts.append(json.dumps(quoted))
    label = TAIL + (", earlier entries left out" if len(tail) > MAX_TAIL else "")
    return (label, texts)


def capsule_sections(payload: dict[str, Any]) -> list[Section]:
    """The sections about the work (before the effects): work, tests, frontier, decisions,
    agent statements, unsupported claims, facts; the empty ones left out."""
    builders: Iterable[Callable[[dict[str, Any]], Section | None]] = (
        work_section, tests_section, frontier_section, decisions_section,
        statements_section, claims_section, facts_section,
    )  # fmt: skip
    return [s for s in (build(payload) for build in builders) if s is not None]


__all__ = [
    "Section",
    "capsule_sections",
    "claims_section",
    "decisions_section",
    "effects_done_section",
    "facts_section",
    "frontier_section",
    "one_line",
    "statements_section",
    "tail_section",
    "tests_section",
    "work_section",
]
