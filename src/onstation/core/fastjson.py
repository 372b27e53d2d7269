"""JSON in and out as :mod:`json` does it, without importing :mod:`json` (and so :mod:`re`).

The hook fast path runs after every tool call; ``import json`` costs it ``re`` (json.decoder
and json.scanner compile their patterns at import), about half of a bare interpreter's
start-up. CPython's own accelerator ``_json`` needs none of that: its scanner takes any
object carrying the decoder's settings, and its encoder the encoder's. :func:`loads` and
:func:`dumps` give exactly what ``json.loads`` and ``json.dumps`` (default settings, or
``sort_keys``) give, and fall back to :mod:`json` itself where ``_json`` is missing (another
interpreter). A property test holds them equal (tests/unit/test_fastjson.py).

Pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs import time on the hook hot path
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: JSON's whitespace (RFC 8259 section 2), as ``json.decoder.WHITESPACE`` matches it.
_SPACE = " \t\n\r"

try:
    import _json
except ImportError:  # pragma: no cover - CPython always has it
    _json = None  # type: ignore[assignment]


class _Settings:
    """The decoder settings ``_json.make_scanner`` reads (json.JSONDecoder's defaults)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: dict[str, Any] = {}  # noqa: RUF012 - read once by the scanner, which keeps its own

    @staticmethod
    def parse_constant(name: str) -> float:
        return {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}[name]


_settings: Any = _Settings()
#: The C scanner (None without ``_json``): made once, it keeps no state between calls.
_scan: Callable[[str, int], tuple[Any, int]] | None = (
    None if _json is None else _json.make_scanner(_settings)
)


def _error(message: str, text: str, at: int) -> ValueError:
    """The error ``json.loads`` raises (json.JSONDecodeError, a ValueError); json is imported
    only here, on the failure path."""
    from json import JSONDecodeError

    return JSONDecodeError(message, text, at)


def loads(text: str) -> Any:
    """``json.loads(text)`` for a ``str``, with the same result and the same errors."""
    if _scan is None:  # pragma: no cover
        import json

        return json.loads(text)
    if text.startswith("\ufeff"):
        raise _error("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _decode(text)


def _decode(text: str) -> Any:
    """json.JSONDecoder.decode: one value, whitespace around it (no BOM check: json.loads
    makes that on ``str`` input only)."""
    assert _scan is not None
    start = len(text) - len(text.lstrip(_SPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration as stop:
        raise _error("Expecting value", text, stop.value) from None
    if end < len(text):
        tail = text[end:]
        extra = tail.lstrip(_SPACE)
        if extra:  # only whitespace may follow the value (json.decoder's "Extra data")
            raise _error("Extra data", text, end + len(tail) - len(extra))
    return value


def loads_bytes(data: bytes) -> Any:
    """``json.loads(data)`` for ``bytes``: UTF-8 (a BOM allowed, surrogates passed as json
    passes them) here; UTF-16 and UTF-32, which json detects by their NUL bytes, by json."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in data[:4] or _scan is None:
        import json

        return json.loads(data)
    if data[:3] == b"\xef\xbb\xbf":
        return _decode(data[3:].decode("utf-8", "surrogatepass"))
    return _decode(data.decode("utf-8", "surrogatepass"))


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def dumps(value: Any, *, sort_keys: bool = False) -> str:
    """``json.dumps(value)`` (or with ``sort_keys=True``): the same text, the same errors."""
    if _json is None or _json.make_encoder is None:  # pragma: no cover
        import json

        return json.dumps(value, sort_keys=sort_keys)
    # (markers, default, encoder, indent, key separator, item separator, sort_keys, skipkeys,
    # allow_nan): json.dumps's defaults, ensure_ascii and check_circular on. A new encoder
    # each call, as json.dumps makes one: its markers must not outlive a failed call.
    encode = _json.make_encoder(
        {}, _refuse, _json.encode_basestring_ascii, None, ": ", ", ", sort_keys, False, True
    )
    if isinstance(value, str):
        return str(_json.encode_basestring_ascii(value))
    return "".join(encode(value, 0))


__all__ = ["dumps", "loads", "loads_bytes"]
