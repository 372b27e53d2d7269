"""The ledger's own commands: identities (``node``, ``actor``, ``episode``), bodies (``lease``,
``guard``, ``denials``, ``grant``), effects (``effect``), the history and the database (``db``).

Each group is imported by the root group (:mod:`onstation.cli.main`) when it is first used.
"""

from __future__ import annotations

from datetime import timedelta

import click

from onstation.cli.common import (
    Options,
    body_generation,
    command_options,
    emit,
    open_ledger,
    operator_name,
    parse_json_option,
    positive_int,
)
from onstation.core.effects import EffectState
from onstation.core.names import validate_free_text, validate_name
from onstation.core.timefmt import human_time
from onstation.core.types import Effect, Event


def _check_name(value: str, field: str = "node") -> str:
    return validate_name(value, field)


def _ttl(seconds: int) -> timedelta:
    from onstation.ledger.ledger import MAX_LEASE_TTL

    # Checked here too: timedelta() itself overflows long before the ledger's own check.
    return timedelta(seconds=positive_int(seconds, "--ttl", int(MAX_LEASE_TTL.total_seconds())))


# --------------------------------------------------------------------------------------------
# nodes


@click.group()
def node() -> None:
    """Durable identities (AgentNodes)."""


@node.command("register")
@click.argument("name")
@click.option("--role", default=None, help="The node's role, e.g. executor or coordinator.")
@click.option(
    "--spawner", default=None, help="The node that spawned this one (notified on respawn)."
)
@command_options
def node_register(name: str, role: str | None, spawner: str | None, opts: Options) -> None:
    """Register a durable identity at generation 1."""
    _check_name(name)
    with open_ledger(opts) as ledger:
        created = ledger.register_node(name, role=role, spawner=spawner, by=operator_name())
    emit(opts, created.to_json(), f"registered {created.node} (generation {created.generation})")


@node.command("show")
@click.argument("name")
@command_options
def node_show(name: str, opts: Options) -> None:
    """Show an identity, its live body and its effects in flight."""
    _check_name(name)
    with open_ledger(opts, create=False) as ledger:
        current = ledger.get_node(name)
        lease = ledger.live_lease(name)
        effects = ledger.effects(name)
        respawn = ledger.respawn_status(name)
    open_effects = [e for e in effects if e.state not in (EffectState.COMMITTED,)]
    data = current.to_json() | {
        "live_lease": None if lease is None else lease.to_json(),
        "open_effects": [e.to_json() for e in open_effects],
        "respawn": respawn.to_json(),
    }

    def human() -> str:
        lines = [
            f"node        {current.node}",
            f"role        {current.role or '-'}",
            f"spawner     {current.spawner or '-'}",
            f"generation  {current.generation}",
            f"state       {current.state}",
            "body        "
            + (
                "none live"
                if lease is None
                else f"lease {lease.lease_id} ({lease.holder or 'unnamed'}), "
                f"expires {human_time(lease.expires_at)}"
            ),
            f"respawns    {respawn.count_in_window}/{respawn.limit} in window"
            + (" — breaker OPEN" if current.breaker_open else ""),
        ]
        if open_effects:
            lines.append("effects not yet committed:")
            lines.extend(f"  {_effect_line(e)}" for e in open_effects)
        return "\n".join(lines)

    emit(opts, data, human)


@node.command("list")
@command_options
def node_list(opts: Options) -> None:
    """List every identity."""
    with open_ledger(opts, create=False) as ledger:
        nodes = ledger.list_nodes()
    emit(
        opts,
        {"nodes": [n.to_json() for n in nodes]},
        lambda: (
            "\n".join(
                f"{n.node:<24} generation {n.generation:<4} {n.role or '-':<14} {n.state}"
                + (" breaker-open" if n.breaker_open else "")
                for n in nodes
            )
            or "no nodes"
        ),
    )


# --------------------------------------------------------------------------------------------
# actors and episodes


@click.group()
def actor() -> None:
    """Offices, roles and mailboxes."""


@actor.command("add")
@click.argument("name")
@click.option("--node", "node_name", default=None, help="The node holding this office.")
@command_options
def actor_add(name: str, node_name: str | None, opts: Options) -> None:
    """Record an actor (an office or mailbox), optionally held by a node."""
    _check_name(name, "actor")
    with open_ledger(opts) as ledger:
        created = ledger.add_actor(name, node=node_name, by=operator_name())
    emit(opts, created.to_json(), f"actor {created.actor} -> {created.node or '-'}")


@actor.command("list")
@command_options
def actor_list(opts: Options) -> None:
    """List actors."""
    with open_ledger(opts, create=False) as ledger:
        actors = ledger.list_actors()
    emit(
        opts,
        {"actors": [a.to_json() for a in actors]},
        lambda: "\n".join(f"{a.actor:<24} {a.node or '-'}" for a in actors) or "no actors",
    )


@click.group()
def episode() -> None:
    """Work episodes: one bounded assignment of a node."""


_BODY_GENERATION = click.option(
    "--generation", type=int, default=None,
    help="The generation of the body writing (default: ONSTATION_GENERATION in a body of "
         "this node's environment; an operator gives none).",
)  # fmt: skip


@episode.command("open")
@click.argument("name")
@click.option("--objective", required=True, help="What the episode is for.")
@_BODY_GENERATION
@command_options
def episode_open(name: str, objective: str, generation: int | None, opts: Options) -> None:
    """Open the node's work episode (from a body: its generation is checked, exit 3 if
    fenced)."""
    _check_name(name)
    generation = body_generation(generation, name, required=False, what="episode open")
    with open_ledger(opts) as ledger:
        ep = ledger.open_episode(name, objective, by=operator_name(), generation=generation)
    emit(opts, ep.to_json(), f"episode {ep.episode_id} open for {ep.node}: {ep.objective}")


@episode.command("settle")
@click.argument("name")
@_BODY_GENERATION
@command_options
def episode_settle(name: str, generation: int | None, opts: Options) -> None:
    """Settle (close) the node's open episode (from a body: its generation is checked)."""
    _check_name(name)
    generation = body_generation(generation, name, required=False, what="episode settle")
    with open_ledger(opts) as ledger:
        ep = ledger.settle_episode(name, by=operator_name(), generation=generation)
    emit(opts, ep.to_json(), f"episode {ep.episode_id} of {ep.node} settled")


@episode.command("list")
@click.argument("name")
@command_options
def episode_list(name: str, opts: Options) -> None:
    """List the node's episodes."""
    _check_name(name)
    with open_ledger(opts, create=False) as ledger:
        eps = ledger.episodes(name)
    emit(
        opts,
        {"episodes": [e.to_json() for e in eps]},
        lambda: (
            "\n".join(f"{e.episode_id:<5} {e.state:<8} {e.objective}" for e in eps) or "no episodes"
        ),
    )


# --------------------------------------------------------------------------------------------
# leases


@click.group()
def lease() -> None:
    """Body leases: admission, heartbeat, release and fencing."""


@lease.command("acquire")
@click.argument("name")
@click.option("--holder", default=None, help="Who the body is (session id, witness).")
@click.option("--ttl", type=int, default=3600, show_default=True, help="Lease lifetime in seconds.")
@click.option(
    "--expect-generation", type=int, default=None, help="Admit only if this is the generation."
)
@command_options
def lease_acquire(
    name: str, holder: str | None, ttl: int, expect_generation: int | None, opts: Options
) -> None:
    """Admit a body for the node's current generation."""
    _check_name(name)
    lifetime = _ttl(ttl)
    if expect_generation is not None:
        positive_int(expect_generation, "--expect-generation")
    with open_ledger(opts) as ledger:
        got = ledger.acquire_lease(
            name,
            holder=holder,
            ttl=lifetime,
            expect_generation=expect_generation,
            by=operator_name(),
        )
    emit(
        opts,
        got.to_json(),
        f"admitted {got.node} generation {got.generation} (lease {got.lease_id}, "
        f"expires {human_time(got.expires_at)})",
    )


@lease.command("fence")
@click.argument("name")
@click.option("--expect-generation", type=int, required=True, help="The generation to fence.")
@click.option("--reason", default="fenced by operator", help="Why, for the history.")
@command_options
def lease_fence(name: str, expect_generation: int, reason: str, opts: Options) -> None:
    """Fence the node: generation + 1 by compare-and-swap, revoking the old lease and grants."""
    _check_name(name)
    positive_int(expect_generation, "--expect-generation")
    with open_ledger(opts) as ledger:
        result = ledger.fence(
            name, expect_generation=expect_generation, by=operator_name(), reason=reason
        )
    emit(
        opts,
        result.to_json(),
        f"fenced {result.node}: generation {result.previous_generation} -> {result.generation}"
        f" (revoked {len(result.revoked_leases)} lease(s), {len(result.revoked_grants)} grant(s))",
    )


@lease.command("renew")
@click.argument("name")
@click.option("--generation", type=int, required=True, help="The body's generation.")
@click.option("--ttl", type=int, default=3600, show_default=True, help="New lifetime in seconds.")
@command_options
def lease_renew(name: str, generation: int, ttl: int, opts: Options) -> None:
    """Heartbeat: extend the body's lease (denied for a stale generation)."""
    _check_name(name)
    positive_int(generation, "--generation")
    lifetime = _ttl(ttl)
    with open_ledger(opts) as ledger:
        got = ledger.renew_lease(name, generation=generation, ttl=lifetime)
    emit(
        opts,
        got.to_json(),
        f"renewed {got.node} generation {got.generation} until {human_time(got.expires_at)}",
    )


@lease.command("release")
@click.argument("name")
@click.option("--generation", type=int, required=True, help="The body's generation.")
@command_options
def lease_release(name: str, generation: int, opts: Options) -> None:
    """The body gives its lease back."""
    _check_name(name)
    positive_int(generation, "--generation")
    with open_ledger(opts) as ledger:
        got = ledger.release_lease(name, generation=generation)
    emit(opts, got.to_json(), f"released {got.node} generation {got.generation}")


@lease.command("list")
@click.argument("name")
@command_options
def lease_list(name: str, opts: Options) -> None:
    """Every lease the node ever had."""
    _check_name(name)
    with open_ledger(opts, create=False) as ledger:
        leases = ledger.leases(name)
    emit(
        opts,
        {"leases": [lease.to_json() for lease in leases]},
        lambda: (
            "\n".join(
                f"generation {ls.generation:<4} lease {ls.lease_id:<5} {ls.state.value:<9} "
                f"{ls.holder or '-'}"
                for ls in leases
            )
            or "no leases"
        ),
    )


# --------------------------------------------------------------------------------------------
# guard, denials, grants


@click.command("guard")
@click.argument("name")
@click.option("--generation", type=int, required=True, help="The body's generation.")
@click.option("--action", default="write", help="What the body is about to do.")
@command_options
def guard_cmd(name: str, generation: int, action: str, opts: Options) -> None:
    """Check that a body may act now; a refusal is recorded (exit 3)."""
    _check_name(name)
    positive_int(generation, "--generation")
    validate_free_text(action, "--action", 1024)
    with open_ledger(opts) as ledger:
        got = ledger.guard(name, generation=generation, action=action)
    emit(
        opts,
        {"node": name, "generation": generation, "allowed": True, "lease_id": got.lease_id},
        f"allowed: {name} generation {generation} holds lease {got.lease_id}",
    )


@click.command("denials")
@click.argument("name")
@command_options
def denials_cmd(name: str, opts: Options) -> None:
    """The node's durable denial receipts."""
    _check_name(name)
    with open_ledger(opts, create=False) as ledger:
        rows = ledger.denials(name)
    emit(
        opts,
        {"node": name, "denials": [d.to_json() for d in rows]},
        lambda: (
            "\n".join(
                f"{human_time(d.at)}  generation {d.presented_generation} "
                f"(current {d.current_generation})  {d.reason:<18} {d.action}"
                for d in rows
            )
            or "no denials"
        ),
    )


@click.group()
def grant() -> None:
    """Capability grants, issued per generation and revoked by a fence."""


@grant.command("issue")
@click.argument("name")
@click.option("--generation", type=int, required=True, help="The body's generation.")
@click.option("--capability", required=True, help="What is granted, e.g. tool:Bash.")
@command_options
def grant_issue(name: str, generation: int, capability: str, opts: Options) -> None:
    """Issue a capability to the live generation."""
    _check_name(name)
    positive_int(generation, "--generation")
    with open_ledger(opts) as ledger:
        got = ledger.issue_grant(name, generation=generation, capability=capability)
    emit(opts, got.to_json(), f"granted {got.capability} to {got.node}@{got.generation}")


@grant.command("list")
@click.argument("name")
@command_options
def grant_list(name: str, opts: Options) -> None:
    """The node's grants."""
    _check_name(name)
    with open_ledger(opts, create=False) as ledger:
        rows = ledger.grants(name)
    emit(
        opts,
        {"grants": [g.to_json() for g in rows]},
        lambda: (
            "\n".join(
                f"{g.grant_id:<5} generation {g.generation:<4} {g.state:<8} {g.capability}"
                for g in rows
            )
            or "no grants"
        ),
    )


# --------------------------------------------------------------------------------------------
# effects


def _effect_line(e: Effect) -> str:
    return (
        f"{e.effect_id}  {e.state.value:<22} gen {e.generation:<3} {e.operation} -> "
        f"{e.destination}"
        + (f"  [slot {e.approval_slot}]" if e.approval_slot else "")
        + (f"  [repeat of {e.repeat_of}: {e.repeat_reason}]" if e.repeat_of else "")
    )


@click.group()
def effect() -> None:
    """Non-idempotent effects: INTENDED -> DISPATCHED -> OBSERVED -> COMMITTED."""


@effect.command("intend")
@click.argument("name")
@click.option("--generation", type=int, required=True, help="The body's generation.")
@click.option("--op", "operation", required=True, help="Operation, e.g. git.push.")
@click.option("--dest", "destination", required=True, help="Where it lands (remote, URL, channel).")
@click.option("--args", "arguments", default="{}", show_default=True, help="Arguments as JSON.")
@click.option(
    "--slot", default=None,
    help="Approval slot of a deliberate repeat (with --repeat-reason); alone it changes nothing.",
)  # fmt: skip
@click.option(
    "--repeat-reason", default=None,
    help="Declare a deliberate repeat of an earlier effect under --slot, and why.",
)  # fmt: skip
@click.option("--id", "caller_ref", default=None, help="Caller's own id (never the identity).")
@command_options
def effect_intend(
    name: str,
    generation: int,
    operation: str,
    destination: str,
    arguments: str,
    slot: str | None,
    repeat_reason: str | None,
    caller_ref: str | None,
    opts: Options,
) -> None:
    """Record the intent to perform an effect (the same logical effect is never recorded twice,
    whatever its slot, unless a repeat is declared with --slot and --repeat-reason)."""
    _check_name(name)
    positive_int(generation, "--generation")
    args = parse_json_option(arguments, "--args")
    with open_ledger(opts) as ledger:
        got, created = ledger.intend_effect(
            name,
            generation=generation,
            operation=operation,
            destination=destination,
            arguments=args,
            approval_slot=slot,
            caller_ref=caller_ref,
            repeat_reason=repeat_reason,
        )
    emit(
        opts,
        got.to_json() | {"created": created},
        f"{'intended' if created else 'existing'} {_effect_line(got)}",
    )


def _advance(
    verb: str, effect_id: str, generation: int, opts: Options, result: str | None = None
) -> None:
    validate_name(effect_id, "effect id")
    positive_int(generation, "--generation")
    with open_ledger(opts) as ledger:
        if verb == "dispatch":
            got = ledger.dispatch_effect(effect_id, generation=generation)
        elif verb == "observe":
            parsed = None if result is None else parse_json_option(result, "--result")
            got = ledger.observe_effect(effect_id, generation=generation, result=parsed)
        elif verb == "commit":
            got = ledger.commit_effect(effect_id, generation=generation)
        else:
            got = ledger.fail_effect(effect_id, generation=generation, reason=result)
    emit(opts, got.to_json(), _effect_line(got))


@effect.command("dispatch")
@click.argument("effect_id")
@click.option("--generation", type=int, required=True, help="The body's generation.")
@command_options
def effect_dispatch(effect_id: str, generation: int, opts: Options) -> None:
    """INTENDED -> DISPATCHED, just before acting."""
    _advance("dispatch", effect_id, generation, opts)


@effect.command("observe")
@click.argument("effect_id")
@click.option("--generation", type=int, required=True, help="The body's generation.")
@click.option("--result", default=None, help="The authoritative result, as JSON.")
@command_options
def effect_observe(effect_id: str, generation: int, result: str | None, opts: Options) -> None:
    """DISPATCHED -> OBSERVED, with the result seen."""
    _advance("observe", effect_id, generation, opts, result)


@effect.command("commit")
@click.argument("effect_id")
@click.option("--generation", type=int, required=True, help="The body's generation.")
@command_options
def effect_commit(effect_id: str, generation: int, opts: Options) -> None:
    """OBSERVED -> COMMITTED."""
    _advance("commit", effect_id, generation, opts)


@effect.command("fail")
@click.argument("effect_id")
@click.option("--generation", type=int, required=True, help="The body's generation.")
@click.option("--reason", default=None, help="Why it was given up.")
@command_options
def effect_fail(effect_id: str, generation: int, reason: str | None, opts: Options) -> None:
    """INTENDED -> FAILED_BEFORE_DISPATCH."""
    _advance("fail", effect_id, generation, opts, reason)


@effect.command("reconcile")
@click.argument("name")
@command_options
def effect_reconcile(name: str, opts: Options) -> None:
    """Settle the effects of the node's fenced generations: on evidence where there is some
    (a push seen on its remote, a call the host rejected), else DISPATCHED -> AMBIGUOUS."""
    _check_name(name)
    from onstation.relief.reconcile import observe_and_reconcile

    with open_ledger(opts) as ledger:
        report = observe_and_reconcile(ledger, name, by=operator_name())

    def human() -> str:
        lines = [f"reconciled {report.node} (generation {report.generation})"]
        lines += [f"  AMBIGUOUS               {e}" for e in report.ambiguous]
        lines += [f"  FAILED_BEFORE_DISPATCH  {e}" for e in report.failed_before_dispatch]
        lines += [f"  COMMITTED               {e}" for e in report.committed]
        if report.unresolved_ambiguous:
            lines.append(
                f"  {len(report.unresolved_ambiguous)} ambiguous effect(s) await an operator: "
                "onstation effect resolve ID --as observed|compensated --by NAME --why TEXT"
            )
        return "\n".join(lines)

    emit(opts, report.to_json(), human)


@effect.command("resolve")
@click.argument("effect_id")
@click.option(
    "--as", "outcome", required=True, type=click.Choice(["observed", "compensated"]),
    help="observed: it happened; compensated: a compensating action undid it.",
)  # fmt: skip
@click.option("--by", "by", required=True, help="The operator recording this.")
@click.option("--why", required=True, help="The evidence.")
@command_options
def effect_resolve(effect_id: str, outcome: str, by: str, why: str, opts: Options) -> None:
    """An operator settles an AMBIGUOUS effect."""
    validate_name(effect_id, "effect id")
    with open_ledger(opts) as ledger:
        got = ledger.resolve_effect(effect_id, outcome=outcome, by=by, why=why)
    emit(opts, got.to_json(), _effect_line(got))


@effect.command("list")
@click.argument("name")
@click.option(
    "--state", default=None, type=click.Choice([s.value for s in EffectState]),
    help="Only effects in this state.",
)  # fmt: skip
@command_options
def effect_list(name: str, state: str | None, opts: Options) -> None:
    """The node's effects."""
    _check_name(name)
    with open_ledger(opts, create=False) as ledger:
        rows = ledger.effects(name, state=None if state is None else EffectState(state))
    emit(
        opts,
        {"node": name, "effects": [e.to_json() for e in rows]},
        lambda: "\n".join(_effect_line(e) for e in rows) or "no effects",
    )


@effect.command("show")
@click.argument("effect_id")
@command_options
def effect_show(effect_id: str, opts: Options) -> None:
    """One effect, whole."""
    validate_name(effect_id, "effect id")
    with open_ledger(opts, create=False) as ledger:
        got = ledger.get_effect(effect_id)
    emit(
        opts,
        got.to_json(),
        lambda: "\n".join(f"{k:<14} {v}" for k, v in got.to_json().items()),
    )


# --------------------------------------------------------------------------------------------
# history


def _event_line(e: Event) -> str:
    detail = " ".join(f"{k}={v}" for k, v in sorted(e.detail.items()) if v not in (None, [], ""))
    gen = "-" if e.generation is None else str(e.generation)
    return f"{e.seq:>5}  {human_time(e.at)}  gen {gen:<3} {e.kind:<22} {e.actor:<16} {detail}"


@click.command("history")
@click.argument("name")
@click.option("--limit", type=int, default=None, help="Only the last N events.")
@command_options
def history_cmd(name: str, limit: int | None, opts: Options) -> None:
    """The node's append-only event history."""
    _check_name(name)
    if limit is not None:
        positive_int(limit, "--limit")
    with open_ledger(opts, create=False) as ledger:
        events = ledger.history(name, limit=limit)
    emit(
        opts,
        {"node": name, "events": [e.to_json() for e in events]},
        lambda: "\n".join(_event_line(e) for e in events) or "no events",
    )


# --------------------------------------------------------------------------------------------
# database


@click.group()
def db() -> None:
    """The ledger database itself."""


@db.command("migrate")
@command_options
def db_migrate(opts: Options) -> None:
    """Apply pending schema migrations (PostgreSQL; SQLite migrates itself on open)."""
    from onstation.ledger import open_backend

    backend = open_backend(opts.db, require_migrated=False)
    try:
        applied = backend.migrate()
        version = backend.schema_version()
    finally:
        backend.close()
    emit(
        opts,
        {"applied": applied, "schema_version": version, "backend": backend.name},
        f"{backend.name}: applied {applied or 'nothing'}; schema version {version}",
    )


@db.command("status")
@command_options
def db_status(opts: Options) -> None:
    """Which backend and schema version the ledger URL reaches."""
    from onstation.ledger import latest_schema_version, open_backend

    backend = open_backend(opts.db, require_migrated=False, create=False)
    try:
        version = backend.schema_version()
    finally:
        backend.close()
    latest = latest_schema_version(backend.name)
    emit(
        opts,
        {"backend": backend.name, "url": backend.url, "schema_version": version, "latest": latest},
        f"{backend.name} {backend.url}: schema {version} (latest {latest})",
    )
