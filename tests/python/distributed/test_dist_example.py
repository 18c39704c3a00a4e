"""examples/ddp_train.py runs as the README says:
`torchrun --standalone --nproc-per-node 2 examples/ddp_train.py`."""

import os
import re
import signal
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TIMEOUT = 240


def _torchrun() -> list:
    """This interpreter's torchrun; `python -m torch.distributed.run` (the same thing) if
    it has none next to it."""
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    return [torchrun] if os.access(torchrun, os.X_OK) else [sys.executable, "-m", "torch.distributed.run"]


def test_ddp_example_with_torchrun():
    command = _torchrun() + ["--standalone", "--nproc-per-node", "2", "examples/ddp_train.py"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PTO_FALLBACK": "silent",
           "PYTHONPATH": os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)}
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # torchrun and the ranks it started
        stdout, stderr = process.communicate()
        raise AssertionError(f"{' '.join(command)} still running after {TIMEOUT} s\n"
                             f"stdout:\n{stdout[-4000:]}\nstderr:\n{stderr[-4000:]}")
    assert process.returncode == 0, f"exit code {process.returncode}\nstdout:\n{stdout[-4000:]}\nstderr:\n{stderr[-6000:]}"
    # Searched, not split into lines: the ranks share the output and torchrun may interleave them.
    for rank in range(2):
        assert re.search(rf"rank {rank} step 29 loss \d+\.\d+", stdout), stdout
    first = [float(v) for v in re.findall(r"rank \d step  0 loss (\d+\.\d+)", stdout)]
    finals = re.findall(r"^trained 30 steps on 2 ranks, final loss (\d+\.\d+)$", stdout, re.MULTILINE)
    assert len(finals) == 1 and len(first) == 2, stdout
    assert float(finals[0]) < sum(first) / 2, stdout
