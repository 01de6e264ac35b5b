"""`tinygrad-core conformance NAME`: runs the suite's pytest session on one backend and returns its exit status.

cli.py hands its arguments here; `python -m tinygrad_core.conformance.runner NAME` does the same."""
from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import sys


def add_arguments(parser: argparse.ArgumentParser):
    parser.add_argument("backend", help="backend name, as `tinygrad-core backends` lists it (e.g. PYTHON, CPU, CL)")
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON to PATH")
    parser.add_argument("--compile-only", action="store_true",
                        help="render and compile every kernel without allocating or launching anything")
    parser.add_argument("--max-examples", type=int, default=10,
                        help="hypothesis examples per op and dtype in section 4 (default 10)")
    parser.add_argument("--sections", metavar="N,N,...", help="run only these sections, e.g. 1,2,3")
    parser.add_argument("-k", dest="keyword", metavar="EXPRESSION", help="run only tests matching (pytest -k)")
    parser.add_argument("-x", "--exitfirst", action="store_true", help="stop at the first failure")
    parser.add_argument("--pytest-args", default="", metavar="ARGS", help="more pytest arguments, e.g. '-v --tb=long'")


def run(name: str, json_path: str | None = None, compile_only: bool = False, max_examples: int = 10,
        sections: str | None = None, extra: list[str] | tuple = ()) -> int:
    """Check backend `name`; prints the per-section table. Returns 0 when it conforms (pytest's exit status)."""
    missing = [m for m in ("pytest", "hypothesis") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"the conformance suite needs {' and '.join(missing)}: pip install 'tinygrad-core[conformance]'",
              file=sys.stderr)
        return 4
    import pytest
    # the suite's settings are its own, whatever directory it runs from
    args = ["-c", os.devnull, "--rootdir", os.path.dirname(os.path.abspath(__file__)),
            "-p", "no:cacheprovider", "-q", "--pyargs", "tinygrad_core.conformance", "--backend", name,
            "--max-examples", str(max_examples)]
    if json_path:
        args += ["--conformance-json", json_path]
    if compile_only:
        args.append("--compile-only")
    if sections:
        args += ["--sections", sections]
    args += list(extra)
    return int(pytest.main(args))


def run_from_args(ns: argparse.Namespace) -> int:
    extra = shlex.split(ns.pytest_args) + (["-k", ns.keyword] if ns.keyword else []) + (["-x"] if ns.exitfirst else [])
    return run(ns.backend, ns.json, ns.compile_only, ns.max_examples, ns.sections, extra)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tinygrad-core conformance",
                                     description="Check a backend against the tinygrad-core conformance suite.")
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
