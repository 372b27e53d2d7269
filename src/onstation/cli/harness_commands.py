"""Commands for agents and their harnesses: install, workspaces, briefs, manifests, notes,
messages. (The hook and status-line entry points themselves live in :mod:`onstation.cli.hooks`.)
"""

from __future__ import annotations

import getpass
import os
import re
from pathlib import Path

import click

from onstation.cli.common import Options, body_generation, command_options, emit
from onstation.core.errors import BadInput
from onstation.core.names import validate_name
from onstation.harness.adapters import CLAUDE_CODE, HOOK_HARNESSES


def _by() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "operator"


def _default_node(directory: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(os.path.realpath(directory)).name).strip("-.")
    return validate_name(name or "agent", "--node")


# --------------------------------------------------------------------------------------------
# install


@click.command("install")
@click.argument("harness", type=click.Choice(list(HOOK_HARNESSES)))
@click.option("--project", "project", default=None, metavar="DIR", help="Install into DIR.")
@click.option("--user", "user", is_flag=True, help="Install for the user (all projects).")
@click.option("--plugin", "plugin", default=None, metavar="DIR",
              help="Write a Claude Code plugin (a marketplace) into DIR.")  # fmt: skip
@click.option("--node", "node_name", default=None, help="Identity the workspace works for.")
@click.option("--role", default=None, help="Role of a newly registered node.")
@click.option("--tiers", default=None, help="relief, coordinator, or JSON thresholds.")
@click.option("--supervised", is_flag=True, help="A team lead decides relief (no self-requests).")
@click.option(
    "--no-wrap", is_flag=True, help="Replace an existing status line instead of wrapping."
)
@command_options
def install_cmd(
    harness: str,
    project: str | None,
    user: bool,
    plugin: str | None,
    node_name: str | None,
    role: str | None,
    tiers: str | None,
    supervised: bool,
    no_wrap: bool,
    opts: Options,
) -> None:
    """Merge onstation's hooks, status line and skills into a harness's settings.

    A Claude Code project install writes .claude/settings.local.json (not committed); the
    install record goes to DIR/.onstation/. --plugin DIR writes a Claude Code plugin instead
    (no settings edited). Codex runs the hooks once you trust them: install prints how."""
    from onstation.harness.config import read_config_file, write_config
    from onstation.harness.install import HOOK_LAUNCHER, check_install, command_program, install
    from onstation.ledger import Ledger
    from onstation.ledger.bodies import HarnessLedger

    if plugin is not None:
        _install_plugin(harness, plugin, project, user, opts)
        return
    if (project is None) == (not user):
        raise BadInput("give exactly one of --project DIR, --user or --plugin DIR")
    tier_value: object = None
    if tiers is not None:
        if tiers in ("relief", "coordinator"):
            tier_value = tiers
        else:
            from onstation.core.canonical import loads_strict
            from onstation.core.hull import policy_from_mapping

            tier_value = loads_strict(tiers, "--tiers")
            if not isinstance(tier_value, dict):
                raise BadInput("--tiers: relief, coordinator, or a JSON object")
            policy_from_mapping(tier_value)
    node = None
    if project is not None:
        if not Path(project).is_dir():
            raise BadInput(f"--project: {project} is not a directory")
        node = node_name or _default_node(project)
        validate_name(node, "--node")
    elif node_name is not None:
        node = validate_name(node_name, "--node")
    # Every file is read and checked before the first write, so a refusal changes nothing.
    check_install(harness, project=project, user=user)
    existing = read_config_file(project) if project is not None else {}
    if project is not None and node is not None:
        with Ledger.open(opts.db) as ledger:
            known = {n.node for n in ledger.list_nodes()}
            if node not in known:
                ledger.register_node(node, role=role, by=_by())
            HarnessLedger(ledger).bind_workspace(project, node, harness=harness, by=_by())
    record = install(harness, project=project, user=user, node=node, wrap_statusline=not no_wrap)
    if project is not None:
        write_config(project, {"node": node, "db": opts.db, "tiers": tier_value,
                               "supervised": supervised or None}, existing)  # fmt: skip
    lines = [f"installed onstation into {record['settings']} for {node or 'every workspace'} "
             f"(hooks: {', '.join(sorted(record['added_hooks']))})"]  # fmt: skip
    if record.get("statusline_wrapped"):
        wrapped = record["statusline_wrapped"]
        lines.append(f"status line: wraps {wrapped['command']!r} (from {wrapped['from']})")
    # The installed commands run the hook launcher, whose calls start this user's daemon
    # when none runs (docs/daemon.md); a fallback to the console script does not.
    autostart = HOOK_LAUNCHER in command_program()
    if autostart:
        from onstation.cli.daemon_client import AUTO_IDLE_EXIT

        lines.append("daemon: the first hook call starts this user's daemon, which runs later "
                     f"calls warm and stops after {AUTO_IDLE_EXIT // 60} min without one "
                     "(ONSTATION_DAEMON=off: never)")  # fmt: skip
    lines += [f"note: {w}" for w in record.get("warnings", [])]
    lines += [f"to do once: {step}" for step in record.get("next_steps", [])]
    emit(
        opts,
        {"installed": harness, "settings": record["settings"], "record": record["record"],
         "node": node, "hooks": sorted(record["added_hooks"]), "daemon_autostart": autostart,
         "skills": [s["path"] for s in record["skills"]],
         "statusline_wrapped": record.get("statusline_wrapped"),
         "warnings": record.get("warnings", []), "next_steps": record.get("next_steps", []),
         "codex_trust": record.get("codex_trust")},
        "\n".join(lines),
    )  # fmt: skip


def _install_plugin(
    harness: str, directory: str, project: str | None, user: bool, opts: Options
) -> None:
    from onstation.harness.install_plugin import write_plugin

    if harness != CLAUDE_CODE.name:
        raise BadInput(f"--plugin: only for {CLAUDE_CODE.name}")
    if project is not None or user:
        raise BadInput("give exactly one of --project DIR, --user or --plugin DIR")
    result = write_plugin(directory)
    emit(opts, result, "\n".join([f"wrote the onstation plugin to {result['plugin']}",
                                   *(f"to do: {s}" for s in result["next_steps"])]))  # fmt: skip


@click.command("uninstall")
@click.argument("harness", type=click.Choice(list(HOOK_HARNESSES)))
@click.option("--project", "project", default=None, metavar="DIR", help="Uninstall from DIR.")
@click.option("--user", "user", is_flag=True, help="Uninstall the user-level install.")
@command_options
def uninstall_cmd(harness: str, project: str | None, user: bool, opts: Options) -> None:
    """Remove exactly what install added."""
    from onstation.harness.install import uninstall

    result = uninstall(harness, project=project, user=user)
    emit(opts, result, f"removed onstation from {result['settings']}")


# --------------------------------------------------------------------------------------------
# workspaces


@click.group("workspace")
def workspace() -> None:
    """Which identity a workspace works for."""


@workspace.command("bind")
@click.argument("directory")
@click.argument("node_name", metavar="NODE")
@click.option("--harness", default=CLAUDE_CODE.name, show_default=True)
@command_options
def workspace_bind(directory: str, node_name: str, harness: str, opts: Options) -> None:
    """Bind DIRECTORY (and everything below it) to NODE."""
    from onstation.ledger import Ledger
    from onstation.ledger.bodies import HarnessLedger

    validate_name(node_name, "node")
    validate_name(harness, "--harness")
    if not Path(directory).is_dir():
        raise BadInput(f"{directory} is not a directory")
    with Ledger.open(opts.db) as ledger:
        HarnessLedger(ledger).bind_workspace(directory, node_name, harness=harness, by=_by())
    emit(opts, {"workspace": os.path.realpath(directory), "node": node_name},
         f"{os.path.realpath(directory)} works for {node_name}")  # fmt: skip


@workspace.command("show")
@click.argument("directory", default=".")
@command_options
def workspace_show(directory: str, opts: Options) -> None:
    """Which identity DIRECTORY works for."""
    from onstation.ledger import Ledger
    from onstation.ledger.bodies import HarnessLedger

    with Ledger.open(opts.db, create=False) as ledger:
        found = HarnessLedger(ledger).node_for_workspace(directory)
    if found is None:
        raise BadInput(f"{os.path.realpath(directory)} is not bound to any node")
    emit(opts, {"node": found[0], "workspace": found[1]}, f"{found[1]} works for {found[0]}")


# --------------------------------------------------------------------------------------------
# briefs, manifests, notes


@click.group("brief")
def brief() -> None:
    """Turnover briefs, built from evidence."""


@brief.command("write")
@click.argument("node_name", metavar="NODE")
@click.option("--workspace", default=None, help="Workspace (default: the node's bound one).")
@click.option("--base", default=None, help="Git base to diff against (default: upstream).")
@click.option("--from", "from_file", default=None, help="JSON file with the fields below.")
@click.option("--task-id", default=None)
@click.option("--task", default=None, help="What you were working on.")
@click.option("--status", default=None, help="in_progress or blocked.")
@click.option("--completed", multiple=True, help="'PATH — WHAT WAS DONE' (repeat).")
@click.option("--remaining", multiple=True, help="A remaining step (repeat).")
@click.option("--decision", "decisions", multiple=True, help="'DECISION: WHY' (repeat).")
@click.option("--context", multiple=True, help="Something the successor must know (repeat).")
@click.option("--handoff", multiple=True, help="A hand-off instruction (repeat).")
@click.option("--reason", default=None, help="Why the relief (default: the hull tier).")
@click.option("--generation", type=int, default=None,
              help="The writing body's generation (default: ONSTATION_GENERATION).")  # fmt: skip
@command_options
def brief_write(
    node_name: str,
    workspace: str | None,
    base: str | None,
    from_file: str | None,
    task_id: str | None,
    task: str | None,
    status: str | None,
    completed: tuple[str, ...],
    remaining: tuple[str, ...],
    decisions: tuple[str, ...],
    context: tuple[str, ...],
    handoff: tuple[str, ...],
    reason: str | None,
    generation: int | None,
    opts: Options,
) -> None:
    """Write the turnover brief to .bridge/turnovers/ (missing fields are marked missing).

    Only the identity's live body may: a fenced generation is denied (exit 3), and its
    brief is kept as late, untrusted evidence."""
    from onstation.ledger import Ledger
    from onstation.relief.documents import _BRIEF_KEYS, Supplied, write_brief

    validate_name(node_name, "node")
    generation = body_generation(generation, node_name, required=True, what="brief write")
    supplied = Supplied.load(
        from_file, _BRIEF_KEYS, task_id=task_id, task=task, status=status, completed=completed,
        remaining=remaining, decisions=decisions, context=context, handoff=handoff, reason=reason,
    )  # fmt: skip
    with Ledger.open(opts.db) as ledger:
        path, content = write_brief(
            ledger, node_name, supplied, workspace=workspace, base=base, by=_by(),
            generation=generation,
        )  # fmt: skip
    data = {k: v for k, v in content.items() if k != "markdown"} | {"path": str(path)}
    missing = f" (missing: {', '.join(content['missing'])})" if content["missing"] else ""
    emit(opts, data, f"wrote {path}{missing}")


@brief.command("show")
@click.argument("node_name", metavar="NODE")
@command_options
def brief_show(node_name: str, opts: Options) -> None:
    """The latest brief of NODE, as the successor gets it."""
    from onstation.ledger import Ledger
    from onstation.ledger.bodies import HarnessLedger

    validate_name(node_name, "node")
    with Ledger.open(opts.db, create=False) as ledger:
        doc = HarnessLedger(ledger).latest_document(node_name, "brief")
    if doc is None:
        raise BadInput(f"{node_name} has no brief")
    emit(opts, doc.to_json(), str(doc.content.get("markdown", "")))


@click.group("manifest")
def manifest() -> None:
    """Coordinator continuation manifests."""


@manifest.command("write")
@click.argument("node_name", metavar="NODE")
@click.option("--l3", required=True, help="The L3 task's short name.")
@click.option("--pun", required=True, help="The coordinator's pun name.")
@click.option("--workspace", default=None, help="Workspace (default: the node's bound one).")
@click.option("--from", "from_file", default=None, help="JSON file with the fields below.")
@click.option("--l3-task", default=None, help="The L3 task description.")
@click.option("--completed", multiple=True, help="'EXEC: STATUS — SUMMARY' (repeat).")
@click.option("--in-flight", multiple=True, help="A sub-task in flight and its state (repeat).")
@click.option("--not-started", multiple=True, help="A sub-task not started (repeat).")
@click.option("--scratch", default=None, help="Scratch state (status and children tables).")
@click.option("--next", "next_action", default=None, help="The exact next action.")
@click.option("--blocker", "blockers", multiple=True, help="An active blocker (repeat).")
@click.option("--generation", type=int, default=None,
              help="The writing body's generation (default: ONSTATION_GENERATION).")  # fmt: skip
@command_options
def manifest_write(
    node_name: str,
    l3: str,
    pun: str,
    workspace: str | None,
    from_file: str | None,
    l3_task: str | None,
    completed: tuple[str, ...],
    in_flight: tuple[str, ...],
    not_started: tuple[str, ...],
    scratch: str | None,
    next_action: str | None,
    blockers: tuple[str, ...],
    generation: int | None,
    opts: Options,
) -> None:
    """Write the continuation manifest and tell the spawner (COORD_RESPAWN TRIGGERED).

    Refused while an APPROACH/CHECKPOINT is open (exit 5), past the respawn cap (exit 4,
    the spawner is told), or from a fenced generation (exit 3)."""
    from onstation.ledger import Ledger
    from onstation.relief.documents import _MANIFEST_KEYS, Supplied, write_manifest

    validate_name(node_name, "node")
    generation = body_generation(generation, node_name, required=True, what="manifest write")
    supplied = Supplied.load(
        from_file, _MANIFEST_KEYS, l3_task=l3_task, completed=completed, in_flight=in_flight,
        not_started=not_started, scratch=scratch, next_action=next_action, blockers=blockers,
    )  # fmt: skip
    with Ledger.open(opts.db) as ledger:
        path, content = write_manifest(
            ledger, node_name, supplied, l3=l3, pun=pun, workspace=workspace, by=_by(),
            generation=generation,
        )  # fmt: skip
    data = {k: v for k, v in content.items() if k != "markdown"} | {"path": str(path)}
    emit(opts, data, f"wrote {path}")


@click.command("note")
@click.argument("node_name", metavar="NODE")
@click.option("--decision", default=None, help="A decision, recorded for the successor.")
@click.option("--why", default=None, help="The decision's rationale.")
@click.option("--note", "text", default=None, help="A plain note.")
@click.option("--generation", type=int, default=None,
              help="The writing body's generation (default: ONSTATION_GENERATION).")  # fmt: skip
@command_options
def note_cmd(
    node_name: str, decision: str | None, why: str | None, text: str | None,
    generation: int | None, opts: Options,
) -> None:  # fmt: skip
    """Record a decision (with --why) or a note for NODE's successor (a fenced generation is
    denied, exit 3)."""
    from onstation.ledger import Ledger
    from onstation.ledger.bodies import HarnessLedger

    validate_name(node_name, "node")
    if (decision is None) == (text is None):
        raise BadInput("give exactly one of --decision TEXT or --note TEXT")
    if decision is not None and not why:
        raise BadInput("--why: a decision needs its rationale")
    with Ledger.open(opts.db) as ledger:
        got = HarnessLedger(ledger).add_note(
            node_name, kind="decision" if decision else "note", text=decision or text or "",
            rationale=why, by=_by(),
            generation=body_generation(generation, node_name, required=True, what="note"),
        )  # fmt: skip
    emit(opts, got.to_json(), f"recorded {got.kind} {got.note_id} for {got.node}")


# --------------------------------------------------------------------------------------------
# messages


@click.group("message")
def message() -> None:
    """Messages between actors (relief requests, shutdown, exchanges)."""


@message.command("send")
@click.option("--from", "sender", required=True, help="The sender (actor or node).")
@click.option("--to", "recipient", required=True, help="The recipient (actor or node).")
@click.option("--kind", required=True, help="e.g. relief_requested, APPROACH, ACK.")
@click.option("--body", default="", help="The text.")
@click.option("--reply-to", type=int, default=None, help="The message this answers.")
@click.option("--generation", type=int, default=None,
              help="The sending body's generation when --from is an identity (default: "
                   "ONSTATION_GENERATION).")  # fmt: skip
@click.option("--to-generation", type=int, default=None,
              help="Deliver to this generation of the recipient only.")  # fmt: skip
@command_options
def message_send(
    sender: str, recipient: str, kind: str, body: str, reply_to: int | None,
    generation: int | None, to_generation: int | None, opts: Options,
) -> None:  # fmt: skip
    """Queue a message; bodies receive theirs through their hooks.

    A message from an identity is a write of its body: it carries the body's generation and
    a fenced generation is denied (exit 3)."""
    from onstation.ledger import Ledger
    from onstation.ledger.bodies import HarnessLedger

    for value, field in ((sender, "--from"), (recipient, "--to"), (kind, "--kind")):
        validate_name(value, field)
    with Ledger.open(opts.db) as ledger:
        names = {n.node for n in ledger.list_nodes()}
        sender_generation = (
            body_generation(generation, sender, required=True, what="message send --from "
                            f"{sender}")
            if sender in names else None
        )  # fmt: skip
        got = HarnessLedger(ledger).post_message(
            sender=sender, recipient=recipient, kind=kind, body=body, reply_to=reply_to,
            generation=to_generation, sender_generation=sender_generation,
        )  # fmt: skip
    emit(opts, got.to_json(), f"message {got.message_id} to {got.recipient} queued")


@message.command("list")
@click.argument("recipient")
@command_options
def message_list(recipient: str, opts: Options) -> None:
    """Every message to RECIPIENT."""
    from onstation.ledger import Ledger
    from onstation.ledger.bodies import HarnessLedger

    validate_name(recipient, "recipient")
    with Ledger.open(opts.db, create=False) as ledger:
        rows = HarnessLedger(ledger).messages(recipient)
    emit(
        opts,
        {"messages": [m.to_json() for m in rows]},
        lambda: (
            "\n".join(
                f"{m.message_id:>4} {'delivered' if m.delivered_at else 'pending  '} "
                f"{m.kind:<18} from {m.sender}: {m.body[:80]}"
                for m in rows
            )
            or "no messages"
        ),
    )


# --------------------------------------------------------------------------------------------
# help for the fast-path entry points


@click.command(
    "hook",
    context_settings={"ignore_unknown_options": True},
    help=f"""onstation hook HARNESS EVENT: answer one harness hook (JSON on stdin).

    HARNESS is one of: {", ".join(HOOK_HARNESSES)}.

    Events (the ones install registers): {", ".join(CLAUDE_CODE.hook_events)}; Codex has
    all but SessionEnd, PostToolUseFailure and PermissionDenied.
    A hook always fails open: on any problem it exits 0 with a one-line note on stderr.
    """,
)
@click.argument("args", nargs=-1)
def hook_help(args: tuple[str, ...]) -> None:
    click.echo(click.get_current_context().get_help())


@click.command("statusline", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1)
def statusline_help(args: tuple[str, ...]) -> None:
    """onstation statusline [--wrap COMMAND]: record the status line's telemetry, print a line.

    With --wrap, COMMAND (your previous status line) gets the same JSON and its output is
    printed first.
    """
    click.echo(click.get_current_context().get_help())
