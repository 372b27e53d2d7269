"""A relief computes its capsule's digest once (issue 14): it builds the payload, seals it,
verifies it for the verdict and validates the plan that carries it, all over the one object
it built and held, and each step checks the stated digest and the signature against that
digest instead of canonicalizing the payload again."""

from __future__ import annotations

from typing import Any

import pytest
from test_relief_batched_writes import relief  # noqa: F401 - the fixture

from onstation.ledger import Ledger
from onstation.plan import capsule
from onstation.plan.capsule import CAPSULE_SCOPE
from onstation.relief.relieve import Relief


def test_a_relief_digests_its_capsule_once(
    relief: tuple[Ledger, Relief],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger, run = relief
    scopes: list[str] = []
    real = capsule.digest

    def counting(scope: str, value: Any) -> str:
        scopes.append(scope)
        return real(scope, value)

    def counting_bytes(scope: str, data: bytes) -> str:
        scopes.append(scope)
        return real_of_bytes(scope, data)

    from onstation.plan import build

    real_of_bytes = build.digest_of_canonical
    monkeypatch.setattr(capsule, "digest", counting)
    monkeypatch.setattr(build, "digest_of_canonical", counting_bytes)
    outcome = run.run()
    assert outcome.state == "SETTLED", outcome
    assert scopes.count(CAPSULE_SCOPE) == 1
    from onstation.ledger.relief_records import ReliefLedger

    [record] = ReliefLedger(ledger).reliefs("agent-1")
    assert not record.detail.get("plan_violations"), record.detail


def test_a_relief_encodes_its_payload_once_and_splices_it_elsewhere(
    relief: tuple[Ledger, Relief],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The capsule's payload is canonicalized once; the sealed capsule, the incident and the
    plan splice its bytes in, each exactly as its own whole encoding (checked here)."""
    from onstation.core import canonical
    from onstation.core.canonical import digest
    from onstation.plan import build, embedded
    from onstation.relief.relieve import PLAN_SCOPE

    real_bytes = canonical.canonical_bytes
    embedding = {"payload", "capsule"}
    encoded: list[str] = []

    def counting(value: Any) -> bytes:
        if isinstance(value, dict):
            if "capsuleVersion" in value:
                encoded.append("payload")
            elif any(isinstance(value.get(k), dict) for k in embedding):
                encoded.append("a document embedding it, whole")
        return real_bytes(value)

    for module in (canonical, build, embedded):
        monkeypatch.setattr(module, "canonical_bytes", counting)
    real_splice = embedded.spliced_canonical
    spliced: list[str] = []

    def checked(value: Any, key: str, part: bytes) -> bytes:
        out = real_splice(value, key, part)
        assert out == real_bytes(dict(value))
        spliced.append(key)
        return out

    monkeypatch.setattr(embedded, "spliced_canonical", checked)
    ledger, run = relief
    outcome = run.run()
    assert outcome.state == "SETTLED", outcome
    assert encoded == ["payload"]
    assert spliced == ["payload", "capsule", "capsule"]  # the capsule, the incident, the plan
    from onstation.ledger.correspondence import Correspondence
    from onstation.ledger.relief_records import ReliefLedger

    [record] = ReliefLedger(ledger).reliefs("agent-1")
    stored = Correspondence(ledger).stored_object("plan", record.detail["plan_digest"])
    assert digest(PLAN_SCOPE, stored.body) == record.detail["plan_digest"]


def test_a_relief_stores_its_capsule_and_plan_as_the_bytes_it_digested(
    relief: tuple[Ledger, Relief],  # noqa: F811 - the fixture
) -> None:
    """The stored capsule and plan are kept as the canonical bytes the relief already held
    (issue 14: not encoded once more): each stored text is its object's RFC 8785 encoding and
    reads back as the object; the plan's text is what its digest is over."""
    from onstation.core.canonical import canonical_bytes, digest, digest_of_canonical
    from onstation.ledger.correspondence import Correspondence
    from onstation.ledger.relief_records import ReliefLedger
    from onstation.relief.relieve import PLAN_SCOPE

    ledger, run = relief
    assert run.run().state == "SETTLED"
    [record] = ReliefLedger(ledger).reliefs("agent-1")
    objects = Correspondence(ledger)
    texts = {}
    for kind, key in (("capsule", "capsule_digest"), ("plan", "plan_digest")):
        stored = objects.stored_object(kind, record.detail[key])
        row = ledger.backend.autocommit().one(
            "SELECT body FROM stored_object WHERE digest = ?", (stored.digest,)
        )
        assert row is not None
        texts[kind] = str(row[0]).encode()
        assert texts[kind] == canonical_bytes(stored.body)
    capsule_body = objects.stored_object("capsule", record.detail["capsule_digest"]).body
    assert digest(CAPSULE_SCOPE, capsule_body["payload"]) == record.detail["capsule_digest"]
    assert digest_of_canonical(PLAN_SCOPE, texts["plan"]) == record.detail["plan_digest"]
