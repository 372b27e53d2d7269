"""Run every benchmark in bench/ (``./dev bench``), or the ones named: ``./dev bench ledger``.

``./dev bench --readme`` runs every benchmark and writes what they printed into README.md,
between the ``<!-- bench:begin -->`` and ``<!-- bench:end -->`` lines, so the README's figures
are always a run's own output, never typed by hand.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import re
import sys
from pathlib import Path
from typing import TextIO

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"


class _Tee(io.TextIOBase):
    """Writes to the terminal and keeps a copy."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.kept = io.StringIO()

    def write(self, text: str) -> int:
        self.out.write(text)
        self.kept.write(text)
        return len(text)

    def flush(self) -> None:
        self.out.flush()


def readme_with(readme: str, output: str) -> str:
    """``readme`` with the text between its bench markers replaced by ``output``."""
    if BEGIN not in readme or END not in readme:
        raise SystemExit(f"bench: README.md has no {BEGIN} ... {END} block to fill")
    head, rest = readme.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    # The output is set off as preformatted text; a fence longer than any in it stays closed.
    longest = max((len(run) for run in re.findall(r"`+", output)), default=0)
    fence = "`" * max(3, longest + 1)
    block = f"{BEGIN}\n{fence}text\n{output.strip()}\n{fence}\n{END}"
    return head + block + tail


def main() -> None:
    here = Path(__file__).parent
    names = sorted(p.stem for p in here.glob("bench_*.py"))
    args = sys.argv[1:]
    write_readme = "--readme" in args
    if write_readme:
        if len(args) != 1:
            raise SystemExit("bench: --readme runs every benchmark; name none with it")
        sys.argv = sys.argv[:1]  # the benchmarks read their own arguments
    wanted = sys.argv[1:]
    if wanted:
        names = [n for n in names if n.removeprefix("bench_") in wanted or n in wanted]
        if not names:
            raise SystemExit(f"bench: no benchmark named {' '.join(wanted)}")
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee) if write_readme else contextlib.nullcontext():
        for name in names:
            print(f"\n### {name}", flush=True)
            importlib.import_module(f"bench.{name}").main()
    if write_readme:
        readme = here.parent / "README.md"
        readme.write_text(readme_with(readme.read_text(), tee.kept.getvalue()))
        print(f"\nbench: README.md's benchmark block written ({len(names)} benchmarks)")


if __name__ == "__main__":
    main()
