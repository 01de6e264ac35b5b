"""OpenCL benchmark: tinygrad_core's CL backend against tinygrad 0.14's CL device, on the same OpenCL device.

Each column runs in a process of its own (this script starts itself with --worker); it prints the figures and their
ratios and writes bench/results/compare-cl-<date>.json and compare-cl-<date>.md.

    python bench/compare_cl.py [--quick] [--repeats 7] [--core-variant NAME=VALUE ...]"""
from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import shlex
import sys
import tempfile
import time
from importlib.util import find_spec

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)                 # the shared worker code lives beside this script
from compare import installed_versions, load_average, machine_description, run_process, speed_ratio  # noqa: E402
from compare_workloads import TinygradFramework, error_text, measure_arrays  # noqa: E402

MATMUL_SIZES = (512, 1024)
CHAIN_ELEMENTS = 16 * 1024 * 1024
DISTRIBUTIONS = ("tinygrad-core", "tinygrad-opencl", "tinygrad", "pyopencl", "pocl-binary-distribution")
DEVICE_ENV_VARS = ("DEV", "TINYGRAD_DEVICE", "CL", "GPU", "CACHEDB", "TINYGRAD_CACHE_DIR")


# ---------------------------------------------------------------------------------------------------------------------
# the worker: one framework, every workload, in this process
# ---------------------------------------------------------------------------------------------------------------------

def workloads(quick: bool):
    """(name, unit, units of work per call, builder(framework) -> run, numpy reference, tolerance)."""
    rng = np.random.default_rng(0)
    for n in MATMUL_SIZES:
        a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
        yield (f"matmul {n}", "GFLOP/s", 2 * n ** 3 / 1e9, lambda fw, a=a, b=b: fw.matmul(a, b),
               lambda a=a, b=b: a @ b, 1e-3)
    elements = CHAIN_ELEMENTS // 4 if quick else CHAIN_ELEMENTS
    x, y, z = (rng.standard_normal(elements, dtype=np.float32) for _ in range(3))
    # 3 inputs read and 1 output written: what one fused kernel must move
    yield (f"fused chain {elements >> 20}M", "GB/s", 4 * 4 * elements / 1e9, lambda fw: fw.chain(x, y, z),
           lambda: np.exp(np.maximum(x * y + z, 0) * 0.5), 1e-5)


def workload_names(quick: bool) -> list[tuple[str, str]]:
    return [(name, unit) for name, unit, *_ in workloads(quick)]


def run_worker(options):
    framework = TinygradFramework(options, options.worker)
    compiled = framework.tg.Device[framework.tg.Device.DEFAULT]
    # the OpenCL device it opened: tinygrad_core's keeps the pyopencl device, tinygrad 0.14's its name
    cl_device = getattr(compiled, "cl_device", None)
    framework.device += f", {cl_device.name.strip() if cl_device else getattr(compiled, 'device_name', '?').strip()}"
    payload = {"version": framework.version, "device": framework.device, "results": {}}

    def save():
        with open(options.json, "w") as f:
            json.dump(payload, f, indent=1)

    save()
    measure_arrays(framework, workloads(options.quick), options, payload["results"], save)


# ---------------------------------------------------------------------------------------------------------------------
# the driver: one process per column
# ---------------------------------------------------------------------------------------------------------------------

def pyopencl_loader_environment() -> dict:
    """What tinygrad 0.14's DEV=CL needs to reach the OpenCL driver bundled in the pyopencl wheel.

    tinygrad loads libOpenCL itself (OPENCL_PATH names the file); the wheel's copy of the loader finds its vendor
    list (pocl.icd) under $PYOPENCL_HOME and opens the driver it names by file name, so the driver's folder goes on
    LD_LIBRARY_PATH. A pyopencl built against the system's loader has no such folder: then nothing is needed."""
    spec = find_spec("pyopencl")
    if spec is None or not spec.submodule_search_locations:
        return {}
    package = spec.submodule_search_locations[0]
    libraries = os.path.join(package, ".libs")
    loaders = sorted(glob.glob(os.path.join(libraries, "libOpenCL*.so*")))
    if not loaders:
        return {}
    search_path = [libraries] + [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    return {"OPENCL_PATH": loaders[0], "PYOPENCL_HOME": package, "LD_LIBRARY_PATH": os.pathsep.join(search_path)}


def columns_to_run(options) -> list[dict]:
    columns = [{"framework": "tinygrad_core", "label": "tinygrad_core CL", "env": {"TINYGRAD_DEVICE": "CL"}}]
    for variant in options.core_variant:
        name, _, value = variant.partition("=")
        columns.append({"framework": "tinygrad_core", "label": f"tinygrad_core CL {name}={value}",
                        "env": {"TINYGRAD_DEVICE": "CL", name: value}})
    columns.append({"framework": "tinygrad", "label": "tinygrad CL", "env": {"DEV": "CL",
                                                                           **pyopencl_loader_environment()}})
    for column in columns:
        column["installed"] = find_spec(column["framework"]) is not None
    return columns


def measure(column: dict, options) -> dict:
    if not column["installed"]:
        return {"status": "not installed"}
    print(f"{column['label']}: workloads", file=sys.stderr, flush=True)
    env = {k: v for k, v in os.environ.items() if k not in DEVICE_ENV_VARS} | column["env"]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "result.json")
        command = [sys.executable, os.path.abspath(__file__), "--worker", column["framework"], "--json", out,
                   "--repeats", str(options.repeats), "--budget", str(options.budget)] + ["--quick"] * options.quick
        result = run_process(command, env, column["label"], options.timeout, out)
    result["status"] = "failed" if "failure" in result else "ok"
    result["seconds"] = time.perf_counter() - started
    return result


def cell_text(result: dict, workload: str, footnotes: list[str]) -> str:
    if result["status"] == "not installed":
        return "not installed"
    cell = result.get("results", {}).get(workload)
    if cell is None:
        return "crashed" if "failure" in result else "missing"
    if "value" in cell:
        return f"{cell['value']:.3g}" if cell["value"] < 100 else f"{cell['value']:.0f}"
    footnotes.append(cell["error"])
    return f"error [{len(footnotes)}]"


def markdown_report(report: dict) -> str:
    machine, results, columns = report["machine"], report["frameworks"], report["columns"]
    labels = [c["label"] for c in columns]
    reference = "tinygrad CL"
    footnotes: list[str] = []
    table = ["| workload | unit | " + " | ".join(labels) + " | " +
             " | ".join(f"{label} / {reference}" for label in labels if label != reference) + " |",
             "|---|---|" + "---:|" * (2 * len(labels) - 1)]
    for workload, unit in report["workloads"]:
        cells = [cell_text(results[label], workload, footnotes) for label in labels]
        ratios = []
        for label in labels:
            if label != reference:
                ratio = speed_ratio(unit, results[label].get("results", {}).get(workload, {}).get("value"),
                                    results[reference].get("results", {}).get(workload, {}).get("value"))
                ratios.append(f"{ratio:.2f}x" if ratio else "-")
        table.append(f"| {workload} | {unit} | " + " | ".join(cells + ratios) + " |")
    if footnotes:
        table += ["", "Errors:", ""] + [f"{i}. `{text}`" for i, text in enumerate(footnotes, 1)]
    versions = ", ".join(f"{k} {v}" for k, v in report["versions"].items())
    devices = "; ".join(f"{label}: {result.get('device', result['status'])}" for label, result in results.items())
    return "\n".join([
        f"# OpenCL benchmark, {report['date']}", "",
        (f"- Machine: {machine['cpu']}, {machine['cores']} cores, {machine['platform']}; OpenCL devices: "
         f"{report['opencl_devices']}; load average {machine['load_before']} before the run, "
         f"{machine['load_after']} after it."),
        f"- Versions: {versions}.",
        f"- Devices: {devices}.",
        (f"- Command: `{report['command']}` ({report['seconds']:.0f} s). Each column ran in a process of its own; "
         "figures are medians of the timed repetitions after a checked, untimed first call (see the JSON for "
         "counts, min and max). Ratios > 1: that column is faster than tinygrad 0.14."), "",
        *table, ""])


def opencl_devices() -> str:
    try:
        import pyopencl as cl
        return "; ".join(f"{p.name.strip()} / {d.name.strip()}" for p in cl.get_platforms() for d in p.get_devices())
    except Exception as e:  # noqa: BLE001 - the report says why instead
        return f"none found ({error_text(e)})"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--budget", type=float, default=20.0, help="seconds of timed calls per workload at most")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one column's process may take")
    parser.add_argument("--quick", action="store_true", help="a 4M-element chain and three repetitions")
    parser.add_argument("--core-variant", action="append", default=[], metavar="NAME=VALUE",
                        help="an extra tinygrad_core column run with this environment variable set (repeatable)")
    parser.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    parser.add_argument("--worker", choices=["tinygrad_core", "tinygrad"], help=argparse.SUPPRESS)
    parser.add_argument("--json", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    options = parse_args(argv)
    if options.worker:
        return run_worker(options)
    started, machine = time.perf_counter(), machine_description()
    columns = columns_to_run(options)
    results = {c["label"]: measure(c, options) for c in columns}
    machine["load_after"] = load_average()
    today = datetime.date.today().isoformat()
    report = {"date": today, "machine": machine, "opencl_devices": opencl_devices(),
              "versions": installed_versions(DISTRIBUTIONS),
              "command": shlex.join(["python", "bench/compare_cl.py", *(sys.argv[1:] if argv is None else argv)]),
              "seconds": time.perf_counter() - started,
              "columns": [{k: c[k] for k in ("framework", "label")} for c in columns],
              "workloads": workload_names(options.quick), "frameworks": results}
    text = markdown_report(report)
    print(text)
    os.makedirs(options.out_dir, exist_ok=True)
    with open(os.path.join(options.out_dir, f"compare-cl-{today}.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(options.out_dir, f"compare-cl-{today}.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
