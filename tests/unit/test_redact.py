"""Secrets never travel (issue 13): the redaction rules against a corpus.

Every secret here is fake but well-formed (the shape a real one has), and built by
concatenation so that no scanner mistakes this file for a leak. The look-alikes are what a
hand-over carries all the time (object ids, digests, UUIDs, prose) and must come through
untouched.
"""

from __future__ import annotations

import base64
import hashlib
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onstation.core import redact as r

A36 = "Abc123" * 6  # 36 token characters
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4"

# (kind, text containing exactly one secret of that kind, the secret itself)
SECRETS: list[tuple[str, str, str]] = [
    ("aws-access-key-id", "key id {}", "AKIA" + "IOSFODNN7EXAMPLE"),
    ("aws-access-key-id", "sts said {} (temporary)", "ASIA" + "Y34FZKBOKMUTVV7A"),
    (
        "aws-secret-access-key",
        "AWS_SECRET_ACCESS_KEY={}",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
    ),
    (
        "aws-secret-access-key",
        "aws_secret_access_key = {}",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
    ),
    (
        "private-key",
        "key:\n{}\nafter",
        "-----BEGIN RSA " + "PRIVATE KEY-----\n" + PEM_BODY + "\n-----END RSA PRIVATE KEY-----",
    ),
    (
        "private-key",
        "{}",
        "-----BEGIN OPENSSH "
        + "PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
    ),
    (
        "private-key",
        "{}",
        "-----BEGIN ENCRYPTED "
        + "PRIVATE KEY-----\nMIIFHDBOBgkqhkiG9w0BBQ0w\n-----END ENCRYPTED PRIVATE KEY-----",
    ),
    (
        "private-key",
        "{}",
        "-----BEGIN PGP "
        + "PRIVATE KEY BLOCK-----\n\nlQOYBF0=\n-----END PGP PRIVATE KEY BLOCK-----",
    ),
    # A GCP service-account key as JSON: the newlines are escapes on one line.
    (
        "private-key",
        '{{"type": "service_account", "private_key": "{}\\n"}}',
        "-----BEGIN " + "PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0\\n-----END PRIVATE KEY-----",
    ),
    # A bounded transcript tail cut the block before its END line.
    (
        "private-key",
        "cat id_ed25519\n{}",
        "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    ),
    ("github-token", "token {} here", "ghp_" + A36),
    ("github-token", "{}", "gho_" + A36),
    ("github-token", "GITHUB_TOKEN is {}", "ghs_" + A36),
    ("github-token", "pat: {}", "github_pat_" + "11ABCDEFG0" + "a1b2c3d4e5_" * 6),
    ("gitlab-token", "{}", "glpat-" + "x1Y2z3W4v5U6t7S8r9Q0"),
    ("slack-token", "slack {}", "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
    ("slack-token", "{}", "xoxp-" + "123456789012-123456789012-1234567890123-0123456789abcdef"),
    ("openai-key", "OPENAI key {}", "sk-" + "Ab1" * 16),
    ("openai-key", "{}", "sk-proj-" + "Ab1_Cd2-" * 8),
    ("anthropic-key", "{}", "sk-ant-api03-" + "Ab1_Cd2-" * 10 + "AA"),
    ("stripe-key", "stripe {}", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"),
    ("bearer-token", "Authorization: Bearer {}", "abcdef0123456789.ABCDEF"),
    ("bearer-token", "curl -H 'Authorization: token {}' x", "0123456789abcdefABCD"),
    (
        "jwt",
        "Bearer {}",
        "eyJhbGciOiJIUzI1NiJ9"
        + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    ("google-api-key", "{}", "AIza" + "SyA-1234567890abcdefghijklmnopqrstu"),
    ("secret-assignment", "PASSWORD={}", "hunter2"),
    ("secret-assignment", "export DB_PASSWORD='{}'", "c0rrect horse"),
    ("secret-assignment", "TOKEN={}", "0f9e8d7c6b5a"),
    ("secret-assignment", "SECRET={}\nOTHER=1", "s3cr3t-value"),
    ("secret-assignment", "API_KEY={}", "k-1234567890"),
    ("secret-assignment", '{{"client_secret": "{}"}}', "abc.def-123"),
    ("secret-assignment", "db:\n  password: {}\n", "pa55w0rd"),
    ("url-credentials", "git clone https://{}@example.org/x.git", "bot:s3cret"),
    ("url-credentials", "remote ssh://git:{}@example.org/x.git", "pa55"),
    ("url-query-secret", "GET https://api.example.org/v1?access_token={}&page=2", "0a1b2c3d4e"),
    (
        "slack-webhook",
        "https://hooks.slack.com/services/{}",
        "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    ),
]

LOOKALIKES = [
    hashlib.sha1(b"commit", usedforsecurity=False).hexdigest(),  # a git object id
    "commit " + hashlib.sha1(b"x", usedforsecurity=False).hexdigest()[:12] + " (short id)",
    "sha256:" + hashlib.sha256(b"blob").hexdigest(),
    str(uuid.UUID(int=0x123E4567E89B12D3A456426614174000)),
    base64.b64encode(b"The quick brown fox jumps over the lazy dog").decode(),
    "The password is kept in the vault; ask the operator for the password.",
    "Rotate the token monthly. A bearer token is described in RFC 6750.",
    "Secret: nobody knows",  # prose with a colon, not a key name of a config
    "max_tokens=4096 tokens=12 MAX_TOKENS: 200000",
    "TOKEN_FILE=/run/secrets/token PASSWORD=$DB_PASSWORD API_KEY=${API_KEY}",
    "git@github.com:example/webapp.git and https://github.com/example/webapp.git",
    "ssh://git@example.org/x.git",
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
    "pip install scikit-learn; import sk-learn? no: sklearn",
    "see src/onstation/core/redact.py and docs/password-policy.md",
    "https://example.org/search?q=token&page=2",
    "AKIA is the prefix of an AWS access key id",
    "eyJ alone is not a token",
    "[redacted: github-token] was already redacted",
]


@pytest.mark.parametrize(("kind", "template", "secret"), SECRETS)
def test_each_secret_is_redacted_with_its_kind(kind: str, template: str, secret: str) -> None:
    text = template.format(secret)
    done = r.redact(text)
    assert secret not in done.text
    assert done.kinds == {kind: 1}
    assert done.count == 1
    assert f"[redacted: {kind}]" in done.text
    # What surrounds the secret is kept.
    for piece in template.split("{}"):
        assert piece.replace("{{", "{").replace("}}", "}") in done.text or "\\n" in piece


@pytest.mark.parametrize("text", LOOKALIKES)
def test_lookalikes_are_left_alone(text: str) -> None:
    done = r.redact(text)
    assert done.text == text
    assert done.count == 0


def test_all_kinds_are_exercised_by_the_corpus() -> None:
    assert {k for k, _, _ in SECRETS} == set(r.KINDS)


@pytest.mark.parametrize(
    ("url", "clean"),
    [
        (
            "https://user:TOKEN@host.example/o/r.git",
            "https://[redacted: url-credentials]@host.example/o/r.git",
        ),
        (
            "https://TOKEN@host.example/o/r.git",
            "https://[redacted: url-credentials]@host.example/o/r.git",
        ),
        ("http://u:p@[::1]:8080/r", "http://[redacted: url-credentials]@[::1]:8080/r"),
        (
            "https://x-access-token:" + "ghs_" + A36 + "@github.com/o/r",
            "https://x-access-token:[redacted: github-token]@github.com/o/r",
        ),
        ("ssh://git:pw@host/r.git", "ssh://git:[redacted: url-credentials]@host/r.git"),
        (
            "https://host/r.git?private_token=abc123",
            "https://host/r.git?private_token=[redacted: url-query-secret]",
        ),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
        ("ssh://git@host:2222/r.git", "ssh://git@host:2222/r.git"),
        ("https://github.com/o/r.git", "https://github.com/o/r.git"),
        ("/srv/git/r.git", "/srv/git/r.git"),
    ],
)
def test_scrub_url(url: str, clean: str) -> None:
    assert r.scrub_url(url) == clean
    assert r.scrub_url(clean) == clean


def test_build_scrub_remote_is_the_same_function() -> None:
    from onstation.plan.build import scrub_remote

    assert scrub_remote is r.scrub_url


def test_redact_tree_counts_and_keeps_shape() -> None:
    token = "ghp_" + A36
    tree = {"a": [f"x {token}", 3, None], "b": {"PASSWORD": "PASSWORD=hunter2"}, "effects": token}
    out, kinds = r.redact_tree(tree, skip=frozenset({"effects"}))
    assert out["a"][1:] == [3, None]
    assert token not in out["a"][0] and out["effects"] == token
    assert kinds == {"github-token": 1, "secret-assignment": 1}
    assert r.count_markers(out) == kinds


def test_describe_and_recorded() -> None:
    assert r.describe({}) == "no secrets redacted"
    assert r.describe({"jwt": 1}) == "1 secret redacted (1 jwt)"
    assert r.describe({"jwt": 2, "private-key": 1}) == "3 secrets redacted (2 jwt, 1 private-key)"
    record = r.redactions_record({"jwt": 2})
    assert record == {"total": 2, "kinds": {"jwt": 2}}
    assert r.recorded_redactions({"redactions": record, "markdown": "[redacted: jwt]"}) == {
        "jwt": 2
    }
    # A capsule payload records no count of its own: its markers are counted.
    assert r.recorded_redactions({"objective": "[redacted: jwt] and [redacted: jwt]"}) == {"jwt": 2}


# ------------------------------------------------------------------------------------------
# properties

_ATOMS = st.sampled_from(LOOKALIKES) | st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40
)
_SECRET_TEXTS = st.sampled_from([t.format(s) for _, t, s in SECRETS])


@settings(max_examples=300, deadline=None)
@given(st.lists(_ATOMS, max_size=8).map(" ".join))
def test_secret_free_text_is_never_lengthened(text: str) -> None:
    done = r.redact(text)
    if done.count == 0:  # only the invisible format characters go
        assert done.text == r._INVISIBLE.sub("", text)
    assert len(done.text) <= len(text) or done.count > 0


@settings(max_examples=300, deadline=None)
@given(st.lists(_ATOMS | _SECRET_TEXTS, max_size=8), st.sampled_from([" ", "\n", "", "\t"]))
def test_redaction_is_idempotent(parts: list[str], sep: str) -> None:
    once = r.redact(sep.join(parts))
    twice = r.redact(once.text)
    assert twice.text == once.text
    assert twice.count == 0
    # Every redaction left its marker behind, so a count of markers agrees.
    assert sum(r.count_markers(once.text).values()) >= once.count


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(LOOKALIKES), max_size=6), st.sampled_from(SECRETS))
def test_a_planted_secret_never_survives(noise: list[str], planted: tuple[str, str, str]) -> None:
    _, template, secret = planted
    text = "\n".join([*noise, template.format(secret), *noise])
    assert secret not in r.redact(text).text


@pytest.mark.parametrize("cut", range(1, len("[redacted: secret-assignment]")))
def test_a_marker_cut_by_a_bound_is_not_redacted_again(cut: int) -> None:
    text = "PASSWORD=[redacted: secret-assignment]"[: len("PASSWORD=") + cut]
    assert r.redact(text).text == text


_INVISIBLES = st.sampled_from(["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad",
                               "\u202e"])  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SECRETS), _INVISIBLES, st.integers(min_value=1, max_value=60))
def test_a_secret_split_by_an_invisible_character_is_still_redacted(
    planted: tuple[str, str, str], invisible: str, at: int
) -> None:
    """A reader does not see a zero-width or bidi character, so a secret split by one reads
    whole: it is redacted all the same (before, ``ghp_…\u200b…`` passed every rule)."""
    _, template, secret = planted
    cut = min(at, len(secret) - 1)
    text = template.format(secret[:cut] + invisible + secret[cut:])
    done = r.redact(text).text
    assert secret not in done and invisible not in done
    assert done.count("[redacted: ") >= 1


def _rules_find_something(text: str) -> bool:
    """Whether any rule matches ``text``, run without the shapes check that guards them."""
    from collections import Counter

    counts: Counter[str] = Counter()
    for rule in r._RULES:
        r._apply(rule, text, counts)
    return bool(counts)


def test_every_corpus_secret_has_a_secret_shape() -> None:
    from onstation.core.secret_shapes import may_hold_secret

    for _kind, template, secret in SECRETS:
        assert may_hold_secret(template.format(secret)), template


_SHAPELESS = st.text(
    alphabet=st.sampled_from(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789-_=:/.?&;'\" \t\n+~,[]{}()<>#$%!*")),
    max_size=120,
)  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(st.one_of(_SHAPELESS, st.lists(_ATOMS, max_size=8).map(" ".join)))
def test_a_text_without_a_secret_shape_is_one_no_rule_matches(text: str) -> None:
    """The shapes check (core/secret_shapes.py) lets redact() and the hook fast path skip the
    rules: sound only if no rule can match a text it does not flag."""
    from onstation.core.secret_shapes import may_hold_secret

    if not may_hold_secret(text):
        assert not _rules_find_something(text), text
        assert r.redact(text).text == r._INVISIBLE.sub("", text)


@pytest.mark.parametrize(
    ("url", "clean"),
    [
        ("https://x-access-token:TOKEN@github.com/o/r.git", "https://github.com/o/r.git"),
        ("https://TOKEN@github.com/o/r", "https://github.com/o/r"),
        ("ssh://git:PW@host/r.git", "ssh://git@host/r.git"),
        ("ssh://git@host/r.git", "ssh://git@host/r.git"),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
        ("origin", "origin"),
        ("https://github.com/a@b", "https://github.com/a@b"),
    ],
)
def test_without_userinfo_keeps_a_parseable_url(url: str, clean: str) -> None:
    from urllib.parse import urlsplit

    assert r.without_userinfo(url) == clean
    urlsplit(r.without_userinfo(url))  # never a marker where a parser reads a host


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                *(t.format(s) for _k, t, s in SECRETS),
                "HEAD " + "a" * 40,
                "tool",
                "password=hunter2 and more",
            ]
        ),
        min_size=1,
        max_size=6,
    )
)
def test_a_remembered_redaction_is_the_redaction_made_anew(texts: list[str]) -> None:
    """redact() remembers short texts (issue 14): a text asked again gets exactly what the
    rules give it, and a caller changing the counts it got changes nothing later."""
    for text in texts + texts:
        got = r.redact(text)
        fresh_text, fresh_kinds = r._redact(text)
        assert (got.text, dict(got.kinds)) == (fresh_text, dict(fresh_kinds))
        assert isinstance(got.kinds, dict)
        got.kinds.clear()  # type: ignore[attr-defined]
        assert dict(r.redact(text).kinds) == dict(fresh_kinds)
    long = "token=" + "x" * (r._MEMO_LENGTH + 10)
    assert r.redact(long).text == "token=[redacted: secret-assignment]"
    assert long not in r._MEMO
