"""Capsule and receipt forgery and replay: a mutation corpus (goal G9) and targeted cases."""

from __future__ import annotations

import copy
import hashlib
import json
import random
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from plan_testkit import ISSUED_AT, TRUST, example

from onstation.core.errors import BadInput
from onstation.plan.capsule import AcceptedMark, CapsuleRejected, seal, verify, verify_text
from onstation.plan.example_key import example_private_key
from onstation.plan.signing import (
    L,
    SignatureRejected,
    check_public_key,
    key_id,
    public_raw,
    receipt_preimage,
)

SEED = 20260302
UNTRUSTED = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"not trusted").digest())


def _bases() -> list[dict[str, Any]]:
    payload = example("resurrection-plan.ready.json")["capsule"]["payload"]
    bases = []
    for index, (node, generation, sequence) in enumerate(
        [
            ("executor-7", 4, 57),
            ("executor-7", 5, 3),
            ("coord-auth", 2, 9),
            ("executor-8", 1, 0),
            ("executor-7", 4, 58),
            ("reviewer-2", 11, 400),
            ("coord-auth", 3, 1),
            ("ex_9", 7, 7),
        ]
    ):
        p = copy.deepcopy(payload)
        p["subject"].update(node=node, generation=generation, sequence=sequence)
        p["objective"] = f"{p['objective']} (variant {index})"
        for effect in p["effects"]:
            effect["node"] = node
        bases.append(seal(p, example_private_key(), issued_at=ISSUED_AT))
    return bases


BASES = _bases()


def _context(doc: dict[str, Any]) -> dict[str, Any]:
    subject = doc["payload"]["subject"]
    return {
        "expect_node": subject["node"],
        "min_generation": subject["generation"],
        "accepted": AcceptedMark(subject["generation"], subject["sequence"], doc["digest"]),
    }


def _accepts(text: bytes, context: dict[str, Any]) -> bool:
    try:
        verify_text(text, TRUST, **context)
    except BadInput:
        return False
    return True


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc).encode("utf-8")


def _resign(doc: dict[str, Any], key: Ed25519PrivateKey, **changes: Any) -> dict[str, Any]:
    receipt = dict(doc["receipts"][0], **changes)
    receipt["signature"] = key.sign(receipt_preimage(receipt)).hex()
    out = copy.deepcopy(doc)
    out["receipts"] = [receipt]
    return out


def subject_node(doc: dict[str, Any]) -> str:
    return str(doc["payload"]["subject"]["node"])


def _targeted(index: int, doc: dict[str, Any]) -> list[tuple[str, bytes, dict[str, Any]]]:
    """Named tampered variants of one base capsule, each with its verification context."""
    ctx = _context(doc)
    other = BASES[(index + 1) % len(BASES)]
    text = _dumps(doc)
    out: list[tuple[str, bytes, dict[str, Any]]] = []

    def add(name: str, value: Any, context: dict[str, Any] | None = None) -> None:
        out.append((name, value if isinstance(value, bytes) else _dumps(value), context or ctx))

    swapped = copy.deepcopy(doc)
    swapped["digest"] = other["digest"]
    add("digest swap (capsule)", swapped)
    swapped = copy.deepcopy(swapped)
    swapped["receipts"][0]["digest"] = other["digest"]
    add("digest swap (capsule and receipt)", swapped)
    add("digest swap, re-signed", _resign(swapped, example_private_key()))
    for scope in ("onstation-effect-v1", "resurrection-capsule-v2"):
        changed = copy.deepcopy(doc)
        changed["scope"] = scope
        add(f"scope swap {scope}", changed)
        add(f"scope swap {scope}, re-signed", _resign(changed, example_private_key(), scope=scope))
    stranger = next(b for b in BASES if b["payload"]["subject"]["node"] != subject_node(doc))
    add("other identity's capsule", stranger, ctx)
    foreign = copy.deepcopy(doc)
    foreign["receipts"] = copy.deepcopy(other["receipts"])
    add("other identity's receipt", foreign)
    renamed = _resign(doc, example_private_key(), node="someone-else")
    add("receipt re-signed for another node", renamed)
    subject = doc["payload"]["subject"]
    add(
        "older generation than the floor", doc, {**ctx, "min_generation": subject["generation"] + 1}
    )
    add(
        "older than accepted generation",
        doc,
        {**ctx, "accepted": AcceptedMark(subject["generation"] + 1, 0, "0" * 64)},
    )
    add(
        "older than accepted sequence",
        doc,
        {**ctx, "accepted": AcceptedMark(subject["generation"], subject["sequence"] + 1, "0" * 64)},
    )
    add(
        "other capsule at the accepted mark",
        doc,
        {**ctx, "accepted": AcceptedMark(subject["generation"], subject["sequence"], "f" * 64)},
    )
    untrusted_id = key_id(public_raw(UNTRUSTED))
    add("wrong key", _resign(doc, UNTRUSTED, keyId=untrusted_id))
    add("wrong key claiming the trusted key id", _resign(doc, UNTRUSTED))
    add(
        "wrong key id with the trusted signature",
        {**doc, "receipts": [dict(doc["receipts"][0], keyId=untrusted_id)]},
    )
    raw = bytes.fromhex(doc["receipts"][0]["signature"])
    s_plus_l = raw[:32] + (int.from_bytes(raw[32:], "little") + L).to_bytes(32, "little")
    add(
        "non-canonical signature S+L",
        {**doc, "receipts": [dict(doc["receipts"][0], signature=s_plus_l.hex())]},
    )
    add(
        "upper-case signature hex",
        {**doc, "receipts": [dict(doc["receipts"][0], signature=raw.hex().upper())]},
    )
    add("no receipt", {**doc, "receipts": []})
    add("duplicate key (top level)", b'{"scope": "resurrection-capsule-v2", ' + text[1:])
    needle = b'"payload": {'
    add(
        "duplicate key (payload)", text.replace(needle, needle + b'"objective": "ship it now", ', 1)
    )
    seq = f'"sequence": {subject["sequence"]}'.encode()
    add("NaN sequence", text.replace(seq, b'"sequence": NaN'))
    add("Infinity sequence", text.replace(seq, b'"sequence": Infinity'))
    add("huge sequence", text.replace(seq, b'"sequence": 1152921504606846976'))
    gen = f'"generation": {subject["generation"]}'.encode()
    add("huge generation", text.replace(gen, b'"generation": 9007199254740993'))
    edited = copy.deepcopy(doc)
    edited["payload"]["effects"][1]["state"] = "AMBIGUOUS"
    add("effect state edited after sealing", edited)
    edited = copy.deepcopy(doc)
    edited["payload"]["objective"] = "Push to main and skip review"
    add("objective edited after sealing", edited)
    edited = copy.deepcopy(doc)
    edited["payload"]["extra"] = True
    add("unknown payload field", edited)
    edited = copy.deepcopy(doc)
    edited["receipts"][0]["issuedAt"] = "2026-03-02T09:22:00Z"
    add("receipt issuedAt edited", edited)
    edited = copy.deepcopy(doc)
    edited["receipts"][0]["note"] = "trust me"
    add("unknown receipt field", edited)
    add("truncated file", text[: len(text) // 2])
    return out


def _corpus() -> list[tuple[str, bytes, dict[str, Any]]]:
    rng = random.Random(SEED)
    corpus = []
    for index, doc in enumerate(BASES):
        corpus += _targeted(index, doc)
        text = _dumps(doc)
        for _ in range(100):
            position = rng.randrange(len(text))
            flipped = bytearray(text)
            flipped[position] ^= 1 << rng.randrange(8)
            corpus.append((f"bit flip at {position}", bytes(flipped), _context(doc)))
    return corpus


def test_mutation_corpus_is_all_refused() -> None:
    corpus = _corpus()
    assert len(corpus) >= 1000
    accepted = [name for name, text, context in corpus if _accepts(text, context)]
    assert accepted == []


@pytest.mark.parametrize("index", range(len(BASES)))
def test_every_unmodified_capsule_is_accepted(index: int) -> None:
    doc = BASES[index]
    result = verify_text(_dumps(doc), TRUST, **_context(doc))
    assert result.digest == doc["digest"]
    assert result.key_ids == (key_id(public_raw(example_private_key())),)


@pytest.mark.parametrize("index", range(len(BASES)))
def test_reserialized_capsule_is_accepted(index: int) -> None:
    # Key order and whitespace carry no meaning: the digest is over canonical bytes.
    doc = BASES[index]

    def reverse(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: reverse(v) for k, v in reversed(list(value.items()))}
        if isinstance(value, list):
            return [reverse(v) for v in value]
        return value

    text = json.dumps(reverse(doc), indent=3, ensure_ascii=False).encode("utf-8")
    assert verify_text(text, TRUST, **_context(doc)).digest == doc["digest"]


def test_unsealed_capsule_is_refused() -> None:
    doc = copy.deepcopy(BASES[0])
    doc["receipts"] = []
    with pytest.raises(CapsuleRejected, match="not sealed"):
        verify(doc, TRUST)


def test_untrusted_signer_is_refused_even_when_consistent() -> None:
    doc = seal(BASES[0]["payload"], UNTRUSTED, issued_at=ISSUED_AT)
    with pytest.raises(CapsuleRejected, match="not trusted"):
        verify(doc, TRUST)


SMALL_ORDER = [
    "0100000000000000000000000000000000000000000000000000000000000000",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
]
NON_CANONICAL = [
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # y = p
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # y = p + 1
    "0000000000000000000000000000000000000000000000000000000000000080",  # x = 0, sign 1
]


@pytest.mark.parametrize("hex_key", SMALL_ORDER + NON_CANONICAL)
def test_small_order_and_non_canonical_public_keys_are_refused(hex_key: str) -> None:
    with pytest.raises(SignatureRejected):
        check_public_key(bytes.fromhex(hex_key))


def test_real_public_keys_pass_the_point_checks() -> None:
    for seed in range(20):
        key = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(bytes([seed])).digest())
        check_public_key(public_raw(key))
