"""Run every benchmark in bench/ (``./dev bench``), or the ones named: ``./dev bench ledger``."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def main() -> None:
    here = Path(__file__).parent
    names = sorted(p.stem for p in here.glob("bench_*.py"))
    wanted = sys.argv[1:]
    if wanted:
        names = [n for n in names if n.removeprefix("bench_") in wanted or n in wanted]
        if not names:
            raise SystemExit(f"bench: no benchmark named {' '.join(wanted)}")
    for name in names:
        print(f"\n### {name}", flush=True)
        importlib.import_module(f"bench.{name}").main()


if __name__ == "__main__":
    main()
