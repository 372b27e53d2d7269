"""The library's public names are curated and pinned: a change to them is a decision.

``onstation.ledger``, ``onstation.plan`` and ``onstation.testing`` are what code outside
the package may import; their ``__all__`` is pinned here, and every name in it resolves.
"""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "onstation.ledger": [
        "Clock", "DEFAULT_LEASE_TTL", "Ledger", "LedgerUnavailable", "UnitOfWork",
        "default_sqlite_path", "from_us", "latest_schema_version", "open_backend", "parse_url",
        "system_clock", "to_us",
    ],
    "onstation.plan": [
        "CapsuleRejected", "GitEvidence", "KeyStore", "Report", "SignatureRejected",
        "VerifiedCapsule", "build_payload", "capsule_digest", "render_review", "resurrect",
        "seal", "sign_receipt", "validate_plan", "verify", "verify_receipt", "verify_text",
    ],
    "onstation.testing": ["FakeClock", "scratch_ledger", "scratch_postgres_url", "with_schema"],
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_the_public_names_are_pinned_and_resolve(module: str) -> None:
    loaded = importlib.import_module(module)
    assert sorted(loaded.__all__) == sorted(PUBLIC[module])
    for name in loaded.__all__:
        assert getattr(loaded, name) is not None, name


def test_each_lazy_name_is_the_object_of_its_module() -> None:
    import onstation.ledger.ledger
    import onstation.plan.capsule
    from onstation import ledger, plan

    assert ledger.Ledger is onstation.ledger.ledger.Ledger
    assert plan.seal is onstation.plan.capsule.seal
    with pytest.raises(AttributeError):
        _ = ledger.NoSuchName  # type: ignore[attr-defined]  # the lookup is what is tested


def test_scratch_ledgers_are_fresh_and_removed() -> None:
    from onstation.testing import FakeClock, scratch_ledger

    clock = FakeClock()
    with scratch_ledger(clock=clock) as ledger:
        ledger.register_node("exec-1")
        clock.advance(minutes=5)
        assert ledger.now() == clock.now
        path = ledger.backend.path  # type: ignore[attr-defined]  # the SQLite backend's file
        assert path.exists()
    assert not path.exists()
    with scratch_ledger() as again:
        assert again.list_nodes() == []
