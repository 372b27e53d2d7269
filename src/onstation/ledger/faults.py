"""Deliberate bugs for the simulator to plant, one at a time, to prove its checks bite.

Each plant changes one ledger rule for the duration of a ``with planted(name):`` block (by
patching the ledger's own modules), so it lives beside the SQL and the rules it breaks; the
SQL of the plants is in ``queries/faults.sql``, marked there as planted faults. Only the
simulator (``onstation simulate --plant NAME``) uses it; nothing else imports it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

from onstation.core.effects import EffectAction, EffectState, next_state
from onstation.core.governor import RespawnPolicy, decide_respawn
from onstation.core.leases import judge_write
from onstation.ledger.ledger import Ledger

#: The deliberate bugs ``plant=`` applies (by monkeypatching, for one run only).
PLANTS = (
    "governor-extra-birth",
    "reconcile-retries-ambiguous",
    "guard-ignores-generation",
    "fence-keeps-lease",
    "breaker-forgets-on-restart",
    "halt-ignored",
)


@contextlib.contextmanager
def planted(name: str | None) -> Iterator[None]:
    """Apply one deliberate bug for the duration of the block (None: the build as it is)."""
    if name is None:
        yield
        return
    from onstation.ledger import base, effect_journal, governance

    with contextlib.ExitStack() as stack:
        if name == "governor-extra-birth":
            real = decide_respawn

            def lenient(policy: RespawnPolicy, counted: Any, now: Any, *,
                        breaker_open: bool) -> Any:  # fmt: skip
                wider = RespawnPolicy(limit=policy.limit + 1, window=policy.window)
                return real(wider, counted, now, breaker_open=breaker_open)

            stack.enter_context(mock.patch.object(governance, "decide_respawn", lenient))
        elif name == "reconcile-retries-ambiguous":
            real_next = next_state

            def retry(action: EffectAction, current: EffectState) -> EffectState | None:
                if action is EffectAction.RECONCILE and current is EffectState.DISPATCHED:
                    return EffectState.FAILED_BEFORE_DISPATCH  # "it probably never went out"
                return real_next(action, current)

            stack.enter_context(mock.patch.object(effect_journal, "next_state", retry))
        elif name == "guard-ignores-generation":
            real_judge = judge_write

            def lax(*, presented: int, current: int, **rest: Any) -> Any:
                return real_judge(presented=current, current=current, **rest)

            stack.enter_context(mock.patch.object(base, "judge_write", lax))
        elif name == "fence-keeps-lease":

            def keep(self: Ledger, tx: Any, now: int, node: str, expect: int, reason: str) -> Any:
                row = tx.one(self._q("fault_fence_keeps_lease"), (node, expect))
                return row, [], []

            stack.enter_context(mock.patch.object(Ledger, "_fence_statements", keep))
        elif name == "breaker-forgets-on-restart":
            real_open = Ledger.open.__func__  # type: ignore[attr-defined]  # a classmethod's function

            def forgetful(cls: type[Ledger], *args: Any, **kwargs: Any) -> Ledger:
                opened: Ledger = real_open(cls, *args, **kwargs)
                opened._write(
                    lambda tx, _now: tx.run(opened._q("fault_breaker_forgets_on_restart"))
                )
                return opened

            stack.enter_context(mock.patch.object(Ledger, "open", classmethod(forgetful)))
        elif name == "halt-ignored":
            stack.enter_context(mock.patch.object(Ledger, "_refuse_if_halted", return_value=None))
        else:
            raise ValueError(f"unknown plant {name!r}; one of {', '.join(PLANTS)}")
        yield
