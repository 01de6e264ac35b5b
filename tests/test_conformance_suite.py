"""Tests of the conformance suite itself: it catches a deliberately wrong backend in the right section, its
compile-only mode runs, and it works both through `tinygrad-core conformance` and through plain pytest."""
from __future__ import annotations

import json

import pytest
from plugin_dists import conformance, make_distribution, run_python

MUTANTS = '''
"""Backends that are the reference backend with two ops swapped in the renderer, for floats only (so the index
arithmetic, which is int32, stays right and the kernels still address memory correctly)."""
import json
from tinygrad_core.plugins import BackendSpec, hookimpl

SWAPS = {"MUTANTADD": {"ADD": "MUL", "MUL": "ADD"}, "MUTANTCMP": {"CMPLT": "CMPNE", "CMPNE": "CMPLT"}}
FLOATS = {"half", "bfloat16", "float", "double"}


def make(swap):
    def load(device):
        from tinygrad_python.backend import PythonBackend, PythonRenderer

        class SwappingRenderer(PythonRenderer):
            def render(self, name, uops):
                program = json.loads(super().render(name, uops))
                for row in program["uops"]:
                    operand_dtype = program["uops"][row[2][0]][1] if row[2] else None
                    if row[0] in swap and operand_dtype in FLOATS:
                        row[0] = swap[row[0]]
                return json.dumps(program)
        backend = PythonBackend(device)
        backend.renderer = SwappingRenderer()
        return backend
    return load


@hookimpl
def tinygrad_core_register_backends(register):
    for name, swap in SWAPS.items():
        register(BackendSpec(name=name, load=make(swap)))
'''


@pytest.fixture(scope="module")
def mutants(tmp_path_factory):
    return make_distribution(tmp_path_factory.mktemp("mutants"), "tinygrad-mutants", {"mutants.py": MUTANTS},
                             {"mutants": "mutants"})


def failed_in(report: dict, section: int) -> list[str]:
    return [t["id"].split("::")[-1] for t in report["tests"] if t["section"] == section and t["outcome"] == "failed"]


@pytest.mark.parametrize("backend, swapped", [("MUTANTADD", ("ADD", "MUL")), ("MUTANTCMP", ("CMPLT", "CMPNE"))])
def test_swapped_ops_fail_in_the_op_section(mutants, backend, swapped):
    done, report = conformance(backend, mutants, "--sections", "1,2,3,4", "--max-examples", "3",
                               "-k", "not test_cast and not test_bitcast")
    assert done.returncode != 0 and not report["passed"]
    assert not failed_in(report, 1) and not failed_in(report, 2), "discovery and memory are not what's wrong"
    failures = failed_in(report, 4)
    float_ids = {f"test_alu[{op}-{dt}]" for op in swapped for dt in ("half", "bfloat16", "float", "double")}
    assert set(failures) == float_ids, f"expected exactly {sorted(float_ids)} to fail, got {sorted(failures)}"
    failed = next(t for t in report["tests"] if t["id"].endswith(f"test_alu[{swapped[0]}-float]"))
    assert f"{swapped[0]} on float" in failed["message"] and "expected" in failed["message"]


def test_compile_only_mode(tmp_path):
    done, report = conformance("PYTHON", tmp_path, "--compile-only")
    assert done.returncode == 0, done.stdout[-3000:]
    assert report["mode"] == "compile-only" and report["passed"]
    assert report["kernels_compiled"] > 400, "compile-only mode compiles every kernel the suite would launch"
    for section in ("3", "4", "5", "6", "8"):
        assert report["sections"][section]["passed"] > 0, section
    skipped = [t["message"] for t in report["tests"] if t["outcome"] == "skipped"]
    assert skipped and all("compile-only" in m or "declares" in m for m in skipped)


def test_runs_as_a_plain_pytest_plugin(tmp_path):
    report = tmp_path / "report.json"
    done = run_python(["-m", "pytest", "-p", "no:cacheprovider", "--pyargs", "tinygrad_core.conformance",
                       "--backend", "python", "--sections", "1,2", "--conformance-json", str(report)], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1. discovery and metadata" in done.stdout and "CONFORMS" in done.stdout
    assert json.loads(report.read_text())["sections"]["2"]["passed"] > 0


def test_unusable_backend_is_refused_with_its_reason(tmp_path):
    done = run_python(["-m", "tinygrad_core.cli", "conformance", "NO_SUCH_BACKEND"], tmp_path)
    assert done.returncode != 0
    assert "unknown device 'NO_SUCH_BACKEND'" in done.stdout + done.stderr
