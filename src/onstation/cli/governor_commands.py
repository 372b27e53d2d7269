"""The commands that stop things: the respawn governor (``respawn``), the persistent breaker
(``breaker``) and the halt gate (``halt``, ``unhalt``, ``halts``).

Each is imported by the root group (:mod:`onstation.cli.main`) when it is first used.
"""

from __future__ import annotations

from typing import Any

import click

from onstation.cli.common import Options, command_options, emit, open_ledger, operator_name
from onstation.core.names import validate_name
from onstation.core.timefmt import human_time_text


def _check_name(value: str, field: str = "node") -> str:
    return validate_name(value, field)


def _respawn_human(data: dict[str, Any]) -> str:
    line = f"{data['node']}: {data['count_in_window']}/{data['limit']} respawns in window"
    if data["breaker_open"]:
        line += " — breaker OPEN"
    if data.get("reopens_at"):
        line += f"; reopens at {human_time_text(str(data['reopens_at']))}"
    return line


@click.group()
def respawn() -> None:
    """The respawn governor: at most N respawns per identity per window."""


_KIND_OPTION = click.option(
    "--kind", "kind", type=click.Choice(["relief", "coordinator"]), default="relief",
    show_default=True,
    help="coordinator: a coordinator's self-respawn (its own cap); relief: a body relieved by "
         "its lead or an operator (births per window).",
)  # fmt: skip


@respawn.command("request")
@click.argument("name")
@_KIND_OPTION
@command_options
def respawn_request(name: str, kind: str, opts: Options) -> None:
    """Count one respawn if allowed (exit 4 with the reopening time if not)."""
    _check_name(name)
    with open_ledger(opts) as ledger:
        status = ledger.request_respawn(name, by=operator_name(), kind=kind)
    emit(opts, status.to_json(), f"allowed: {status.reason} for {status.node}")


@respawn.command("status")
@click.argument("name")
@_KIND_OPTION
@command_options
def respawn_status(name: str, kind: str, opts: Options) -> None:
    """What the governor would answer now."""
    _check_name(name)
    with open_ledger(opts, create=False) as ledger:
        status = ledger.respawn_status(name, kind=kind)
    emit(opts, status.to_json(), lambda: _respawn_human(status.to_json()))


@click.group()
def breaker() -> None:
    """The persistent per-identity breaker (survives restarts until closed)."""


@breaker.command("open")
@click.argument("name")
@click.option("--by", "by", default=None, help="Operator (default: the current user).")
@click.option("--why", default="opened by operator", help="Why.")
@command_options
def breaker_open(name: str, by: str | None, why: str, opts: Options) -> None:
    """Open the breaker: every respawn of the node is blocked."""
    _check_name(name)
    with open_ledger(opts) as ledger:
        got = ledger.open_breaker(name, by=by or operator_name(), why=why)
    emit(opts, got.to_json(), f"breaker open on {got.node}")


@breaker.command("close")
@click.argument("name")
@click.option("--by", "by", default=None, help="Operator (default: the current user).")
@click.option("--why", default="closed by operator", help="Why.")
@command_options
def breaker_close(name: str, by: str | None, why: str, opts: Options) -> None:
    """Close the breaker."""
    _check_name(name)
    with open_ledger(opts) as ledger:
        got = ledger.close_breaker(name, by=by or operator_name(), why=why)
    emit(opts, got.to_json(), f"breaker closed on {got.node}")


@click.command("halt")
@click.option("--node", "node_name", default=None, help="Halt one identity (default: all).")
@click.option("--why", required=True, help="Why (recorded).")
@click.option("--by", "by", default=None, help="Operator (default: the current user).")
@command_options
def halt_cmd(node_name: str | None, why: str, by: str | None, opts: Options) -> None:
    """Block admission of new bodies and new effects until lifted."""
    if node_name is not None:
        _check_name(node_name)
    with open_ledger(opts) as ledger:
        got = ledger.halt(node=node_name, by=by or operator_name(), why=why)
    emit(opts, got.to_json(), f"halted {got.node or 'everything'} (halt {got.halt_id}): {got.why}")


@click.command("unhalt")
@click.option("--node", "node_name", default=None, help="Lift the halt of one identity.")
@click.option("--by", "by", default=None, help="Operator (default: the current user).")
@command_options
def unhalt_cmd(node_name: str | None, by: str | None, opts: Options) -> None:
    """Lift a halt."""
    if node_name is not None:
        _check_name(node_name)
    with open_ledger(opts) as ledger:
        lifted = ledger.unhalt(node=node_name, by=by or operator_name())
    emit(
        opts,
        {"lifted": [h.to_json() for h in lifted]},
        f"lifted {len(lifted)} halt(s)" if lifted else "no halt was in force",
    )


@click.command("halts")
@command_options
def halts_cmd(opts: Options) -> None:
    """Halts in force."""
    with open_ledger(opts, create=False) as ledger:
        rows = ledger.halts()
    emit(
        opts,
        {"halts": [h.to_json() for h in rows]},
        lambda: (
            "\n".join(
                f"halt {h.halt_id}: {h.node or 'everything'} by {h.by} — {h.why}" for h in rows
            )
            or "no halt in force"
        ),
    )
