"""Fuzzing every JSON the CLI reads (hypothesis, bounded): whatever the text, a command ends
with a documented exit code for its input (never 1, "anything else", never a traceback) and a
one-line error.

The inputs mix valid JSON of every shape, hostile JSON (deep nesting, integers past Python's
4,300-digit limit, duplicate keys, NaN) and arbitrary text and bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Campaign, soak_scale
from onstation.cli.main import cli
from onstation.ledger import Ledger

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=20,
)  # fmt: skip
HOSTILE = st.sampled_from(
    [
        "[" * 100_000 + "]" * 100_000,
        '{"a":' * 50_000 + "1" + "}" * 50_000,
        "9" * 5_000,
        '{"n": ' + "7" * 4_301 + "}",
        '{"a": 1, "a": 2}',
        "NaN",
        '{"x": Infinity}',
        "\ud800",
        "",
        "\x00",
        '"' + "a" * 100_000 + '"',
    ]
)
TEXTS = st.one_of(JSON_VALUES.map(json.dumps), HOSTILE, st.text(max_size=200))
#: Exit codes an input can earn: 0 ok, 2 bad input, 3 denied, 4 blocked, 5 conflict.
ALLOWED = {0, 2, 3, 4, 5}


@pytest.fixture
def world(tmp_path: Path) -> dict[str, object]:
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.register_node("app")
        ledger.acquire_lease("app", holder="fuzz")
    return {"db": db, "file": tmp_path / "input.json", "tmp": tmp_path}


def _commands(world: dict[str, object]) -> dict[str, Callable[[str], list[str]]]:
    path = str(world["file"])
    return {
        "effect intend --args": lambda t: ["effect", "intend", "app", "--generation", "1",
                                           "--op", "git.push", "--dest", "origin", "--args", t],
        "challenge answer --echo": lambda t: ["challenge", "answer", "app", "--generation", "1",
                                              "--echo", t],
        "plan validate": lambda t: ["plan", "validate", path],
        "capsule verify": lambda t: ["capsule", "verify", path],
        "resurrect": lambda t: ["resurrect", path],
        "supervise --team": lambda t: ["supervise", "--team", path, "--once"],
        "brief write --from": lambda t: ["brief", "write", "app", "--generation", "1",
                                         "--from", path],
    }  # fmt: skip


@pytest.mark.parametrize(
    "command",
    ["effect intend --args", "challenge answer --echo", "plan validate", "capsule verify",
     "resurrect", "supervise --team", "brief write --from"],
)  # fmt: skip
def test_any_json_gets_a_documented_exit_code(
    world: dict[str, object], command: str, campaign: type[Campaign],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    count = campaign("CLI JSON fuzz (7 readers)")
    monkeypatch.setenv("ONSTATION_DB", str(world["db"]))
    monkeypatch.setenv("ONSTATION_KEYS_DIR", str(Path(str(world["tmp"])) / "keys"))
    build = _commands(world)[command]
    runner = CliRunner()

    @settings(max_examples=40 * soak_scale(), deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow])  # fmt: skip
    @given(TEXTS)
    def attempt(text: str) -> None:
        Path(str(world["file"])).write_bytes(text.encode("utf-8", "surrogatepass"))
        # argv as the OS hands it to Python: bytes, undecodable ones surrogate-escaped.
        args = [a.encode("utf-8", "surrogatepass").decode("utf-8", "surrogateescape")
                for a in build(text)]  # fmt: skip
        result = runner.invoke(cli, [*args, "--json"])
        count.tried()
        code = result.exit_code
        traceback = result.exception is not None and not isinstance(result.exception, SystemExit)
        if code not in ALLOWED or traceback:
            count.lost()
        assert not traceback, (command, text[:80], repr(result.exception))
        assert code in ALLOWED, (command, text[:80], code, result.output[:300])
        if code != 0:
            count.denied()
            lines = [line for line in result.output.splitlines() if line.strip()]
            # One JSON object: the error, or (plan validate, capsule verify) the verdict.
            assert len(lines) == 1 and isinstance(json.loads(lines[0]), dict), result.output[:300]

    attempt()
