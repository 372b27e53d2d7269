"""The signer of the shipped examples: a deliberately public, never-trusted key.

Its seed is derived from a fixed string so the examples can be re-sealed and their receipts
checked in tests. It is not in any key store; trusting it would be a mistake (``keys
import-public`` of this key works, on purpose only for demonstrations).
"""

from __future__ import annotations

import hashlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from onstation.plan.signing import key_id, public_raw

EXAMPLE_SEED = hashlib.sha256(
    b"onstation example signer - public, NOT SECRET, never trust"
).digest()


def example_private_key() -> Ed25519PrivateKey:
    """The example signer (public knowledge: never use it for real capsules)."""
    return Ed25519PrivateKey.from_private_bytes(EXAMPLE_SEED)


def example_trust() -> dict[str, bytes]:
    """``{key id: raw public key}`` for the example signer."""
    raw = public_raw(example_private_key())
    return {key_id(raw): raw}
