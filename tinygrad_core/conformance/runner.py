"""`tinygrad-core conformance NAME`: runs the suite on one backend, in a worker process it watches, and writes the
report (terminal table, JSON, Markdown).

A backend's kernel can take its process down (a segfault from a wrong index) or never return. So the suite's
pytest session runs in a child process that records each test's start and result in a progress file
(plugin.py). When the child dies, the test it was running is recorded as failed with the signal or exit status;
when a test runs past --timeout, the child is stopped (SIGABRT first, so faulthandler prints where it hung) and the
test is recorded as timed out. Either way a new child goes on from the next test, and the report is always written.

cli.py hands its arguments here; `python -m tinygrad_core.conformance.runner NAME` does the same."""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time

POLL_SECONDS = 0.2
# the suite's pytest plugin, loaded only where asked for (-p), never into every pytest run of an environment
PLUGIN = "tinygrad_core.conformance.plugin"
GRACE_SECONDS = 5.0             # after SIGABRT, how long faulthandler may take before SIGKILL
SECTION_CRASHES = 3             # a section whose tests took the process down this often is stopped: the verdict is
                                # FAILS already, and a restart per test of a backend whose kernels all crash took hours


def add_arguments(parser: argparse.ArgumentParser):
    parser.add_argument("backend", help="backend name, as `tinygrad-core backends` lists it (e.g. PYTHON, CPU, CL)")
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON to PATH")
    parser.add_argument("--markdown", metavar="PATH", help="also write the per-section table as Markdown to PATH "
                                                           "(for the backend's README)")
    parser.add_argument("--compile-only", action="store_true",
                        help="render and compile every kernel without allocating or launching anything")
    parser.add_argument("--max-examples", type=int, default=10,
                        help="hypothesis examples per op and dtype in section 4 (default 10)")
    parser.add_argument("--sections", metavar="N,N,...", help="run only these sections, e.g. 1,2,3")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                        help="a test running longer than this fails as a hang (default 120)")
    parser.add_argument("-k", dest="keyword", metavar="EXPRESSION", help="run only tests matching (pytest -k)")
    parser.add_argument("-x", "--exitfirst", action="store_true", help="stop at the first failure")
    parser.add_argument("--pytest-args", default="", metavar="ARGS", help="more pytest arguments, e.g. '-v --tb=long'")
    parser.epilog = "exit status: 0 conforms, 1 fails, 3 incomplete (a part could not be checked), 4 usage error"


class Progress:
    """The worker's progress file, read as it grows."""

    def __init__(self, path: str):
        self.path, self.offset = path, 0
        self.header, self.error, self.planned, self.results = None, None, [], {}
        self.running, self.started = None, 0.0          # the test in flight, and when it was first seen

    def read(self):
        with open(self.path) as f:
            f.seek(self.offset)
            while (line := f.readline()).endswith("\n"):      # a line still being written waits for the next read
                self.offset += len(line.encode())
                self._take(json.loads(line))

    def _take(self, record: dict):
        kind = record["kind"]
        if kind == "header":
            self.header = record["header"]
        elif kind == "error":
            self.error = record["message"]
        elif kind == "planned":
            self.planned = self.planned or record["tests"]     # the first worker's plan is the whole plan
        elif kind == "start":
            self.running, self.started = record["id"], time.monotonic()
        elif kind == "result":
            self.results[record["id"]] = record["entry"]
            self.running = None

    def fail_running(self, message: str):
        """Record the test in flight as failed (in the file too, so the next worker leaves it out); after
        SECTION_CRASHES in its section, the section's tests not run yet are recorded as not run, and left out too."""
        from tinygrad_core.conformance.plugin import append
        from tinygrad_core.conformance.report import section_of
        section = section_of(self.running)
        entry = {"section": section, "outcome": "failed", "seconds": round(time.monotonic() - self.started, 4),
                 "message": message}
        append(self.path, kind="result", id=self.running, entry=entry)
        self.read()
        crashes = [e for e in self.results.values() if e["section"] == section and "the test process" in e["message"]]
        if len(crashes) >= SECTION_CRASHES:
            for test in [t for t in self.planned if section_of(t) == section and t not in self.results]:
                append(self.path, kind="result", id=test, entry={"section": section, "outcome": "not run", "seconds":
                       0.0, "message": f"never ran: section {section} stopped after {len(crashes)} crashes"})
            self.read()


def ending(returncode: int | None, timeout: float) -> str:
    """How a worker ended: 'died of signal 11 (SIGSEGV)', 'exited with status 3', or stopped at the timeout."""
    if returncode is None:
        return f"was still running after {timeout:g} s (the --timeout) and was stopped"
    if returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else "?"
        return f"died of signal {-returncode} ({name})"
    return f"exited with status {returncode}"


def test_failure(returncode: int | None, timeout: float) -> str:
    what = "timed out" if returncode is None else "crashed"
    return f"{what}: the test process {ending(returncode, timeout)} during this test"


def supervise(args: list[str], progress: Progress, timeout: float) -> int | None:
    """Run one worker until it exits (its status) or its test in flight passes the timeout (None)."""
    sys.stdout.flush()
    child = subprocess.Popen(args, process_group=0)       # its own group: a compiler it started goes with it
    try:
        while True:
            try:
                return child.wait(timeout=POLL_SECONDS)
            except subprocess.TimeoutExpired:
                progress.read()
                if progress.running is not None and time.monotonic() - progress.started > timeout:
                    stop(child)
                    return None
    except BaseException:          # Ctrl-C: the worker goes too
        stop(child, signal.SIGINT)
        raise
    finally:
        progress.read()


def stop(child: subprocess.Popen, first: signal.Signals = signal.SIGABRT):
    """SIGABRT makes faulthandler print where the worker hung before it ends; then its whole group is killed."""
    child.send_signal(first)
    try:
        child.wait(GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()


def run(name: str, json_path: str | None = None, compile_only: bool = False, max_examples: int = 10,
        sections: str | None = None, extra: list[str] | tuple = (), markdown_path: str | None = None,
        timeout: float = 120.0) -> int:
    """Check backend `name`; prints the per-section table and writes the reports asked for. Returns the exit status
    of the verdict (report.EXIT_STATUS), or 4 when the backend can't be checked at all."""
    missing = [m for m in ("pytest", "hypothesis") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"the conformance suite needs {' and '.join(missing)}: pip install 'tinygrad-core[conformance]'",
              file=sys.stderr)
        return 4
    from tinygrad_core.conformance import report as reporting
    with tempfile.TemporaryDirectory(prefix="tinygrad-conformance-") as tmp:
        progress = Progress(os.path.join(tmp, "progress.jsonl"))
        open(progress.path, "w").close()
        # the suite's settings are its own, whatever directory it runs from
        args = [sys.executable, "-m", "pytest", "-c", os.devnull, "--rootdir", os.path.dirname(os.path.abspath(
            __file__)), "-p", "no:cacheprovider", "-p", PLUGIN, "-q", "--pyargs", "tinygrad_core.conformance",
            "--tinygrad-backend", name, "--tinygrad-max-examples", str(max_examples),
            "--tinygrad-progress", progress.path, *(["--tinygrad-compile-only"] if compile_only else []),
            *(["--tinygrad-sections", sections] if sections else []), *extra]
        returncode, stopped = watch(args, progress, timeout)
        if progress.header is None and progress.error is not None:      # a usage error, which the worker printed
            if json_path:
                reporting.write({"backend": name, "verdict": "ERROR", "passed": False, "error": progress.error},
                                json_path, None)
            return 4
        opening = f"the suite's process {ending(returncode, timeout)} while opening the backend (its load())"
        problems = [] if progress.header else [opening]
        never = {t: {"section": reporting.section_of(t), "outcome": "not run", "seconds": 0.0,
                     "message": f"never ran: {'-x stopped the run' if '-x' in extra else stopped}"}
                 for t in progress.planned if t not in progress.results}
    header = progress.header or {"backend": name.upper(), "capabilities": {}}
    report = reporting.build(header, {**progress.results, **never}, problems,
                             sorted({int(s) for s in sections.split(",") if s.strip()}) if sections else None)
    for line in reporting.table(report) + reporting.write(report, json_path, markdown_path):
        print(line)
    return reporting.EXIT_STATUS[report["verdict"]]


def watch(args: list[str], progress: Progress, timeout: float) -> tuple[int | None, str]:
    """Run workers until one ends with no test in flight; each test that crashed or hung one is recorded as failed.
    Returns the last worker's exit status and how the run stopped."""
    while True:
        try:
            returncode = supervise(args, progress, timeout)
        except KeyboardInterrupt:
            return 2, "interrupted"
        if progress.running is None:
            return returncode, f"the run stopped early (the test process {ending(returncode, timeout)})"
        print(f"\n{progress.running} {test_failure(returncode, timeout)}; going on from the next test")
        progress.fail_running(test_failure(returncode, timeout))


def run_from_args(ns: argparse.Namespace) -> int:
    extra = shlex.split(ns.pytest_args) + (["-k", ns.keyword] if ns.keyword else []) + (["-x"] if ns.exitfirst else [])
    return run(ns.backend, ns.json, ns.compile_only, ns.max_examples, ns.sections, extra, ns.markdown, ns.timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tinygrad-core conformance",
                                     description="Check a backend against the tinygrad-core conformance suite.")
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
