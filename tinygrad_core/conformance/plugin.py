"""The conformance suite's pytest plugin: the --tinygrad-* options, the `dut` fixture, and the report (report.py).

Loaded only where asked for: `pytest -p tinygrad_core.conformance.plugin --pyargs tinygrad_core.conformance
--tinygrad-backend NAME` (as `tinygrad-core conformance` does), never into every pytest run of the environment;
without --tinygrad-backend it does nothing (and the suite's own modules aren't collected). Its options carry the
`tinygrad` prefix so that they can sit beside a project's own.

Run by `tinygrad-core conformance` (runner.py), the session is a worker: --tinygrad-progress names a file where it
appends, one JSON line each, the backend's description, the tests it will run, and each test's start and result.
The runner watches that file from another process, so a test that crashes or hangs the worker is still known, and
it starts a new worker that leaves out the tests already recorded there."""
from __future__ import annotations

import gc
import json
import sys
from typing import TYPE_CHECKING

import pytest

from tinygrad_core.conformance import report as reporting

if TYPE_CHECKING:
    from tinygrad_core.conformance.harness import BackendUnderTest

DUT_KEY = pytest.StashKey["BackendUnderTest"]()
COLLECTOR_KEY = pytest.StashKey["ResultCollector"]()
REPORT_KEY = pytest.StashKey[dict]()


def pytest_addoption(parser):
    group = parser.getgroup("tinygrad-core conformance")
    group.addoption("--tinygrad-backend", default=None, metavar="NAME",
                    help="run the conformance suite on this backend (as `tinygrad-core backends` lists it)")
    group.addoption("--tinygrad-compile-only", action="store_true", default=False,
                    help="render and compile every kernel without allocating or launching (for a device this "
                         "machine lacks)")
    group.addoption("--tinygrad-json", default=None, metavar="PATH", help="write the conformance report as JSON")
    group.addoption("--tinygrad-markdown", default=None, metavar="PATH",
                    help="write the conformance table as Markdown (for the backend's README)")
    group.addoption("--tinygrad-max-examples", type=int, default=10,
                    help="hypothesis examples per op and dtype in section 4 (default 10)")
    group.addoption("--tinygrad-sections", default=None, metavar="N,N,...",
                    help="run only these sections of the conformance suite (e.g. 1,2,3)")
    group.addoption("--tinygrad-progress", default=None, metavar="PATH",
                    help="(used by `tinygrad-core conformance`) record progress in PATH and leave out the tests "
                         "already recorded there; the runner writes the report")


def pytest_configure(config):
    name = config.getoption("--tinygrad-backend")
    if name is None:
        return
    from tinygrad_core.conformance.harness import open_backend  # the core loads only when the suite runs
    progress = config.getoption("--tinygrad-progress")
    try:
        dut = open_backend(name, config.getoption("--tinygrad-compile-only"),
                           config.getoption("--tinygrad-max-examples"))
    except Exception as e:
        message = f"can't check backend {name!r}: {e}"
        if progress:
            append(progress, kind="error", message=message)
        raise pytest.UsageError(message) from e
    config.stash[DUT_KEY] = dut
    config.stash[COLLECTOR_KEY] = collector = ResultCollector(dut, progress)
    config.pluginmanager.register(collector, "conformance-results")
    if progress:
        append(progress, kind="header", header=reporting.describe(dut))


def append(path: str, **record):
    """One line of the progress file, on disk before the test it announces runs (a crash can't lose it)."""
    with open(path, "a") as f:
        f.write(json.dumps(record, default=str) + "\n")


def recorded(path: str) -> set[str]:
    """The tests the progress file has a result for."""
    try:
        with open(path) as f:
            return {r["id"] for r in map(json.loads, f) if r["kind"] == "result"}
    except FileNotFoundError:
        return set()


def pytest_ignore_collect(collection_path, config):
    # the suite checks one named backend; collected without one (e.g. `pytest tinygrad_core/`) it is left out
    if DUT_KEY not in config.stash and collection_path.name == "conformance" and collection_path.parent.name == \
            "tinygrad_core":
        return True
    return None


@pytest.fixture(scope="session")
def dut(request) -> BackendUnderTest:
    """The backend under test."""
    return request.config.stash[DUT_KEY]


def wanted_sections(config) -> list[int] | None:
    wanted = config.getoption("--tinygrad-sections")
    return sorted({int(s) for s in wanted.split(",") if s.strip()}) if wanted else None


def pytest_collection_modifyitems(config, items):
    if DUT_KEY not in config.stash:
        return
    sections = set(wanted_sections(config) or reporting.SECTIONS)
    if config.stash[DUT_KEY].load_error is not None:
        sections &= {1}         # section 1 says what load() did; the others would all fail with the same message
    progress = config.getoption("--tinygrad-progress")
    done = recorded(progress) if progress else set()
    keep = [item for item in items if reporting.section_of(item.nodeid) in sections and item.nodeid not in done]
    if len(keep) < len(items):
        kept = set(keep)
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = keep


def pytest_collection_finish(session):
    if (progress := session.config.getoption("--tinygrad-progress")) and DUT_KEY in session.config.stash:
        append(progress, kind="planned", tests=[item.nodeid for item in session.items])


class ResultCollector:
    """Collects each test's outcome (a test that fails in setup, call or teardown has failed); a skip for something
    the suite lacks (harness.NotCovered) is "not run"."""

    def __init__(self, dut: BackendUnderTest, progress: str | None):
        self.dut, self.progress, self.results = dut, progress, {}
        self.kernels_before = 0

    def pytest_runtest_logstart(self, nodeid, location):
        self.kernels_before = self.dut.kernels_compiled
        if self.progress:
            append(self.progress, kind="start", id=nodeid)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        from tinygrad_core.conformance.harness import NotCovered
        report = yield
        covered = call.excinfo is None or not call.excinfo.errisinstance(NotCovered)
        report.not_covered = None if covered else call.excinfo.value.msg     # (its reason, without the class name)
        return report

    def pytest_runtest_logreport(self, report):
        entry = self.results.setdefault(report.nodeid, {"section": reporting.section_of(report.nodeid),
                                                        "outcome": "passed", "seconds": 0.0, "message": ""})
        entry["seconds"] = round(entry["seconds"] + report.duration, 4)
        if report.failed:
            entry["outcome"], entry["message"] = "failed", _short(report.longreprtext)
        elif report.skipped and entry["outcome"] != "failed" and getattr(report, "not_covered", None):
            entry["outcome"], entry["message"] = "not run", report.not_covered
        elif report.skipped and entry["outcome"] != "failed":
            entry["outcome"] = "skipped"
            entry["message"] = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)

    def pytest_runtest_logfinish(self, nodeid, location):
        if self.results.get(nodeid, {}).get("outcome") == "failed":
            forget_failure()
        if nodeid in self.results:
            self.results[nodeid]["kernels"] = self.dut.kernels_compiled - self.kernels_before
            if self.progress:
                append(self.progress, kind="result", id=nodeid, entry=self.results[nodeid])


def forget_failure():
    """pytest keeps a failed test's traceback (sys.last_traceback, for post-mortem debugging), and with it the
    test's tensors: a later TinyJit capture, which realizes every live lazy tensor, would run a failed test's
    kernels again and fail the same way. One failure is one test's."""
    for name in ("last_exc", "last_type", "last_value", "last_traceback"):
        if hasattr(sys, name):
            delattr(sys, name)
    gc.collect()


def _short(text: str, limit: int = 2000) -> str:
    lines = [line for line in text.splitlines() if line.startswith("E ")] or text.splitlines()[-5:]
    out = "\n".join(line[2:].rstrip() if line.startswith("E ") else line for line in lines)
    return out if len(out) <= limit else out[:limit] + " ..."


def _report(config) -> dict:
    if REPORT_KEY not in config.stash:
        collector = config.stash[COLLECTOR_KEY]
        config.stash[REPORT_KEY] = reporting.build(reporting.describe(collector.dut), collector.results,
                                                   sections=wanted_sections(config))
    return config.stash[REPORT_KEY]


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if DUT_KEY not in config.stash or config.getoption("--tinygrad-progress"):
        return
    # a plain pytest run exits like the runner: INCOMPLETE is not a success
    if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = reporting.EXIT_STATUS[_report(config)["verdict"]]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if DUT_KEY not in config.stash or config.getoption("--tinygrad-progress"):
        return                      # a worker's report is the runner's to write
    report = _report(config)
    for line in reporting.table(report)[:-1]:
        terminalreporter.write_line(line)
    ok = report["verdict"] == "CONFORMS"
    terminalreporter.write_line(reporting.table(report)[-1], bold=True, red=not ok, green=ok)
    for line in reporting.write(report, config.getoption("--tinygrad-json"), config.getoption("--tinygrad-markdown")):
        terminalreporter.write_line(line)
