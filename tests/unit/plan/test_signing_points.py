"""The public key check's curve arithmetic (plan/signing.py) against a reference written as
RFC 8032 §5.1.3 states it, with Fermat's inverses: the same verdict for any 32 bytes."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from onstation.plan import signing

P = 2**255 - 19
D = (-121665 * pow(121666, P - 2, P)) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)


def reference(data: bytes) -> str | None:
    y = int.from_bytes(data, "little")
    sign, y = y >> 255, y & ((1 << 255) - 1)
    if y >= P:
        return "not canonical"
    u, v = (y * y - 1) % P, (D * y * y + 1) % P
    x2 = u * pow(v, P - 2, P) % P
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P or (x == 0 and sign == 1):
        return "not canonical"
    point = (x if x & 1 == sign else P - x, y)
    for _ in range(3):
        px, py = point
        t = D * px * px * py * py
        point = ((2 * px * py) * pow(1 + t, P - 2, P) % P,
                 (py * py + px * px) * pow(1 - t, P - 2, P) % P)  # fmt: skip
    return "small order" if point == (0, 1) else None


def verdict(data: bytes) -> str | None:
    problem = signing._point_problem.__wrapped__(data)
    if problem is None:
        return None
    return "small order" if "small-order" in problem else "not canonical"


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=32, max_size=32))
def test_any_32_bytes_get_the_references_verdict(data: bytes) -> None:
    assert verdict(data) == reference(data)


def test_real_keys_pass_and_small_order_points_do_not() -> None:
    for _ in range(20):
        raw = signing.public_raw(Ed25519PrivateKey.generate())
        assert verdict(raw) is None is reference(raw)
    minus_one = bytes.fromhex("ec" + "ff" * 30 + "7f")  # y = p - 1: the point of order 2
    for small in (bytes(32), (1).to_bytes(32, "little"), minus_one):
        assert verdict(small) == reference(small) == "small order"
