#!/usr/bin/env python3
"""Run PyTorch's device-generic test files against the pto device, beside CPU.

A developer's check, not part of `make test`.  Get copies of PyTorch's test
files (test/test_view_ops.py, test/test_indexing.py, ...) into one folder, then:

    python3 scripts/torch_suites.py DIR [FILE ...] [--timeout S] [-k EXPR] [--out results.json]

FILE names are relative to DIR (default: every test_*.py in DIR).  Each file
runs in its own pytest subprocess with PYTORCH_TESTING_DEVICE_ONLY_FOR=
cpu,privateuse1, so every test runs twice: TestFooCPU::test_bar_cpu_float32
and its pto copy TestFooPRIVATEUSE1::test_bar_pto_float32.

Crash isolation: the companion plugin scripts/torch_suites_plugin.py logs a
"started" line before each test and a result line after it.  When pytest dies
(signal, abort) or writes nothing for --timeout seconds (default 120; the
process group is then killed), the test that had started is recorded as
"crashed" or "hung" and pytest starts again, deselecting every test already
recorded.

pytest runs in a temporary folder (DIR linked in as suites/) with
`-c /dev/null --rootdir TMP -p no:cacheprovider`, so no conftest.py or pytest
config of this project applies, and with PYTORCH_TEST_WITH_SLOW=0.  Its output
goes to FILE.log beside --out (or in the temporary folder), not the console.

--twins halves the time of a big file: pto's copies run first (alone), then
only the CPU twins of the pto tests that failed, errored, crashed or hung.
"cpu passed" then counts those twins only; the pto-only failures are the same
as in a full run.

Printed at the end, one row a file: CPU passed, pto passed, pto failed
(failed or error), pto-only failures (the pto copy failed, errored, crashed or
hung while its CPU twin passed), crashes and hangs.  --out gets every test's
outcome and first message line, for failures a "detail" (the error lines of
the traceback, or for a crash the fatal error and innermost Python frames from
the log), and the pto-only failures.
"""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LINK = "suites"  # DIR's name inside the temporary folder
BAD = ("failed", "error", "crashed", "hung")
COLUMNS = ("cpu passed", "pto passed", "pto skipped", "pto failed",
           "pto-only failures", "crashed", "hung")


def device_of(nodeid):
    """'cpu', 'pto', or None for a test that is not device-generic."""
    cls = nodeid.split("::")[1] if nodeid.count("::") >= 2 else ""
    if cls.endswith("CPU"):
        return "cpu"
    if cls.endswith(("PRIVATEUSE1", "PTO")):
        return "pto"
    return None


def cpu_twin(nodeid):
    """TestFooPRIVATEUSE1::test_bar_pto_float32 -> TestFooCPU::test_bar_cpu_float32."""
    path, cls, test = nodeid.split("::", 2)
    cls = re.sub(r"(PRIVATEUSE1|PTO)$", "CPU", cls)
    # the device name comes after the test's own name and parameters, before dtypes
    marks = list(re.finditer(r"_pto(?=_|$)", test))
    if marks:
        m = marks[-1]
        test = test[: m.start()] + "_cpu" + test[m.end():]
    return f"{path}::{cls}::{test}"


def read_new_lines(path, offset):
    """JSON records appended to path since offset (only whole lines)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    records = [json.loads(line) for line in data[:end].splitlines() if line.strip()]
    return records, offset + end


def crash_detail(log_path, start):
    """Python's fatal-error line and the innermost frames faulthandler printed
    in the log after offset start, e.g. 'Fatal Python error: Segmentation fault'."""
    with open(log_path, errors="replace") as f:
        f.seek(start)
        text = f.read()
    fatal = re.search(r"Fatal Python error: .*", text)
    if not fatal:
        return ""
    current = text.find("Current thread", fatal.end())
    frames = re.findall(r'^  File "(?:.*/)?([^/"]+)", line (\d+) in (\S+)', text[current:], re.M)
    return "\n".join([fatal.group(0)] + [f"{f}:{n} in {fn}" for f, n, fn in frames[:3]])


def run_file(test_dir, name, args, log_path, devices="cpu,privateuse1", only=None):
    """Run one test file to the end, restarting pytest after crashes and hangs.
    devices: PYTORCH_TESTING_DEVICE_ONLY_FOR; only: run just these nodeids."""
    work = tempfile.mkdtemp(prefix="torch_suites_")
    os.symlink(test_dir, os.path.join(work, LINK))
    events, done = os.path.join(work, "events.jsonl"), os.path.join(work, "done.txt")
    log_path = log_path or os.path.join(work, "pytest.log")
    env = dict(os.environ,
               PYTORCH_TESTING_DEVICE_ONLY_FOR=devices,
               PYTORCH_TEST_WITH_SLOW="0",
               PYTHONPATH=os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")])),
               TORCH_SUITES_EVENTS=events, TORCH_SUITES_DONE=done)
    env.pop("PYTEST_ADDOPTS", None)
    if only is not None:
        env["TORCH_SUITES_ONLY"] = os.path.join(work, "only.txt")
        with open(env["TORCH_SUITES_ONLY"], "w") as f:
            f.writelines(LINK + "/" + nodeid + "\n" for nodeid in only)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "torch_suites_plugin",
           "-c", os.devnull, "--rootdir", work, "-q", "--tb=short", os.path.join(LINK, name)]
    if args.k:
        cmd += ["-k", args.k]

    results, notes = {}, []  # nodeid -> {"outcome", "message"}; file-level problems
    with open(log_path, "a") as log:
        for attempt in range(1, args.max_restarts + 2):
            with open(done, "w") as f:
                f.writelines(nodeid + "\n" for nodeid in results)
            open(events, "w").close()
            log.write(f"\n===== attempt {attempt}, {len(results)} tests already recorded\n")
            log.flush()
            log_start = log.tell()
            proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            started, collected, offset = None, False, 0
            last_progress, hung, recorded_before = time.monotonic(), False, len(results)
            try:
                while True:
                    rc = proc.poll()
                    records, offset = read_new_lines(events, offset)
                    for rec in records:
                        last_progress = time.monotonic()
                        if rec["event"] == "collected":
                            collected = True
                        elif rec["event"] == "started":
                            started = rec["nodeid"]
                        elif rec["event"] == "result":
                            results[rec["nodeid"]] = {k: rec[k] for k in ("outcome", "message", "detail")
                                                      if k in rec}
                            started = None
                        elif rec["event"] == "collect_error":
                            notes.append(f"collection error {rec['nodeid']}: {rec['message']}")
                    if rc is not None:
                        break
                    # collecting a big file takes a while before the first test starts
                    limit = args.timeout if collected else 5 * args.timeout
                    if time.monotonic() - last_progress > limit:
                        hung = True
                        os.killpg(proc.pid, signal.SIGKILL)
                        rc = proc.wait()
                        break
                    time.sleep(0.5)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()

            how = f"killed by signal {-rc}" if rc < 0 else f"pytest exited {rc}"
            if started is not None:
                outcome = "hung" if hung else "crashed"
                message = f"no progress for {args.timeout:g}s" if hung else how
                results[started] = {"outcome": outcome, "message": message}
                if not hung:
                    results[started]["detail"] = crash_detail(log_path, log_start)
                print(f"  {outcome}: {started} ({message})", flush=True)
                continue
            if hung:
                notes.append(f"hung with no test running ({'after' if collected else 'before'} collection)")
                break
            if rc in (0, 1, 5):  # all ran (some failed), or nothing was left to run
                break
            if rc < 0 and len(results) > recorded_before:
                notes.append(f"{how} between tests; restarted")
                continue
            notes.append(how)
            break
        else:
            notes.append(f"gave up after {args.max_restarts} restarts")
    shutil.rmtree(work)
    return {"log": log_path, "notes": notes,
            "tests": {nodeid.removeprefix(LINK + "/"): r for nodeid, r in results.items()}}


def run_suite(test_dir, name, args, log_dir):
    """Every test of one file, or with --twins pto's first and then the CPU
    twins of its failures."""
    log_path = log_dir and os.path.join(log_dir, name.replace("/", "_") + ".log")
    if log_path:
        open(log_path, "w").close()
    if not args.twins:
        return run_file(test_dir, name, args, log_path)
    suite = run_file(test_dir, name, args, log_path, devices="privateuse1")
    twins = [cpu_twin(nodeid) for nodeid, r in suite["tests"].items()
             if device_of(nodeid) == "pto" and r["outcome"] in BAD]
    cpu = run_file(test_dir, name, args, log_path, devices="cpu", only=twins)
    suite["tests"].update(cpu["tests"])
    suite["notes"] += cpu["notes"] + [f"--twins: {len(twins)} CPU twins of pto failures ran, no other CPU test"]
    return suite


def summarize(suite):
    tests = suite["tests"]
    counts = dict.fromkeys(COLUMNS, 0)
    pto_only = []
    for nodeid, r in tests.items():
        device, outcome = device_of(nodeid), r["outcome"]
        if outcome in ("crashed", "hung"):
            counts[outcome] += 1
        if device == "cpu" and outcome == "passed":
            counts["cpu passed"] += 1
        if device != "pto":
            continue
        if outcome in ("passed", "skipped"):
            counts[f"pto {outcome}"] += 1
        elif outcome in ("failed", "error"):
            counts["pto failed"] += 1
        twin = cpu_twin(nodeid)
        if outcome in BAD and tests.get(twin, {}).get("outcome") == "passed":
            pto_only.append({"nodeid": nodeid, "outcome": outcome, "message": r["message"],
                             "detail": r.get("detail", ""), "cpu_nodeid": twin})
    counts["pto-only failures"] = len(pto_only)
    suite["summary"], suite["pto_only_failures"] = counts, pto_only


def table(suites):
    lines = ["| file | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for name, suite in suites.items():
        cells = [str(suite["summary"][c]) for c in COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for name, suite in suites.items():
        for note in suite["notes"]:
            lines.append(f"\n{name}: {note}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", help="folder with PyTorch's test files")
    parser.add_argument("files", nargs="*", help="test files in DIR (default: all test_*.py)")
    parser.add_argument("--timeout", type=float, default=120,
                        help="seconds without progress before pytest is killed (default 120)")
    parser.add_argument("-k", help="pytest -k expression")
    parser.add_argument("--out", help="write the per-test results here (JSON)")
    parser.add_argument("--twins", action="store_true",
                        help="run pto's tests, then only the CPU twins of its failures")
    parser.add_argument("--max-restarts", type=int, default=1000,
                        help="restarts of pytest per file at most (default 1000)")
    args = parser.parse_args()

    test_dir = os.path.abspath(args.dir)
    files = args.files or sorted(os.path.basename(p) for p in glob.glob(os.path.join(test_dir, "test_*.py")))
    log_dir = os.path.dirname(os.path.abspath(args.out)) if args.out else None
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
    suites = {}
    for name in files:
        print(f"{name} ...", flush=True)
        start = time.monotonic()
        suite = suites[name] = run_suite(test_dir, name, args, log_dir)
        summarize(suite)
        suite["seconds"] = round(time.monotonic() - start)
        print(f"{name}: {len(suite['tests'])} tests in {suite['seconds']}s, log {suite['log']}", flush=True)
        if args.out:  # after each file, so an interrupted run keeps what it has
            with open(args.out, "w") as f:
                json.dump({"suites": suites}, f, indent=1)
    print(table(suites))


if __name__ == "__main__":
    main()
