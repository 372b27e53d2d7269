"""Building a capsule payload from artifacts: the ledger, git, and agent-supplied parts.

Nothing is invented: what the ledger and git can prove becomes cited facts; what the agent
supplies (``--facts FILE``) is carried with the trust class it declares and checked against
the schema; every part nobody supplied is listed under ``omissions``. Transcript text is
bounded, stripped of invisible characters and marked untrusted evidence. Secrets never
travel: every text of the payload (the transcript tail before it is cut, the agent's parts,
the remote URL) goes through :func:`onstation.core.redact.redact`, and how many were
redacted is recorded as a ``redactions`` omission. The effects are carried as the ledger
recorded them (they are fingerprinted field by field); the ledger redacted their
destination and arguments when they were intended, before the fingerprint.

Git is not run here: the caller collects a :class:`~onstation.plan.evidence.GitEvidence`
(:func:`onstation.harness.evidence.collect`) and passes it in as data.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from onstation.core.canonical import canonical_bytes, digest
from onstation.core.effects import EffectState
from onstation.core.errors import BadInput
from onstation.core.redact import count_markers, describe, redact, redact_tree, scrub_url
from onstation.core.secret_shapes import INVISIBLE
from onstation.ledger import Ledger
from onstation.plan.capsule import CAPSULE_SCOPE, schema_passed, unsealed
from onstation.plan.embedded import digest_of_canonical
from onstation.plan.evidence import GitEvidence
from onstation.plan.incident import iso
from onstation.plan.schemas import schema_violations

MAX_TAIL = 20
MAX_TAIL_TEXT = 4000
DEFAULT_REQUIRED_FACTS = ("repository.head", "repository.tree", "objective", "effects.reconciled")

AGENT_PARTS = frozenset(
    {
        "objective",
        "nonGoals",
        "planFrontier",
        "artifacts",
        "requiredFacts",
        "facts",
        "unsupportedClaims",
        "decisions",
        "toolPairs",
        "tests",
        "transcript",
        "capabilityRequirements",
        "capacityState",
        "memoryDisposition",
        "subject",
    }
)
_SUBJECT_PARTS = frozenset({"principal", "workIntent", "planRevision", "episode"})
#: The agent's parts the payload carries exactly as given (after their redaction).
_AGENT_VERBATIM = ("nonGoals", "planFrontier", "requiredFacts", "unsupportedClaims", "decisions",
                   "toolPairs", "tests", "capabilityRequirements", "memoryDisposition")  # fmt: skip


@dataclass
class RepositoryParts:
    """The capsule's parts that come from git evidence."""

    repository: dict[str, Any]
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    omissions: list[dict[str, str]] = field(default_factory=list)


#: The one credential scrubber of git evidence (:func:`onstation.core.redact.scrub_url`);
#: :func:`onstation.harness.evidence.collect` already applied it, and applying it again to
#: evidence built elsewhere changes nothing that is already scrubbed.
scrub_remote = scrub_url


def repository_parts(evidence: GitEvidence) -> RepositoryParts:
    """Remote, base, head, tree and diff from ``evidence`` (omissions for what is missing);
    a requested base that names no commit is refused (:class:`BadInput`)."""
    if not evidence.repository:
        return RepositoryParts(
            {"remote": None, "base": None, "head": None, "tree": None, "diff": None, "dirty": None},
            omissions=[
                {"part": "repository", "reason": f"{evidence.workspace} is not a git work tree"}
            ],
        )
    ev = RepositoryParts({})
    remote = scrub_remote(evidence.remote_url) if evidence.remote_url else None
    if remote is None:
        ev.omissions.append({"part": "repository.remote", "reason": "no git remote configured"})
    head = evidence.head
    tree = evidence.tree
    if head is None:
        ev.omissions.append({"part": "repository.head", "reason": "the repository has no commit"})
    base = evidence.requested_base
    base_oid: str | None = None
    if base is not None:
        if base.startswith("-"):
            raise BadInput(f"--base: {base!r} is not a git revision")
        base_oid = evidence.requested_base_commit
        if base_oid is None:
            raise BadInput(f"--base: {base!r} does not name a commit in {evidence.workspace}")
    else:
        ev.omissions.append(
            {
                "part": "repository.base",
                "reason": "no base given (the generation's start was never recorded)",
            }
        )
    diff = None
    if evidence.diff is not None and evidence.diff.patch_sha256 is None:
        # Never the digest of an empty patch: that would claim the body changed nothing.
        ev.omissions.append({"part": "repository.diff",
                             "reason": "git could not produce the patch of the work"})  # fmt: skip
    elif evidence.diff is not None:
        against = evidence.diff.against
        diff = {
            "stat": (evidence.diff.stat or "")[:20000],
            "files": [{"path": f.path, "status": f.status} for f in evidence.diff.files][:5000],
            "patchDigest": evidence.diff.patch_sha256,
        }
        ev.artifacts.append(
            {
                "id": "git-diff",
                "kind": "git",
                "digest": diff["patchDigest"],
                "ref": f"git diff {against[:12]} (work tree)",
            }
        )
    ev.repository = {
        "remote": remote,
        "base": base_oid,
        "head": head,
        "tree": tree,
        "diff": diff,
        "dirty": evidence.dirty,
    }
    if head is not None:
        ev.artifacts.append(
            {"id": "git-head", "kind": "git", "ref": f"HEAD {head}", "digest": None}
        )
        ev.facts.append(
            {
                "id": "fact-git-head",
                "type": "repository.head",
                "artifact": "git-head",
                "trust": "authoritative",
                "statement": f"HEAD is {head}",
            }
        )
    if tree is not None:
        ev.facts.append(
            {
                "id": "fact-git-tree",
                "type": "repository.tree",
                "artifact": "git-head",
                "trust": "authoritative",
                "statement": f"HEAD's tree is {tree}",
            }
        )
    return ev


def bounded_tail(entries: list[Any]) -> tuple[list[dict[str, str]], bool]:
    """The last :data:`MAX_TAIL` transcript entries, invisible characters removed and secrets
    redacted (before each text is cut, so a cut cannot hide half a secret from the rules)."""
    clean = []
    for entry in entries[-MAX_TAIL:]:
        if not isinstance(entry, dict) or set(entry) != {"role", "text"}:
            raise BadInput("--facts: transcript.tail entries must be {role, text}")
        text = unicodedata.normalize("NFC", INVISIBLE.sub("", str(entry["text"])))
        text = redact(text).text
        clean.append({"role": str(entry["role"]), "text": text[:MAX_TAIL_TEXT]})
    return clean, len(entries) > MAX_TAIL


def build_payload(
    ledger: Ledger,
    node: str,
    *,
    evidence: GitEvidence,
    agent: dict[str, Any] | None,
    now: datetime,
    generation: int | None = None,
) -> dict[str, Any]:
    """A capsule payload for ``node`` (schema-checked); see the module docstring.

    ``generation`` is the body whose work the capsule carries: a relief gives the fenced
    predecessor's (after the fence the relief itself holds the next generation's lease);
    without it, the newest generation that held a lease.
    """
    return build_digested_payload(ledger, node, evidence=evidence, agent=agent, now=now,
                                  generation=generation).payload  # fmt: skip


class DigestedPayload(NamedTuple):
    """A capsule payload just built, with its capsule digest and its canonical bytes."""

    payload: dict[str, Any]
    digest: str
    canonical: bytes


def build_digested_payload(
    ledger: Ledger,
    node: str,
    *,
    evidence: GitEvidence,
    agent: dict[str, Any] | None,
    now: datetime,
    generation: int | None = None,
) -> DigestedPayload:
    """:func:`build_payload`, with the capsule digest of the payload it returns and the
    payload's canonical bytes (computed for its schema check): a relief seals, verifies and
    validates that very object, unchanged, and passes these along instead of canonicalizing
    the payload again each time (:mod:`onstation.plan.embedded`)."""
    # Redacted before anything is bounded: a marker longer than the secret it replaces must
    # not push a text past its schema limit, and a cut must not hide half a secret.
    agent = dict(redact_tree(dict(agent or {}))[0])
    unknown = set(agent) - AGENT_PARTS
    if unknown:
        raise BadInput(f"--facts: unknown part(s) {', '.join(sorted(unknown))}")
    with ledger.reading():  # one read transaction for all of them (issue 14)
        current = ledger.get_node(node)
        leases = ledger.leases(node)
        if generation is None:
            generation = max((lease.generation for lease in leases), default=current.generation)
        events = ledger.history(node, limit=1)  # the newest event alone: its sequence number
        sequence = events[-1].seq if events else 0
        runs = [r for r in ledger.runs(node) if r.generation == generation]
        episodes = ledger.episodes(node, open_only=True)
        effects = ledger.effects(node)
    omissions: list[dict[str, str]] = []
    git = repository_parts(evidence)
    omissions += git.omissions
    artifacts = list(git.artifacts)
    facts = list(git.facts)

    effect_rows = [
        {
            "effectId": e.effect_id,
            "node": e.node,
            "generation": e.generation,
            "operation": e.operation,
            "destination": e.destination,
            "arguments": e.arguments,
            "approvalSlot": e.approval_slot,
            "fingerprint": e.fingerprint,
            "state": e.state.value,
        }
        for e in effects
    ]
    artifacts.append(
        {
            "id": "ledger-effects",
            "kind": "ledger",
            "digest": digest("onstation-ledger-effects-v1", effect_rows),
            "ref": f"effects of {node}",
        }
    )
    unsettled = [e for e in effects if e.state in {EffectState.DISPATCHED, EffectState.AMBIGUOUS}]
    if not unsettled:
        facts.append(
            {
                "id": "fact-effects-reconciled",
                "type": "effects.reconciled",
                "artifact": "ledger-effects",
                "trust": "authoritative",
                "statement": f"all {len(effects)} effect(s) are settled",
            }
        )

    objective = agent.get("objective")
    subject_extra = dict(agent.get("subject") or {})
    if set(subject_extra) - _SUBJECT_PARTS:
        raise BadInput(f"--facts: subject may only hold {', '.join(sorted(_SUBJECT_PARTS))}")
    if episodes:
        episode = episodes[-1]
        artifacts.append(
            {
                "id": "ledger-episode",
                "kind": "ledger",
                "digest": None,
                "ref": f"episode {episode.episode_id} of {node}",
            }
        )
        subject_extra.setdefault("episode", str(episode.episode_id))
        intent = redact(episode.objective).text
        subject_extra.setdefault("workIntent", intent[:512])
        if objective is None:
            objective = intent[:4000]
            facts.append(
                {
                    "id": "fact-objective",
                    "type": "objective",
                    "trust": "authoritative",
                    "artifact": "ledger-episode",
                    "statement": intent[:4000],
                }
            )
    if objective is None:
        omissions.append({"part": "objective", "reason": "no open episode and none supplied"})

    own_artifacts, own_facts = len(artifacts), len(facts)  # the agent's follow, redacted
    artifacts += list(agent.get("artifacts", []))
    facts += list(agent.get("facts", []))
    for part, reason in (
        ("planFrontier", "no plan frontier supplied"),
        ("tests", "no test results supplied"),
        ("capabilityRequirements", "no capability requirements supplied"),
        ("decisions", "no decisions supplied"),
        ("toolPairs", "no tool calls supplied"),
    ):
        if part not in agent:
            omissions.append({"part": part, "reason": reason})
    transcript_in = agent.get("transcript")
    if transcript_in is None:
        omissions.append({"part": "transcript", "reason": "no transcript cursor or tail supplied"})
        transcript: dict[str, Any] = {
            "cursor": None,
            "trust": "untrusted-evidence",
            "truncated": False,
            "tail": [],
        }
    else:
        if not isinstance(transcript_in, dict) or set(transcript_in) - {
            "cursor", "tail", "truncated"
        }:  # fmt: skip
            raise BadInput("--facts: transcript must be {cursor, tail[, truncated]}")
        tail, truncated = bounded_tail(list(transcript_in.get("tail", [])))
        transcript = {
            "cursor": transcript_in.get("cursor"),
            "trust": "untrusted-evidence",
            # Cut here, or already by the reader's window (what came before it is not here).
            "truncated": truncated or transcript_in.get("truncated") is True,
            "tail": tail,
        }
    capacity = agent.get("capacityState")
    if capacity is None:
        omissions.append({"part": "capacityState", "reason": "no capacity evidence supplied"})
        capacity = {"evidenceDigest": None, "executionClass": None, "note": "unknown"}
    payload: dict[str, Any] = {
        "capsuleVersion": 1,
        "subject": {
            "node": node,
            "generation": generation,
            "sequence": sequence,
            "episode": subject_extra.get("episode"),
            "principal": subject_extra.get("principal"),
            "workIntent": subject_extra.get("workIntent"),
            "planRevision": subject_extra.get("planRevision"),
            "predecessorRun": str(runs[-1].run_id) if runs else None,
        },
        "builtAt": iso(now),
        "repository": git.repository,
        "objective": objective,
        "nonGoals": agent.get("nonGoals", []),
        "planFrontier": agent.get("planFrontier", []),
        "artifacts": artifacts,
        "requiredFacts": agent.get("requiredFacts", list(DEFAULT_REQUIRED_FACTS)),
        "facts": facts,
        "unsupportedClaims": agent.get("unsupportedClaims", []),
        "decisions": agent.get("decisions", []),
        "toolPairs": agent.get("toolPairs", []),
        "tests": agent.get("tests", []),
        "effects": effect_rows,
        "transcript": transcript,
        "capabilityRequirements": agent.get("capabilityRequirements", []),
        "capacityState": capacity,
        "memoryDisposition": agent.get(
            "memoryDisposition",
            {"scratch": "discard", "episode": "retain-until-settled", "promotions": []},
        ),
        "omissions": omissions,
    }
    # Effects stay as the ledger recorded them: their fingerprints are recomputed from them.
    # The agent's parts were redacted above, and redaction is idempotent (a second pass
    # changes nothing: tests/unit/test_redact.py), so only what this function added is.
    verbatim = {part: payload[part] for part in _AGENT_VERBATIM if part in agent}
    own = {k: v for k, v in payload.items() if k not in verbatim}
    own["artifacts"], own["facts"] = artifacts[:own_artifacts], facts[:own_facts]
    own, _ = redact_tree(own, skip=frozenset({"effects"}))
    own["artifacts"] += artifacts[own_artifacts:]
    own["facts"] += facts[own_facts:]
    payload = {k: verbatim[k] if k in verbatim else own[k] for k in payload}
    kinds = count_markers({k: v for k, v in payload.items() if k != "effects"})
    if kinds:
        payload["omissions"].append({"part": "redactions", "reason": describe(kinds)})
    canonical = canonical_bytes(payload)
    doc = unsealed(payload, digest_of_canonical(CAPSULE_SCOPE, canonical))
    problems = schema_violations("capsule", doc)
    if problems:
        first = problems[0]
        raise BadInput(f"--facts: {first.pointer}: {first.message}")
    schema_passed(doc, doc["digest"])  # sealing it next does not check these bytes again
    return DigestedPayload(payload, str(doc["digest"]), canonical)
