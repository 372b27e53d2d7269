"""A credential never enters the effect journal (issue 13), on both backends: an effect's
destination and arguments are redacted before its fingerprint, so the same push is the same
effect whatever token its URL carried, and no record (nor any capsule made of them) holds it.
Before the fix the push URL's token was kept verbatim in the effect row."""

from __future__ import annotations

from onstation.core.effects import EffectState
from onstation.ledger import Ledger

TOKEN = "ghp_" + "A1b2C3d4" * 5
OTHER = "ghp_" + "Z9y8X7w6" * 5


def test_a_push_url_credential_is_redacted_before_the_fingerprint(ledger: Ledger) -> None:
    ledger.register_node("exec-1")
    gen = ledger.acquire_lease("exec-1", holder="body-1").generation
    first, created = ledger.intend_effect(
        "exec-1", generation=gen, operation="git.push",
        destination=f"https://x-access-token:{TOKEN}@github.com/o/r.git#refs/heads/main",
        arguments={"commit": "a" * 40, "header": f"Authorization: Bearer {TOKEN}"},
    )  # fmt: skip
    assert created
    stored = ledger.get_effect(first.effect_id)
    assert TOKEN not in stored.destination and "github.com/o/r" in stored.destination
    assert TOKEN not in str(stored.arguments) and "[redacted: " in str(stored.arguments)
    # Another token, the same push: the same logical effect, not a new one.
    again, created = ledger.intend_effect(
        "exec-1", generation=gen, operation="git.push",
        destination=f"https://x-access-token:{OTHER}@github.com/o/r.git#refs/heads/main",
        arguments={"commit": "a" * 40, "header": f"Authorization: Bearer {OTHER}"},
    )  # fmt: skip
    assert not created and again.effect_id == first.effect_id
    assert again.fingerprint == first.fingerprint
    assert [e.state for e in ledger.effects("exec-1")] == [EffectState.INTENDED]
    assert TOKEN not in str([(e.destination, e.arguments) for e in ledger.effects("exec-1")])
