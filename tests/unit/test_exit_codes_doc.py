"""The exit-code table is written once, in :class:`ExitCode`: the README's table and the one
``onstation --help`` prints are both held equal to it."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from onstation.cli.main import cli
from onstation.core.errors import ExitCode

README = Path(__file__).resolve().parents[2] / "README.md"


def _enum_table() -> list[tuple[int, str, str]]:
    return [(int(code), code.name, code.description) for code in ExitCode]


def _readme_table() -> list[tuple[int, str, str]]:
    """The rows of the table under the README's ``### Exit codes`` heading."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n### Exit codes\n", 1)[1]
    section = re.split(r"\n#{1,3} ", section, maxsplit=1)[0]
    # The section's first table: its first run of lines that start with "|".
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    table = lines[start:end]
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    assert header == ["code", "name", "meaning"]
    assert set(table[1].replace("|", "").split()) == {"---"}
    rows: list[tuple[int, str, str]] = []
    for line in table[2:]:
        code, name, meaning = (cell.strip() for cell in line.strip("|").split("|"))
        rows.append((int(code), name.strip("`"), meaning))
    return rows


def test_every_code_has_a_description() -> None:
    for code in ExitCode:
        assert code.description.strip(), code
        assert "\n" not in code.description


def test_the_readme_table_is_the_enum() -> None:
    assert _readme_table() == _enum_table()


def test_the_readme_has_one_exit_code_table() -> None:
    assert README.read_text(encoding="utf-8").count("\n### Exit codes\n") == 1


def test_help_prints_the_enum_table() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    block = result.output.split("Exit codes:\n", 1)[1].splitlines()
    printed = [re.fullmatch(r"\s+(\d+)  (.+)", line) for line in block if line.strip()]
    assert all(printed), block
    assert [(int(m[1]), m[2]) for m in printed if m] == [
        (code, description) for code, _, description in _enum_table()
    ]
