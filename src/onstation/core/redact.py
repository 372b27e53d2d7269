"""Secrets never travel: the one redaction every hand-over document goes through.

Briefs, manifests, capsules and successor prompts carry text from artifacts (git, the
ledger, transcripts, what the agent supplied). Before any of it is written or quoted,
:func:`redact` replaces each secret it recognises with a marker ``[redacted: KIND]`` and
says how many it replaced, of which kinds. :func:`scrub_url` is the same rules applied to a
remote URL (userinfo, tokens in the query), and is what git evidence is collected through.

The rules are onstation's own (docs/decisions.md says why not a detector library): a secret
is recognised by its *shape* (a provider's token prefix, a key block, a JWT) or by its
*name* (``PASSWORD=...``, ``"client_secret": "..."``, ``?access_token=...``), never by
entropy alone, so a git object id, a UUID or a digest is left alone. Over-redacting a value
that only looked like a secret costs the successor a little context; letting one through
cannot be undone, so ambiguous named values are redacted.

Pure: no I/O, no clock, no randomness. Redaction is idempotent (a marker never matches a
rule), and text without secrets comes back unchanged.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping

from onstation.core.secret_shapes import INVISIBLE as _INVISIBLE
from onstation.core.secret_shapes import SUSPECT as _SUSPECT

TYPE_CHECKING = False  # the hook fast path imports this module: typing costs import time
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "KINDS",
    "MARKER",
    "Redaction",
    "count_markers",
    "describe",
    "recorded_redactions",
    "redact",
    "redact_tree",
    "redactions_record",
    "scrub_url",
    "without_userinfo",
]

MARKER = "[redacted: {kind}]"
_MARKER_RE = re.compile(r"\[redacted: ([a-z0-9-]+)\]")
_REDACTED = "[redacted"

# Token characters: a token ends where these end (so a longer run is never half-redacted).
_B = r"(?<![A-Za-z0-9_])"
_E = r"(?![A-Za-z0-9_])"
_E_DASH = r"(?![A-Za-z0-9_-])"

# Names that say "this value is a secret" (case-insensitive substrings of a variable name).
_SENSITIVE_WORDS = (
    r"(?:passw(?:or)?d|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|"
    r"private[_-]?key|client[_-]?secret|credentials?|auth[_-]?key|session[_-]?key|"
    r"signing[_-]?key|encryption[_-]?key|_pass|_pw)"
)
# A variable-like name holding one of those words (FOO_TOKEN, db.password, "apiKey").
_NAME = rf"[A-Za-z0-9_.-]*?{_SENSITIVE_WORDS}[A-Za-z0-9_.-]*"


class _Rule:
    """One redaction rule, compiled the first time it is needed: most texts never reach the
    rules (:data:`_SUSPECT`), and compiling them all costs the hook fast path milliseconds.
    A plain class: dataclasses cost import time there too."""

    __slots__ = (
        "_after",
        "_after_source",
        "_compiled",
        "_flags",
        "_source",
        "check",
        "folded",
        "kind",
        "needs",
    )

    def __init__(
        self,
        kind: str,
        source: str,
        flags: int = 0,
        check: Callable[[re.Match[str], str], str | None] | None = None,
        needs: tuple[str, ...] = (),
        folded: bool = False,
        after: str | None = None,
    ) -> None:
        self.kind = kind
        self._source = source
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None
        #: Optional second look at a match: the kind to record, or None to leave it alone.
        self.check = check
        #: Literals one of which every match holds: a text holding none is not searched
        #: (issue 14). With ``folded`` (a case-insensitive rule) they are lower-case letters,
        #: looked for in the lower-cased text; else exact (no cased letter is matched
        #: case-insensitively by them).
        self.needs = needs
        self.folded = folded
        #: Optional: what every match holds right after its literal (a pattern matched
        #: there, in the text the literals are looked for in): a text where it follows none
        #: of them is not searched either. The whole pattern, asked at every position of a
        #: long text, costs far more than this one, asked only where a literal ends.
        self._after_source = after
        self._after: re.Pattern[str] | None = None

    def cannot_match(self, text: str, lowered: str | None) -> bool:
        """Whether the rule cannot match ``text``; ``lowered`` is it lower-cased, or None
        where lower-casing does not show every letter re's case folding would match."""
        if not self.needs:
            return False
        if self.folded:
            if lowered is None:
                return False
            within = lowered
        else:
            within = text
        if self._after_source is None:
            return not any(word in within for word in self.needs)
        after = self._after
        if after is None:
            after = self._after = re.compile(self._after_source)
        for word in self.needs:
            start = within.find(word)
            while start >= 0:
                if after.match(within, start + len(word)):
                    return False
                start = within.find(word, start + 1)
        return True

    @property
    def pattern(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self._source, self._flags)
        return self._compiled


_NOT_SECRET_SUFFIXES = (
    "tokens", "_count", "_limit", "_size", "_length", "_len", "_file", "_path", "_dir",
    "_url", "_name", "_type", "_hint",
)  # fmt: skip


def _assignment_kind(match: re.Match[str], value: str) -> str | None:
    if value.startswith(("$", "%", _REDACTED)) or value.lower() in {
        "", "null", "none", "nil", "true", "false", "undefined", "***", "<redacted>",
    }:  # fmt: skip
        return None  # a reference, an empty or a masked value: nothing to hide
    name = match.group("name").lower().replace("-", "_")
    if name.endswith(_NOT_SECRET_SUFFIXES):
        return None  # MAX_TOKENS=4096, TOKEN_FILE=/run/x: a count or a place, not a secret
    if "aws" in name or "secretaccesskey" in name or "secret_access_key" in name:
        return "aws-secret-access-key"
    return "secret-assignment"


def _rule(
    kind: str, pattern: str, flags: int = 0, check: Any = None, *, needs: tuple[str, ...] = (),
    folded: bool = False, after: str | None = None,
) -> _Rule:  # fmt: skip
    return _Rule(kind, pattern, flags, check, needs, folded, after)


# Order matters: specific shapes first, so a token inside a URL or an assignment is recorded
# by its kind; the generic rules after them skip values that already are markers.
_RULES: tuple[_Rule, ...] = (
    _rule(
        "private-key",
        # To the END line, or to the end of the text when a bounded tail cut the block.
        r"(?P<secret>-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*))",
        re.DOTALL,
        needs=("-----BEGIN ",),
    ),
    _rule(
        "jwt",
        rf"{_B}(?P<secret>eyJ[A-Za-z0-9_-]{{8,}}\.eyJ[A-Za-z0-9_-]{{8,}}\.[A-Za-z0-9_-]*)",
        needs=("eyJ",),
    ),
    _rule(
        "github-token",
        rf"{_B}(?P<secret>gh[pousr]_[A-Za-z0-9]{{30,255}}|github_pat_[A-Za-z0-9_]{{22,255}}){_E}",
        needs=("gh", "github_pat_"),
    ),
    _rule(
        "gitlab-token", rf"{_B}(?P<secret>glpat-[A-Za-z0-9_-]{{20,}}){_E_DASH}", needs=("glpat-",)
    ),
    _rule(
        "slack-token", rf"{_B}(?P<secret>xox[abposre]-[A-Za-z0-9-]{{10,}}){_E_DASH}", needs=("xox",)
    ),
    _rule(
        "slack-webhook",
        r"https://hooks\.slack\.com/(?:services|workflows)/(?P<secret>[A-Za-z0-9/_-]{20,})",
        needs=("https://hooks.slack.com/",),
    ),
    _rule(
        "anthropic-key",
        rf"{_B}(?P<secret>sk-ant-[A-Za-z0-9_-]{{20,}}){_E_DASH}",
        needs=("sk-ant-",),
    ),
    _rule(
        "openai-key",
        # A digit somewhere: a long hyphenated identifier after "sk-" is not a key.
        rf"{_B}(?P<secret>sk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{{20,}}){_E_DASH}",
        needs=("sk-",),
    ),
    _rule(
        "stripe-key",
        rf"{_B}(?P<secret>(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{{16,}}){_E}",
        needs=("_live_", "_test_"),
    ),
    _rule(
        "aws-access-key-id",
        rf"{_B}(?P<secret>(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{{16}}){_E}",
        needs=("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    ),
    _rule("google-api-key", rf"{_B}(?P<secret>AIza[0-9A-Za-z_-]{{35}}){_E_DASH}", needs=("AIza",)),
    _rule(
        "url-credentials",
        # The whole userinfo of http(s), whose user name is often the token itself
        # (https://TOKEN@host, https://TOKEN:x-oauth-basic@host); the password of any other
        # scheme (ssh://git:PASSWORD@host keeps its account name).
        r"(?i)\b(?:https?://(?P<user>[^\s/@\[\]]+)@"
        r"|[a-z][a-z0-9+.-]*://[^\s/@:\[\]]+:(?P<secret>[^\s/@\[\]]+)@)",
        needs=("://",),
        # Both forms reach an "@" after the "://" through no space, "/", "@", "[" or "]".
        after=r"[^\s/@\[\]]+@",
    ),
    _rule(
        "url-query-secret",
        r"(?i)[?&;](?:[a-z0-9_.-]*(?:token|secret|passw(?:or)?d|api[_-]?key|apikey|signature|"
        r"credential)[a-z0-9_.-]*|sig|key|auth|pwd|pass)=(?P<secret>[^&#\s\"'<>\[\]]+)",
        needs=("=",),
    ),
    _rule(
        "bearer-token",
        r"(?i)(?:\bauthorization\s*[:=]\s*[\"']?(?:bearer|basic|token|bot)\s+"
        r"(?P<secret>[A-Za-z0-9._~+/=-]{8,})"
        r"|\bbearer\s+(?P<bare>[A-Za-z0-9._~+/-]{20,}=*))",
        needs=("authorization", "bearer"),
        folded=True,
    ),
    _rule(
        "secret-assignment",
        # NAME=value (.env, shell, ini); "NAME": "value" (JSON, YAML); NAME: value (YAML)
        # only when the value is the rest of the line, so "Secret: nobody knows" is prose.
        # A value never runs into a marker already there: that one was counted.
        rf"(?im)(?<![A-Za-z0-9_.-])(?P<q>[\"']?)(?P<name>{_NAME})(?P=q)"
        r"(?:\s*=>?\s*|\s*:\s*(?=[\"']|[^\s\"'`,;\\]+[ \t]*(?:$|[,}\]])))"
        r"(?:\"(?P<dq>(?:(?!\[redacted: )[^\"\\\n]|\\.)*)\"?|'(?P<sq>(?:(?!\[redacted: )[^'\n])*)'"
        r"|(?P<bare>(?:(?!\[redacted: )[^\s\"'`,;\\])+))",
        0,
        _assignment_kind,
        # Every word of _SENSITIVE_WORDS holds one of these, and what follows it in the
        # word is of the name's characters: the rest of the name, the closing quote and an
        # "=" or ":" follow it in every match (the lower-cased text holds exactly the ASCII
        # letters the case-insensitive class matches: _lowered).
        needs=("pass", "pwd", "secret", "token", "key", "credential", "_pw"),
        folded=True,
        after=r"[a-z0-9_.-]*[\"']?\s*[=:]",
    ),
)

KINDS: tuple[str, ...] = tuple(dict.fromkeys([r.kind for r in _RULES] + ["aws-secret-access-key"]))


class Redaction:
    """A redacted text and what was taken out of it (kind -> how many)."""

    __slots__ = ("kinds", "text")

    def __init__(self, text: str, kinds: Mapping[str, int] | None = None) -> None:
        self.text = text
        self.kinds: Mapping[str, int] = {} if kinds is None else kinds

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Redaction):
            return NotImplemented
        return (self.text, dict(self.kinds)) == (other.text, dict(other.kinds))

    def __hash__(self) -> int:
        return hash((self.text, tuple(sorted(self.kinds.items()))))

    def __repr__(self) -> str:
        return f"Redaction(text={self.text!r}, kinds={dict(self.kinds)!r})"

    @property
    def count(self) -> int:
        """How many secrets were replaced."""
        return sum(self.kinds.values())


def _secret_group(match: re.Match[str]) -> str | None:
    for name in ("secret", "dq", "sq", "bare", "user"):
        if name in match.re.groupindex and match.group(name) is not None:
            return name
    return None


def _apply(rule: _Rule, text: str, counts: Counter[str]) -> str:
    out: list[str] = []
    last = 0
    for match in rule.pattern.finditer(text):
        group = _secret_group(match)
        if group is None:
            continue
        value = match.group(group)
        if not value or value.startswith(_REDACTED) or "[redacted: ".startswith(value):
            continue  # a marker, or one a bound cut short: what it stood for was counted
        if rule.check is not None:
            kind = rule.check(match, value)
            if kind is None:
                continue
        else:
            kind = rule.kind
        start, end = match.span(group)
        out += [text[last:start], MARKER.format(kind=kind)]
        last = end
        counts[kind] += 1
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


#: Short texts redacted before, by their exact text: (the redacted text, its counts by kind).
#: A pure function's answers (the same text always redacts the same way), bounded in count
#: and in each text's length: the same object ids, paths and names come back in every
#: document of a relief, and each one that looks like a token runs every rule (issue 14).
_MEMO: dict[str, tuple[str, tuple[tuple[str, int], ...]]] = {}
_MEMO_ENTRIES = 4096
_MEMO_LENGTH = 2048


def redact(text: str) -> Redaction:
    """``text`` with every secret replaced by ``[redacted: KIND]``, and the counts by kind.

    Invisible format characters are removed first: they would hide a secret from the rules
    and not from a reader (and they can reorder what a reader sees)."""
    out, kinds = _redact(text) if type(text) is not str else _remembered(text)
    return Redaction(out, dict(kinds))


def _remembered(text: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    """:func:`_redact` of an exact ``str``, from :data:`_MEMO` when it is short."""
    if len(text) > _MEMO_LENGTH:
        return _redact(text)
    known = _MEMO.get(text)
    if known is None:
        if len(_MEMO) >= _MEMO_ENTRIES:
            _MEMO.clear()  # bounded; the next texts fill it again
        known = _MEMO[text] = _redact(text)
    return known


def _redact(text: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    counts: Counter[str] = Counter()
    text = _INVISIBLE.sub("", text)
    lowered = _lowered(text)
    # The rules' literals first: a text where no rule can match is left as it is (the loop
    # below would change nothing), and looking for them costs less than _SUSPECT's
    # case-insensitive alternatives tried at every position (issue 14: most of a brief's
    # redaction time). Then _SUSPECT, as before.
    if all(rule.cannot_match(text, lowered) for rule in _RULES):
        return text, ()
    if not _SUSPECT.search(text):
        return text, ()
    # Each rule is asked of the text the rules before it left (their markers included).
    for rule in _RULES:
        if rule.cannot_match(text, lowered):
            continue
        done = _apply(rule, text, counts)
        if done is not text:
            text = done
            lowered = _lowered(text)
    return text, tuple(sorted(counts.items()))


#: The characters outside ASCII that re's IGNORECASE matches to an ASCII letter (dotted and
#: dotless i, long s, the Kelvin sign); str.lower() does not turn them into that letter.
#: tests/unit/test_redact_prefilter.py scans every code point to hold this list complete.
_ODD_FOLDS = ("\u0130", "\u0131", "\u017f", "\u212a")


def _lowered(text: str) -> str | None:
    """``text`` lower-cased, where that shows every ASCII letter re's case folding would
    match in it (every character is ASCII, or none of :data:`_ODD_FOLDS` is there: only
    they fold to an ASCII letter from outside ASCII); else None."""
    if text.isascii() or not any(odd in text for odd in _ODD_FOLDS):
        return text.lower()
    return None


def scrub_url(url: str) -> str:
    """A URL (a git remote) without credentials: the userinfo of http(s) URLs, the password
    of any other (``ssh://git:pw@host``), tokens in the query, and any recognised token,
    each replaced by a marker. A URL without credentials comes back unchanged; so does an
    scp-like ``git@host:path`` (``git`` is an account name, not a secret)."""
    return redact(url).text


_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^/@\s?#]*)@")


def without_userinfo(url: str) -> str:
    """A URL-shaped destination without the credentials in its userinfo, and still a URL a
    parser accepts (a marker there would read as an IPv6 bracket): http(s) loses its whole
    userinfo (the user name is often the token itself), any other scheme its password
    (``ssh://git:PW@host`` keeps the account ``git``). Anything else is returned as is."""
    match = _USERINFO.match(url)
    if match is None:
        return url
    scheme, info = match.group("scheme"), match.group("info")
    if scheme.lower() in ("http://", "https://") or ":" not in info:
        kept = "" if scheme.lower() in ("http://", "https://") else f"{info}@"
    else:
        kept = info.split(":", 1)[0] + "@"
    return scheme + kept + url[match.end() :]


def redact_tree(value: Any, *, skip: frozenset[str] = frozenset()) -> tuple[Any, dict[str, int]]:
    """Every string inside a JSON-like ``value`` (dicts, lists, strings) redacted; keys and
    non-strings are kept, and so are the values under a dict key in ``skip``. Returns the
    new value and the counts by kind."""
    counts: Counter[str] = Counter()

    def walk(node: Any) -> Any:
        # Exact types first, without a Redaction each (issue 14: a capsule's parts are
        # thousands of short texts); subclasses take the general way below.
        kind = type(node)
        if kind is str:
            text, kinds = _remembered(node)
            for name, count in kinds:
                counts[name] += count
            return text
        if kind is dict and not skip:
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, str):
            done = redact(node)
            counts.update(done.kinds)
            return done.text
        if isinstance(node, dict):
            return {k: v if k in skip else walk(v) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return [walk(v) for v in node]
        return node

    out = walk(value)
    return out, dict(sorted(counts.items()))


def count_markers(value: Any) -> dict[str, int]:
    """How many redaction markers ``value`` (a text, or a JSON-like tree) holds, by kind."""
    counts: Counter[str] = Counter()

    def walk(node: Any) -> None:
        if isinstance(node, str):
            if "[redacted: " in node:  # every marker holds it: most texts hold none
                counts.update(m.group(1) for m in _MARKER_RE.finditer(node))
        elif isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v)

    walk(value)
    return dict(sorted(counts.items()))


def redactions_record(kinds: Mapping[str, int]) -> dict[str, Any]:
    """What a document records of its redactions: ``{"total": N, "kinds": {KIND: n}}``."""
    return {"total": sum(kinds.values()), "kinds": dict(sorted(kinds.items()))}


def recorded_redactions(document: Mapping[str, Any]) -> dict[str, int]:
    """The redactions of a brief's or a manifest's content (its ``redactions`` record), or
    of a capsule payload (the markers it holds), by kind: what a report prints."""
    record = document.get("redactions")
    if isinstance(record, Mapping) and isinstance(record.get("kinds"), Mapping):
        return {str(k): int(v) for k, v in sorted(record["kinds"].items())}
    return count_markers(dict(document))


def describe(kinds: Mapping[str, int]) -> str:
    """``"3 secrets redacted (2 github-token, 1 private-key)"``, or ``"no secrets redacted"``."""
    total = sum(kinds.values())
    if total == 0:
        return "no secrets redacted"
    parts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()) if n)
    return f"{total} secret{'s' if total != 1 else ''} redacted ({parts})"
