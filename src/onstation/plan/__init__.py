"""Resurrection plans: sealed capsules, signature receipts, schemas, the semantic validator,
capability tables, the incident-to-plan pipeline and the operator review.

Pure decisions (the verdict, capability translation) live in :mod:`onstation.core`; this
package adds what needs package data, keys or the file system. See ``docs/plan.md``.

The names below are the package's public API for library use; they load on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onstation.plan.build import build_payload
    from onstation.plan.capsule import (
        CapsuleRejected,
        VerifiedCapsule,
        capsule_digest,
        seal,
        verify,
        verify_text,
    )
    from onstation.plan.evidence import GitEvidence
    from onstation.plan.incident import resurrect
    from onstation.plan.keys import KeyStore
    from onstation.plan.review import render_review
    from onstation.plan.signing import SignatureRejected, sign_receipt, verify_receipt
    from onstation.plan.validator import Report, validate_plan

_WHERE = {
    "CapsuleRejected": "onstation.plan.capsule",
    "GitEvidence": "onstation.plan.evidence",
    "KeyStore": "onstation.plan.keys",
    "Report": "onstation.plan.validator",
    "SignatureRejected": "onstation.plan.signing",
    "VerifiedCapsule": "onstation.plan.capsule",
    "build_payload": "onstation.plan.build",
    "capsule_digest": "onstation.plan.capsule",
    "render_review": "onstation.plan.review",
    "resurrect": "onstation.plan.incident",
    "seal": "onstation.plan.capsule",
    "sign_receipt": "onstation.plan.signing",
    "validate_plan": "onstation.plan.validator",
    "verify": "onstation.plan.capsule",
    "verify_receipt": "onstation.plan.signing",
    "verify_text": "onstation.plan.capsule",
}

__all__ = [
    "CapsuleRejected",
    "GitEvidence",
    "KeyStore",
    "Report",
    "SignatureRejected",
    "VerifiedCapsule",
    "build_payload",
    "capsule_digest",
    "render_review",
    "resurrect",
    "seal",
    "sign_receipt",
    "validate_plan",
    "verify",
    "verify_receipt",
    "verify_text",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'onstation.plan' has no attribute {name!r}")
    value = getattr(import_module(where), name)
    globals()[name] = value
    return value
