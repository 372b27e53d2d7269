"""``./dev bench --readme`` fills the README's benchmark block with a run's own output
(issue 14: the README's figures are produced by the benchmarks, never typed by hand)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]


def test_the_block_between_the_markers_is_replaced_by_the_output(
    bench_module: Callable[[str], ModuleType],
) -> None:
    bench = bench_module("__main__.py")
    readme = f"intro\n{bench.BEGIN}\nold figures\n{bench.END}\nafter\n"
    out = bench.readme_with(readme, "\n### bench_x\n  1.0 ms  ```odd``` fence\n")
    assert out.startswith("intro\n") and out.endswith("\nafter\n")
    block = out.split(bench.BEGIN, 1)[1].split(bench.END, 1)[0]
    assert "old figures" not in block and "### bench_x" in block
    assert block.startswith("\n````text\n")  # a fence longer than any in the output


def test_a_readme_without_the_block_is_refused(
    bench_module: Callable[[str], ModuleType],
) -> None:
    bench = bench_module("__main__.py")
    with pytest.raises(SystemExit, match="no <!-- bench:begin -->"):
        bench.readme_with("no markers here\n", "figures")


def test_the_readme_has_the_block_and_it_holds_every_benchmark(
    bench_module: Callable[[str], ModuleType],
) -> None:
    bench = bench_module("__main__.py")
    text = (ROOT / "README.md").read_text()
    block = text.split(bench.BEGIN, 1)[1].split(bench.END, 1)[0]
    for path in sorted((ROOT / "bench").glob("bench_*.py")):
        assert f"### {path.stem}" in block, path.stem
