"""The copy fuzzer (copy_fuzz.py) in CI: 10,000 cases of seed 0 in chunks, each in
its own interpreter so that a crash fails only its chunk and names its case (a
case prints its description before it runs). Two chunks run at a time."""

import functools
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

FUZZER = Path(__file__).with_name("copy_fuzz.py")
SEED = 0
CHUNKS = 4
CASES_PER_CHUNK = 2500


def _run_chunk(chunk: int) -> subprocess.CompletedProcess:
    command = [sys.executable, "-W", "ignore", str(FUZZER), "--seed", str(SEED),
               "--start", str(chunk * CASES_PER_CHUNK), "--cases", str(CASES_PER_CHUNK)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PTO_FALLBACK": "silent"})


@functools.cache
def _results():
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(_run_chunk, range(CHUNKS)))


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_copy_fuzz_chunk(chunk):
    result = _results()[chunk]
    lines = result.stdout.splitlines()
    cases = sum(line.startswith("case ") for line in lines)
    assert result.returncode == 0, (
        f"chunk {chunk} exited with {result.returncode} after {cases} cases; last output:\n"
        + "\n".join(lines[-4:]) + "\nstderr:\n" + result.stderr[-3000:])
    assert cases == CASES_PER_CHUNK, "\n".join(lines[-4:])
