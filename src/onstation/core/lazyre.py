"""Regular expressions compiled the first time they are used.

Every hook call is a new process, and ``re`` (with the ``enum`` module it imports) costs it
milliseconds of import time; a module-level ``re.compile`` pays that even for the many calls
that never use the pattern. A :class:`LazyPattern` imports ``re`` and compiles only at its
first use, then answers exactly as the compiled pattern does.

Pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs import time on the hook hot path
if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Iterator

#: ``re``'s flag values, as plain ints: naming ``re.IGNORECASE`` would import ``re`` (a test
#: holds them equal to the module's).
IGNORECASE = 2
MULTILINE = 8
DOTALL = 16


class LazyPattern:
    """A ``re.Pattern[str]`` compiled at first use: the methods the project calls, each
    answering as the compiled pattern's own."""

    __slots__ = ("_compiled", "_flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (compiled now, the first time)."""
        compiled = self._compiled
        if compiled is None:
            import re

            compiled = self._compiled = re.compile(self.pattern, self._flags)
        return compiled

    def search(self, string: str) -> re.Match[str] | None:
        return self.compiled().search(string)

    def match(self, string: str) -> re.Match[str] | None:
        return self.compiled().match(string)

    def fullmatch(self, string: str) -> re.Match[str] | None:
        return self.compiled().fullmatch(string)

    def findall(self, string: str) -> list[str]:
        return self.compiled().findall(string)

    def finditer(self, string: str) -> Iterator[re.Match[str]]:
        return self.compiled().finditer(string)

    def split(self, string: str) -> list[str]:
        return self.compiled().split(string)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> str:
        return self.compiled().sub(repl, string, count)

    @property
    def flags(self) -> int:
        """The compiled pattern's flags (as ``re`` reports them)."""
        return self.compiled().flags

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r}, {self._flags})"


__all__ = ["DOTALL", "IGNORECASE", "MULTILINE", "LazyPattern"]
