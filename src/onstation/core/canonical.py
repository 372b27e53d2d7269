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
from itertools import accumulate
from typing import Any

import rfc8785

from onstation.core.errors import BadInput

#: The largest magnitude an integer may have and still round-trip through every JSON parser.
IJSON_MAX_INT = 2**53 - 1
MAX_DEPTH = 64

_SCOPE = re.compile(r"^[a-z0-9][a-z0-9.-]{0,63}$")
#: 2^53-1 has 16 digits: a longer integer literal is out of range whatever its value, and
#: refusing it by length keeps int() (and its 4,300-digit limit) away from huge literals.
_MAX_INT_DIGITS = 16
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}

JsonValue = Any


#: ``json.dumps`` writes exactly the JCS bytes for a value :func:`_fast_ok` accepts: no
#: float (JCS writes numbers as ECMAScript does: ``1.0`` is ``1``, ``1e-07`` is ``1e-7``),
#: only exact JSON types (no subclasses, no tuples), integers in the I-JSON range, and no
#: object key above U+FFFF (JCS sorts keys by UTF-16 code units, Python by code points; the
#: orders agree on the Basic Multilingual Plane). Its string escapes are JCS's (quote,
#: backslash, the five short forms, lower-case \u00xx for other control characters, nothing
#: else), and a lone surrogate fails the UTF-8 encoding. Several times faster than rfc8785.
_FAST_ENCODE = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
).encode
_FAST_SCALARS = (str, bool)


def _fast_ok(value: JsonValue) -> bool:
    """Exact JSON types, no float, ints in range, keys on the BMP, not near MAX_DEPTH."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        kind = type(node)
        if kind is dict:
            keys = "".join(node)  # TypeError for a non-string key: the caller falls back
            if not keys.isascii() and max(keys) > "\uffff":
                return False
            items: Any = node.values()
        elif kind is list:
            items = node
        elif kind in _FAST_SCALARS or node is None:
            continue
        elif kind is int:
            if not -IJSON_MAX_INT <= node <= IJSON_MAX_INT:
                return False
            continue
        else:
            return False
        if depth >= MAX_DEPTH - 1:
            return False  # near the limit: the exact check decides
        for item in items:
            item_kind = type(item)
            if item_kind is dict or item_kind is list:
                stack.append((item, depth + 1))
            elif item_kind is int:
                if not -IJSON_MAX_INT <= item <= IJSON_MAX_INT:
                    return False
            elif item_kind not in _FAST_SCALARS and item is not None:
                return False
    return True


def canonical_bytes(value: JsonValue) -> bytes:
    """The RFC 8785 canonical encoding of ``value``; raises :class:`BadInput` if it has none."""
    try:
        if _fast_ok(value):
            return _FAST_ENCODE(value).encode("utf-8")
    except (TypeError, ValueError):
        pass  # a non-string key, a lone surrogate (UnicodeEncodeError): refused below
    _check_value(value, "$", 0)
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise BadInput(f"value cannot be canonicalized: {exc}") from exc


def digest(scope: str, value: JsonValue) -> str:
    """Hex SHA-256 over the scope, a NUL separator and the canonical bytes of ``value``."""
    return digest_of_canonical(scope, canonical_bytes(value))


def digest_of_canonical(scope: str, canonical: bytes) -> str:
    """:func:`digest` of a value whose canonical bytes are ``canonical`` (for a caller that
    has them already: :mod:`onstation.plan.embedded`)."""
    if not _SCOPE.match(scope):
        raise BadInput(f"digest scope {scope!r} is not a valid scope string")
    hasher = hashlib.sha256()
    hasher.update(scope.encode("ascii"))
    hasher.update(b"\x00")
    hasher.update(canonical)
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
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        shown = text if len(text) <= 32 else f"{text[:32]}..."
        raise BadInput(f"integer {shown} is outside the interoperable range (|n| <= 2^53-1)")
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
    _check_nesting(text, field)
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


def _check_nesting(text: str, field: str) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` before the parser recurses into it.

    Brackets inside strings do not count. On text that is not JSON the count may be too
    high, which only turns one refusal into another.
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if len(brackets) <= MAX_DEPTH + 1:
        return  # the common case: too few brackets to nest too deep
    # One level of slack: the deepest container may still hold scalars, which _check_value
    # judges with the path it names.
    if max(accumulate(_DEPTH_STEP[ch] for ch in brackets)) > MAX_DEPTH + 1:
        raise BadInput(f"{field}: nested deeper than {MAX_DEPTH} levels")


def _check_text(value: str, path: str, field: str) -> None:
    # A lone surrogate (from an undecodable argv byte or a "\ud800" escape) has no UTF-8
    # form: refused here, not as an encoding error deep inside a digest or a database.
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise BadInput(f"{field}: text at {path} is not valid Unicode") from None


def _check_value(value: Any, path: str, depth: int, field: str = "value") -> None:
    if depth > MAX_DEPTH:
        raise BadInput(f"{field}: nested deeper than {MAX_DEPTH} levels at {path}")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        _check_text(value, path, field)
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
            _check_text(key, path, field)
            _check_value(item, f"{path}.{key}", depth + 1, field)
        return
    raise BadInput(f"{field}: value at {path} of type {type(value).__name__} is not JSON")
