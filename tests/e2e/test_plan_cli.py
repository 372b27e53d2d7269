"""The plan commands end to end, through the real click group and the shipped examples."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from onstation.cli.main import cli
from onstation.plan.resources import data_dir, read_text

EXAMPLES = Path(str(data_dir("examples")))


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ONSTATION_KEYS_DIR", str(tmp_path / "keys"))
    monkeypatch.setenv("ONSTATION_DB", str(tmp_path / "l.db"))
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_resurrect_sample_prints_the_expected_review() -> None:
    result = run("resurrect", str(EXAMPLES / "sample-input.json"))
    assert result.exit_code == 0, result.output
    assert result.stdout == read_text("examples", "expected-output.md")


def test_resurrect_json_is_the_quarantined_plan_and_it_validates(tmp_path: Path) -> None:
    result = run("resurrect", str(EXAMPLES / "sample-input.json"), "--json")
    plan = json.loads(result.stdout)
    assert plan["verdict"]["disposition"] == "QUARANTINED"
    assert [r["code"] for r in plan["verdict"]["reasons"]] == ["AMBIGUOUS_EFFECT"]
    (tmp_path / "p.json").write_text(result.stdout)
    assert run("plan", "validate", str(tmp_path / "p.json")).exit_code == 0


def test_ready_plan_validates() -> None:
    result = run("plan", "validate", str(EXAMPLES / "resurrection-plan.ready.json"))
    assert result.exit_code == 0
    assert "valid" in result.stdout


def test_unsafe_plan_exits_2_with_schema_and_semantic_violations() -> None:
    result = run("plan", "validate", str(EXAMPLES / "resurrection-plan.unsafe-ready.json"))
    assert result.exit_code == 2
    lines = result.stdout.splitlines()
    assert "INVALID" in lines[0]
    assert any(
        line.split()[:3] == ["schema", "OS-SCH-010", "/predecessor/fenced"] for line in lines
    )
    assert any(line.split()[:2] == ["semantic", "OS-CAPY-003"] for line in lines)
    report = json.loads(
        run(
            "plan", "validate", str(EXAMPLES / "resurrection-plan.unsafe-ready.json"), "--json"
        ).stdout
    )
    layers = {v["layer"] for v in report["violations"]}
    assert layers == {"schema", "semantic"}
    assert all(
        v["pointer"].startswith("/") and v["rule"].startswith("OS-") for v in report["violations"]
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ('{"a": 1, "a": 2}', "duplicate key"),
        ('{"a": NaN}', "NaN"),
        ('{"a": 123456789012345678901}', "interoperable range"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content)
    for command in (["plan", "validate"], ["resurrect"], ["capsule", "verify"]):
        result = run(*command, str(path))
        assert result.exit_code == 2
        assert len(result.stderr.strip().splitlines()) == 1
        assert message in result.stderr


def test_keys_generate_list_export_import(tmp_path: Path) -> None:
    generated = json.loads(run("keys", "generate", "--label", "ops", "--json").stdout)
    kid = generated["keyId"]
    assert kid in run("keys", "list").stdout
    exported = run("keys", "export-public", kid).stdout
    assert json.loads(exported)["publicKey"] == generated["publicKey"]
    assert "PRIVATE" not in exported
    (tmp_path / "pub.json").write_text(exported)
    assert run("keys", "import-public", str(tmp_path / "pub.json")).exit_code == 0
    (tmp_path / "bad.pub").write_text("01" + "00" * 31)
    refused = run("keys", "import-public", str(tmp_path / "bad.pub"))
    assert refused.exit_code == 2
    assert "small-order" in refused.stderr


def _repo(path: Path) -> Path:
    path.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "t@e.org"], ["config", "user.name", "t"]):
        subprocess.run(["git", "-C", str(path), *args], check=True)
    (path / "f.txt").write_text("x\n")
    subprocess.run(["git", "-C", str(path), "add", "."], check=True)
    subprocess.run(["git", "-C", str(path), "commit", "-qm", "x"], check=True)
    return path


def test_capsule_build_seal_verify_accept_and_replay(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    assert run("node", "register", "ex-1").exit_code == 0
    assert run("lease", "acquire", "ex-1").exit_code == 0
    run("keys", "generate")
    old = tmp_path / "old.json"
    built = run("capsule", "build", "ex-1", "--repo", str(repo), "--out", str(old))
    assert built.exit_code == 0, built.output
    assert run("capsule", "verify", str(old)).exit_code == 2  # not sealed yet
    assert run("capsule", "seal", str(old)).exit_code == 0
    accepted = run("capsule", "verify", str(old), "--accept", "--json")
    assert accepted.exit_code == 0, accepted.output
    assert json.loads(accepted.stdout)["accepted"] == "new"
    # Another identity expected: refused.
    assert run("capsule", "verify", str(old), "--node", "ex-2").exit_code == 2
    # Tampering after sealing: refused, and the file is left as it was.
    doc = json.loads(old.read_text())
    doc["payload"]["objective"] = "push to main"
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(doc))
    result = run("capsule", "verify", str(tampered))
    assert result.exit_code == 2
    assert "digest" in result.stderr
    # A newer capsule raises the mark; the old one is then a replay (exit 5).
    assert run("lease", "fence", "ex-1", "--expect-generation", "1").exit_code == 0
    new = tmp_path / "new.json"
    run("capsule", "build", "ex-1", "--repo", str(repo), "--out", str(new))
    run("capsule", "seal", str(new))
    assert run("capsule", "verify", str(new), "--accept").exit_code == 0
    replay = run("capsule", "verify", str(old), "--accept")
    assert replay.exit_code == 5
    assert "replay refused" in replay.stderr


def test_capsule_build_of_unknown_node_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    result = run("capsule", "build", "nobody", "--repo", str(tmp_path), "--out", str(out))
    assert result.exit_code == 2
    assert not out.exists()
