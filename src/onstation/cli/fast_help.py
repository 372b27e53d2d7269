"""The table of ``onstation``'s commands, and ``onstation --help``, ``-h`` and ``--version``
answered from it without importing click.

Importing click alone costs more than twice the interpreter's own start-up, so the top-level
help is rendered here, from :data:`COMMAND_TABLE` (each command's import path and short help)
and the same few constants the click group in :mod:`onstation.cli.main` is built from, by the
rules of click's help formatter: the terminal's width clamped to 50..98 columns, each short
help cut at its first sentence and shortened to the room left, the exit-code epilog kept as
written. A test renders every width both ways and holds them equal, so the two can never
drift apart. Anything else (a subcommand's help, shell completion, ``--help`` beside another
argument) is click's.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs import time on this path
if TYPE_CHECKING:
    from collections.abc import Sequence

PROG = "onstation"
#: The root group's help (its docstring in :mod:`onstation.cli.main`; a test holds them equal).
GROUP_HELP = "Keep an agent's work alive while its bodies come and go."
#: click's ``max_content_width`` of the root group.
MAX_CONTENT_WIDTH = 100
#: The root group's options, as click's help lists them.
OPTIONS = (
    ("--version", "Show the version and exit."),
    ("-h, --help", "Show this message and exit."),
)
#: click's ``complete_var`` for ``prog_name="onstation"``: set, the shell asks for completion.
COMPLETE_VAR = "_ONSTATION_COMPLETE"

#: Every subcommand of ``onstation``: ``"package.module:attribute"`` (the click command or
#: group) and its short help for ``--help``, untruncated (a test holds each equal to the
#: command's own). A new command is added here; :mod:`onstation.cli.main` loads it lazily.
COMMAND_TABLE: dict[str, tuple[str, str]] = {
    # ledger_commands: identities, bodies, effects, history, the database
    "node": ("onstation.cli.ledger_commands:node", "Durable identities (AgentNodes)."),
    "actor": ("onstation.cli.ledger_commands:actor", "Offices, roles and mailboxes."),
    "episode": (
        "onstation.cli.ledger_commands:episode",
        "Work episodes: one bounded assignment of a node.",
    ),
    "lease": (
        "onstation.cli.ledger_commands:lease",
        "Body leases: admission, heartbeat, release and fencing.",
    ),
    "guard": (
        "onstation.cli.ledger_commands:guard_cmd",
        "Check that a body may act now; a refusal is recorded (exit 3).",
    ),
    "denials": ("onstation.cli.ledger_commands:denials_cmd", "The node's durable denial receipts."),
    "grant": (
        "onstation.cli.ledger_commands:grant",
        "Capability grants, issued per generation and revoked by a fence.",
    ),
    "effect": (
        "onstation.cli.ledger_commands:effect",
        "Non-idempotent effects: INTENDED -> DISPATCHED -> OBSERVED -> COMMITTED.",
    ),
    "history": (
        "onstation.cli.ledger_commands:history_cmd",
        "The node's append-only event history.",
    ),
    "db": ("onstation.cli.ledger_commands:db", "The ledger database itself."),
    # governor_commands: the respawn governor, the breaker, the halt gate
    "respawn": (
        "onstation.cli.governor_commands:respawn",
        "The respawn governor: at most N respawns per identity per window.",
    ),
    "breaker": (
        "onstation.cli.governor_commands:breaker",
        "The persistent per-identity breaker (survives restarts until closed).",
    ),
    "halt": (
        "onstation.cli.governor_commands:halt_cmd",
        "Block admission of new bodies and new effects until lifted.",
    ),
    "unhalt": ("onstation.cli.governor_commands:unhalt_cmd", "Lift a halt."),
    "halts": ("onstation.cli.governor_commands:halts_cmd", "Halts in force."),
    # token_commands: the console's access tokens
    "token": (
        "onstation.cli.token_commands:token",
        "Access tokens of the operator's console (onstation serve).",
    ),
    # serve_command: the operator's console (issue 15)
    "serve": (
        "onstation.cli.serve_command:serve_cmd",
        "The operator's console: HTTP API under /api/v1 and the web page, over the ledger.",
    ),
    # relief_commands: the relief and the team
    "relieve": (
        "onstation.cli.relief_commands:relieve_cmd",
        "Relieve NODE: brief, fence, reconcile, capsule, verdict, and only if READY launch, "
        "challenge, shut down the predecessor and settle.",
    ),
    "challenge": ("onstation.cli.relief_commands:challenge", "A successor's challenge."),
    "task": ("onstation.cli.relief_commands:task", "Tasks: status, owner and hand-off notes."),
    "team": ("onstation.cli.relief_commands:team", "The team as the ledger sees it."),
    "report": (
        "onstation.cli.relief_commands:report_cmd",
        "The discontinuity reports of NODE's reliefs.",
    ),
    "supervise": (
        "onstation.cli.relief_commands:supervise_cmd",
        "The team lead loop: watch tiers, relieve at Red, stop on halt.",
    ),
    # harness_commands: agents and their harnesses
    "install": (
        "onstation.cli.harness_commands:install_cmd",
        "Merge onstation's hooks, status line and skills into a harness's settings.",
    ),
    "uninstall": (
        "onstation.cli.harness_commands:uninstall_cmd",
        "Remove exactly what install added.",
    ),
    "doctor": (
        "onstation.cli.doctor:doctor_cmd",
        "Check the install, hook trust, ledger, window and witness; print what to fix.",
    ),
    "workspace": (
        "onstation.cli.harness_commands:workspace",
        "Which identity a workspace works for.",
    ),
    "brief": ("onstation.cli.harness_commands:brief", "Turnover briefs, built from evidence."),
    "manifest": ("onstation.cli.harness_commands:manifest", "Coordinator continuation manifests."),
    "note": (
        "onstation.cli.harness_commands:note_cmd",
        "Record a decision (with --why) or a note for NODE's successor (a fenced generation "
        "is denied, exit 3).",
    ),
    "message": (
        "onstation.cli.harness_commands:message",
        "Messages between actors (relief requests, shutdown, exchanges).",
    ),
    "hook": (
        "onstation.cli.harness_commands:hook_help",
        "onstation hook HARNESS EVENT: answer one harness hook (JSON on stdin).",
    ),
    "statusline": (
        "onstation.cli.harness_commands:statusline_help",
        "onstation statusline [--wrap COMMAND]: record the status line's telemetry, print a line.",
    ),
    # plan_commands: capsules, plans, the verdict, keys
    "capsule": (
        "onstation.cli.plan_commands:capsule",
        "Resurrection capsules: build from artifacts, seal (sign), verify.",
    ),
    "plan": (
        "onstation.cli.plan_commands:plan",
        "Resurrection plans: schema and semantic validation.",
    ),
    "resurrect": (
        "onstation.cli.plan_commands:resurrect_cmd",
        "Classify an incident, decide, and print the operator review (--json: the plan).",
    ),
    "keys": (
        "onstation.cli.plan_commands:keys",
        "Signer keys (Ed25519), kept outside the workspace (env ONSTATION_KEYS_DIR).",
    ),
    # demo: the demo and the tour
    "demo": (
        "onstation.cli.demo:demo_cmd",
        "The main job on a scratch team: three fake agents, a relief, a self-respawn.",
    ),
    "tour": (
        "onstation.cli.demo:tour_cmd",
        "A tour of one relief on the ledger alone: birth, fence, stale body denied, AMBIGUOUS.",
    ),
    # fake_agent_command: the fake agent
    "fake-agent": (
        "onstation.cli.fake_agent_command:fake_agent_cmd",
        "A fake Claude Code session for demos and tests: real git, real hooks, no model.",
    ),
    # sim_commands: the crash-loop simulation
    "simulate": (
        "onstation.cli.sim_commands:simulate_cmd",
        "Drive the real relief and ledger with a simulated clock, bodies and faults; check "
        "every invariant after every step.",
    ),
    # daemon_commands: the per-user daemon (issue 14)
    "daemon": (
        "onstation.cli.daemon_commands:daemon_group",
        "The per-user daemon that runs hooks and short commands warm (optional).",
    ),
    # alert_commands: alerts and their webhooks (issue 15)
    "webhook": (
        "onstation.cli.alert_commands:webhook",
        "Webhook subscriptions for alerts (signed with HMAC-SHA256).",
    ),
    "alerts": (
        "onstation.cli.alert_commands:alerts",
        "Alerts: what an operator must hear about, and their webhook deliveries.",
    ),
}


def exit_codes_help() -> str:
    """The exit-code table of ``onstation --help``, made from :class:`ExitCode` (the README's
    table is checked against the same enum)."""
    from onstation.core.errors import ExitCode

    return "\n".join(f"  {int(code)}  {code.description}" for code in ExitCode)


def epilog() -> str:
    """The root group's epilog; ``\\b`` keeps click from rewrapping the table."""
    return "\b\nExit codes:\n" + exit_codes_help()


def help_width() -> int:
    """The width click's help formatter takes: the terminal's columns (``COLUMNS`` first, as
    :func:`shutil.get_terminal_size` reads them, 80 when unknown), at most
    :data:`MAX_CONTENT_WIDTH`, less 2, at least 50."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return max(min(columns, MAX_CONTENT_WIDTH) - 2, 50)


def shorten(text: str, limit: int) -> str:
    """``text``'s first sentence in at most ``limit`` columns: click's
    ``_make_default_short_help``, which cuts at the first sentence and then calls
    ``textwrap.shorten(text, limit, placeholder="...", break_on_hyphens=False)``."""
    words = text.partition("\n\n")[0].split()
    if words and words[0] == "\b":
        words = words[1:]
    if not words:
        return ""
    last = len(words) - 1
    for i, word in enumerate(words):
        if word.endswith(".") and (i == last or not words[i + 1][0].islower()):
            words = words[: i + 1]
            break
    joined = " ".join(words)
    if len(joined) <= limit:
        return joined
    if limit < 3:
        return "..."
    if any(len(word) > limit for word in words):  # textwrap splits such a word: its own rules
        import textwrap

        return textwrap.shorten(joined, limit, placeholder="...", break_on_hyphens=False)
    # With whole words only, textwrap keeps the longest run of words that leaves room for
    # the placeholder.
    kept = ""
    for word in words:
        candidate = f"{kept} {word}" if kept else word
        if len(candidate) + 3 > limit:
            break
        kept = candidate
    return f"{kept}..." if kept else "..."


def _fill(text: str, width: int, indent: str, subsequent: str | None = None) -> str:
    """One paragraph wrapped to ``width`` as click's ``wrap_text`` wraps it."""
    if len(indent) + len(text) <= width and text == text.strip() and "\n" not in text:
        return indent + text
    import textwrap

    return textwrap.TextWrapper(
        width,
        initial_indent=indent,
        subsequent_indent=indent if subsequent is None else subsequent,
        replace_whitespace=False,
    ).fill(text)


def _definition_list(rows: Sequence[tuple[str, str]], width: int, indent: int) -> list[str]:
    """click's ``HelpFormatter.write_dl`` (first column at most 30 wide, 2 spaces after)."""
    first_col = min(max(len(term) for term, _ in rows), 30) + 2
    text_width = max(width - first_col - 2, 10)
    lines: list[str] = []
    for term, text in rows:
        head = " " * indent + term
        if not text:
            lines.append(head)
            continue
        if len(term) <= first_col - 2:
            head += " " * (first_col - len(term))
        else:
            lines.append(head)
            head = " " * (first_col + indent)
        wrapped = _fill(text, text_width, "").splitlines()
        lines.append(head + (wrapped[0] if wrapped else ""))
        lines.extend(" " * (first_col + indent) + line for line in wrapped[1:])
    return lines


def render_help(width: int) -> str:
    """``onstation --help`` as click renders it at ``width`` (at least 37) columns, without
    its final newline (click's ``Context.get_help``)."""
    prefix = f"Usage: {PROG} "
    # (below 37 columns click puts the arguments on a line of their own; never asked here)
    lines = _fill("[OPTIONS] COMMAND [ARGS]...", width, prefix, " " * len(prefix)).splitlines()
    lines.append("")
    lines += _fill(GROUP_HELP, width, "  ").splitlines()
    lines += ["", "Options:", *_definition_list(OPTIONS, width, 2)]
    limit = width - 6 - max(len(name) for name in COMMAND_TABLE)
    rows = [(name, shorten(COMMAND_TABLE[name][1], limit)) for name in sorted(COMMAND_TABLE)]
    lines += ["", "Commands:", *_definition_list(rows, width, 2)]
    # The epilog's ``\b`` paragraph is printed as written, each line indented.
    lines += ["", *("  " + line for line in epilog().split("\n")[1:])]
    return "\n".join(lines)


def _write(text: str) -> int:
    """Print ``text`` as ``click.echo`` does; 1 when the reader has gone (click's exit code
    for a broken pipe), else 0."""
    if sys.stdout is None:  # no stdout at all: click prints nothing and succeeds
        return 0
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # Nothing more can be written; keep the interpreter's final flush from failing too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return 0


def try_fast_help(argv: list[str]) -> int | None:
    """The exit code of ``onstation --help``, ``-h`` or ``--version`` answered here, or None
    to leave ``argv`` to click."""
    if len(argv) != 1 or argv[0] not in ("--help", "-h", "--version") or COMPLETE_VAR in os.environ:
        return None
    if argv[0] == "--version":
        from onstation import __version__

        return _write(f"{PROG}, version {__version__}")
    return _write(render_help(help_width()))


__all__ = ["COMMAND_TABLE", "GROUP_HELP", "MAX_CONTENT_WIDTH", "render_help", "try_fast_help"]
