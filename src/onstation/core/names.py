"""Validation of identifiers that may reach a file path, an argv or a SQL parameter.

Names are the durable handles of AgentNodes, Actors and episodes. They may end up in brief
and manifest file names, so the rule is an allowlist: printable, no path separators, no
``..``, no NUL, no leading ``-``, 1 to 128 characters.
"""

from __future__ import annotations

import re
import unicodedata

from onstation.core.errors import BadInput

MAX_NAME_LENGTH = 128

#: The whole rule but ``..``, matched against the whole string (``fullmatch``: a ``$`` would
#: also match before a trailing line break, and let ``"name\n"`` through). ASCII only, so a
#: match is also in NFC; at most :data:`MAX_NAME_LENGTH` characters.
_ALLOWED = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9._:@+=-]{{0,{MAX_NAME_LENGTH - 1}}}")
#: Unicode's control characters (general category Cc: U+0000-U+001F and U+007F-U+009F, a
#: set the standard keeps stable) but tab and line feed. One search, where a look at each
#: character's category took about a microsecond per ten characters of every reason logged.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def validate_name(value: str, field: str = "name") -> str:
    """Return ``value`` if it is a safe identifier; else raise :class:`BadInput` naming it."""
    # Every ledger call validates its names (hundreds per relief): one match decides a good
    # name; a bad one is told why by the checks below, in the order they name it.
    if type(value) is str and ".." not in value and _ALLOWED.fullmatch(value):
        return value
    if not isinstance(value, str):
        raise BadInput(f"{field}: must be a string", field=field)
    if value == "":
        raise BadInput(f"{field}: must not be empty", field=field)
    if "\x00" in value:
        raise BadInput(f"{field}: must not contain NUL", field=field)
    if len(value) > MAX_NAME_LENGTH:
        raise BadInput(
            f"{field}: longer than {MAX_NAME_LENGTH} characters ({len(value)})", field=field
        )
    if value.startswith("-"):
        raise BadInput(f"{field}: must not start with '-' ({value!r})", field=field)
    if "/" in value or "\\" in value:
        raise BadInput(f"{field}: must not contain a path separator ({value!r})", field=field)
    if ".." in value:
        raise BadInput(f"{field}: must not contain '..' ({value!r})", field=field)
    if unicodedata.normalize("NFC", value) != value or not value.isascii():
        raise BadInput(f"{field}: must be plain ASCII ({value!r})", field=field)
    if not _ALLOWED.fullmatch(value):
        raise BadInput(
            f"{field}: may hold only letters, digits and . _ : @ + = - ({value!r})", field=field
        )
    return value


def validate_free_text(value: str, field: str, max_length: int = 4096) -> str:
    """Free text (reasons, actions, operator names): bounded, no NUL, no control characters."""
    if not isinstance(value, str):
        raise BadInput(f"{field}: must be a string", field=field)
    if "\x00" in value:
        raise BadInput(f"{field}: must not contain NUL", field=field)
    if len(value) > max_length:
        raise BadInput(f"{field}: longer than {max_length} characters", field=field)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            # Undecodable command-line bytes arrive as lone surrogates (surrogateescape).
            raise BadInput(f"{field}: not valid UTF-8 text", field=field) from None
    if _CONTROL.search(value):
        raise BadInput(f"{field}: must not contain control characters", field=field)
    return value
