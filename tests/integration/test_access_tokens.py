"""The console's access tokens (issue 15), on every backend: created with their text shown
once, kept as a digest only, authenticated in constant time, bound to one generation for an
agent, revoked for good; the CLI's `onstation token` on top."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onstation.core.errors import BadInput, Conflict
from onstation.ledger import Ledger
from onstation.ledger.tokens import TOKEN_PREFIX, parse_token


def test_an_operator_token_authenticates_and_only_its_digest_is_kept(ledger: Ledger) -> None:
    issued = ledger.create_operator_token("alice", by="root")
    assert issued.token.startswith(TOKEN_PREFIX)
    got = ledger.authenticate(issued.token)
    assert got is not None
    assert (got.kind, got.name, got.node, got.generation) == ("operator", "alice", None, None)
    stored = ledger.backend.read  # the secret must appear nowhere in the table
    with stored() as tx:
        rows = tx.all("SELECT * FROM access_token")
    # As the ledger reads it: the id, then everything after the first "_" (a urlsafe secret
    # may hold "_" itself; its last piece alone, a few characters, matched a digest by chance).
    secret = issued.token[len(TOKEN_PREFIX) :].partition("_")[2]
    assert len(secret) >= 40
    assert rows and not any(secret in str(value) for row in rows for value in row)
    kinds = [e.kind for e in ledger.events_after(0)]
    assert "token.created" in kinds


def test_an_agent_token_is_bound_to_the_current_generation(ledger: Ledger) -> None:
    ledger.register_node("exec-1")
    generation = ledger.acquire_lease("exec-1", holder="body-1").generation
    issued = ledger.create_agent_token("exec-1", generation=generation, by="root")
    got = ledger.authenticate(issued.token)
    assert got is not None and (got.kind, got.node, got.generation) == ("agent", "exec-1", 1)
    with pytest.raises(BadInput, match="generation"):
        ledger.create_agent_token("exec-1", generation=generation + 1, by="root")
    with pytest.raises(BadInput, match="no such node"):
        ledger.create_agent_token("ghost", generation=1, by="root")


def test_tampered_unknown_and_revoked_tokens_do_not_authenticate(ledger: Ledger) -> None:
    issued = ledger.create_operator_token("alice", by="root")
    token_id = issued.record.token_id
    last = issued.token[-1]
    tampered = issued.token[:-1] + ("A" if last != "A" else "B")
    assert ledger.authenticate(tampered) is None
    other_id = ("0" if token_id[0] != "0" else "1") + token_id[1:]
    assert ledger.authenticate(issued.token.replace(token_id, other_id)) is None
    assert ledger.authenticate("") is None
    assert ledger.authenticate("Bearer " + issued.token) is None
    revoked = ledger.revoke_token(token_id, by="root")
    assert revoked.revoked and revoked.revoked_by == "root"
    assert ledger.authenticate(issued.token) is None
    with pytest.raises(Conflict, match="already revoked"):
        ledger.revoke_token(token_id, by="root")
    with pytest.raises(BadInput, match="no such token"):
        ledger.revoke_token("0123456789abcdef", by="root")
    assert [t.token_id for t in ledger.tokens()] == [token_id]


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_parse_token_never_raises_and_accepts_only_the_shape(text: str) -> None:
    parsed = parse_token(text)
    if parsed is not None:
        token_id, secret = parsed
        assert text == f"{TOKEN_PREFIX}{token_id}_{secret}"
        assert len(token_id) == 16 and secret


def _cli(args: list[str], db: Path) -> subprocess.CompletedProcess[str]:
    onstation = str(Path(sys.executable).with_name("onstation"))
    env = {**os.environ, "ONSTATION_DB": str(db)}
    return subprocess.run([onstation, *args], capture_output=True, text=True, env=env,
                          check=False, timeout=60)  # fmt: skip


def test_the_cli_creates_lists_and_revokes_tokens(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    assert _cli(["node", "register", "exec-1"], db).returncode == 0
    made = _cli(["token", "create", "--agent", "exec-1", "--json"], db)
    assert made.returncode == 0, made.stderr
    data = json.loads(made.stdout)
    assert (data["kind"], data["node"], data["generation"]) == ("agent", "exec-1", 1)
    assert data["token"].startswith(TOKEN_PREFIX)
    listed = _cli(["token", "list", "--json"], db)
    assert [t["token_id"] for t in json.loads(listed.stdout)["tokens"]] == [data["token_id"]]
    assert data["token"] not in listed.stdout  # the text is shown once, never listed
    before = db.read_bytes()
    for bad, code in ((["token", "create"], 2), (["token", "create", "--operator", "a",
                      "--agent", "exec-1"], 2), (["token", "create", "--operator", "../x"], 2),
                      (["token", "create", "--operator", "a", "--generation", "1"], 2),
                      (["token", "revoke", "ffffffffffffffff"], 2)):  # fmt: skip
        done = _cli(bad, db)
        assert done.returncode == code, (bad, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1
    assert db.read_bytes() == before
    assert _cli(["token", "revoke", data["token_id"]], db).returncode == 0
    again = _cli(["token", "revoke", data["token_id"]], db)
    assert again.returncode == 5 and "already revoked" in again.stderr
