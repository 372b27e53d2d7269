"""``onstation``: the operator's and the scripts' command line.

This module holds only the root group and the map of its subcommands; each subcommand is
imported from its own module the first time it is used (see :mod:`onstation.cli.lazy`), so
``onstation --help`` and any one command import only what they need. The exit codes of every
command are :class:`onstation.core.errors.ExitCode`, listed by ``onstation --help``.
"""

from __future__ import annotations

import sys

import click

from onstation import __version__
from onstation.cli.common import EXIT_CODES_HELP
from onstation.cli.lazy import LazyCommand, LazyGroup
from onstation.core.errors import BadInput

__all__ = ["COMMANDS", "cli", "main"]

#: Every subcommand of ``onstation``: where it lives and its short help for ``--help`` (a test
#: holds each equal to the command's own).
COMMANDS: dict[str, LazyCommand] = {
    # ledger_commands: identities, bodies, effects, history, the database
    "node": LazyCommand("onstation.cli.ledger_commands:node", "Durable identities (AgentNodes)."),
    "actor": LazyCommand("onstation.cli.ledger_commands:actor", "Offices, roles and mailboxes."),
    "episode": LazyCommand(
        "onstation.cli.ledger_commands:episode", "Work episodes: one bounded assignment of a node."
    ),
    "lease": LazyCommand(
        "onstation.cli.ledger_commands:lease",
        "Body leases: admission, heartbeat, release and fencing.",
    ),
    "guard": LazyCommand(
        "onstation.cli.ledger_commands:guard_cmd",
        "Check that a body may act now; a refusal is recorded (exit 3).",
    ),
    "denials": LazyCommand(
        "onstation.cli.ledger_commands:denials_cmd", "The node's durable denial receipts."
    ),
    "grant": LazyCommand(
        "onstation.cli.ledger_commands:grant",
        "Capability grants, issued per generation and revoked by a fence.",
    ),
    "effect": LazyCommand(
        "onstation.cli.ledger_commands:effect",
        "Non-idempotent effects: INTENDED -> DISPATCHED -> OBSERVED -> COMMITTED.",
    ),
    "history": LazyCommand(
        "onstation.cli.ledger_commands:history_cmd", "The node's append-only event history."
    ),
    "db": LazyCommand("onstation.cli.ledger_commands:db", "The ledger database itself."),
    # governor_commands: the respawn governor, the breaker, the halt gate
    "respawn": LazyCommand(
        "onstation.cli.governor_commands:respawn",
        "The respawn governor: at most N respawns per identity per window.",
    ),
    "breaker": LazyCommand(
        "onstation.cli.governor_commands:breaker",
        "The persistent per-identity breaker (survives restarts until closed).",
    ),
    "halt": LazyCommand(
        "onstation.cli.governor_commands:halt_cmd",
        "Block admission of new bodies and new effects until lifted.",
    ),
    "unhalt": LazyCommand("onstation.cli.governor_commands:unhalt_cmd", "Lift a halt."),
    "halts": LazyCommand("onstation.cli.governor_commands:halts_cmd", "Halts in force."),
    # relief_commands: the relief and the team
    "relieve": LazyCommand(
        "onstation.cli.relief_commands:relieve_cmd",
        "Relieve NODE: brief, fence, reconcile, capsule, verdict, and only if READY launch, "
        "challenge, shut down the predecessor and settle.",
    ),
    "challenge": LazyCommand("onstation.cli.relief_commands:challenge", "A successor's challenge."),
    "task": LazyCommand(
        "onstation.cli.relief_commands:task", "Tasks: status, owner and hand-off notes."
    ),
    "team": LazyCommand("onstation.cli.relief_commands:team", "The team as the ledger sees it."),
    "report": LazyCommand(
        "onstation.cli.relief_commands:report_cmd", "The discontinuity reports of NODE's reliefs."
    ),
    "supervise": LazyCommand(
        "onstation.cli.relief_commands:supervise_cmd",
        "The team lead loop: watch tiers, relieve at Red, stop on halt.",
    ),
    # harness_commands: agents and their harnesses
    "install": LazyCommand(
        "onstation.cli.harness_commands:install_cmd",
        "Merge onstation's hooks, status line and skills into a harness's settings.",
    ),
    "uninstall": LazyCommand(
        "onstation.cli.harness_commands:uninstall_cmd", "Remove exactly what install added."
    ),
    "doctor": LazyCommand(
        "onstation.cli.doctor:doctor_cmd",
        "Check the install, hook trust, ledger, window and witness; print what to fix.",
    ),
    "workspace": LazyCommand(
        "onstation.cli.harness_commands:workspace", "Which identity a workspace works for."
    ),
    "brief": LazyCommand(
        "onstation.cli.harness_commands:brief", "Turnover briefs, built from evidence."
    ),
    "manifest": LazyCommand(
        "onstation.cli.harness_commands:manifest", "Coordinator continuation manifests."
    ),
    "note": LazyCommand(
        "onstation.cli.harness_commands:note_cmd",
        "Record a decision (with --why) or a note for NODE's successor (a fenced generation "
        "is denied, exit 3).",
    ),
    "message": LazyCommand(
        "onstation.cli.harness_commands:message",
        "Messages between actors (relief requests, shutdown, exchanges).",
    ),
    "hook": LazyCommand(
        "onstation.cli.harness_commands:hook_help",
        "onstation hook HARNESS EVENT: answer one harness hook (JSON on stdin).",
    ),
    "statusline": LazyCommand(
        "onstation.cli.harness_commands:statusline_help",
        "onstation statusline [--wrap COMMAND]: record the status line's telemetry, print a line.",
    ),
    # plan_commands: capsules, plans, the verdict, keys
    "capsule": LazyCommand(
        "onstation.cli.plan_commands:capsule",
        "Resurrection capsules: build from artifacts, seal (sign), verify.",
    ),
    "plan": LazyCommand(
        "onstation.cli.plan_commands:plan", "Resurrection plans: schema and semantic validation."
    ),
    "resurrect": LazyCommand(
        "onstation.cli.plan_commands:resurrect_cmd",
        "Classify an incident, decide, and print the operator review (--json: the plan).",
    ),
    "keys": LazyCommand(
        "onstation.cli.plan_commands:keys",
        "Signer keys (Ed25519), kept outside the workspace (env ONSTATION_KEYS_DIR).",
    ),
    # demo: the demo and the tour
    "demo": LazyCommand(
        "onstation.cli.demo:demo_cmd",
        "The main job on a scratch team: three fake agents, a relief, a self-respawn.",
    ),
    "tour": LazyCommand(
        "onstation.cli.demo:tour_cmd",
        "A tour of one relief on the ledger alone: birth, fence, stale body denied, AMBIGUOUS.",
    ),
    # fake_agent_command: the fake agent
    "fake-agent": LazyCommand(
        "onstation.cli.fake_agent_command:fake_agent_cmd",
        "A fake Claude Code session for demos and tests: real git, real hooks, no model.",
    ),
    # sim_commands: the crash-loop simulation
    "simulate": LazyCommand(
        "onstation.cli.sim_commands:simulate_cmd",
        "Drive the real relief and ledger with a simulated clock, bodies and faults; check "
        "every invariant after every step.",
    ),
}


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="\b\nExit codes:\n" + EXIT_CODES_HELP,
)
@click.version_option(__version__, prog_name="onstation")
def cli() -> None:
    """Keep an agent's work alive while its bodies come and go."""


def main(argv: list[str] | None = None) -> None:
    """Console entry point."""
    try:
        cli.main(args=argv, prog_name="onstation", standalone_mode=True)
    except BadInput as exc:  # pragma: no cover - commands handle their own
        click.echo(f"onstation: bad input: {exc.message}", err=True)
        sys.exit(2)
