"""Run a function on N ranks, each in a fresh interpreter, and collect what each returns.

    results = harness.run(my_rank_fn, world_size=2, args=(...))

`my_rank_fn(*args)` must be a module-level function of an importable test module. Each
rank is a new `python` process (subprocess, own session) with MASTER_ADDR, MASTER_PORT
(a free port), RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE set, `pypto_torch`
imported, the CPU fallback silenced and every generator seeded with `SEED`. What the
function returns is moved to the CPU (tensors inside lists, tuples and dicts too) and
sent back with torch.save; an exception comes back as its traceback. After it returns
the process group, if one is left, is destroyed.

A rank that raises, a rank killed by a signal (negative exit code: the signal's name
is reported) or a run past `timeout` seconds (every rank killed, with its process
group) fails the test with each rank's exit code, traceback and the tail of its
stderr, so a hang in a collective never blocks the suite. When one rank fails the
others get `grace` seconds to finish before they are killed: they are usually stuck
in a collective waiting for it.

Device and backend: DEVICE is "pto" and BACKEND "pccl"; PTO_DIST_TEST_DEVICE=cpu
runs the same tests on "cpu" with "gloo" (to tell a backend bug from a test bug).
"""

from __future__ import annotations

import os
import pickle
import random
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any, Callable, Sequence

DEVICE = os.environ.get("PTO_DIST_TEST_DEVICE", "pto")
BACKEND = {"pto": "pccl", "cpu": "gloo"}[DEVICE]
SEED = 0

# What each rank runs: argv = [module file, function name, rank, workdir].
_BOOTSTRAP = textwrap.dedent("""
    import importlib.util, os, pickle, sys, traceback
    path, name, rank, workdir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    try:
        sys.path.insert(0, os.path.dirname(path))
        module_name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        import harness
        harness._seed_everything()
        with open(os.path.join(workdir, "args.pkl"), "rb") as f:
            args, kwargs = pickle.load(f)
        result = getattr(module, name)(*args, **kwargs)
        harness._finish(result, os.path.join(workdir, f"result{rank}.pt"))
    except BaseException:
        with open(os.path.join(workdir, f"error{rank}.txt"), "w") as f:
            f.write(traceback.format_exc())
        sys.stderr.write(traceback.format_exc())
        sys.stderr.flush()
        os._exit(1)
""")


class RanksFailed(AssertionError):
    """One or more ranks failed, crashed or timed out; the message says how."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _seed_everything(seed: int = SEED) -> None:
    import numpy as np
    import torch

    import pypto_torch

    pypto_torch.set_fallback_mode("silent")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if DEVICE == "pto":
        torch.pto.manual_seed_all(seed)


def to_cpu(value: Any) -> Any:
    """Tensors (also inside lists, tuples and dicts) detached and moved to the CPU."""
    import torch

    if isinstance(value, torch.Tensor):
        from torch.distributed.tensor import DTensor

        if isinstance(value, DTensor):
            value = value.to_local()
        return value.detach().cpu().clone()
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(v) for v in value)
    return value


def _finish(result: Any, path: str) -> None:
    import torch
    import torch.distributed as dist

    result = to_cpu(result)
    if dist.is_initialized():
        dist.destroy_process_group()
    torch.save(result, path)


def local_device() -> "torch.device":  # noqa: F821
    """This rank's device, as a user picks it: LOCAL_RANK modulo the devices there are."""
    import torch

    if DEVICE == "cpu":
        return torch.device("cpu")
    index = int(os.environ["LOCAL_RANK"]) % torch.pto.device_count()
    torch.pto.set_device(index)
    return torch.device("pto", index)


def init(backend: str | None = BACKEND, **kwargs) -> "torch.device":  # noqa: F821
    """init_process_group from the environment; returns this rank's device."""
    import torch.distributed as dist

    device = local_device()
    if backend is None:
        dist.init_process_group(**kwargs)
    else:
        dist.init_process_group(backend, **kwargs)
    return device


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running (killed)"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name} (exit code {code})"
        except ValueError:
            return f"killed by signal {-code} (exit code {code})"
    return f"exit code {code}"


def _tail(path: str, chars: int = 4000) -> str:
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    return text if len(text) <= chars else "...\n" + text[-chars:]


def _kill(process: subprocess.Popen) -> None:
    """Kill one rank this harness started and whatever it started (its own session)."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.wait()


def run(fn: Callable, world_size: int = 2, args: Sequence = (), kwargs: dict | None = None,
        timeout: float = 240, grace: float = 20, env: dict | None = None,
        may_exit: Sequence[int] = ()) -> list:
    """Run `fn(*args, **kwargs)` on `world_size` ranks; return each rank's result, rank order.

    Ranks in `may_exit` are expected to end themselves (a crash being simulated, with
    os._exit): their exit does not fail the run and their result is None."""
    module = sys.modules[fn.__module__]
    path = os.path.abspath(module.__file__)
    with tempfile.TemporaryDirectory(prefix="pto-dist-") as workdir:
        with open(os.path.join(workdir, "args.pkl"), "wb") as f:
            pickle.dump((tuple(args), dict(kwargs or {})), f)
        port = free_port()
        here = os.path.dirname(os.path.abspath(__file__))
        repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))  # pypto_torch, as in the tree
        processes, logs = [], []
        started = time.monotonic()
        for rank in range(world_size):
            rank_env = {
                **os.environ,
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "RANK": str(rank),
                "WORLD_SIZE": str(world_size),
                "LOCAL_RANK": str(rank),
                "LOCAL_WORLD_SIZE": str(world_size),
                "PTO_FALLBACK": "silent",
                "PYTHONHASHSEED": str(SEED),
                "OMP_NUM_THREADS": "1",
                "PYTHONPATH": os.pathsep.join([here, repo, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                **(env or {}),
            }
            out = open(os.path.join(workdir, f"stdout{rank}.txt"), "w")
            err = open(os.path.join(workdir, f"stderr{rank}.txt"), "w")
            logs += [out, err]
            processes.append(subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, path, fn.__name__, str(rank), workdir],
                stdout=out, stderr=err, env=rank_env, start_new_session=True))
        deadline = started + timeout
        timed_out, first_failure = False, None
        try:
            while any(p.poll() is None for p in processes):
                now = time.monotonic()
                if first_failure is None and any(p.poll() not in (None, 0) for r, p in enumerate(processes)
                                                 if r not in may_exit):
                    first_failure = now
                if now > deadline or (first_failure is not None and now > first_failure + grace):
                    timed_out = now > deadline
                    break
                time.sleep(0.05)
        finally:
            for p in processes:
                _kill(p)
            for log in logs:
                log.close()
        elapsed = time.monotonic() - started
        codes = [p.returncode for p in processes]
        if timed_out or any(code != 0 for r, code in enumerate(codes) if r not in may_exit):
            lines = [f"{fn.__name__} on {world_size} ranks ({DEVICE}/{BACKEND}) failed after {elapsed:.1f} s"
                     + (f": TIMEOUT after {timeout} s, every rank killed" if timed_out else "")]
            for rank, p in enumerate(processes):
                lines.append(f"--- rank {rank}: {_describe_exit(p.returncode)}")
                error = _tail(os.path.join(workdir, f"error{rank}.txt"), 6000)
                if error:
                    lines.append(error.rstrip())
                stderr = _tail(os.path.join(workdir, f"stderr{rank}.txt"))
                if stderr and stderr.strip() != error.strip():
                    lines.append(f"[stderr of rank {rank}]\n{stderr.rstrip()}")
            raise RanksFailed("\n".join(lines))
        import torch

        return [None if rank in may_exit else torch.load(os.path.join(workdir, f"result{rank}.pt"), weights_only=False)
                for rank in range(world_size)]
