"""pytest plugin used by scripts/torch_suites.py (load it with -p torch_suites_plugin).

It appends JSON lines to the file named by $TORCH_SUITES_EVENTS:
  {"event": "started", "nodeid": ...}            before each test runs
  {"event": "result", "nodeid": ..., "outcome": ..., "message": ..., "detail": ...}   after it
  {"event": "collect_error", "nodeid": ..., "message": ...}
and deselects every nodeid listed (one a line) in $TORCH_SUITES_DONE, so that
a pytest restarted after a crash or hang goes on where the last one stopped,
and, when $TORCH_SUITES_ONLY names a file, every nodeid not listed in it.
Each line is one os.write on an O_APPEND descriptor: it is on disk even if the
process dies right after.
"""

import json
import os
import re

import pytest

_fd = None
_reports = {}


def _emit(**record):
    global _fd
    if _fd is None:
        path = os.environ["TORCH_SUITES_EVENTS"]
        _fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(_fd, (json.dumps(record) + "\n").encode())


def _first_line(report):
    """The first line of what went wrong (or of the skip reason)."""
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple):  # skips: (path, lineno, reason)
        text = str(longrepr[2])
    else:
        crash = getattr(longrepr, "reprcrash", None)
        text = crash.message if crash is not None else str(longrepr)
    text = text.strip().splitlines()[0] if text.strip() else ""
    return text[:300]


_BOILERPLATE = ("To execute this test", "python ", "This message can be suppressed")


def _detail(report, limit=1200):
    """Where it failed and the error lines ("E ...") of the traceback, for reading
    later: pytest's own failure summary is lost when a later test crashes it."""
    text = str(report.longrepr)
    # the innermost frame in the test file itself ("suites/test_x.py:12: in test_y"),
    # else where the exception was raised
    frames = re.findall(r"^(\S+\.py:\d+: in \S+)", text, re.M)
    in_test = [f for f in frames if os.path.basename(f.split(":")[0]) == os.path.basename(report.fspath)]
    crash = getattr(report.longrepr, "reprcrash", None)
    where = in_test[-1] if in_test else f"{crash.path}:{crash.lineno}" if crash is not None else ""
    lines = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    lines = [line for line in lines if line and not line.startswith(_BOILERPLATE)]
    return "\n".join([where] + lines)[:limit]


def _nodeids(variable):
    """The nodeids listed in the file named by $variable, or None."""
    path = os.environ.get(variable)
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return {line.rstrip("\n") for line in f}


def pytest_collection_modifyitems(session, config, items):
    done, only = _nodeids("TORCH_SUITES_DONE") or set(), _nodeids("TORCH_SUITES_ONLY")

    def wanted(item):
        return item.nodeid not in done and (only is None or item.nodeid in only)

    keep = [item for item in items if wanted(item)]
    dropped = [item for item in items if not wanted(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_collectreport(report):
    if report.failed:
        _emit(event="collect_error", nodeid=report.nodeid, message=_first_line(report))


def pytest_collection_finish(session):
    _emit(event="collected", count=len(session.items))


def pytest_runtest_logstart(nodeid, location):
    _reports[nodeid] = []
    _emit(event="started", nodeid=nodeid)


def pytest_runtest_logreport(report):
    _reports.setdefault(report.nodeid, []).append(report)


def pytest_runtest_logfinish(nodeid, location):
    reports = _reports.pop(nodeid, [])
    failed = [r for r in reports if r.failed]
    skipped = [r for r in reports if r.skipped]
    if failed:
        calls = [r for r in failed if r.when == "call"]
        # a failing call is "failed"; a failing setup or teardown is "error"
        outcome, report = ("failed", calls[0]) if calls else ("error", failed[0])
        message, detail = _first_line(report), _detail(report)
    elif skipped:
        outcome, report = "skipped", skipped[0]
        message = _first_line(report)
        if hasattr(report, "wasxfail"):
            message = ("xfail " + report.wasxfail).strip()
    else:
        outcome, message = "passed", ""
    record = dict(event="result", nodeid=nodeid, outcome=outcome, message=message)
    if failed:
        record["detail"] = detail
    _emit(**record)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    global _fd
    if _fd is not None:
        os.close(_fd)
        _fd = None
