"""``plain_output``: the one decision on ANSI escapes and line redraws."""

from __future__ import annotations

import io
import os
import pty

import pytest

from onstation.cli.common import plain_output


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("environ", "plain"),
    [
        ({}, False),
        ({"TERM": "xterm-256color"}, False),
        ({"NO_COLOR": ""}, False),  # set but empty: does not count (no-color.org)
        ({"NO_COLOR": "1"}, True),
        ({"NO_COLOR": "0"}, True),  # any non-empty value
        ({"TERM": "dumb"}, True),
        ({"TERM": "dumb", "NO_COLOR": ""}, True),
    ],
)
def test_a_terminal_is_plain_only_when_asked(environ: dict[str, str], plain: bool) -> None:
    assert plain_output(_Terminal(), environ) is plain


def test_a_stream_that_is_not_a_terminal_is_always_plain() -> None:
    assert plain_output(io.StringIO(), {"TERM": "xterm-256color"}) is True


def test_a_closed_or_odd_stream_is_plain() -> None:
    closed = io.StringIO()
    closed.close()
    assert plain_output(closed, {}) is True
    assert plain_output(object(), {}) is True
    assert plain_output(None, {}) is True


def test_a_real_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    master, slave = pty.openpty()
    try:
        with os.fdopen(os.dup(slave), "w") as stream:
            monkeypatch.setenv("TERM", "xterm")
            monkeypatch.delenv("NO_COLOR", raising=False)
            assert plain_output(stream) is False
            monkeypatch.setenv("NO_COLOR", "1")
            assert plain_output(stream) is True
    finally:
        os.close(slave)
        os.close(master)
