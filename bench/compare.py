"""Side-by-side benchmark: tinygrad_core's CPU backend against numpy, PyTorch CPU and tinygrad 0.14, one run.

Each framework runs in a process of its own (bench/compare_workloads.py, and bench/epochs.py's worker for the MLP and
MNIST CNN training epochs); this script starts them one after another, prints the figures and their ratios, and
writes bench/results/compare-<date>.json and compare-latest.md.

    python bench/compare.py [--quick] [--frameworks tinygrad_core,numpy,torch,tinygrad]"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)                            # the worker, beside this script, names the workloads
from compare_workloads import workload_names  # noqa: E402

WORKER = os.path.join(HERE, "compare_workloads.py")
FRAMEWORKS = ("tinygrad_core", "numpy", "torch", "tinygrad")
FIRST_COLD, FIRST_WARM = "MLP first step, empty cache", "MLP first step, warm cache"
# the training epochs bench/epochs.py times (its worker, same models, data pipeline and threads), two per process:
# model -> (the row of its second epoch, what each later epoch of training takes; the row of its first, which compiles
# the kernels the column's workloads didn't)
EPOCHS = {"mlp": ("MLP epoch (main job)", "MLP first epoch"), "cnn": ("MNIST CNN epoch", "MNIST CNN first epoch")}
# the floors the speed issue sets for tinygrad_core: (workload, reference column, least speed ratio, how it reads)
TARGETS = {
    "matmul 512": [("numpy", 0.8, ">= 0.8x numpy")],
    "matmul 1024": [("numpy", 0.8, ">= 0.8x numpy")],
    "matmul 2048": [("numpy", 0.6, ">= 0.6x numpy")],
    "fused chain 16M": [("numpy", 1.0, "faster than numpy"), ("torch", 1.0, "and than PyTorch")],
    "MLP train step": [("torch", 1 / 1.2, "within 1.2x PyTorch")],
    "CNN train step": [("torch", 1 / 1.2, "within 1.2x PyTorch")],
    "MLP epoch (main job)": [("torch", 1 / 1.2, "within 1.2x PyTorch")],
    "MNIST CNN epoch": [("torch", 1 / 1.5, "within 1.5x PyTorch")],
}
SECONDS_TARGETS = {FIRST_COLD: (1.5, "< 1.5 s"), FIRST_WARM: (0.3, "< 0.3 s")}
DEVICE_ENV_VARS = ("DEV", "TINYGRAD_DEVICE", "CPU", "LLVM", "CLANG", "CACHEDB", "TINYGRAD_CACHE_DIR")


def worker_environment(column: dict, cache_dir: str | None = None) -> dict:
    """The environment of one worker: the device chosen for it, its compile cache pointed at cache_dir if given."""
    env = {k: v for k, v in os.environ.items() if k not in DEVICE_ENV_VARS}
    env.update(column["env"])
    if cache_dir is not None:
        if column["framework"] == "tinygrad_core":
            env["TINYGRAD_CACHE_DIR"] = cache_dir
        elif column["framework"] == "tinygrad":
            env["CACHEDB"] = os.path.join(cache_dir, "cache.db")
    return env


def run_worker(column: dict, options, extra: list[str], cache_dir: str | None = None) -> dict:
    """Runs compare_workloads.py for one column; whatever it saved before a crash or a timeout is kept."""
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "result.json")
        command = [sys.executable, WORKER, column["framework"], "--json", out, "--repeats", str(options.repeats),
                   "--budget", str(options.budget), "--torch-threads", str(options.torch_threads), *extra]
        command += ["--quick"] * options.quick + ["--no-cnn"] * options.no_cnn
        return run_process(command, worker_environment(column, cache_dir), column["label"], options.timeout, out)


def run_process(command: list[str], env: dict, label: str, timeout: float, out: str) -> dict:
    """Runs one worker process; returns the JSON it wrote to out (even after a crash), with "failure" if it failed."""
    failure = None
    try:
        # the workers' progress goes to stderr, as this script's does; stdout is kept for the report
        done = subprocess.run(command, check=False, env=env, stdout=subprocess.DEVNULL, timeout=timeout)
        if done.returncode != 0:
            failure = f"the {label} process exited with code {done.returncode}"
    except subprocess.TimeoutExpired:
        failure = f"the {label} process ran past --timeout {timeout} s and was stopped"
    result = {}
    if os.path.exists(out):
        with open(out) as f:
            result = json.load(f)
    if failure:
        result["failure"] = failure
    return result


def columns_to_run(options) -> list[dict]:
    columns = []
    for framework in options.frameworks:
        if framework == "tinygrad":
            for device in options.tinygrad_devices:
                columns.append({"framework": framework, "label": f"tinygrad {device}", "env": {"DEV": device}})
        elif framework == "tinygrad_core":
            columns.append({"framework": framework, "label": f"tinygrad_core {options.core_device}",
                            "env": {"TINYGRAD_DEVICE": options.core_device}})
        else:
            columns.append({"framework": framework, "label": framework, "env": {}})
    for column in columns:
        column["installed"] = find_spec(column["framework"]) is not None
    return columns


def measure(column: dict, options) -> dict:
    """The column's workloads in one process, then its first MLP step in two fresh processes: the first with an
    empty compile cache, the second with the cache the first one left."""
    if not column["installed"]:
        return {"status": "not installed"}
    label = column["label"]
    print(f"{label}: first step, empty cache", file=sys.stderr, flush=True)
    first = {}
    with tempfile.TemporaryDirectory() as cache_dir:
        for name, extra in ((FIRST_COLD, ["--first-step"]), (FIRST_WARM, ["--first-step"])):
            run = run_worker(column, options, extra, cache_dir)
            if "first_step_s" in run:
                first[name] = {"unit": "s", "value": run["first_step_s"], "import_s": run["import_s"],
                               "loss": run["loss"]}
            else:
                first[name] = {"unit": "s", "error": run.get("error") or run.get("failure", "no result")}
            if name == FIRST_COLD:
                print(f"{label}: first step, warm cache", file=sys.stderr, flush=True)
        print(f"{label}: workloads", file=sys.stderr, flush=True)
        started = time.perf_counter()
        result = faster_of([run_worker(column, options, [], cache_dir) for _ in range(options.runs)])
        result.setdefault("results", {}).update(epochs(column, options, cache_dir))
    result["results"].update(first)
    result["status"] = "failed" if "failure" in result else "ok"
    result["seconds"] = time.perf_counter() - started
    return result


def faster_of(runs: list[dict]) -> dict:
    """One column's worker runs as one: each workload's cell from the run with the faster median (the machine's other
    work only slows a run, and it slows one for minutes at a time: a 512 matmul's median at twice its fastest
    repetition, in one run of three), every run's median kept in the cell's "run_values"; the rest from the first run
    that didn't fail."""
    result = dict(next((run for run in runs if "failure" not in run), runs[0]))
    cells: dict[str, dict] = {}
    for run in runs:
        for name, cell in run.get("results", {}).items():
            best = cells.get(name)
            if best is None or "value" in cell and ("value" not in best or
                                                    speed_ratio(cell["unit"], cell["value"], best["value"]) > 1):
                cells[name] = cell
    for name, cell in cells.items():
        cells[name] = dict(cell, run_values=[run["results"][name].get("value") for run in runs
                                             if name in run.get("results", {})])
    result["results"] = cells
    return result


def epochs(column: dict, options, cache_dir: str) -> dict:
    """bench/epochs.py's epochs for tinygrad_core and PyTorch (with the compile cache the column's workloads filled:
    kernels those compiled are loaded, the others are compiled within the epoch)."""
    if column["framework"] not in ("tinygrad_core", "torch") or options.quick or options.no_epochs:
        return {}
    from epochs import fastest, worker
    out = {}
    for model, names in EPOCHS.items():
        print(f"{column['label']}: {model} epochs", file=sys.stderr, flush=True)
        run = fastest([worker(column["framework"], model, options.torch_threads, worker_environment(column, cache_dir),
                              2) for _ in range(options.epoch_runs)])
        for name, seconds in zip(names, run.get("seconds", [None, None])[::-1]):
            out[name] = {"unit": "s/epoch", "error": run["error"]} if "error" in run else \
                {"unit": "s/epoch", "value": seconds, "accuracy": run["accuracy"]}
    return out


# ---------------------------------------------------------------------------------------------------------------------
# ratios and tables
# ---------------------------------------------------------------------------------------------------------------------

def value_of(results: dict, label: str | None, workload: str) -> float | None:
    if label is None:
        return None
    cell = results.get(label, {}).get("results", {}).get(workload, {})
    return cell.get("value")


def speed_ratio(unit: str, mine: float | None, reference: float | None) -> float | None:
    """How many times faster than the reference (> 1: faster), whichever way the unit reads."""
    if not mine or not reference:
        return None
    return mine / reference if unit in ("GFLOP/s", "GB/s") else reference / mine


def best_tinygrad(columns: list[dict], results: dict, workloads: list[tuple[str, str]]) -> str | None:
    """tinygrad 0.14's fastest CPU device of this run: the geometric mean of its speed against the others'."""
    labels = [c["label"] for c in columns if c["framework"] == "tinygrad" and results[c["label"]]["status"] != "not "
              "installed"]
    if len(labels) <= 1:
        return labels[0] if labels else None

    def score(label):
        logs = []
        for other in labels:
            for workload, unit in workloads:
                ratio = speed_ratio(unit, value_of(results, label, workload), value_of(results, other, workload))
                if ratio:
                    logs.append(math.log(ratio))
        return (sum(logs) / len(logs)) if logs else -math.inf
    return max(labels, key=score)


def workload_order(results: dict, options) -> list[tuple[str, str]]:
    """The rows: the workloads the workers were asked for, then any other they reported, then the first steps."""
    rows = dict(workload_names(options.quick, options.no_cnn))
    for result in results.values():
        for workload, cell in result.get("results", {}).items():
            rows.setdefault(workload, cell.get("unit", ""))
    rest = [w for w in rows if w not in (FIRST_COLD, FIRST_WARM)]
    return [(w, rows[w]) for w in rest] + [(FIRST_COLD, "s"), (FIRST_WARM, "s")]


def best_value(cell: dict) -> float:
    """The figure of the fastest repetition: less sensitive than the median to other work on the machine."""
    if "min_s" not in cell:
        return cell["value"]
    if cell["unit"] == "ms/step":
        return 1000 * cell["min_s"]
    return cell["value"] * cell["median_s"] / cell["min_s"]


def cell_text(result: dict, workload: str, footnotes: list[str], best: bool = False) -> str:
    if result["status"] == "not installed":
        return "not installed"
    cell = result.get("results", {}).get(workload)
    if cell is None:
        return "missing" if "failure" not in result else "crashed"
    if "value" in cell:
        value = best_value(cell) if best else cell["value"]
        if cell["unit"] == "s":
            return f"{value:.3f}"                           # close to the targets (1.5 s, 0.3 s): keep the digits
        return f"{value:.3g}" if value < 100 else f"{value:.0f}"
    if "not_applicable" in cell:
        return "n/a"
    footnotes.append(cell["error"])
    return f"error [{len(footnotes)}]"


def ratio_text(ratio: float | None) -> str:
    return f"{ratio:.2f}x" if ratio else "-"


def target_text(workload: str, unit: str, results: dict, labels: dict) -> str:
    core = labels.get("tinygrad_core")
    if workload in SECONDS_TARGETS:
        limit, wording = SECONDS_TARGETS[workload]
        value = value_of(results, core, workload)
        return f"{wording}: " + ("-" if value is None else "met" if value < limit else "missed")
    verdicts = []
    for reference, least, wording in TARGETS.get(workload, []):
        ratio = speed_ratio(unit, value_of(results, core, workload), value_of(results, labels.get(reference),
                                                                               workload))
        verdicts.append(f"{wording}: " + ("-" if ratio is None else "met" if ratio >= least else "missed"))
    return "; ".join(verdicts)


def markdown_tables(report: dict) -> str:
    results, columns, workloads = report["frameworks"], report["columns"], report["workloads"]
    labels = {c["framework"]: c["label"] for c in columns if c["framework"] != "tinygrad"}
    labels["tinygrad"] = report["tinygrad_best_device"]
    footnotes: list[str] = []
    lines = ["| workload | unit | " + " | ".join(c["label"] for c in columns) + " |",
             "|---|---|" + "---:|" * len(columns)]
    for workload, unit in workloads:
        cells = [cell_text(results[c["label"]], workload, footnotes) for c in columns]
        lines.append(f"| {workload} | {unit} | " + " | ".join(cells) + " |")
    pairs = [("tinygrad_core", "numpy"), ("tinygrad_core", "torch"), ("tinygrad_core", "tinygrad"),
             ("torch", "numpy"), ("tinygrad", "numpy"), ("tinygrad", "torch")]
    short = {"tinygrad_core": "core", "numpy": "numpy", "torch": "torch", "tinygrad": "tinygrad"}
    lines += ["", ("Speed ratios (> 1: the first is faster; `tinygrad` is its best device here, "
                   f"{labels['tinygrad'] or 'none'}):"), "",
              "| workload | " + " | ".join(f"{short[a]} / {short[b]}" for a, b in pairs) + " | speed-issue floor (core) |",
              "|---|" + "---:|" * len(pairs) + "---|"]
    for workload, unit in workloads:
        ratios = [speed_ratio(unit, value_of(results, labels.get(a), workload),
                              value_of(results, labels.get(b), workload)) for a, b in pairs]
        lines.append(f"| {workload} | " + " | ".join(map(ratio_text, ratios)) + " | "
                     + target_text(workload, unit, results, labels) + " |")
    fastest = "The fastest repetition (the medians above are the figures; this shows how much of a gap is noise):"
    lines += ["", fastest, "", lines[0], lines[1]]
    for workload, unit in workloads:
        if workload not in (FIRST_COLD, FIRST_WARM):
            cells = [cell_text(results[c["label"]], workload, [], best=True) for c in columns]
            lines.append(f"| {workload} | {unit} | " + " | ".join(cells) + " |")
    if footnotes:
        lines += ["", "Errors:", ""] + [f"{i}. `{text}`" for i, text in enumerate(footnotes, 1)]
    return "\n".join(lines)


def markdown_report(report: dict) -> str:
    machine = report["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in report["versions"].items())
    devices = "; ".join(f"{label}: {result.get('device', result['status'])}"
                        for label, result in report["frameworks"].items())
    imports = ", ".join(f"{label} {cell['import_s']:.2f} s" for label, result in report["frameworks"].items()
                        if (cell := result.get("results", {}).get(FIRST_WARM, {})).get("import_s") is not None)
    return "\n".join([
        f"# Side-by-side CPU benchmark, {report['date']}", "",
        (f"- Machine: {machine['cpu']}, {machine['cores']} cores, {machine['platform']}; load average "
         f"{machine['load_before']} before the run, {machine['load_after']} after it (other work on the machine "
         "makes the figures noisy)."),
        f"- Versions: {versions}.",
        f"- Devices: {devices}.",
        (f"- Command: `{report['command']}` ({report['seconds']:.0f} s). Each column ran in a process of its own; "
         "figures are medians of the timed repetitions after warm-up (see the JSON for counts, min and max), each "
         f"workload's from the faster of {report.get('runs', 1)} runs of the column's process (the machine's other "
         "work only slows a run)."),
        ("- Training steps use random data; MLP 784-128-10 batch 128, the seed's TinyCNN batch 64, Adam. tinygrad "
         "and tinygrad_core run them under TinyJit, PyTorch eagerly, numpy's MLP is written out by hand. 'First "
         "step' is building the model and optimizer and running one step to its loss in a fresh process, the import "
         f"excluded (imports: {imports or 'none measured'}). The epochs are bench/epochs.py's: the shipped MNIST, the "
         "same numpy batching for both, two epochs in one process: the first compiles what the column's workloads "
         "didn't (their kernels are loaded from the disk cache), the second is what each later epoch takes; each "
         f"epoch's figure is the fastest of {report.get('epoch_runs', 1)} such processes (the machine's other work "
         "slows a whole process). Calls are timed after a collection of what earlier calls left (`gc.collect()` "
         "with what lived before the timing frozen, `gc.freeze()`)."), "",
        markdown_tables(report), ""])


# ---------------------------------------------------------------------------------------------------------------------

def machine_description() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": f"{platform.system()} {platform.machine()}, "
                                                              f"Python {platform.python_version()}",
            "load_before": load_average()}


def load_average() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def installed_versions(dists=("tinygrad-core", "tinygrad-cpu", "numpy", "torch", "tinygrad", "llvmlite")) -> dict:
    found = {}
    for dist in dists:
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = "not installed"
    return found


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS), type=lambda s: s.split(","),
                        help=f"comma-separated, from {','.join(FRAMEWORKS)} (default: all)")
    parser.add_argument("--tinygrad-devices", default="CPU,CPU:LLVM", type=lambda s: s.split(","),
                        help="tinygrad 0.14's CPU devices to try, one process each (DEV=...); the best one is "
                             "used for the ratios (default: CPU,CPU:LLVM)")
    parser.add_argument("--core-device", default="CPU", help="tinygrad_core's backend (default: CPU)")
    parser.add_argument("--torch-threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7, help="timed repetitions per workload (the MLP step gets "
                                                               "three times as many)")
    parser.add_argument("--budget", type=float, default=20.0, help="seconds of timed calls per workload at most")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds one framework's process may take")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, three repetitions: a smoke test")
    parser.add_argument("--no-cnn", action="store_true", help="leave out the CNN training step (minutes per step "
                                                              "on a slow framework)")
    parser.add_argument("--runs", type=int, default=2, help="worker processes per column for the workloads, one "
                                                               "after another: each workload's faster median counts")
    parser.add_argument("--epoch-runs", type=int, default=3, help="bench/epochs.py processes per framework and "
                                                                      "model: each epoch's fastest counts")
    parser.add_argument("--no-epochs", action="store_true", help="leave out bench/epochs.py's MLP and MNIST CNN "
                                                                  "epochs (about a minute)")
    parser.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    parser.add_argument("--render", metavar="JSON", help="measure nothing: print the report of an earlier run's "
                                                         "JSON (and write it to compare-latest.md in --out-dir)")
    options = parser.parse_args(argv)
    unknown = set(options.frameworks) - set(FRAMEWORKS)
    if unknown:
        parser.error(f"unknown framework(s) {sorted(unknown)}; choose from {', '.join(FRAMEWORKS)}")
    return options


def write_markdown(text: str, out_dir: str):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "compare-latest.md"), "w") as f:
        f.write(text + "\n")


def main(argv=None):
    options = parse_args(argv)
    if options.render:
        with open(options.render) as f:
            text = markdown_report(json.load(f))
        print(text)
        write_markdown(text, options.out_dir)
        return
    started, machine = time.perf_counter(), machine_description()
    columns = columns_to_run(options)
    results = {c["label"]: measure(c, options) for c in columns}
    machine["load_after"] = load_average()
    workloads = workload_order(results, options)
    today = datetime.date.today().isoformat()
    report = {"date": today, "machine": machine, "versions": installed_versions(),
              "command": shlex.join(["python", "bench/compare.py", *(sys.argv[1:] if argv is None else argv)]),
              "seconds": time.perf_counter() - started, "epoch_runs": options.epoch_runs, "runs": options.runs,
              "columns": [{k: c[k] for k in ("framework", "label", "env")} for c in columns],
              "workloads": workloads, "frameworks": results,
              "tinygrad_best_device": best_tinygrad(columns, results, workloads)}
    text = markdown_report(report)
    print(text)
    os.makedirs(options.out_dir, exist_ok=True)
    with open(os.path.join(options.out_dir, f"compare-{today}.json"), "w") as f:
        json.dump(report, f, indent=1)
    write_markdown(text, options.out_dir)


if __name__ == "__main__":
    main()
