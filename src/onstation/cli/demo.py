"""``onstation demo`` (the main job on a scratch team) and ``onstation tour`` (the ledger
alone): the commands and what they print for a person.

The tour:

It runs real ledger operations on a real SQLite file (a temporary one unless ``--db`` is
given): a body is born, acts, goes silent mid-push; the relief fences it, the stale body
wakes and is denied, reconciliation marks the push AMBIGUOUS, the successor cannot repeat
it, an operator settles it, and the respawn governor stops a crash loop.
"""

from __future__ import annotations

import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from onstation.cli.common import Options, command_options, emit, plain_output
from onstation.core.errors import (
    BadInput,
    BlockedByPolicy,
    Conflict,
    OnstationError,
    StaleGeneration,
)
from onstation.ledger import Ledger

# --------------------------------------------------------------------------------------------
# the commands (imported by the root group when first used)


@click.command("demo")
@click.option("--keep", is_flag=True, help="Keep the scratch team and print where it is.")
@click.option("--timeout", type=float, default=120.0, show_default=True, help="Seconds at most.")
@command_options
def demo_cmd(keep: bool, timeout: float, opts: Options) -> None:
    """The main job on a scratch team: three fake agents, a relief, a self-respawn."""
    run_team_demo(opts, keep=keep, timeout=timeout)


@click.command("tour")
@click.option("--keep", is_flag=True, help="Keep the tour's ledger and print where it is.")
@command_options
def tour_cmd(keep: bool, opts: Options) -> None:
    """A tour of one relief on the ledger alone: birth, fence, stale body denied, AMBIGUOUS."""
    run_tour(opts, keep=keep)


# --------------------------------------------------------------------------------------------
# what they print


def _step(title: str) -> None:
    click.echo("")
    text = f"== {title}"
    click.echo(text if plain_output(sys.stdout) else click.style(text, bold=True), color=True)


def _say(text: str) -> None:
    click.echo(f"   {text}")


def _expect_refusal(action: Callable[[], Any], kind: type[OnstationError]) -> OnstationError:
    try:
        action()
    except kind as exc:
        return exc
    raise AssertionError(f"the tour expected {kind.__name__} and got success")


def run_tour(opts: Options, *, keep: bool) -> None:
    """Run the tour and print it (``--json``: one summary object)."""
    scratch: Path | None = None
    if opts.db is None:
        scratch = Path(tempfile.mkdtemp(prefix="onstation-demo-"))
        url = str(scratch / "ledger.db")
    else:
        url = opts.db
    suffix = "" if scratch else f"-{secrets.token_hex(3)}"
    coord, executor = f"coord-auth{suffix}", f"exec-login{suffix}"
    quiet = opts.json
    echo_step = (lambda _t: None) if quiet else _step
    say = (lambda _t: None) if quiet else _say
    summary: dict[str, Any] = {"ledger": url, "coordinator": coord, "executor": executor}
    commit = "9fceb02d0ae598e95dc970b74767f19372d61af8"
    try:
        with Ledger.open(url) as ledger:
            echo_step("1. Birth: two identities, one body")
            ledger.register_node(coord, role="coordinator", by="demo")
            ledger.register_node(executor, role="executor", spawner=coord, by="demo")
            body = ledger.acquire_lease(executor, holder="pid 4242 on laptop (first body)")
            say(f"registered {coord} (coordinator) and {executor} (executor, spawned by {coord})")
            say(f"admitted {executor} generation {body.generation}: lease {body.lease_id}")

            echo_step("2. The body pushes, and goes silent before the result comes back")
            push, _ = ledger.intend_effect(
                executor,
                generation=1,
                operation="git.push",
                destination="git@example.com:team/app.git",
                arguments={"ref": "refs/heads/main", "commit": commit},
            )  # fmt: skip
            ledger.dispatch_effect(push.effect_id, generation=1)
            say(f"{push.effect_id}: git.push -> {push.destination}: INTENDED -> DISPATCHED")
            say("... no result recorded: the body's context ran out mid-call")

            echo_step("3. Relief: fence the old generation")
            fence = ledger.fence(executor, expect_generation=1, by="team-lead", reason="relief")
            say(
                f"compare-and-swap generation {fence.previous_generation} -> {fence.generation}; "
                f"revoked lease(s) {fence.revoked_leases}"
            )
            lost = _expect_refusal(
                lambda: ledger.fence(executor, expect_generation=1, by="second-supervisor"),
                Conflict,
            )
            say(f"a second supervisor racing the same fence loses: {lost.message}")

            echo_step("4. The old body wakes up and tries to act")
            denied = _expect_refusal(
                lambda: ledger.observe_effect(push.effect_id, generation=1, result={"ok": True}),
                StaleGeneration,
            )
            say(f"denied (exit 3): {denied.message}")
            receipt = ledger.denials(executor)[-1]
            say(
                f"denial receipt {receipt.denial_id}: presented generation "
                f"{receipt.presented_generation}, current {receipt.current_generation}, "
                f"attempted '{receipt.action}'"
            )

            echo_step("5. Reconcile: what happened to the push?")
            report = ledger.reconcile(executor, by="team-lead")
            say(f"DISPATCHED without a result -> AMBIGUOUS: {report.ambiguous}")

            echo_step("6. The successor is admitted; it may not repeat the push")
            successor = ledger.acquire_lease(executor, holder="pid 5151 on laptop (successor)")
            say(f"admitted generation {successor.generation}: lease {successor.lease_id}")
            repeat = _expect_refusal(
                lambda: ledger.intend_effect(
                    executor,
                    generation=successor.generation,
                    operation="GIT.PUSH",
                    destination="ssh://git@EXAMPLE.com/team/app",
                    arguments={"commit": commit, "ref": "refs/heads/main"},
                ),
                Conflict,
            )  # fmt: skip
            say("same push, spelled differently, keys reordered -> same fingerprint, refused:")
            say(f"  {repeat.message}")
            resolved = ledger.resolve_effect(
                push.effect_id,
                outcome="observed",
                by="operator",
                why="the remote shows 9fceb02 on main",
            )
            say(f"an operator checks the remote and records it: {resolved.state.value}")

            echo_step("7. A crash loop meets the respawn governor")
            for _ in range(ledger.respawn_policy.limit):
                status = ledger.request_respawn(executor, by="team-lead")
                say(f"respawn request: allowed ({status.reason})")
            blocked = _expect_refusal(
                lambda: ledger.request_respawn(executor, by="team-lead"), BlockedByPolicy
            )
            say(f"respawn request: blocked (exit 4): {blocked.message}")

            echo_step(f"History of {executor}")
            events = ledger.history(executor)
            for event in events:
                gen = "-" if event.generation is None else event.generation
                say(f"{event.seq:>3}  gen {gen!s:<2} {event.kind:<20} by {event.actor}")
            summary |= {
                "generation": successor.generation,
                "ambiguous": report.ambiguous,
                "denials": len(ledger.denials(executor)),
                "respawn_blocked": blocked.message,
                "events": len(events),
            }
    finally:
        if scratch is not None and not keep:
            shutil.rmtree(scratch, ignore_errors=True)
    if scratch is not None and keep:
        say(f"\nledger kept at {url}: try `onstation history {executor} --db {url}`")
    emit(opts, summary, "\nThe tour is over: one identity, two bodies, nothing repeated.")


def run_team_demo(opts: Options, *, keep: bool, timeout: float) -> None:
    """Run the scratch team (see :mod:`onstation.relief.demo`) and print what happened.

    ``timeout`` is how long the team may go without any progress, not a budget for the
    whole run: a busy machine makes the team slow, not wrong.
    """
    from onstation.relief.demo import TEAM, run_demo

    if timeout <= 0:
        raise BadInput("--timeout: must be positive")
    started = time.monotonic()
    say = (lambda _t: None) if opts.json else click.echo
    if not opts.json:
        _step("A scratch team: a coordinator and two executors, each a real process")
    summary = run_demo(keep=keep, say=say, stall=timeout)
    elapsed = time.monotonic() - started
    summary["elapsed_seconds"] = round(elapsed, 1)
    nodes = summary["nodes"]
    ok = bool(summary["ok"])
    if opts.json:
        emit(opts, summary, "")
    else:
        _step("The team, as the ledger sees it")
        from onstation.cli.relief_commands import _table

        click.echo(_table(summary["team"]))
        _step("Reliefs")
        for member in TEAM:
            for relief in nodes[member.node]["reliefs"]:
                click.echo(
                    f"   {member.node}: relief {relief['relief_id']} ({relief['cause']}): "
                    f"{relief['verdict']}, {relief['state']}, generation {relief['from']} -> "
                    f"{relief['to']}"
                )
                if relief["report"]:
                    click.echo(
                        f"     report: {relief['report']}"
                        if keep
                        else "     report written (use --keep to read it)"
                    )
        _step("Checks")
        for member in TEAM:
            n = nodes[member.node]
            click.echo(
                f"   {member.node:<12} {n['commits']}/{n['steps']} steps committed, "
                f"{'each exactly once' if n['each_step_once'] else 'NOT each once'}; "
                f"{n['pushes_committed']} push(es) journaled once; {n['ambiguous']} ambiguous; "
                f"generation {n['generation']}"
            )
        failed = summary["failed_checks"]
        for check in failed:
            where = f"{check['node']}: " if check["node"] else ""
            click.echo(f"   FAILED check '{check['check']}': {where}{check['detail']}")
        click.echo("")
        if ok:
            click.echo(
                f"Done in {elapsed:.1f} s: every commit made once, old bodies fenced, every "
                "loss on record, no process left behind."
                + (f" Scratch team kept in {summary['scratch']}" if keep else "")
            )
        else:
            names = ", ".join(sorted({f"'{c['check']}'" for c in failed}))
            click.echo(
                f"FAILED after {elapsed:.1f} s: {len(failed)} check(s) failed ({names})."
                + (f" Scratch team kept in {summary['scratch']}" if keep else "")
            )
    if not ok:
        raise SystemExit(1)
