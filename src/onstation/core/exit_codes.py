"""The process exit codes of the CLI (:class:`ExitCode`), one for each kind of
:mod:`onstation.core.errors` error.

Apart from the error classes so that importing those (every hook process does) does not
import ``enum``, about 1.5 ms of a hook's start-up: :mod:`onstation.core.errors` reads an
error's code from here only when it is asked for (``onstation.core.errors.ExitCode`` is this
class too).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes of the CLI; scripts branch on them.

    Each code's :attr:`description` is the one text of the exit-code table: ``onstation
    --help`` prints it and the README's table is tested against it.
    """

    OK = 0
    ERROR = 1
    BAD_INPUT = 2
    DENIED = 3
    BLOCKED = 4
    CONFLICT = 5

    @property
    def description(self) -> str:
        """What the code means, for people reading ``--help`` or the README."""
        return _EXIT_CODE_DESCRIPTIONS[self]


_EXIT_CODE_DESCRIPTIONS: dict[ExitCode, str] = {
    ExitCode.OK: "ok",
    ExitCode.ERROR: "anything else (e.g. the ledger cannot be opened)",
    ExitCode.BAD_INPUT: "bad input or usage; nothing was changed",
    ExitCode.DENIED: "denied: the generation is stale or fenced (the denial is recorded)",
    ExitCode.BLOCKED: "blocked by policy: respawn limit, breaker or halt",
    ExitCode.CONFLICT: (
        "conflict: a compare-and-swap lost, a live lease exists, or the transition is invalid"
    ),
}
