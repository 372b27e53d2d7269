"""Context-fill reading on a 200 MB Claude Code transcript, against ``tail -c 65536``.

Measured, on a transcript generated in a temp dir (filler user lines, one assistant usage
near the end):

- ``first read``: ``read_fill(path)`` without a cursor (bounded tail read), in process;
- ``incremental``: ``read_fill(path, cursor)`` right after appending two lines, in process;
- the baseline: one ``tail -c 65536`` of the same file as a subprocess (what a shell hook
  would do at the least), and for the hook picture, whole processes: ``python3 -c pass`` and
  ``python -c "read_fill(path)"`` (interpreter start-up + import + one read).

Ratios are ours/baseline; the in-process read should be a small fraction of the tail
subprocess, and the whole-process read close to bare interpreter start-up.

Run: ``./dev bench transcript`` or ``python -m bench.bench_transcript``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from onstation.harness.transcript import TranscriptCursor, read_fill

SIZE = 200 * 1024 * 1024
REPEATS = 21
PROCESS_REPEATS = 11


def _assistant(tokens: int, msg_id: str) -> bytes:
    line = {
        "type": "assistant",
        "isSidechain": False,
        "message": {
            "id": msg_id,
            "model": "claude-sonnet-4-5-20250929",
            "usage": {
                "input_tokens": tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 10,
            },
        },
        "requestId": f"req_{msg_id}",
    }
    return (json.dumps(line) + "\n").encode()


def _filler_line() -> bytes:
    text = "x" * 1500
    return (
        json.dumps({"type": "user", "message": {"role": "user", "content": text}}) + "\n"
    ).encode()


def _generate(path: Path) -> None:
    line = _filler_line()
    block = line * (8 * 1024 * 1024 // len(line))
    written = 0
    with path.open("wb") as handle:
        while written < SIZE:
            handle.write(block)
            written += len(block)
        handle.write(_assistant(120_000, "m0"))
        handle.write(line * 4)


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _time_process(argv: list[str], env: dict[str, str] | None = None) -> float:
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)  # warm caches, .pyc
    samples = []
    for _ in range(PROCESS_REPEATS):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
        samples.append(time.perf_counter() - start)
    return _median_ms(samples)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="onstation-bench-") as scratch:
        path = Path(scratch) / "transcript.jsonl"
        started = time.perf_counter()
        _generate(path)
        size = path.stat().st_size
        print(
            f"transcript: {size / 1024 / 1024:.0f} MB generated in "
            f"{time.perf_counter() - started:.1f} s; medians of {REPEATS} (in process) and "
            f"{PROCESS_REPEATS} (processes)"
        )

        first: list[float] = []
        cursor: TranscriptCursor | None = None
        for _ in range(REPEATS):
            start = time.perf_counter()
            reading, cursor = read_fill(path)
            first.append(time.perf_counter() - start)
            assert reading is not None and reading.used_tokens == 120_000

        incremental: list[float] = []
        filler = _filler_line()
        for i in range(REPEATS):
            with path.open("ab") as handle:
                handle.write(filler + _assistant(120_001 + i, f"m{i + 1}"))
            start = time.perf_counter()
            reading, cursor = read_fill(path, cursor)
            incremental.append(time.perf_counter() - start)
            assert reading is not None and reading.used_tokens == 120_001 + i

        # As installed: byte-code cached (a PYTHONDONTWRITEBYTECODE shell would otherwise
        # recompile every module on every start), the cache kept in the scratch dir.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(scratch) / "pycache")
        tail_ms = _time_process(["tail", "-c", "65536", str(path)])
        bare_ms = _time_process([sys.executable, "-c", "pass"], env)
        code = (
            "from onstation.harness.transcript import read_fill; "
            f"r, _ = read_fill({str(path)!r}); assert r is not None"
        )
        hook_ms = _time_process([sys.executable, "-c", code], env)
        first_ms, inc_ms = _median_ms(first), _median_ms(incremental)

        print(f"tail -c 65536 (process)      {tail_ms:8.3f} ms   baseline")
        print(f"read_fill first tail read    {first_ms:8.3f} ms   {first_ms / tail_ms:6.3f}x tail")
        print(f"read_fill incremental        {inc_ms:8.3f} ms   {inc_ms / tail_ms:6.3f}x tail")
        print(f"python -c pass (process)     {bare_ms:8.3f} ms")
        print(
            f"python -c read_fill(path)    {hook_ms:8.3f} ms   {hook_ms / tail_ms:6.3f}x tail, "
            f"{hook_ms / bare_ms:5.2f}x python -c pass"
        )
        os.unlink(path)


if __name__ == "__main__":
    main()
