"""Throwaway plugin distributions for tests: a package plus the dist-info metadata pip would write, in a folder
that a subprocess puts on sys.path (PYTHONPATH), so importlib.metadata finds its entry points like an install's."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent


def make_distribution(where: pathlib.Path, name: str, files: dict[str, str], entry_points: dict[str, str],
                      version: str = "0.1.0") -> pathlib.Path:
    """Write files (path -> source) and a dist-info for distribution `name` with entry points
    (entry name -> module) in group tinygrad_core.backends."""
    for path, source in files.items():
        target = where / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(source))
    info = where / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{entry} = {module}\n" for entry, module in entry_points.items())
    (info / "entry_points.txt").write_text(f"[tinygrad_core.backends]\n{lines}")
    return where


def run_python(code_or_args: str | list[str], path: pathlib.Path, env: dict | None = None,
               timeout: int = 600) -> subprocess.CompletedProcess:
    """Run `python -c code` (or `python args...`) with `path` first on sys.path."""
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(path), os.environ.get("PYTHONPATH", "")]))
    environment.pop("TINYGRAD_DEVICE", None)
    environment.pop("DEV", None)
    environment.update(env or {})
    args = ["-c", code_or_args] if isinstance(code_or_args, str) else code_or_args
    return subprocess.run([sys.executable, *args], check=False, capture_output=True, text=True, env=environment,
                          timeout=timeout, cwd=path)


def conformance(backend: str, path: pathlib.Path, *options: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Run the conformance suite on a backend in a subprocess; return the process and its JSON report."""
    report = path / f"conformance-{backend}.json"
    done = run_python(["-m", "tinygrad_core.cli", "conformance", backend, "--json", str(report), *options], path)
    assert report.exists(), f"no report written:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done, json.loads(report.read_text())
