"""The effect journal: intend, dispatch, observe, reconcile and resolve side effects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onstation.core.canonical import JsonValue, canonical_bytes, loads_strict
from onstation.core.effects import (
    REINTENDABLE,
    EffectAction,
    EffectState,
    effect_id_for,
    effect_payload,
    fingerprint,
    identity_slot,
    next_state,
)
from onstation.core.errors import (
    BadInput,
    Conflict,
)
from onstation.core.leases import GuardOutcome
from onstation.core.names import validate_free_text, validate_name
from onstation.core.redact import redact, redact_tree, without_userinfo
from onstation.core.types import (
    Effect,
    ReconcileReport,
)
from onstation.ledger.backends import Tx
from onstation.ledger.base import LedgerBase

#: How a dispatched effect is settled on evidence: the action, and the key its evidence is
#: kept under in the effect's result.
_SETTLEMENTS = {
    "not-executed": (EffectAction.RESOLVE_NOT_EXECUTED, "not_executed"),
    "uncertain": (EffectAction.UNCERTAIN, "uncertain"),
    "observed": (EffectAction.OBSERVE, "observed"),
}


@dataclass(frozen=True)
class DispatchedCall:
    """A DISPATCHED effect and the tool call that dispatched it (None fields: not recorded)."""

    effect_id: str
    generation: int
    operation: str
    arguments: JsonValue
    session_id: str | None
    tool_use_id: str | None
    tool_name: str | None
    input_digest: str | None
    transcript_path: str | None
    transcript_offset: int | None
    observe: JsonValue


def _dispatched_call(row: Any) -> DispatchedCall:
    return DispatchedCall(
        effect_id=row[0], generation=int(row[1]), operation=row[2],
        arguments=loads_strict(row[3], "arguments"), session_id=row[4], tool_use_id=row[5],
        tool_name=row[6], input_digest=row[7], transcript_path=row[8],
        transcript_offset=None if row[9] is None else int(row[9]),
        observe=None if row[10] is None else loads_strict(row[10], "observe"),
    )  # fmt: skip


class EffectJournal(LedgerBase):
    """The effect journal: intend, dispatch, observe, reconcile and resolve side effects."""

    # ----------------------------------------------------------------------------------------
    # effects

    def intend_effect(
        self,
        node: str,
        *,
        generation: int,
        operation: str,
        destination: str,
        arguments: JsonValue,
        approval_slot: str | None = None,
        caller_ref: str | None = None,
        repeat_reason: str | None = None,
    ) -> tuple[Effect, bool]:
        """Record the intent to perform one logical effect; returns (effect, created).

        The fingerprint is recomputed here over the effect's identity: node, operation,
        destination and arguments. The same logical effect presented again, under any slot or
        none, returns the existing record while it has not been dispatched, and is a
        :class:`Conflict` once it has. Only a declared repeat (``approval_slot`` and
        ``repeat_reason``) is recorded as a new effect naming the one it repeats, once per
        slot: presenting that slot again finds that repeat.
        """
        validate_name(node, "node")
        if approval_slot is not None:
            validate_free_text(approval_slot, "slot", 256)
        if repeat_reason is not None:
            validate_free_text(repeat_reason, "--repeat-reason")
        if caller_ref is not None:
            validate_free_text(caller_ref, "caller reference", 256)
        if isinstance(arguments, str):
            arguments = loads_strict(arguments, "args")
        # A credential is never part of an effect's identity (a push to origin is the same
        # push whatever token the URL carried) and never kept: redacted before the fingerprint,
        # so the ledger, and every capsule and brief carrying its records, never holds it.
        destination = redact(without_userinfo(destination)).text
        arguments = redact_tree(arguments)[0]
        repeat_slot = identity_slot(approval_slot, repeat_reason)
        payload = effect_payload(
            node=node, operation=operation, destination=destination, arguments=arguments,
            approval_slot=None,
        )  # fmt: skip
        logical_print = fingerprint(
            node=node, operation=operation, destination=destination, arguments=arguments,
            approval_slot=None,
        )  # fmt: skip
        repeat_print = None
        if repeat_slot is not None:
            repeat_print = fingerprint(
                node=node, operation=operation, destination=destination, arguments=arguments,
                approval_slot=repeat_slot,
            )  # fmt: skip
        args_text = canonical_bytes(payload["arguments"]).decode("utf-8")
        description = f"effect intend {payload['operation']} {payload['destination']}"

        def logical_effect(tx: Tx) -> Effect | None:
            row = tx.one(self._q("effect_by_fingerprint"), (logical_print,))
            if row is None:
                # An effect recorded before schema 5 under a slot has the slot in its
                # fingerprint; its identity columns still find it.
                row = tx.one(
                    self._q("effect_original_by_identity"),
                    (node, payload["operation"], payload["destination"], args_text),
                )
            return None if row is None else self._effect(row)

        def present_again(tx: Tx, now: int, existing: Effect) -> tuple[Effect, bool]:
            if existing.state not in REINTENDABLE:
                hint = ""
                if approval_slot is not None and repeat_reason is None:
                    hint = (
                        f"; slot {approval_slot!r} alone does not make it a new effect "
                        "(a deliberate repeat also needs --repeat-reason)"
                    )
                raise Conflict(
                    f"effect {existing.effect_id} is this same logical effect and was already "
                    f"dispatched (state {existing.state.value}); it is not recorded again{hint}",
                    effect_id=existing.effect_id, state=existing.state.value,
                    fingerprint=existing.fingerprint,
                )  # fmt: skip
            if existing.state is EffectState.INTENDED and existing.generation == generation:
                return existing, False
            again = tx.one(self._q("effect_reintend"), (generation, now, existing.effect_id))
            assert again is not None  # read in this transaction, under the node's lock
            self._event(tx, now, node=node, kind="effect.reintended", generation=generation,
                        actor=f"{node}@{generation}", effect_id=existing.effect_id,
                        previous_state=existing.state.value,
                        previous_generation=existing.generation)  # fmt: skip
            return self._effect(again), False

        def record(tx: Tx, now: int, print_: str, repeat_of: str | None) -> tuple[Effect, bool]:
            effect_id = effect_id_for(print_)
            inserted = tx.one(
                self._q("effect_insert_intended"),
                (effect_id, node, generation, print_, payload["operation"],
                 payload["destination"], args_text, repeat_slot, caller_ref, now, now,
                 repeat_of, repeat_reason),
            )  # fmt: skip
            assert inserted is not None
            detail: dict[str, Any] = {}
            if repeat_of is not None:
                detail = {"approval_slot": repeat_slot, "repeat_of": repeat_of,
                          "repeat_reason": repeat_reason}  # fmt: skip
            elif approval_slot is not None:
                # Kept in the history only: an undeclared slot is not part of the effect.
                detail = {"undeclared_slot": approval_slot}
            self._event(tx, now, node=node, kind="effect.intended", generation=generation,
                        actor=f"{node}@{generation}", effect_id=effect_id,
                        fingerprint=print_, operation=payload["operation"],
                        destination=payload["destination"], **detail)  # fmt: skip
            return self._effect(inserted), True

        def body(tx: Tx, now: int) -> tuple[Effect, bool]:
            self._guard_and_rights(tx, now, node, generation, description)
            self._refuse_if_halted(tx, node, "new effect")
            original = logical_effect(tx)
            if repeat_print is None:
                if original is None:
                    return record(tx, now, logical_print, None)
                return present_again(tx, now, original)
            if original is None:
                raise BadInput(
                    f"--repeat-reason: there is no earlier {payload['operation']} to "
                    f"{payload['destination']} with these arguments to repeat; intend it "
                    "without --slot and --repeat-reason",
                    field="repeat_reason",
                )
            if original.approval_slot == repeat_slot:
                return present_again(tx, now, original)
            row = tx.one(self._q("effect_by_fingerprint"), (repeat_print,))
            if row is not None:
                return present_again(tx, now, self._effect(row))
            # Repeating what may or may not have happened could make it happen twice: an
            # AMBIGUOUS effect is settled by an operator first, whatever the caller declares.
            unsettled = tx.one(
                self._q("effect_ambiguous_of_original"),
                (original.effect_id, original.effect_id),
            )
            if unsettled is not None:
                raise Conflict(
                    f"effect {unsettled[0]} of this same logical effect is AMBIGUOUS; it is not "
                    "repeated until an operator resolves it with `onstation effect resolve "
                    f"{unsettled[0]} --as observed|compensated --by NAME --why TEXT`",
                    effect_id=unsettled[0], state=EffectState.AMBIGUOUS.value,
                )  # fmt: skip
            return record(tx, now, repeat_print, original.effect_id)

        return self._write(body)

    def _load_effect(self, tx: Tx, effect_id: str) -> Effect:
        row = tx.one(self._q("effect_by_id"), (effect_id,))
        if row is None:
            raise BadInput(f"no such effect {effect_id!r}", effect_id=effect_id)
        return self._effect(row)

    def get_effect(self, effect_id: str) -> Effect:
        """One effect by id."""
        validate_name(effect_id, "effect id")
        return self._read_single(lambda tx, _now: self._load_effect(tx, effect_id))

    def _advance(
        self,
        effect_id: str,
        action: EffectAction,
        generation: int,
        result: JsonValue = None,
    ) -> Effect:
        validate_name(effect_id, "effect id")
        result_text = None if result is None else canonical_bytes(result).decode("utf-8")

        def body(tx: Tx, now: int) -> Effect:
            # The effect, the guard's node and lease and the birth's state in one read (issue
            # 14: three statements before, each a round trip on PostgreSQL), taken once the
            # node's row is locked, as the guard's own read is.
            if self._pg:
                tx.send(self._q("effect_node_row_lock"), (effect_id,))
            row = tx.one(self._q("effect_and_guard"), (generation, effect_id))
            if row is None:
                raise BadInput(f"no such effect {effect_id!r}", effect_id=effect_id)
            effect = self._effect(row[:17])
            read = self._node_lease_of(row[17:])
            self._guard(tx, now, effect.node, generation, f"effect {action.value} {effect_id}",
                        read=read)  # fmt: skip
            if action is EffectAction.DISPATCH:
                self._require_effect_rights(
                    tx, now, effect.node, generation, f"effect dispatch {effect_id}",
                    birth=(row[36],),
                )  # fmt: skip
                self._refuse_if_halted(tx, effect.node, "effect dispatch")
            resolve = (
                f"an operator resolves it with `onstation effect resolve {effect_id} "
                "--as observed|compensated --by NAME --why TEXT`"
            )
            if effect.generation != generation:
                # The advice depends on the state: each one names a command that succeeds.
                if effect.state is EffectState.AMBIGUOUS:
                    advice = f"it is AMBIGUOUS and never retried automatically: {resolve}"
                elif effect.state is EffectState.COMMITTED:
                    advice = "it is already COMMITTED; nothing is left to do"
                elif effect.state in {EffectState.INTENDED, EffectState.DISPATCHED,
                                      EffectState.OBSERVED}:  # fmt: skip
                    advice = (
                        f"it is {effect.state.value} under a fenced generation: settle it with "
                        f"`onstation effect reconcile {effect.node}`"
                    )
                else:
                    advice = (  # FAILED_BEFORE_DISPATCH or COMPENSATED: never done now
                        f"it is {effect.state.value}: intend it again under generation "
                        f"{generation} (`onstation effect intend {effect.node} --generation "
                        f"{generation}` with the same --op, --dest and --args)"
                    )
                raise Conflict(
                    f"effect {effect_id} belongs to generation {effect.generation}, not "
                    f"{generation}; {advice}",
                    effect_id=effect_id, state=effect.state.value,
                )  # fmt: skip
            target = next_state(action, effect.state)
            if target is None:
                hint = ""
                if effect.state is EffectState.AMBIGUOUS:
                    hint = f"; AMBIGUOUS is never retried automatically: {resolve}"
                raise Conflict(
                    f"cannot {action.value} effect {effect_id} in state {effect.state.value}{hint}",
                    effect_id=effect_id, state=effect.state.value,
                )  # fmt: skip
            advanced = tx.one(
                self._q("effect_advance"),
                (target.value, now, result_text, effect_id, effect.state.value),
            )
            if advanced is None:  # pragma: no cover - the node lock makes this unreachable
                raise Conflict(f"effect {effect_id} changed concurrently")
            self._event(tx, now, node=effect.node, kind=f"effect.{target.value.lower()}",
                        generation=generation, actor=f"{effect.node}@{generation}",
                        effect_id=effect_id, previous_state=effect.state.value)  # fmt: skip
            return self._effect(advanced)

        return self._write(body)

    def dispatch_effect(self, effect_id: str, *, generation: int) -> Effect:
        """INTENDED -> DISPATCHED: the body is about to act in the world."""
        return self._advance(effect_id, EffectAction.DISPATCH, generation)

    def observe_effect(
        self, effect_id: str, *, generation: int, result: JsonValue = None
    ) -> Effect:
        """DISPATCHED -> OBSERVED: the body saw the authoritative result."""
        if isinstance(result, str):
            result = loads_strict(result, "result")
        return self._advance(effect_id, EffectAction.OBSERVE, generation, result)

    def commit_effect(self, effect_id: str, *, generation: int) -> Effect:
        """OBSERVED -> COMMITTED: the result is settled."""
        return self._advance(effect_id, EffectAction.COMMIT, generation)

    def fail_effect(self, effect_id: str, *, generation: int, reason: str | None = None) -> Effect:
        """INTENDED -> FAILED_BEFORE_DISPATCH: the body gave up before acting."""
        result = None if reason is None else {"failure": validate_free_text(reason, "reason")}
        return self._advance(effect_id, EffectAction.FAIL, generation, result)

    # ----------------------------------------------------------------------------------------
    # the calls that dispatched effects, and their settlement on evidence

    def record_effect_call(
        self,
        effect_id: str,
        *,
        generation: int,
        session_id: str,
        tool_name: str,
        input_digest: str,
        tool_use_id: str | None = None,
        transcript_path: str | None = None,
        transcript_offset: int | None = None,
        observe: JsonValue = None,
    ) -> None:
        """Keep the call that dispatched ``effect_id`` (replacing an earlier call's record):
        what pairs its result, where its rejection would be, how to ask its destination."""
        validate_name(effect_id, "effect id")
        validate_free_text(session_id, "session_id", 256)
        validate_free_text(tool_name, "tool_name", 256)
        validate_free_text(input_digest, "input digest", 128)
        if tool_use_id is not None:
            validate_free_text(tool_use_id, "tool_use_id", 256)
        if transcript_path is not None:
            validate_free_text(transcript_path, "transcript_path", 4096)
        observe_text = None if observe is None else canonical_bytes(observe).decode("utf-8")

        def body(tx: Tx, now: int) -> None:
            effect = self._load_effect(tx, effect_id)
            self._guard(tx, now, effect.node, generation, f"effect call {effect_id}")
            tx.run(self._q("effect_call_delete"), (effect_id,))
            tx.run(
                self._q("effect_call_insert"),
                (effect_id, effect.node, generation, session_id, tool_use_id, tool_name,
                 input_digest, transcript_path, transcript_offset, observe_text, now),
            )  # fmt: skip

        self._write(body)

    def dispatched_calls(self, node: str, *, generation: int | None = None) -> list[DispatchedCall]:
        """The node's DISPATCHED effects with their calls: of ``generation``, or (None) of
        every generation before the current one (what a reconcile settles)."""
        validate_name(node, "node")

        def body(tx: Tx, _now: int) -> list[DispatchedCall]:
            # One statement (the current generation read inside it): no read transaction
            # around it; whether the node exists is asked only of an empty answer, or (of a
            # generation: every full-path hook call asks) answered by the statement itself.
            if generation is None:
                rows = tx.all(self._q("effect_calls_dispatched_of_fenced_generations"),
                              (node, node))  # fmt: skip
            else:
                rows = tx.all(self._q("effect_calls_dispatched_of_generation"), (generation, node))
            if not rows:
                self._require_node(tx, node)
            # A generation's statement answers an existing node with no such effect by one
            # row of NULLs.
            return [_dispatched_call(r) for r in rows if r[0] is not None]

        return self._read_single(body)

    def settle_dispatched(
        self,
        effect_id: str,
        *,
        outcome: str,
        evidence: JsonValue,
        by: str,
        generation: int | None = None,
    ) -> Effect | None:
        """Settle a DISPATCHED effect on evidence, with the evidence kept as its result:
        ``not-executed`` (the host did not run the tool, or its destination shows it
        unchanged) -> NOT_EXECUTED; ``uncertain`` (the tool failed and may have reached its
        destination) -> AMBIGUOUS; ``observed`` (its destination shows it done) -> COMMITTED.

        With ``generation``, the body of that generation settles its own effect (the guard
        applies); without, a reconciler settles an effect of a fenced generation only.
        Returns the effect, or None when it is no longer DISPATCHED (settled meanwhile).
        """
        validate_name(effect_id, "effect id")
        validate_free_text(by, "by", 256)
        if outcome not in _SETTLEMENTS:
            raise BadInput(
                f"outcome: must be one of {', '.join(_SETTLEMENTS)}, not {outcome!r}",
                field="outcome",
            )
        action, key = _SETTLEMENTS[outcome]
        result_text = canonical_bytes({key: evidence, "by": by}).decode("utf-8")

        def body(tx: Tx, now: int) -> Effect | None:
            effect = self._load_effect(tx, effect_id)
            if generation is None:
                current = self._lock_node(tx, effect.node)
                if effect.generation >= current.generation:
                    raise Conflict(
                        f"effect {effect_id} belongs to the current generation "
                        f"{current.generation}: only its body settles it",
                        effect_id=effect_id, state=effect.state.value,
                    )  # fmt: skip
            else:
                self._guard(tx, now, effect.node, generation, f"effect {outcome} {effect_id}")
                if effect.generation != generation:
                    return None
            if effect.state is not EffectState.DISPATCHED:
                return None
            steps = [action] if action is not EffectAction.OBSERVE else [
                EffectAction.OBSERVE, EffectAction.RECONCILE]  # fmt: skip
            state: EffectState = effect.state
            for step in steps:
                target = next_state(step, state)
                assert target is not None
                advanced = tx.one(
                    self._q("effect_advance"),
                    (target.value, now, result_text, effect_id, state.value),
                )
                assert advanced is not None  # read in this transaction, under the node's lock
                effect = self._effect(advanced)
                self._event(tx, now, node=effect.node, kind=f"effect.{target.value.lower()}",
                            generation=effect.generation, actor=by, effect_id=effect_id,
                            previous_state=state.value, via=outcome,
                            evidence=evidence)  # fmt: skip
                state = target
            return effect

        return self._write(body)

    def reconcile(self, node: str, *, by: str = "operator") -> ReconcileReport:
        """Settle every effect of the node's fenced generations.

        DISPATCHED without a result becomes AMBIGUOUS; OBSERVED (result on record) becomes
        COMMITTED. INTENDED becomes AMBIGUOUS too (a hook killed after recording the intent
        gave its host no decision, and the host ran the tool) unless the ledger refused its
        dispatch to that generation for good (a denial receipt ``effect dispatch ID`` of that
        generation whose reason ends it): then it is FAILED_BEFORE_DISPATCH.
        """
        validate_name(node, "node")

        def body(tx: Tx, now: int) -> ReconcileReport:
            current = self._lock_node(tx, node)
            rows = tx.all(
                self._q("effect_unsettled_of_fenced_generations"),
                (node, current.generation),
            )
            moved: dict[EffectState, list[str]] = {
                EffectState.AMBIGUOUS: [],
                EffectState.FAILED_BEFORE_DISPATCH: [],
                EffectState.COMMITTED: [],
            }
            # A generation refused for one of these reasons never acts again: after such a
            # refusal of its dispatch, the intent cannot have reached the world through it.
            ended = tuple(
                o.value
                for o in (GuardOutcome.STALE_GENERATION, GuardOutcome.LEASE_FENCED,
                          GuardOutcome.LEASE_EXPIRED, GuardOutcome.LEASE_RELEASED)
            )  # fmt: skip
            for row in rows:
                effect = self._effect(row)
                action = EffectAction.RECONCILE
                if effect.state is EffectState.INTENDED and tx.one(
                    self._q("effect_dispatch_denied_for_good"),
                    (node, effect.generation, f"effect dispatch {effect.effect_id}", *ended),
                ):
                    action = EffectAction.RECONCILE_REFUSED
                target = next_state(action, effect.state)
                assert target is not None
                tx.run(
                    self._q("effect_set_state"),
                    (target.value, now, effect.effect_id),
                )
                self._event(tx, now, node=node, kind=f"effect.{target.value.lower()}",
                            generation=effect.generation, actor=by, effect_id=effect.effect_id,
                            previous_state=effect.state.value, via="reconcile")  # fmt: skip
                moved[target].append(effect.effect_id)
            unresolved = [r[0] for r in tx.all(self._q("effect_ambiguous_ids_of_node"), (node,))]
            self._event(tx, now, node=node, kind="node.reconciled", generation=current.generation,
                        actor=by, ambiguous=moved[EffectState.AMBIGUOUS],
                        failed_before_dispatch=moved[EffectState.FAILED_BEFORE_DISPATCH],
                        committed=moved[EffectState.COMMITTED],
                        unresolved_ambiguous=unresolved)  # fmt: skip
            return ReconcileReport(
                node=node,
                generation=current.generation,
                ambiguous=moved[EffectState.AMBIGUOUS],
                failed_before_dispatch=moved[EffectState.FAILED_BEFORE_DISPATCH],
                committed=moved[EffectState.COMMITTED],
                unresolved_ambiguous=unresolved,
            )

        return self._write(body)

    def resolve_effect(self, effect_id: str, *, outcome: str, by: str, why: str) -> Effect:
        """An operator settles an AMBIGUOUS effect: ``observed`` (it happened) -> COMMITTED,
        ``compensated`` (a compensating action undid it) -> COMPENSATED."""
        validate_name(effect_id, "effect id")
        validate_free_text(by, "by", 256)
        validate_free_text(why, "why")
        if not by.strip() or not why.strip():
            raise BadInput("resolve: --by and --why must both be given", field="by")
        actions = {
            "observed": EffectAction.RESOLVE_OBSERVED,
            "compensated": EffectAction.RESOLVE_COMPENSATED,
        }
        if outcome not in actions:
            raise BadInput(f"--as: must be observed or compensated, not {outcome!r}", field="as")
        action = actions[outcome]

        def body(tx: Tx, now: int) -> Effect:
            effect = self._load_effect(tx, effect_id)
            self._lock_node(tx, effect.node)
            target = next_state(action, effect.state)
            if target is None:
                raise Conflict(
                    f"effect {effect_id} is {effect.state.value}; only an AMBIGUOUS effect "
                    "is resolved by an operator",
                    effect_id=effect_id, state=effect.state.value,
                )  # fmt: skip
            tx.run(
                self._q("effect_resolve"),
                (target.value, now, by, f"{outcome}: {why}", effect_id),
            )
            self._event(tx, now, node=effect.node, kind=f"effect.{target.value.lower()}",
                        generation=effect.generation, actor=by, effect_id=effect_id,
                        previous_state=effect.state.value, resolution=outcome,
                        why=why)  # fmt: skip
            return self._load_effect(tx, effect_id)

        return self._write(body)

    def open_effects(self, node: str) -> list[Effect]:
        """The node's effects not yet settled (INTENDED, DISPATCHED, OBSERVED, AMBIGUOUS),
        oldest first; read through the state index, so flat however long the history."""
        validate_name(node, "node")

        def body(tx: Tx, _now: int) -> list[Effect]:
            rows = tx.all(self._q("effects_of_node_open"), (node,))
            if not rows:
                self._require_node(tx, node)
            return [self._effect(r) for r in rows]

        return self._read_single(body)

    def effects(self, node: str, *, state: EffectState | None = None) -> list[Effect]:
        """The node's effects, oldest first, optionally only those in one state."""
        validate_name(node, "node")

        def body(tx: Tx, _now: int) -> list[Effect]:
            if state is None:
                rows = tx.all(self._q("effects_of_node"), (node,))
            else:
                rows = tx.all(self._q("effects_of_node_in_state"), (node, state.value))
            if not rows:
                self._require_node(tx, node)
            return [self._effect(r) for r in rows]

        return self._read_single(body)
