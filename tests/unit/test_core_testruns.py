"""Test runs recognised from shell commands (core/testruns.py), and their status."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onstation.core import testruns
from onstation.core.testruns import MAX_NAME_CHARS, failure_exit_code

# Imported under other names: pytest would collect functions named test_*.
find_run = testruns.test_run
run_name = testruns.test_run_name
status_of = testruns.test_status

#: Command -> the name it is recognised under.
RUNS = {
    "pytest": "pytest",
    "pytest -q tests/unit": "pytest -q tests/unit",
    "python -m pytest -x": "python -m pytest -x",
    "python3 -m unittest discover": "python3 -m unittest discover",
    ".venv/bin/python -X dev -m pytest": ".venv/bin/python -X dev -m pytest",
    ".venv/bin/pytest -p no:cacheprovider": ".venv/bin/pytest -p no:cacheprovider",
    "python manage.py test": "python manage.py test",
    "coverage run -m pytest": "coverage run -m pytest",
    "tox -e py311": "tox -e py311",
    "nox -s tests": "nox -s tests",
    "npm test": "npm test",
    "npm run test": "npm run test",
    "npm run test:unit -- --watch=false": "npm run test:unit -- --watch=false",
    "npm t": "npm t",
    "yarn test": "yarn test",
    "pnpm test": "pnpm test",
    "bun test": "bun test",
    "jest --ci": "jest --ci",
    "npx vitest run": "npx vitest run",
    "vitest": "vitest",
    "mocha": "mocha",
    "go test ./...": "go test ./...",
    "cargo test --all": "cargo test --all",
    "cargo nextest run": "cargo nextest run",
    "make test": "make test",
    "make -j4 check": "make -j4 check",
    "./dev test": "./dev test",
    "ctest --output-on-failure": "ctest --output-on-failure",
    "rspec spec/a_spec.rb": "rspec spec/a_spec.rb",
    "bundle exec rspec": "bundle exec rspec",
    "mvn test": "mvn test",
    "gradle test": "gradle test",
    "./gradlew test": "./gradlew test",
    "dotnet test": "dotnet test",
    "deno test": "deno test",
    "vendor/bin/phpunit": "vendor/bin/phpunit",
    "uv run pytest": "uv run pytest",
    "uv run --with pytest-xdist pytest -n 4": "uv run --with pytest-xdist pytest -n 4",
    "poetry run pytest": "poetry run pytest",
    "scripts/run-tests.sh": "scripts/run-tests.sh",
}

#: Commands that mention tests but run none.
NOT_RUNS = [
    "echo pytest",
    "grep -rn test src",
    "cat test.py",
    'git commit -m "fix tests"',
    "pip install pytest",
    "which pytest",
    "command -v pytest",
    "ls tests",
    "npm install",
    "npm run lint",
    "make build",
    "python -c 'import pytest'",
    "python -m pip install pytest",
    "pytest --collect-only",
    "pytest --version",
    "vim tests/test_a.py",
    "printf 'pytest\\n'",
    "",
    "pytest 'unclosed",
]


@pytest.mark.parametrize(("command", "name"), sorted(RUNS.items()))
def test_a_test_command_is_recognised_under_its_own_words(command: str, name: str) -> None:
    assert run_name(command) == name


@pytest.mark.parametrize("command", NOT_RUNS)
def test_a_command_that_only_mentions_tests_is_not_a_run(command: str) -> None:
    assert run_name(command) is None


@pytest.mark.parametrize(
    ("command", "name", "exit_is_run"),
    [
        ("FOO=1 BAR=x pytest -q", "pytest -q", True),
        ("cd app && pytest -q", "pytest -q", True),
        ("timeout 60 pytest", "pytest", True),
        ("timeout -s KILL 5m pytest", "pytest", True),
        ("env -i PATH=/usr/bin pytest", "pytest", True),
        ("pytest | tail -5", "pytest", False),
        ("pytest -q 2>&1 | tail -20", "pytest -q", False),
        ("pytest; echo done", "pytest", False),
        ("pytest || true", "pytest", False),
        ("pytest &", "pytest", False),
        ("pytest && echo ok", "pytest", True),
        ("(cd app && pytest)", "pytest", True),
        ("bash -lc 'cd app && npm test'", "npm test", True),
        ("pip install -e . && pytest tests", "pytest tests", True),
        ("git status\npytest -x", "pytest -x", True),
    ],
)
def test_prefixes_chains_and_pipes(command: str, name: str, exit_is_run: bool) -> None:
    found = find_run(command)
    assert found is not None
    assert (found.name, found.exit_is_run) == (name, exit_is_run)


def test_status_follows_the_outcome_and_exit_code() -> None:
    assert status_of("succeeded", 0) == "passed"
    assert status_of("succeeded", 1) == "failed"
    assert status_of("succeeded", None) == "unknown"  # Codex: no exit status given
    assert status_of("failed", 1) == "failed"
    assert status_of("failed", None) == "failed"
    assert status_of("denied", None) == "skipped"
    assert status_of("interrupted", None) == "unknown"
    assert status_of("interrupted", 0) == "unknown"


def test_the_exit_code_is_read_from_claude_codes_failure_text() -> None:
    assert failure_exit_code("Command exited with non-zero status code 1") == 1
    assert failure_exit_code("Command exited with non-zero status code 137\nKilled") == 137
    assert failure_exit_code("Exit code 2\nFAILED tests/test_a.py::test_x") == 2
    assert failure_exit_code("Command timed out after 2m 0.0s") is None
    assert failure_exit_code("The user doesn't want to proceed with this tool use.") is None
    assert failure_exit_code("non-zero status code 99999999999") is None  # out of range


# -- properties ------------------------------------------------------------------------------

_commands = st.sampled_from(sorted(RUNS))
_var = st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True)
_value = st.from_regex(r"[A-Za-z0-9./:-]{0,12}", fullmatch=True)
_dir = st.from_regex(r"[A-Za-z0-9_./-]{1,16}", fullmatch=True)
#: Text without the characters that could start another command.
_plain = st.text(
    alphabet=st.characters(blacklist_characters=";&|()\n`$", blacklist_categories=("Cs",)),
    max_size=80,
)


@given(_commands, _var, _value)
def test_an_environment_prefix_keeps_a_run_recognised(command: str, var: str, value: str) -> None:
    assert run_name(f"{var}={value} {command}") == RUNS[command]


@given(_commands, _dir)
def test_a_cd_prefix_keeps_a_run_recognised(command: str, directory: str) -> None:
    assert run_name(f"cd {directory} && {command}") == RUNS[command]


@given(_commands, st.integers(min_value=1, max_value=3600))
def test_a_timeout_keeps_a_run_recognised_and_a_pipe_takes_its_exit(
    command: str, seconds: int
) -> None:
    found = find_run(f"timeout {seconds} {command} | tail -n 20")
    assert found is not None
    assert (found.name, found.exit_is_run) == (RUNS[command], False)


@given(st.sampled_from(["echo", "grep", "cat", "printf", "git commit -m", "pip install"]), _plain)
def test_a_command_that_only_prints_or_searches_is_never_a_run(word: str, text: str) -> None:
    assert run_name(f"{word} {text}") is None
    assert run_name(f"{word} pytest {text}") is None


@given(st.text(max_size=400))
def test_any_text_gives_none_or_a_bounded_printable_name(text: str) -> None:
    name = run_name(text)
    assert name is None or (0 < len(name) <= MAX_NAME_CHARS and name.isprintable())


@given(st.text(alphabet="abcdefghij =", max_size=1000))
def test_a_long_run_has_a_bounded_name(args: str) -> None:
    name = run_name(f"pytest {args} {'x' * 300}")
    assert name is not None and len(name) <= MAX_NAME_CHARS
    assert name.startswith("pytest")


@given(st.text(max_size=200), st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_the_failure_code_is_found_whatever_surrounds_it(prefix: str, code: int) -> None:
    found = failure_exit_code(f"Command exited with non-zero status code {code}\n{prefix}")
    assert found == code
