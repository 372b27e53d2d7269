"""Ed25519 signature receipts over capsule digests, with strict key and signature checks.

A receipt binds the capsule scope, node, generation, sequence and the *recomputed* digest to
the signer's key id, the algorithm and the exact 64 signature bytes. The signed pre-image is
domain-separated and typed::

    b"onstation-capsule-receipt-v1" || 0x00 || JCS(receipt without "signature")

so every field of the receipt is covered, and a signature made for another purpose (or
another capsule type) can never verify as a capsule receipt.

Strictness that does not depend on the OpenSSL build: signatures with ``S >= L`` are
refused before verification (malleability), and public keys are refused when they are not
canonical encodings of a curve point or when the point has small order (they would make
"valid" signatures for any message possible).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from onstation.core.canonical import canonical_bytes
from onstation.core.errors import BadInput

ALGORITHM = "ed25519"
RECEIPT_CONTEXT = b"onstation-capsule-receipt-v1\x00"
KEY_ID_CONTEXT = b"onstation-key-id-v1\x00"

#: The order of the Ed25519 base point.
L = 2**252 + 27742317777372353535851937790883648493
_P = 2**255 - 19
_D = (-121665 * pow(121666, _P - 2, _P)) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)

RECEIPT_FIELDS = (
    "algorithm",
    "keyId",
    "scope",
    "node",
    "generation",
    "sequence",
    "digest",
    "issuedAt",
    "signature",
)


class SignatureRejected(BadInput):
    """A receipt, signature or public key failed a check."""


def key_id(public_raw: bytes) -> str:
    """``ed25519-`` + 32 hex chars of SHA-256 over a context string and the raw public key."""
    return "ed25519-" + hashlib.sha256(KEY_ID_CONTEXT + public_raw).hexdigest()[:32]


def public_raw(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    """The 32 raw public key bytes."""
    pub = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return pub.public_bytes(Encoding.Raw, PublicFormat.Raw)


def _decode_point(data: bytes) -> tuple[int, int] | None:
    """Affine (x, y) of a canonical Ed25519 point encoding, or None (RFC 8032 §5.1.3)."""
    if len(data) != 32:
        return None
    y = int.from_bytes(data, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    if y >= _P:
        return None
    u = (y * y - 1) % _P
    v = (_D * y * y + 1) % _P
    # Inverses by Euclid (pow(n, -1, p)), about a seventh of Fermat's pow(n, p - 2, p). None
    # of the denominators here can be 0 mod p: each would need d times a square to be -1
    # or 1, and d is not a square mod p.
    x2 = u * pow(v, -1, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P != 0:
        return None
    if x == 0 and sign == 1:
        return None
    if x & 1 != sign:
        x = _P - x
    return x, y


def _double(point: tuple[int, int]) -> tuple[int, int]:
    x, y = point
    denom_x = (1 + _D * x * x * y * y) % _P
    denom_y = (1 - _D * x * x * y * y) % _P
    nx = (2 * x * y) * pow(denom_x, -1, _P) % _P
    ny = (y * y + x * x) * pow(denom_y, -1, _P) % _P
    return nx, ny


@functools.lru_cache(maxsize=256)
def _point_problem(data: bytes) -> str | None:
    """Why ``data`` is no acceptable public key, or None: a pure function of the 32 bytes
    (about 0.3 ms of big-integer arithmetic), so each key is checked once per process."""
    point = _decode_point(data)
    if point is None:
        return "public key: not a canonical Ed25519 point encoding"
    for _ in range(3):
        point = _double(point)
    if point == (0, 1):
        return "public key: small-order point refused"
    return None


def check_public_key(data: bytes) -> Ed25519PublicKey:
    """Refuse non-canonical, off-curve and small-order public keys; return the key."""
    problem = _point_problem(bytes(data))
    if problem is not None:
        raise SignatureRejected(problem)
    return Ed25519PublicKey.from_public_bytes(data)


def receipt_preimage(receipt: Mapping[str, Any]) -> bytes:
    """The bytes a receipt's signature covers: every field but the signature itself."""
    body = {k: receipt[k] for k in RECEIPT_FIELDS if k != "signature"}
    return RECEIPT_CONTEXT + canonical_bytes(body)


def sign_receipt(
    private: Ed25519PrivateKey,
    *,
    scope: str,
    node: str,
    generation: int,
    sequence: int,
    digest_hex: str,
    issued_at: str,
) -> dict[str, Any]:
    """A signed receipt for one capsule digest."""
    receipt: dict[str, Any] = {
        "algorithm": ALGORITHM,
        "keyId": key_id(public_raw(private)),
        "scope": scope,
        "node": node,
        "generation": generation,
        "sequence": sequence,
        "digest": digest_hex,
        "issuedAt": issued_at,
    }
    receipt["signature"] = private.sign(receipt_preimage(receipt)).hex()
    return receipt


def signature_bytes(receipt: Mapping[str, Any]) -> bytes:
    """The exact 64 signature bytes, refusing anything but lower-case hex and ``S >= L``."""
    text = receipt.get("signature")
    if not isinstance(text, str) or len(text) != 128 or text != text.lower():
        raise SignatureRejected("receipt: signature must be 128 lower-case hex characters")
    try:
        raw = bytes.fromhex(text)
    except ValueError as exc:
        raise SignatureRejected("receipt: signature is not hex") from exc
    if int.from_bytes(raw[32:], "little") >= L:
        raise SignatureRejected("receipt: non-canonical signature (S >= L)")
    return raw


def verify_receipt(
    receipt: Mapping[str, Any],
    *,
    scope: str,
    node: str,
    generation: int,
    sequence: int,
    digest_hex: str,
    trusted: Mapping[str, bytes],
) -> str:
    """Check a receipt's binding to the recomputed capsule facts and its signature.

    ``trusted`` maps key ids to raw public keys. Returns the signer's key id.
    """
    if set(receipt) != set(RECEIPT_FIELDS):
        raise SignatureRejected("receipt: fields differ from the receipt format")
    if receipt["algorithm"] != ALGORITHM:
        raise SignatureRejected(f"receipt: algorithm must be {ALGORITHM}")
    bound_digest = receipt["digest"]
    if not isinstance(bound_digest, str) or not hmac.compare_digest(
        bound_digest.encode("ascii", "replace"), digest_hex.encode("ascii")
    ):
        raise SignatureRejected("receipt: bound digest differs from the recomputed digest")
    expected = {"scope": scope, "node": node, "generation": generation, "sequence": sequence}
    for field, value in expected.items():
        got = receipt[field]
        if type(got) is not type(value) or got != value:
            raise SignatureRejected(f"receipt: {field} differs from the capsule ({got!r})")
    kid = receipt["keyId"]
    if not isinstance(kid, str) or kid not in trusted:
        raise SignatureRejected(f"receipt: signer key {kid!r} is not trusted")
    raw_public = trusted[kid]
    if not hmac.compare_digest(key_id(raw_public), kid):
        raise SignatureRejected("receipt: key id does not derive from the trusted public key")
    public = check_public_key(raw_public)
    sig = signature_bytes(receipt)
    try:
        public.verify(sig, receipt_preimage(receipt))
    except InvalidSignature as exc:
        raise SignatureRejected("receipt: signature does not verify") from exc
    return kid
