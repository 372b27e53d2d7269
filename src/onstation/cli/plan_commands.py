"""``onstation capsule|plan|resurrect|keys``: capsules, plan validation, the verdict, keys.

Registered by :mod:`onstation.cli.main` through :func:`register`. Exit codes follow the
CLI's rules: 0 ok, 2 invalid or bad input (``plan validate`` lists every violation with its
JSON pointer and rule id), 5 a capsule replay the ledger refused, 1 anything else. Bad input
is one line naming what was wrong, and nothing is written.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from onstation.cli.common import Options, command_options, emit
from onstation.core.canonical import loads_strict
from onstation.core.errors import BadInput, ExitCode
from onstation.core.names import validate_name
from onstation.harness.files import (
    MAX_DOCUMENT_BYTES,
    MAX_KEY_BYTES,
    MAX_SMALL_JSON_BYTES,
    read_bounded,
)


def _read_bytes(path: str, what: str, limit: int = MAX_DOCUMENT_BYTES) -> bytes:
    return read_bounded(path, limit, what)


def _read_json(path: str, what: str, limit: int = MAX_DOCUMENT_BYTES) -> Any:
    return loads_strict(_read_bytes(path, what, limit), f"{what} {path}")


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _write(path: str, value: Any) -> None:
    from onstation.plan.keys import atomic_write

    target = Path(path)
    if not target.parent.is_dir():
        raise BadInput(f"--out {path}: directory {target.parent} does not exist")
    atomic_write(target, (_pretty(value) + "\n").encode("utf-8"), 0o644)


def _now(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    from onstation.plan.incident import parse_time

    return parse_time(text, "--now")


_NOW_HELP = "The time to record (ISO-8601 UTC; default: now)."


# --------------------------------------------------------------------------------------------
# capsule


@click.group()
def capsule() -> None:
    """Resurrection capsules: build from artifacts, seal (sign), verify."""


@capsule.command("build")
@click.argument("node")
@click.option("--repo", "repo", default=".", show_default=True, help="The git work tree.")
@click.option("--base", default=None, metavar="REF", help="The base revision of the work.")
@click.option(
    "--facts",
    "facts_file",
    default=None,
    metavar="FILE",
    help="Agent-supplied parts (objective, facts, tests, transcript, ...) as JSON.",
)
@click.option("--out", default=None, metavar="FILE", help="Write here instead of stdout.")
@click.option("--now", default=None, help=_NOW_HELP)
@command_options
def capsule_build(
    node: str,
    repo: str,
    base: str | None,
    facts_file: str | None,
    out: str | None,
    now: str | None,
    opts: Options,
) -> None:
    """Build an unsealed capsule for NODE from the ledger, git and --facts."""
    from onstation.cli.common import open_ledger
    from onstation.harness.evidence import collect
    from onstation.plan.build import build_payload
    from onstation.plan.capsule import unsealed

    validate_name(node, "node")
    repo_path = Path(repo)
    if not repo_path.is_dir():
        raise BadInput(f"--repo {repo}: not a directory")
    agent = None if facts_file is None else _read_json(facts_file, "--facts", MAX_SMALL_JSON_BYTES)
    if agent is not None and not isinstance(agent, dict):
        raise BadInput("--facts: must be a JSON object")
    moment = _now(now)
    with open_ledger(opts, create=False) as ledger:
        evidence = collect(repo_path, base)
        payload = build_payload(ledger, node, evidence=evidence, agent=agent, now=moment)
    doc = unsealed(payload)
    if out is not None:
        _write(out, doc)
        emit(
            opts,
            {"written": out, "digest": doc["digest"], "omissions": payload["omissions"]},
            f"wrote {out}: capsule of {node} generation {payload['subject']['generation']} "
            f"sequence {payload['subject']['sequence']}, digest {doc['digest']}, "
            f"{len(payload['omissions'])} omission(s); seal it with: onstation capsule seal "
            f"{out}",
        )
    else:
        emit(opts, doc, lambda: _pretty(doc))


@capsule.command("seal")
@click.argument("file")
@click.option(
    "--key",
    "key",
    default=None,
    metavar="KEY_ID",
    help="Signing key (default: the only key in the store).",
)
@click.option("--out", default=None, metavar="FILE", help="Write here (default: FILE in place).")
@click.option("--now", default=None, help=_NOW_HELP)
@command_options
def capsule_seal(
    file: str, key: str | None, out: str | None, now: str | None, opts: Options
) -> None:
    """Recompute the digest and sign it; writes the sealed capsule atomically."""
    from onstation.plan.capsule import seal
    from onstation.plan.incident import iso
    from onstation.plan.keys import KeyStore

    doc = _read_json(file, "capsule")
    if not isinstance(doc, dict):
        raise BadInput(f"capsule {file}: must be a JSON object")
    private = KeyStore().private(key)
    sealed = seal(doc, private, issued_at=iso(_now(now)))
    target = out or file
    _write(target, sealed)
    receipt = sealed["receipts"][0]
    emit(
        opts,
        {"written": target, "digest": sealed["digest"], "receipt": receipt},
        f"sealed {target}: digest {sealed['digest']}, signed by {receipt['keyId']}",
    )


@capsule.command("verify")
@click.argument("file")
@click.option("--node", "expect_node", default=None, help="Refuse a capsule of another identity.")
@click.option(
    "--accept",
    is_flag=True,
    help="Check against the ledger and record the acceptance (replay refusal).",
)
@command_options
def capsule_verify(file: str, expect_node: str | None, accept: bool, opts: Options) -> None:
    """Recompute the digest, check every receipt's binding and signature, refuse replays."""
    from onstation.plan.capsule import parse, verify
    from onstation.plan.keys import KeyStore

    if expect_node is not None:
        validate_name(expect_node, "--node")
    doc = parse(_read_bytes(file, "capsule"))
    trusted = KeyStore().trusted()
    result = verify(doc, trusted, expect_node=expect_node)
    data = result.to_json()
    note = ""
    if accept:
        from onstation.cli.common import open_ledger

        with open_ledger(opts) as ledger:
            current = ledger.get_node(result.node)
            # The capsule of the body just fenced, or of the live one; anything older is replay.
            result = verify(
                doc, trusted, expect_node=expect_node, min_generation=current.generation - 1
            )
            raised = ledger.accept_capsule(
                result.node,
                generation=result.generation,
                sequence=result.sequence,
                digest=result.digest,
                key_id=result.key_ids[0],
            )
        data["accepted"] = "new" if raised else "already"
        note = "; accepted" if raised else "; already accepted (same digest)"
    emit(
        opts,
        data,
        f"verified {file}: {result.node} generation {result.generation} sequence "
        f"{result.sequence}, digest {result.digest}, signed by "
        f"{', '.join(result.key_ids)}{note}",
    )


def _show_stored(kind: str, digest: str, out: str | None, opts: Options) -> None:
    """Print (or write) a capsule or plan a relief stored under its digest."""
    from onstation.cli.common import open_ledger
    from onstation.ledger.correspondence import Correspondence

    with open_ledger(opts, create=False) as ledger:
        found = Correspondence(ledger).stored_object(kind, digest)
    if out is not None:
        _write(out, found.body)
        emit(opts, {"written": out, "digest": found.digest, "node": found.node},
             f"wrote {out}: {kind} {found.digest} of {found.node}")  # fmt: skip
    else:
        emit(opts, found.body, lambda: _pretty(found.body))


@capsule.command("show")
@click.argument("digest")
@click.option("--out", default=None, metavar="FILE", help="Write here instead of stdout.")
@command_options
def capsule_show(digest: str, out: str | None, opts: Options) -> None:
    """Print the capsule a relief sealed, by its digest (or a prefix of 8+ hex digits)."""
    _show_stored("capsule", digest, out, opts)


# --------------------------------------------------------------------------------------------
# plan


@click.group()
def plan() -> None:
    """Resurrection plans: schema and semantic validation."""


@plan.command("show")
@click.argument("digest")
@click.option("--out", default=None, metavar="FILE", help="Write here instead of stdout.")
@command_options
def plan_show(digest: str, out: str | None, opts: Options) -> None:
    """Print the plan a relief decided, by its digest (or a prefix of 8+ hex digits)."""
    _show_stored("plan", digest, out, opts)


@plan.command("validate")
@click.argument("file")
@click.option(
    "--verify-signatures",
    is_flag=True,
    help="Also verify each receipt's signature with the key store (OS-RCPT-002).",
)
@command_options
def plan_validate(file: str, verify_signatures: bool, opts: Options) -> None:
    """Schema first, then the semantic rules; exit 0 valid, 2 invalid (violations listed)."""
    from onstation.plan.keys import KeyStore
    from onstation.plan.validator import validate_plan

    document = _read_json(file, "plan")
    trusted = KeyStore().trusted() if verify_signatures else None
    report = validate_plan(document, trusted=trusted)
    if report.valid:
        emit(opts, report.to_json(), f"{file}: valid (schema and semantic rules)")
        return
    schema_n, semantic_n = len(report.schema), len(report.semantic)
    emit(
        opts,
        report.to_json(),
        lambda: "\n".join(
            [f"{file}: INVALID: {schema_n} schema and {semantic_n} semantic violation(s)"]
            + [f"  {v.layer:<8} {v.line()}" for v in report.violations]
        ),
    )
    sys.exit(int(ExitCode.BAD_INPUT))


# --------------------------------------------------------------------------------------------
# resurrect


@click.command("resurrect")
@click.argument("incident_file", metavar="INCIDENT.json")
@click.option("--now", default=None, help="Decide as of this time (default: the incident's asOf).")
@click.option("--plan-out", default=None, metavar="FILE", help="Also write the plan here.")
@command_options
def resurrect_cmd(incident_file: str, now: str | None, plan_out: str | None, opts: Options) -> None:
    """Classify an incident, decide, and print the operator review (--json: the plan).

    Runs nothing: a verdict is a proof result, not permission to launch.
    """
    from onstation.plan.incident import parse_time, resurrect
    from onstation.plan.keys import KeyStore
    from onstation.plan.review import render_review

    incident = _read_json(incident_file, "incident")
    moment = None if now is None else parse_time(now, "--now")
    plan_doc, _verdict = resurrect(incident, now=moment, trusted=KeyStore().trusted())
    if plan_out is not None:
        _write(plan_out, plan_doc)
    emit(opts, plan_doc, lambda: render_review(plan_doc).rstrip("\n"))


# --------------------------------------------------------------------------------------------
# keys


@click.group()
def keys() -> None:
    """Signer keys (Ed25519), kept outside the workspace (env ONSTATION_KEYS_DIR)."""


@keys.command("generate")
@click.option("--label", default=None, help="A name to remember the key by.")
@command_options
def keys_generate(label: str | None, opts: Options) -> None:
    """Create a signing key; the private file is written 0600."""
    from onstation.plan.keys import KeyStore

    store = KeyStore()
    info = store.generate(label)
    emit(opts, info.to_json(), f"generated {info.key_id} in {store.directory}")


@keys.command("list")
@command_options
def keys_list(opts: Options) -> None:
    """Every key: own signing keys and imported public keys."""
    from onstation.plan.keys import KeyStore

    found = KeyStore().list()
    emit(
        opts,
        {"keys": [k.to_json() for k in found]},
        lambda: (
            "\n".join(
                f"{k.key_id}  {'sign+verify' if k.has_private else 'verify only'}  {k.label or '-'}"
                for k in found
            )
            or "no keys"
        ),
    )


@keys.command("export-public")
@click.argument("key_id")
@command_options
def keys_export_public(key_id: str, opts: Options) -> None:
    """Print a key's public part (JSON), for another verifier's import-public."""
    from onstation.plan.keys import KeyStore

    validate_name(key_id, "key id")
    info = KeyStore().get(key_id)
    doc = {"algorithm": "ed25519", "keyId": info.key_id, "publicKey": info.public_hex}
    emit(opts, doc, _pretty(doc))


@keys.command("import-public")
@click.argument("file")
@click.option("--label", default=None, help="A name to remember the key by.")
@command_options
def keys_import_public(file: str, label: str | None, opts: Options) -> None:
    """Trust a public key (exported JSON or 64 hex characters); small-order keys refused."""
    from onstation.plan.keys import KeyStore

    info = KeyStore().import_public(
        read_bounded(file, MAX_KEY_BYTES, "public key", follow_symlinks=False), label
    )
    emit(opts, info.to_json(), f"imported {info.key_id} (verify only)")


def register(cli: click.Group) -> None:
    """Add this module's commands to the ``onstation`` group."""
    cli.add_command(capsule)
    cli.add_command(plan)
    cli.add_command(resurrect_cmd)
    cli.add_command(keys)
