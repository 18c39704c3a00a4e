"""Memory safety of hand-written programs: 10,000 random PTO programs (asm_fuzz.py)
bound to slices of larger tensors, in chunks of 2,500, each chunk in its own
interpreter so that a crash fails the test naming its chunk. Every program is
refused before it runs or touches nothing outside the slices it is given."""

import os
import subprocess
import sys

import pytest

FUZZ = os.path.join(os.path.dirname(__file__), "asm_fuzz.py")
CHUNK = 2500


@pytest.mark.parametrize("first", range(0, 10000, CHUNK))
def test_random_programs_stay_inside_their_buffers(first):
    result = subprocess.run([sys.executable, FUZZ, "--cases", str(CHUNK), "--first", str(first), "--seed", "0"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    ran = int(result.stdout.split("ran=")[1].split()[0])
    assert ran > CHUNK // 20, result.stdout  # enough programs pass the verifier to test the kernels too
