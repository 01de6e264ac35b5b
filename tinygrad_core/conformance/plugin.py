"""The conformance suite's pytest plugin: the --backend option, the `dut` fixture, and the report (a per-section
pass/fail/skip table on the terminal, and JSON for a plugin's README).

Registered as a pytest11 entry point of tinygrad-core, so `pytest --pyargs tinygrad_core.conformance --backend NAME`
works anywhere; without --backend it does nothing (and the suite's own modules aren't collected)."""
from __future__ import annotations

import datetime
import importlib.metadata
import json
import platform
import sys
from typing import TYPE_CHECKING

import pytest

from tinygrad_core.conformance import SECTIONS

if TYPE_CHECKING:
    from tinygrad_core.conformance.harness import BackendUnderTest

DUT_KEY = pytest.StashKey["BackendUnderTest"]()
RESULTS_KEY = pytest.StashKey[dict]()


def pytest_addoption(parser):
    group = parser.getgroup("tinygrad-core conformance")
    group.addoption("--backend", default=None, help="name of the backend to check (as `tinygrad-core backends` lists)")
    group.addoption("--compile-only", action="store_true", default=False,
                    help="render and compile every kernel without allocating or launching (for a device this "
                         "machine lacks)")
    group.addoption("--conformance-json", default=None, metavar="PATH", help="write the report as JSON to PATH")
    group.addoption("--max-examples", type=int, default=10,
                    help="hypothesis examples per op and dtype in section 4 (default 10)")
    group.addoption("--sections", default=None, metavar="N,N,...", help="run only these sections (e.g. 1,2,3)")


def pytest_configure(config):
    name = config.getoption("--backend")
    if name is None:
        return
    from tinygrad_core.conformance.harness import open_backend  # the core loads only when the suite runs
    try:
        config.stash[DUT_KEY] = open_backend(name, config.getoption("--compile-only"),
                                             config.getoption("--max-examples"))
    except Exception as e:
        raise pytest.UsageError(f"can't check backend {name!r}: {e}") from e
    config.stash[RESULTS_KEY] = {}
    config.pluginmanager.register(ResultCollector(config.stash[RESULTS_KEY]), "conformance-results")


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


def section_of(nodeid: str) -> int:
    """test_4_ops.py::... -> 4"""
    module = nodeid.split("::")[0].rsplit("/", 1)[-1]
    return int(module.split("_")[1])


def pytest_collection_modifyitems(config, items):
    wanted = config.getoption("--sections")
    if not wanted:
        return
    sections = {int(s) for s in wanted.split(",") if s.strip()}
    keep = [item for item in items if section_of(item.nodeid) in sections]
    dropped = [item for item in items if section_of(item.nodeid) not in sections]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


class ResultCollector:
    """Collects each test's outcome (a test that fails in setup, call or teardown has failed)."""

    def __init__(self, results: dict):
        self.results = results

    def pytest_runtest_logreport(self, report):
        entry = self.results.setdefault(report.nodeid, {"section": section_of(report.nodeid), "outcome": "passed",
                                                        "seconds": 0.0, "message": ""})
        entry["seconds"] = round(entry["seconds"] + report.duration, 4)
        if report.failed:
            entry["outcome"] = "failed"
            entry["message"] = _short(report.longreprtext)
        elif report.skipped and entry["outcome"] != "failed":
            entry["outcome"] = "skipped"
            entry["message"] = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)


def _short(text: str, limit: int = 2000) -> str:
    lines = [line for line in text.splitlines() if line.startswith("E ")] or text.splitlines()[-5:]
    out = "\n".join(line[2:].rstrip() if line.startswith("E ") else line for line in lines)
    return out if len(out) <= limit else out[:limit] + " ..."


def section_counts(results: dict) -> dict[int, dict[str, int]]:
    counts = {n: {"passed": 0, "failed": 0, "skipped": 0} for n in SECTIONS}
    for entry in results.values():
        counts[entry["section"]][entry["outcome"]] += 1
    return counts


def report_dict(dut: BackendUnderTest, results: dict) -> dict:
    from tinygrad_core.plugins import BACKEND_API
    renderer = dut.renderer
    spec = dut.backend.spec
    counts = section_counts(results)
    return {
        "backend": dut.name,
        "distribution": dut.backend.distribution,
        "distribution_version": dut.backend.version,
        "core_version": importlib.metadata.version("tinygrad-core"),
        "api_version": list(spec.api_version),
        "core_api_version": list(BACKEND_API),
        "mode": "compile-only" if dut.compile_only else "full",
        "capabilities": {
            "dtypes": [dt.name for dt in dut.dtypes()],
            "ops": sorted(op.name for op in renderer.code_for_op),
            "has_local": renderer.has_local, "has_shared": renderer.has_shared,
            "global_max": renderer.global_max, "local_max": renderer.local_max, "shared_max": renderer.shared_max,
            "supports_float4": renderer.supports_float4, "max_upcast": renderer.max_upcast,
            "max_unroll": renderer.max_unroll,
        },
        "sections": {str(n): {"name": SECTIONS[n], **counts[n]} for n in SECTIONS},
        "passed": all(c["failed"] == 0 for c in counts.values()) and bool(results),
        "kernels_compiled": dut.kernels_compiled,
        "hypothesis_max_examples": dut.max_examples,
        "python": platform.python_version(), "platform": sys.platform,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "tests": [{"id": nodeid, **entry} for nodeid, entry in results.items()],
    }


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if DUT_KEY not in config.stash:
        return
    dut, results = config.stash[DUT_KEY], config.stash[RESULTS_KEY]
    report = report_dict(dut, results)
    write = terminalreporter.write_line
    write("")
    write(f"conformance of {dut.name} ({report['distribution']} {report['distribution_version']}), "
          f"tinygrad-core {report['core_version']}, backend API {tuple(report['api_version'])}, "
          f"{report['mode']} mode")
    write(f"  {'section':40s} {'passed':>7s} {'failed':>7s} {'skipped':>8s}")
    for n, row in report["sections"].items():
        if row["passed"] + row["failed"] + row["skipped"] == 0:
            continue
        write(f"  {n + '. ' + row['name']:40s} {row['passed']:7d} {row['failed']:7d} {row['skipped']:8d}",
              red=row["failed"] > 0, green=row["failed"] == 0)
    skips = sorted({entry["message"] for entry in results.values() if entry["outcome"] == "skipped"})
    if skips:
        write("  skipped because:")
        for reason in skips:
            write(f"    - {reason.removeprefix('Skipped: ')}")
    write(f"  {'CONFORMS' if report['passed'] else 'DOES NOT CONFORM'}", bold=True,
          red=not report["passed"], green=report["passed"])
    if path := config.getoption("--conformance-json"):
        with open(path, "w") as f:
            json.dump(report, f, indent=1, default=str)
        write(f"  report written to {path}")
