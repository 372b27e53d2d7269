"""Turnover briefs and continuation manifests, built from evidence.

A brief (the relief procedure's hand-over) and a manifest (a coordinator's respawn
hand-over) are filled from artifacts: git (branch, head, files changed against the base),
the ledger (the episode's objective, effects, recorded decisions and notes, the respawn
count) and the telemetry (context used, tier). A brief's base is the commit the writing
body's generation started from (so work already pushed still counts), and it also carries
the commits since that base, the tests the generation ran (its hook journal), its open
tasks (the one in progress is the current task) and the effects done. What only the agent
can say (what it was doing, what remains, why it decided things) comes from flags or a JSON
file; whatever is not supplied is marked missing, never invented.

The JSON form is kept in the ledger exactly as the successor will get it; the Markdown
form is written atomically inside the workspace. Secrets never travel: every text of both
forms has gone through :func:`onstation.core.redact.redact` (the git evidence's remote URL
already did, where it was collected), and the content records how many were redacted, by
kind, under ``redactions`` (:func:`onstation.core.redact.recorded_redactions` reads it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from onstation.core.errors import BadInput, BlockedByPolicy, Conflict, StaleGeneration
from onstation.core.names import validate_name
from onstation.core.redact import count_markers, redact, redact_tree, redactions_record
from onstation.harness.evidence import CommitLog, EvidenceCache, GitEvidence, collect
from onstation.harness.files import write_inside
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.relief.brief_render import (
    MISSING,
    SHORT_ID,
    _bullets,
    _or_missing,
    _redaction_line,
    render_brief,
)
from onstation.relief.hook_texts import brief_written, late_brief

STANDARD_HANDOFF = [
    'Read the files listed in "Completed Work" to understand the current state.',
    'Continue from the "Remaining Work" list.',
    "Respect the decisions made (unless you find clear issues).",
]

_BRIEF_KEYS = {
    "task_id", "task", "status", "completed", "remaining", "decisions", "context", "handoff",
    "reason",
}  # fmt: skip
_MANIFEST_KEYS = {
    "l3_task", "completed", "in_flight", "not_started", "scratch", "next_action", "blockers",
}  # fmt: skip
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
#: How much of the hook journal a brief reads for its test runs, and how many runs it keeps.
JOURNAL_CALLS = 200
MAX_TESTS = 50


@dataclass
class Supplied:
    """What the agent supplied, from flags and/or a JSON file (flags win)."""

    values: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | None, allowed: set[str], **flags: Any) -> Supplied:
        """Merge the JSON file at ``path`` (if any) with flag values."""
        values: dict[str, Any] = {}
        if path is not None:
            from onstation.core.canonical import loads_strict
            from onstation.harness.files import MAX_SMALL_JSON_BYTES, read_bounded

            text = read_bounded(path, MAX_SMALL_JSON_BYTES, "--from")

            data = loads_strict(text, "--from")
            if not isinstance(data, dict):
                raise BadInput("--from: must hold a JSON object")
            unknown = sorted(set(data) - allowed)
            if unknown:
                raise BadInput(f"--from: unknown field {unknown[0]!r}")
            values.update(data)
        for key, value in flags.items():
            if value not in (None, (), []):
                values[key] = list(value) if isinstance(value, tuple) else value
        for key, value in values.items():
            if isinstance(value, list):
                if not all(isinstance(v, (str, dict)) for v in value):
                    raise BadInput(f"{key}: must be a list of strings")
            elif not isinstance(value, str):
                raise BadInput(f"{key}: must be a string")
        return cls(values)

    def text(self, key: str) -> str | None:
        value = self.values.get(key)
        return value.strip() or None if isinstance(value, str) else None

    def items(self, key: str) -> list[str]:
        value = self.values.get(key)
        if isinstance(value, str):
            return [value] if value.strip() else []
        if isinstance(value, list):
            return [v if isinstance(v, str) else json.dumps(v, sort_keys=True) for v in value]
        return []


def _split_pair(item: str, seps: tuple[str, ...]) -> tuple[str, str | None]:
    for sep in seps:
        if sep in item:
            left, right = item.split(sep, 1)
            return left.strip(), right.strip() or None
    return item.strip(), None


def _git_json(evidence: GitEvidence) -> dict[str, Any]:
    return {
        "repository": evidence.repository,
        "branch": evidence.branch,
        "head": evidence.head,
        "base": evidence.base_ref,
        "base_commit": evidence.merge_base,
        "remote": evidence.remote_url if evidence.remote_name == "origin" else None,
        "changed_files": list(evidence.changed_files),
        "untracked_files": list(evidence.untracked_files),
        "dirty": evidence.dirty is True,
    }


def _work_evidence(
    records: HarnessLedger, node: str, generation: int, workspace: str, base: str | None,
    cache: EvidenceCache,
) -> tuple[GitEvidence, str]:  # fmt: skip
    """(the git evidence of the body's work, where its base comes from).

    The base is the caller's ``base`` when given (``brief write --base``); else the commit
    the writing body's generation started from, as recorded (ledger/generation_bases.py),
    while it still names a commit; else none: :func:`~onstation.harness.evidence.collect`'s
    default (the upstream, else ``main`` or ``master``, else HEAD)."""
    if base is not None:
        return cache.collect(workspace, base), "argument"
    recorded = records.base_of(node, generation)
    if recorded is not None:
        # One collection resolves the recorded base too (it is recorded as a full commit id).
        evidence = cache.collect(workspace, recorded)
        resolved = evidence.requested_base_commit
        if resolved == recorded:
            return evidence, "generation"
        if resolved is not None:  # a name that peels to another commit: measured from that
            return cache.collect(workspace, resolved), "generation"
    return cache.collect(workspace, None), "default"


def _commits_json(log: CommitLog | None) -> dict[str, Any]:
    """The commits of the body's work for the brief's git evidence: short ids, newest first."""
    if log is None:
        return {"commits": None, "commits_total": None}
    return {
        "commits": [{"id": c.commit[:SHORT_ID], "subject": c.subject} for c in log.commits],
        "commits_total": log.total,
    }


def _tests_run(
    records: HarnessLedger, node: str, generation: int
) -> tuple[list[dict[str, str]], int]:
    """The test runs of ``generation``, from its hook journal (the newest
    :data:`JOURNAL_CALLS` calls): the last run of each name wins, the newest last; at most
    :data:`MAX_TESTS` of them, and how many names there are in all."""
    from onstation.relief.tool_journal import parts_of

    rows = records.tool_outcomes(node, generation=generation, limit=JOURNAL_CALLS)
    last: dict[str, str] = {}
    for run in parts_of(rows, node, generation).get("tests", []):
        last.pop(run["name"], None)  # re-inserted: the order is of each name's last run
        last[run["name"]] = run["status"]
    tests = [{"name": name, "status": status} for name, status in last.items()]
    return tests[-MAX_TESTS:], len(tests)


def _redacted(content: dict[str, Any]) -> dict[str, Any]:
    """``content`` with every secret in its texts redacted, and the count recorded.

    The count is of the markers the content holds, so the remote URL scrubbed where the git
    evidence was collected counts too."""
    clean: dict[str, Any] = redact_tree(content)[0]
    clean["redactions"] = redactions_record(count_markers(clean))
    return clean


def _timestamp(now: datetime) -> str:
    return now.strftime("%Y%m%dT%H%M%SZ")


def workspace_of(records: HarnessLedger, node: str, explicit: str | None) -> str:
    """The workspace a document of ``node`` belongs in: ``--workspace`` or its binding."""
    if explicit is not None:
        if not Path(explicit).is_dir():
            raise BadInput(f"--workspace: {explicit} is not a directory")
        return explicit
    bound = records.workspace_of(node)
    if bound is None:
        raise BadInput(f"{node} has no bound workspace; give --workspace DIR")
    return bound


def write_brief(
    ledger: Ledger,
    node: str,
    supplied: Supplied,
    *,
    workspace: str | None = None,
    base: str | None = None,
    by: str = "agent",
    generation: int | None = None,
    losses: list[str] | None = None,
    notify_spawner: bool = True,
    evidence_cache: EvidenceCache | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Build the turnover brief from evidence, write it, keep its JSON; return both.

    ``evidence_cache`` is the relief's own, when a relief writes the brief: its capsule then
    reuses what this brief's collection proved (:class:`EvidenceCache`).

    ``generation`` is the writing body's. A brief from a body whose generation was fenced
    is still kept, as late, untrusted evidence (under ``.bridge/turnovers/late/``, offered to
    the successor as such), and the writer is denied (:class:`StaleGeneration`, with its
    receipt): it is never taken as a relief's hand-over. Without ``generation`` the brief is
    the relief's own, from evidence, filed under the current generation.
    """
    validate_name(node, "node")
    records = HarnessLedger(ledger)
    current = ledger.get_node(node)
    late = generation is not None and not is_current_body(ledger, node, generation)
    where = workspace_of(records, node, workspace)
    writer = generation if generation is not None else current.generation
    # The body's work: what changed and was committed since its generation began, so that
    # work already pushed still counts (the upstream would drop it).
    cache = evidence_cache if evidence_cache is not None else EvidenceCache()
    evidence, base_source = _work_evidence(records, node, writer, where, base, cache)
    log = None
    if evidence.merge_base is not None and evidence.head is not None:
        log = cache.commits_since(where, evidence.merge_base, head=evidence.head)
    from onstation.ledger.relief_records import ReliefLedger

    with ledger.reading():  # one read transaction for all of them (issue 14)
        tests, tests_total = _tests_run(records, node, writer)
        now = ledger.now()
        fill = records.latest_fill(node)
        episodes = ledger.episodes(node, open_only=True)
        effects = ledger.effects(node)
        notes = records.notes(node)
        open_tasks = [t for t in ReliefLedger(ledger).tasks(node) if t.status != "completed"]
    # The task being worked on: the newest in progress, else the newest open one.
    in_progress = [t for t in open_tasks if t.status == "in_progress"]
    current_task = (in_progress or open_tasks)[-1] if open_tasks else None
    task = (
        supplied.text("task")
        or (current_task.title if current_task else None)
        or (episodes[-1].objective if episodes else None)
    )
    decisions = [
        {"decision": d, "rationale": r}
        for d, r in (_split_pair(i, (": ", " — ", " -- ")) for i in supplied.items("decisions"))
    ] + [
        {"decision": n.text, "rationale": n.rationale} for n in notes if n.kind == "decision"
    ]  # fmt: skip
    completed = [
        {"path": p, "what": w}
        for p, w in (_split_pair(i, (" — ", " -- ", ": ")) for i in supplied.items("completed"))
    ]
    tier = fill["tier"] if fill else None
    reason = supplied.text("reason") or (f"Hull integrity {tier.capitalize()}" if tier else None)
    content: dict[str, Any] = {
        "kind": "turnover-brief",
        "version": 1,
        "agent": node,
        "generation": writer,
        "late": late,
        "date": now.isoformat().replace("+00:00", "Z"),
        "context_used_percent": None if fill is None else round(float(fill["percent"]), 1),
        "tier": tier,
        "reason": reason,
        "current_task": {
            "id": supplied.text("task_id") or (str(current_task.task_id) if current_task else None),
            "description": task,
            "status": supplied.text("status") or (current_task.status if current_task else None),
        },
        "completed_work": completed,
        "remaining_work": supplied.items("remaining"),
        "decisions": decisions,
        "files_modified": sorted(set(evidence.changed_files) | set(evidence.untracked_files)),
        "important_context": supplied.items("context"),
        "handoff_instructions": supplied.items("handoff") or STANDARD_HANDOFF,
        "losses": list(losses or []),
        "evidence": {
            "git": _git_json(evidence)
            | _commits_json(log)
            | {
                "base_source": base_source,
                "base_generation": writer if base_source == "generation" else None,
            },
            "telemetry": fill,
            "tests": tests,
            "tests_total": tests_total,
            "effects": [
                {
                    "effect_id": e.effect_id,
                    "state": e.state.value,
                    "operation": e.operation,
                    "destination": e.destination,
                    "generation": e.generation,
                    "resolved_by": e.resolved_by,
                    "resolution": e.resolution,
                }
                for e in effects
            ],
            "notes": [n.text for n in notes if n.kind == "note"],
            "tasks": [
                {"task_id": t.task_id, "title": t.title, "status": t.status, "notes": t.notes}
                for t in open_tasks
            ],
        },
    }
    content = _redacted(content)
    content["missing"] = _missing_brief(content)
    markdown = render_brief(content)
    content["markdown"] = markdown
    if late:
        assert generation is not None
        name = f"{node}-g{generation}-{_timestamp(now)}.md"
        path = write_inside(where, [".bridge", "turnovers", "late", name], markdown)
        try:
            records.record_document(node, kind="brief", path=str(path), content=content, by=by,
                                    generation=generation)  # fmt: skip
        except StaleGeneration as exc:
            # Offered to whoever holds the identity now, as what it is.
            records.post_message(
                sender="onstation", recipient=node, kind="late_brief",
                body=late_brief(generation, str(path)),
                generation=ledger.get_node(node).generation,
            )  # fmt: skip
            raise StaleGeneration(
                f"{exc.message}; the brief is kept as late, untrusted evidence: {path}",
                **exc.details,
                late_brief=str(path),
            ) from None
        return path, content
    name = f"{node}-{_timestamp(now)}.md"
    path = write_inside(where, [".bridge", "turnovers", name], markdown)
    try:
        records.record_document(node, kind="brief", path=str(path), content=content, by=by,
                                generation=generation)  # fmt: skip
    except StaleGeneration:
        # Fenced between the check and the record: the ledger kept it as late evidence; the
        # file must not sit among the hand-overs either.
        path.unlink(missing_ok=True)
        raise
    if current.spawner is not None and notify_spawner:
        # The relief procedure's step 3: tell the team lead where the brief is.
        used = content["context_used_percent"]
        records.post_message(
            sender=node, recipient=current.spawner, kind="relief_requested",
            body=brief_written(str(path), "unknown" if used is None else f"{used}%"),
            sender_generation=generation,
        )  # fmt: skip
    return path, content


def is_current_body(ledger: Ledger, node: str, generation: int) -> bool:
    """Whether ``generation`` is the identity's current one with a live lease (a read; the
    write itself is checked again, with a receipt, in its own transaction)."""
    if ledger.get_node(node).generation != generation:
        return False
    live = ledger.live_lease(node)
    return live is not None and live.generation == generation


def _missing_brief(content: dict[str, Any]) -> list[str]:
    missing = []
    for key in ("id", "description", "status"):
        if content["current_task"][key] is None:
            missing.append(f"current_task.{key}")
    for key in ("completed_work", "remaining_work", "decisions", "important_context"):
        if not content[key]:
            missing.append(key)
    if content["context_used_percent"] is None:
        missing.append("context_used_percent")
    if not content["evidence"]["git"]["repository"]:
        missing.append("files_modified (not a git repository)")
    return missing


def write_manifest(
    ledger: Ledger,
    node: str,
    supplied: Supplied,
    *,
    l3: str,
    pun: str,
    workspace: str | None = None,
    by: str = "agent",
    generation: int | None = None,
    notify_spawner: bool = True,
) -> tuple[Path, dict[str, Any]]:
    """The coordinator's continuation manifest; refused unless at a clean task boundary.

    The coordinator procedure, in order: the respawn cap is checked (past it the spawner is
    told and nothing is written), the manifest is written with this respawn's count, and the
    spawner gets the procedure's COORD_RESPAWN TRIGGERED message with the manifest's path.
    ``generation`` is the writing body's; a fenced body is denied with a receipt before
    anything is written.
    """
    validate_name(node, "node")
    for label, value in (("--l3", l3), ("--pun", pun)):
        if not _SLUG.match(value):
            raise BadInput(f"{label}: lower-case letters, digits and - only ({value!r})")
    records = HarnessLedger(ledger)
    open_ = records.open_exchanges(node)
    if open_:
        first = open_[0]
        raise Conflict(
            f"not a clean boundary: {first.kind} from {first.sender} (message "
            f"{first.message_id}) awaits a reply; finish that exchange first",
            open_exchanges=[m.message_id for m in open_],
        )
    current = ledger.get_node(node)
    if generation is not None and not is_current_body(ledger, node, generation):
        ledger.guard(node, generation=generation, action="manifest write")  # records a denial
    where = workspace_of(records, node, workspace)
    now = ledger.now()
    fill = records.latest_fill(node)
    respawn = ledger.respawn_status(node, kind="coordinator")
    coordinator = f"coord-{l3}-{pun}"
    if not respawn.allowed:
        # The procedure's RESPAWN_BLOCKED: escalate with the current state, do not continue.
        if current.spawner is not None and notify_spawner:
            records.post_message(
                sender=node, recipient=current.spawner, kind="respawn_blocked",
                body=f"{coordinator}: RESPAWN_BLOCKED: {respawn.reason}. Current state: "
                f"{redact(supplied.text('scratch') or MISSING).text}",
                sender_generation=generation,
            )  # fmt: skip
        raise BlockedByPolicy(
            f"respawn of {node} blocked: {respawn.reason}; the spawner is told, do not continue",
            node=node, reason=respawn.reason,
        )  # fmt: skip
    content: dict[str, Any] = {
        "kind": "continuation-manifest",
        "version": 1,
        "coordinator": coordinator,
        "node": node,
        "generation": generation if generation is not None else current.generation,
        "timestamp": now.isoformat().replace("+00:00", "Z"),
        "context_used_percent": None if fill is None else round(float(fill["percent"]), 1),
        # This respawn counts: the first self-respawn says 1/3, as the procedure's does.
        "respawn_count": respawn.count_in_window + 1,
        "respawn_limit": respawn.limit,
        "l3_task": supplied.text("l3_task"),
        "completed": supplied.items("completed"),
        "in_flight": supplied.items("in_flight"),
        "not_started": supplied.items("not_started"),
        "scratch_state": supplied.text("scratch"),
        "next_action": supplied.text("next_action"),
        "blockers": supplied.items("blockers"),
        "evidence": {"git": _git_json(collect(where)), "telemetry": fill},
    }
    content = _redacted(content)
    content["missing"] = [
        k
        for k in ("l3_task", "completed", "in_flight", "not_started", "scratch_state",
                  "next_action")
        if content[k] in (None, [])
    ]  # fmt: skip
    markdown = render_manifest(content)
    content["markdown"] = markdown
    name = f"coord-{l3}-{pun}-respawn-{_timestamp(now)}.md"
    path = write_inside(where, ["memory", "agents", "coords", name], markdown)
    try:
        records.record_document(node, kind="manifest", path=str(path), content=content, by=by,
                                generation=generation)  # fmt: skip
    except StaleGeneration:
        path.unlink(missing_ok=True)  # fenced meanwhile: nothing of it is left as a hand-over
        raise
    if current.spawner is not None and notify_spawner:
        records.post_message(
            sender=node, recipient=current.spawner, kind="respawn_triggered",
            body=spawner_message(content, path), sender_generation=generation,
        )  # fmt: skip
    return path, content


def spawner_message(c: dict[str, Any], path: Path | str) -> str:
    """The coordinator procedure's message to its spawner, line for line."""
    done = len(c["completed"])
    total = done + len(c["in_flight"]) + len(c["not_started"])
    context = c["context_used_percent"]
    return "\n".join(
        [
            f"{c['coordinator']}: COORD_RESPAWN TRIGGERED",
            f"Context at respawn: {'unknown' if context is None else f'{context}%'}",
            f"Respawn count: {c['respawn_count']}/{c['respawn_limit']}",
            f"L3: {c['l3_task'] or 'unknown'} — {done}/{total} sub-tasks done",
            f"Continuation manifest: {path}",
            "A fresh Coord session is needed to continue this L3.",
            f"Spawner should start a new {c['coordinator']} with the manifest path in the spawn "
            "prompt.",
        ]
    )


def render_manifest(c: dict[str, Any]) -> str:
    """The Markdown form of a continuation manifest, in the coordinator procedure's layout."""
    context = c["context_used_percent"]
    blockers = c["blockers"]
    return "\n".join(
        [
            f"# Coord Respawn Manifest — {c['coordinator']} — {c['timestamp']}",
            f"Context at respawn: {MISSING if context is None else f'{context}%'}",
            f"Respawn count: {c['respawn_count']}/{c['respawn_limit']}",
            *_redaction_line(c, "Secrets redacted"),
            f"L3 task: {_or_missing(c['l3_task'])}",
            "",
            "## Sub-tasks Completed",
            _bullets(c["completed"]),
            "",
            "## Sub-tasks In Flight at Respawn",
            _bullets(c["in_flight"]),
            "",
            "## Sub-tasks Not Yet Started",
            _bullets(c["not_started"]),
            "",
            "## Scratch State",
            _or_missing(c["scratch_state"]),
            "",
            "## Next Action for Fresh Coord",
            _or_missing(c["next_action"]),
            "",
            "## Active Blockers",
            "\n".join(f"- {b}" for b in blockers) if blockers else "none",
            "",
        ]
    )
