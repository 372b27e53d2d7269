"""Canonical JSON (RFC 8785) and the domain-separated digests built on it.

Every digest in onstation is ``SHA-256(scope || 0x00 || JCS(payload))``: the scope string
(e.g. ``resurrection-capsule-v1``, ``onstation-effect-v1``) keeps a digest made for one
purpose from ever being accepted for another. Canonical bytes come from the ``rfc8785``
package; ``json.dumps(sort_keys=True)`` is not JCS and is never used for hashing.

Input that reaches a digest is parsed strictly: duplicate object keys, NaN and infinities,
integers outside the I-JSON range and absurd nesting are refused before hashing, because
each of them lets two parties read the same bytes differently.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

import rfc8785

from onstation.core.errors import BadInput

#: The largest magnitude an integer may have and still round-trip through every JSON parser.
IJSON_MAX_INT = 2**53 - 1
MAX_DEPTH = 64

_SCOPE = re.compile(r"^[a-z0-9][a-z0-9.-]{0,63}$")

JsonValue = Any


def canonical_bytes(value: JsonValue) -> bytes:
    """The RFC 8785 canonical encoding of ``value``; raises :class:`BadInput` if it has none."""
    _check_value(value, "$", 0)
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise BadInput(f"value cannot be canonicalized: {exc}") from exc


def digest(scope: str, value: JsonValue) -> str:
    """Hex SHA-256 over the scope, a NUL separator and the canonical bytes of ``value``."""
    if not _SCOPE.match(scope):
        raise BadInput(f"digest scope {scope!r} is not a valid scope string")
    hasher = hashlib.sha256()
    hasher.update(scope.encode("ascii"))
    hasher.update(b"\x00")
    hasher.update(canonical_bytes(value))
    return hasher.hexdigest()


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, val in pairs:
        if key in result:
            raise BadInput(f"duplicate key {key!r} in JSON object")
        result[key] = val
    return result


def _reject_constant(name: str) -> Any:
    raise BadInput(f"{name} is not valid JSON")


def _parse_int(text: str) -> int:
    value = int(text)
    if abs(value) > IJSON_MAX_INT:
        raise BadInput(f"integer {text[:32]} is outside the interoperable range (|n| <= 2^53-1)")
    return value


def loads_strict(text: str | bytes, field: str = "JSON") -> JsonValue:
    """Parse JSON refusing duplicate keys, NaN/Infinity, out-of-range integers and deep nesting."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadInput(f"{field}: not UTF-8 ({exc.reason})") from exc
    try:
        value = json.loads(
            text,
            object_pairs_hook=_reject_duplicates,
            parse_constant=_reject_constant,
            parse_int=_parse_int,
        )
    except BadInput as exc:
        raise BadInput(f"{field}: {exc.message}") from exc
    except (json.JSONDecodeError, RecursionError) as exc:
        raise BadInput(f"{field}: not valid JSON ({exc})") from exc
    _check_value(value, "$", 0, field)
    return value


def _check_value(value: Any, path: str, depth: int, field: str = "value") -> None:
    if depth > MAX_DEPTH:
        raise BadInput(f"{field}: nested deeper than {MAX_DEPTH} levels at {path}")
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, int):
        if abs(value) > IJSON_MAX_INT:
            raise BadInput(f"{field}: integer at {path} is outside the interoperable range")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BadInput(f"{field}: non-finite number at {path}")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_value(item, f"{path}[{index}]", depth + 1, field)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise BadInput(f"{field}: object key at {path} is not a string")
            _check_value(item, f"{path}.{key}", depth + 1, field)
        return
    raise BadInput(f"{field}: value at {path} of type {type(value).__name__} is not JSON")
