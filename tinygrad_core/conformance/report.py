"""The conformance report: what the backend declares, each test's outcome, per-section counts and the verdict, as a
terminal table, JSON and a Markdown table for a plugin's README.

It is built from plain data (the `describe` of the backend and one entry per test), so that the runner, which
watches the suite from another process, writes the same report as a plain pytest run.

The verdict: FAILS when any test failed (a crash and a timeout are failures); else INCOMPLETE when some part of the
contract could not be checked (a test "not run" because the suite lacked something, e.g. the reference backend, or
a run that stopped early); else CONFORMS. A capability the backend declares it lacks is a skip, and still conforms."""
from __future__ import annotations

import dataclasses
import datetime
import enum
import importlib.metadata
import json
import platform
import sys

from tinygrad_core.conformance import SECTIONS
from tinygrad_core.dtype import DType

OUTCOMES = ("passed", "failed", "skipped", "not run")
EXIT_STATUS = {"CONFORMS": 0, "FAILS": 1, "INCOMPLETE": 3}


def section_of(nodeid: str) -> int:
    """test_4_ops.py::... -> 4"""
    module = nodeid.split("::")[0].rsplit("/", 1)[-1]
    return int(module.split("_")[1])


# ---------------------------------------------------------------------------------------------------------------
# what the backend declares
# ---------------------------------------------------------------------------------------------------------------
def _plain(value):
    """A declared value as JSON data: dtypes and ops by name, sets sorted, dataclasses (TensorCore) as dicts."""
    if isinstance(value, (DType, enum.Enum)):
        return value.name
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(_plain(k)): getattr(v, "__name__", "callable") if callable(v) else _plain(v)
                for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if isinstance(value, (int, float, str, bool, type(None))) else repr(value)


def declared(obj) -> dict:
    """Every public non-method attribute of obj (its class's declarations and what its __init__ set)."""
    names = sorted(n for n in dir(obj) if not n.startswith("_"))
    return {n: _plain(getattr(obj, n)) for n in names if not callable(getattr(obj, n, None))}


def capabilities(dut) -> dict:
    from tinygrad_core.device import Allocator, Compiler, LRUAllocator
    compiled, spec = dut.loaded, dut.backend.spec
    if dut.load_error is not None:
        return {}
    renderer = declared(compiled.renderer)
    compiler, allocator = compiled.compiler, compiled.allocator
    return {
        "dtypes": [dt.name for dt in dut.dtypes()],
        "ops": sorted(op.name for op in compiled.renderer.code_for_op),
        **{k: v for k, v in renderer.items() if k not in ("supported_dtypes", "code_for_op")},
        "renderer_class": type(compiled.renderer).__name__,
        "compiler": {"class": type(compiler).__name__, "cachekey": compiler.cachekey,
                     "compile_many": type(compiler).compile_many is not Compiler.compile_many},
        "allocator": {"class": type(allocator).__name__, "lru": isinstance(allocator, LRUAllocator),
                      "views": type(allocator).offset is not Allocator.offset},
        "runtime": getattr(compiled.runtime, "__name__", repr(compiled.runtime)),
        "spec": {"priority": spec.priority, "is_gpu": spec.is_gpu, "describe": spec.describe is not None},
    }


def describe(dut) -> dict:
    """The report's header: the backend, its versions and its declared capabilities."""
    from tinygrad_core.plugins import BACKEND_API
    spec = dut.backend.spec
    return {
        "backend": dut.name, "distribution": dut.backend.distribution,
        "distribution_version": dut.backend.version, "core_version": importlib.metadata.version("tinygrad-core"),
        "api_version": list(spec.api_version) if isinstance(spec.api_version, tuple) else repr(spec.api_version),
        "core_api_version": list(BACKEND_API), "mode": "compile-only" if dut.compile_only else "full",
        "load_error": dut.load_error, "capabilities": capabilities(dut), "hypothesis_max_examples": dut.max_examples,
    }


# ---------------------------------------------------------------------------------------------------------------
# counts and verdict
# ---------------------------------------------------------------------------------------------------------------
def verdict(counts: dict, problems: list[str] = ()) -> str:
    if counts["failed"] or problems:
        return "FAILS"
    return "INCOMPLETE" if counts["not run"] or not counts["tests"] else "CONFORMS"


def build(header: dict, results: dict, problems: list[str] = (), sections: list[int] | None = None) -> dict:
    """The whole report. results: nodeid -> entry (section, outcome, seconds, message); problems: failures of the
    run that belong to no test (the backend did not load, the suite process died outside a test)."""
    problems = list(problems) + ([f"load() failed: {header['load_error']}"] if header.get("load_error") else [])
    rows = {n: {"name": name, "tests": 0, **dict.fromkeys(OUTCOMES, 0)} for n, name in SECTIONS.items()}
    for entry in results.values():
        rows[entry["section"]][entry["outcome"]] += 1
        rows[entry["section"]]["tests"] += 1
    for row in rows.values():
        row["verdict"] = verdict(row) if row["tests"] else "-"
    total = {"tests": len(results), **{o: sum(r[o] for r in rows.values()) for o in OUTCOMES}}
    result = verdict(total, problems)
    return {
        **header, "verdict": result, "passed": result == "CONFORMS", "problems": problems,
        "sections_run": sections or sorted({e["section"] for e in results.values()}),
        "sections": {str(n): row for n, row in rows.items()}, "totals": total,
        "kernels_compiled": sum(e.get("kernels", 0) for e in results.values()),
        "python": platform.python_version(), "platform": sys.platform,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "tests": [{"id": nodeid, **entry} for nodeid, entry in results.items()],
    }


def _reasons(report: dict, outcome: str) -> list[str]:
    return sorted({t["message"].removeprefix("Skipped: ") for t in report["tests"] if t["outcome"] == outcome})


def table(report: dict) -> list[str]:
    """The terminal table, one line each."""
    api = report.get("api_version", "?")
    title = (f"conformance of {report['backend']} ({report.get('distribution', '?')} "
             f"{report.get('distribution_version', '?')}), tinygrad-core {report.get('core_version', '?')}, "
             f"backend API {tuple(api) if isinstance(api, list) else api}, {report.get('mode', '?')} mode")
    lines = ["", title,
             f"  {'section':40s} {'passed':>7s} {'failed':>7s} {'skipped':>8s} {'not run':>8s}  verdict"]
    for n, row in report["sections"].items():
        if row["tests"]:
            lines.append(f"  {n + '. ' + row['name']:40s} {row['passed']:7d} {row['failed']:7d} {row['skipped']:8d} "
                         f"{row['not run']:8d}  {row['verdict']}")
    for title, outcome in (("skipped (capabilities the backend declares it lacks)", "skipped"),
                           ("not run (the suite lacked something: install it and run again)", "not run")):
        if reasons := _reasons(report, outcome):
            lines += [f"  {title}:"] + [f"    - {reason}" for reason in reasons]
    failed = [t for t in report["tests"] if t["outcome"] == "failed"]
    if failed:
        lines += ["  failed:"] + [f"    - {t['id']}: {(t['message'].strip().splitlines() or [''])[0]}"[:200]
                                  for t in failed[:20]]
        if len(failed) > 20:
            lines.append(f"    ... and {len(failed) - 20} more (the JSON report lists them all)")
    lines += [f"  problem: {p}" for p in report["problems"]]
    lines.append(f"  {report['verdict']}" + _verdict_note(report))
    return lines


def _verdict_note(report: dict) -> str:
    total = report["totals"]
    if report["verdict"] == "FAILS":
        return f": {total['failed']} of {total['tests']} tests failed" + \
            (f", {len(report['problems'])} problem(s) outside the tests" if report["problems"] else "")
    if report["verdict"] == "INCOMPLETE":
        return (f": {total['not run']} tests could not run (see 'not run' above); what ran has no failure"
                if total["tests"] else ": no test ran")
    partial = len(report["sections_run"]) < len(SECTIONS)
    return f" (sections {','.join(map(str, report['sections_run']))} only)" if partial else ""


def markdown(report: dict) -> str:
    """A table for the backend's README."""
    versions = (f"{report.get('distribution', '?')} {report.get('distribution_version', '?')}, tinygrad-core "
                f"{report.get('core_version', '?')}, {report.get('mode', '?')} mode, {report['date'][:10]}")
    out = [f"### tinygrad-core conformance: {report['backend']}", "", f"{versions}: **{report['verdict']}**", "",
           "| section | tests | passed | failed | skipped | not run | verdict |",
           "|---|---:|---:|---:|---:|---:|---|"]
    for n, row in report["sections"].items():
        if row["tests"]:
            out.append(f"| {n}. {row['name']} | {row['tests']} | {row['passed']} | {row['failed']} | {row['skipped']} "
                       f"| {row['not run']} | {row['verdict']} |")
    t = report["totals"]
    out.append(f"| **total** | {t['tests']} | {t['passed']} | {t['failed']} | {t['skipped']} | {t['not run']} "
               f"| **{report['verdict']}** |")
    if reasons := _reasons(report, "skipped"):
        out += ["", "Skipped (not declared):"] + [f"- {reason}" for reason in reasons]
    return "\n".join(out) + "\n"


def write(report: dict, json_path: str | None, markdown_path: str | None) -> list[str]:
    """Write the JSON and Markdown reports asked for; returns the lines that say where."""
    said = []
    if json_path:
        with open(json_path, "w") as f:
            json.dump(report, f, indent=1, default=str)
        said.append(f"  report written to {json_path}")
    if markdown_path:
        with open(markdown_path, "w") as f:
            f.write(markdown(report))
        said.append(f"  Markdown table written to {markdown_path}")
    return said
