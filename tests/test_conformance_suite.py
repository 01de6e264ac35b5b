"""Tests of the conformance suite itself: it catches a deliberately wrong backend in the right section, a backend
that crashes or hangs is that test's failure and the report is still written, an impostor or a missing reference
backend can't pass, its compile-only mode runs, and it works through `tinygrad-core conformance` and plain pytest."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from plugin_dists import conformance, make_distribution, run_python

from tinygrad_core.conformance import runner
from tinygrad_core.plugins import registry

pytestmark = pytest.mark.slow      # (a quick run deselects it: -m 'not slow')

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


# Backends with the faults a native backend can have: a program that segfaults on kernels of more than ten buffers
# and never returns from kernels with int arguments (both in section 3, with tests after them); a renderer that
# raises on EXP2; a load() that returns None (an impostor) or segfaults; and a backend that declares only the
# required dtypes and refuses any other in a kernel, as a native backend would (and is otherwise right).
FAULTY = '''
import os, signal, time
from tinygrad_core.dtype import dtypes
from tinygrad_core.plugins import BackendSpec, hookimpl


def load_crashing(device):
    from tinygrad_python.backend import PythonBackend, PythonProgram

    class CrashingProgram(PythonProgram):
        def __call__(self, *bufs, vals=(), **kwargs):
            if len(bufs) > 10:
                os.kill(os.getpid(), signal.SIGSEGV)
            if vals:
                time.sleep(3600)
            return super().__call__(*bufs, vals=vals, **kwargs)
    backend = PythonBackend(device)
    backend.runtime = CrashingProgram
    return backend


def load_all_crashing(device):
    from tinygrad_python.backend import PythonBackend, PythonProgram

    class AlwaysCrashing(PythonProgram):
        def __call__(self, *bufs, **kwargs):
            os.kill(os.getpid(), signal.SIGSEGV)
    backend = PythonBackend(device)
    backend.runtime = AlwaysCrashing
    return backend


def load_required_dtypes(device):
    from tinygrad_python.backend import PythonBackend, PythonRenderer

    class RequiredDtypesRenderer(PythonRenderer):
        supported_dtypes = frozenset({dtypes.bool, dtypes.int32, dtypes.float32})

        def render(self, name, uops):      # like a native backend, it has no code for any other dtype
            if other := {u.dtype.name for u in uops if u.dtype not in self.supported_dtypes | {dtypes.void}}:
                raise NotImplementedError(f"RequiredDtypesRenderer can't render {sorted(other)} in {name}")
            return super().render(name, uops)
    backend = PythonBackend(device)
    backend.renderer = RequiredDtypesRenderer()
    return backend


def load_without_exp2(device):
    from tinygrad_python.backend import PythonBackend, PythonRenderer

    class NoExp2Renderer(PythonRenderer):
        def render(self, name, uops):
            if any(u.op.name == "EXP2" for u in uops):
                raise NotImplementedError(f"NoExp2Renderer can't render EXP2 in {name}")
            return super().render(name, uops)
    backend = PythonBackend(device)
    backend.renderer = NoExp2Renderer()
    return backend


@hookimpl
def tinygrad_core_register_backends(register):
    register(BackendSpec(name="CRASHING", load=load_crashing))
    register(BackendSpec(name="ALLCRASH", load=load_all_crashing))
    register(BackendSpec(name="NOEXP", load=load_without_exp2))
    register(BackendSpec(name="IMPOSTOR", load=lambda device: None))
    register(BackendSpec(name="CRASHLOAD", load=lambda device: os.kill(os.getpid(), signal.SIGSEGV)))
    register(BackendSpec(name="THREEDTYPES", load=load_required_dtypes))
'''


@pytest.fixture(scope="module")
def mutants(tmp_path_factory):
    where = make_distribution(tmp_path_factory.mktemp("mutants"), "tinygrad-mutants", {"mutants.py": MUTANTS},
                              {"mutants": "mutants"})
    return make_distribution(where, "tinygrad-faulty", {"faulty.py": FAULTY}, {"faulty": "faulty"})


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
    done = run_python(["-m", "pytest", "-p", "no:cacheprovider", "-p", "tinygrad_core.conformance.plugin", "--pyargs",
                       "tinygrad_core.conformance",
                       "--tinygrad-backend", "python", "--tinygrad-sections", "1,2", "--tinygrad-json", str(report)],
                      tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1. discovery and metadata" in done.stdout and "CONFORMS" in done.stdout
    assert json.loads(report.read_text())["sections"]["2"]["passed"] > 0


def test_unusable_backend_is_refused_with_its_reason(tmp_path):
    done = run_python(["-m", "tinygrad_core.cli", "conformance", "NO_SUCH_BACKEND"], tmp_path)
    assert done.returncode != 0
    assert "unknown device 'NO_SUCH_BACKEND'" in done.stdout + done.stderr


def outcome(report: dict, test: str) -> dict:
    return next(t for t in report["tests"] if t["id"].endswith("::" + test))


def test_a_crash_or_a_hang_is_that_tests_failure_and_the_run_goes_on(mutants, tmp_path):
    markdown = tmp_path / "table.md"
    done, report = conformance("CRASHING", mutants, "--sections", "3", "--timeout", "2", "--markdown", str(markdown))
    assert done.returncode == 1 and report["verdict"] == "FAILS"
    crashed, hung = outcome(report, "test_many_buffer_arguments"), outcome(report, "test_symbolic_int_arguments")
    assert crashed["outcome"] == "failed" and "signal 11 (SIGSEGV)" in crashed["message"]
    assert hung["outcome"] == "failed" and "timed out" in hung["message"] and "2 s" in hung["message"]
    # the tests after each, and before, ran in a fresh process and pass
    assert outcome(report, "test_wait_returns_seconds")["outcome"] == "passed"
    assert outcome(report, "test_trivial_kernel")["outcome"] == "passed"
    assert [t["id"] for t in report["tests"] if t["outcome"] == "failed"] == [crashed["id"], hung["id"]]
    assert "3. compile and launch" in done.stdout and "FAILS" in done.stdout
    assert "| 3. compile and launch |" in markdown.read_text() and "FAILS" in markdown.read_text()


def test_a_backend_whose_every_kernel_crashes_fails_within_minutes(mutants):
    # each crash costs a new test process: a section is stopped after its first SECTION_CRASHES crashes (a mutant
    # whose kernels all crashed took 163 restarts and more than 15 minutes)
    start = time.monotonic()
    done, report = conformance("ALLCRASH", mutants, "--sections", "3,4,6", "--max-examples", "3")
    assert report["verdict"] == "FAILS" and done.returncode == 1
    for section in (3, 4, 6):
        tests = [t for t in report["tests"] if t["section"] == section]
        crashed = [t for t in tests if t["outcome"] == "failed"]
        assert len(crashed) == runner.SECTION_CRASHES and all("signal 11" in t["message"] for t in crashed)
        stopped = [t for t in tests if t["outcome"] == "not run"]
        assert stopped and all(f"section {section} stopped after 3 crashes" in t["message"] for t in stopped)
    assert time.monotonic() - start < 180


def test_an_impostor_is_reported_not_a_crash(mutants, tmp_path):
    done, report = conformance("IMPOSTOR", mutants)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "1. discovery and metadata" in done.stdout and "FAILS" in done.stdout
    assert report["verdict"] == "FAILS" and not report["passed"] and report["capabilities"] == {}
    failed = outcome(report, "test_load_returns_a_complete_compiled")
    assert failed["outcome"] == "failed" and "None" in failed["message"] and "not a Compiled" in failed["message"]
    assert any("load() failed" in p for p in report["problems"])
    assert {t["section"] for t in report["tests"]} == {1}, "the sections after 1 would all fail the same way"


def test_a_load_that_crashes_is_a_failure_with_a_report(mutants, tmp_path):
    done, report = conformance("CRASHLOAD", mutants)
    assert done.returncode == 1 and report["verdict"] == "FAILS"
    assert any("signal 11 (SIGSEGV)" in p and "load()" in p for p in report["problems"]), report["problems"]
    assert "FAILS" in done.stdout


def test_missing_reference_is_incomplete_not_a_pass(tmp_path):
    registry.discover()
    if registry.backends.get("CPU") is None or registry.backends["CPU"].reason is not None:
        pytest.skip("the CPU backend is not usable here")
    # a package shadowing the installed tinygrad_python: the reference backend is listed broken
    make_distribution(tmp_path, "shadow", {"tinygrad_python/__init__.py": "raise ImportError('not installed')\n"}, {})
    done, report = conformance("CPU", tmp_path, "--sections", "5,8,9",
                               "-k", "on_tensor_cores or trains or copies_between_devices")
    assert done.returncode == 3 and report["verdict"] == "INCOMPLETE" and not report["passed"]
    assert report["sections"]["8"]["not run"] == 1 and report["sections"]["9"]["not run"] >= 3
    skipped = [t for t in report["tests"] if t["outcome"] == "skipped"]
    assert skipped and all("declares" in t["message"] for t in skipped), "capability skips stay skips"
    assert report["sections"]["5"]["verdict"] == "CONFORMS" and report["sections"]["8"]["verdict"] == "INCOMPLETE"
    assert "pip install ./plugins/tinygrad_python" in done.stdout and "INCOMPLETE" in done.stdout


def test_required_dtypes_alone_conform(mutants, tmp_path):
    """docs/PLUGINS.md section 4: bool, int32 and float32 are all a backend must declare."""
    # section 6 has the strided slice whose gradient once needed int64 indices (bounds of a negative division)
    done, report = conformance("THREEDTYPES", mutants, "--sections", "3,6")
    assert done.returncode == 0, done.stdout[-4000:]
    assert report["capabilities"]["dtypes"] == ["bool", "int", "float"]
    assert outcome(report, "test_buffer_arguments_arrive_in_order[required-dtypes]")["outcome"] == "passed"
    assert "declares no support" in outcome(report, "test_buffer_arguments_arrive_in_order[half-and-uint8]")["message"]


def test_json_lists_every_declared_capability(tmp_path):
    _, report = conformance("PYTHON", tmp_path, "--sections", "1")
    capabilities = report["capabilities"]
    for name in ("simd_width", "max_upcast", "tensor_cores", "cache_programs", "dtypes", "ops", "has_local"):
        assert name in capabilities, name
    assert capabilities["compiler"]["class"] == "PythonCompiler" and capabilities["allocator"]["views"] is True


def test_the_plugin_loads_only_where_asked_for_and_its_options_are_scoped(tmp_path):
    """A plain pytest run in the environment doesn't load the suite's plugin (nor the framework); with -p, its options
    don't take common names."""
    plain = subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True, cwd=tmp_path,
                           check=False)
    assert plain.returncode == 0 and "tinygrad" not in plain.stdout, plain.stdout[-2000:]
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tinygrad_core.conformance.plugin", "--help"],
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    ours = done.stdout[done.stdout.index("tinygrad-core conformance"):].split("\n\n")[0]
    options = [word for word in ours.split() if word.startswith("--")]
    assert options and all(o.startswith("--tinygrad-") for o in options), options


def test_a_failure_stays_in_its_test(mutants, tmp_path):
    """A test that fails while its tensors are still lazy leaves them alive in pytest's traceback: the JIT tests after
    it (a capture realizes every live lazy tensor) must not fail with the same error."""
    _, report = conformance("NOEXP", mutants, "--sections", "6,7", "-k", "exp or replay")
    assert outcome(report, "test_forward_and_backward[exp]")["outcome"] == "failed"
    jit = [t for t in report["tests"] if t["section"] == 7]
    assert jit and all(t["outcome"] == "passed" for t in jit), [t["message"] for t in jit]
