"""docs/PLUGINS.md, tested as a newcomer would use it: the guide's own `file=` code blocks become a throwaway
distribution, which the core discovers through its entry point and which passes the conformance suite."""
from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tomllib

import pytest
from plugin_dists import ROOT, conformance, make_distribution, run_python

from tinygrad_core.conformance import scaffold

pytestmark = pytest.mark.slow      # (a quick run deselects it: -m 'not slow')

GUIDE = ROOT / "docs" / "PLUGINS.md"
BLOCK = re.compile(r"^```\w+ file=(\S+)\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def guide_files() -> dict[str, str]:
    """Every block marked file=PATH, concatenated per path in the order the guide shows them."""
    files: dict[str, str] = {}
    for path, body in BLOCK.findall(GUIDE.read_text()):
        files[path] = files[path] + "\n\n" + body if path in files else body
    return files


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    files = guide_files()
    project = tomllib.loads(files.pop("pyproject.toml"))["project"]
    entry_points = project["entry-points"]["tinygrad_core.backends"]
    return make_distribution(tmp_path_factory.mktemp("toy"), project["name"], files, entry_points, project["version"])


def test_guide_has_a_complete_plugin():
    files = guide_files()
    assert {"pyproject.toml", "tinygrad_toy/__init__.py", "tinygrad_toy/backend.py"} <= set(files)
    compile(files["tinygrad_toy/backend.py"], "backend.py", "exec")


def test_guide_plugin_is_discovered(toy):
    done = run_python(["-m", "tinygrad_core.cli", "backends"], toy)
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("TOY "))
    assert "tinygrad-toy" in row and " ok " in f"{row} ", row


def test_guide_plugin_computes(toy):
    done = run_python("from tinygrad_core import Tensor; print((Tensor([1., 2.]) * 3).max().item())", toy,
                      env={"TINYGRAD_DEVICE": "TOY"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "6.0"


def test_guide_plugin_passes_the_first_sections(toy):
    done, report = conformance("TOY", toy, "--sections", "1,2,3,4,7")
    assert done.returncode == 0, done.stdout[-4000:]
    assert report["backend"] == "TOY" and report["distribution"] == "tinygrad-toy" and report["passed"]
    for section in ("1", "2", "3", "4", "7"):
        counts = report["sections"][section]
        assert counts["failed"] == 0 and counts["passed"] > 0, (section, counts)
    # what TOY doesn't declare is skipped, and says why
    skipped = [t for t in report["tests"] if t["outcome"] == "skipped"]
    assert skipped and all("declares" in t["message"] for t in skipped)
    assert set(report["capabilities"]["dtypes"]) == {"bool", "int", "float"}


# What the guide tells authors to declare, override or read: each must exist under the name it uses (where it is).
GUIDE_NAMES = [
    ("tinygrad_core.renderer", "Renderer", ("simd_width", "max_upcast", "max_unroll", "supports_float4", "device",
                                            "cache_programs", "supported_dtypes", "tensor_cores", "kernel_opts", "panel_columns",
                                            "far_rows_bytes", "split_sum_elements", "split_sum_parts", "im2col_bytes",
                                            "row_elements")),
    ("tinygrad_core.renderer.kernel_opts", None, ("KernelOpts", "load_strides")),
    ("tinygrad_core.plugins", "BackendSpec", ("describe", "install_hint", "probe", "priority", "is_gpu")),
    ("tinygrad_core.device", "Compiler", ("compile", "compile_many", "cachekey")),
    ("tinygrad_core.device", "LRUAllocator", ("_alloc", "_free", "offset")),
    ("tinygrad_core.device", "Allocator", ("shares_host_memory", "_borrow", "as_buffer")),
    ("tinygrad_core.renderer.cstyle", "CStyleRenderer", (
        "int_division", "negate", "kernel_prefix", "buffer_prefix", "thread_index", "type_names", "literal_suffix",
        "barrier", "local_prefix", "kernel_preamble")),
    ("tinygrad_core.codegen.symbolic", None, ("fits_int32", "wide_index")),
]


@pytest.mark.parametrize("module,owner,names", GUIDE_NAMES, ids=lambda v: v if isinstance(v, str) else None)
def test_guide_names_exist(module, owner, names):
    text = GUIDE.read_text()
    where = importlib.import_module(module)
    where = getattr(where, owner) if owner else where
    for name in names:
        assert hasattr(where, name), f"the guide names {owner or module}.{name}, which doesn't exist"
        assert f"`{name}" in text or f".{name}`" in text or f"{name}(" in text, f"the guide no longer explains {name}"
    assert owner is None or f"`{owner}`" in text or f"{owner}." in text


def test_guide_files_exist():
    """Every source file the guide points to (`tinygrad_core/codegen/opts.py`, `tinygrad_cuda/renderer.py` ...)."""
    mentioned = set(re.findall(r"`((?:[\w.]+/)+[\w.]+\.py)`", GUIDE.read_text()))
    assert len(mentioned) >= 5, mentioned
    roots = (ROOT, ROOT / "tinygrad_core", ROOT / "plugins" / "tinygrad_python")     # what its paths start from
    for path in mentioned:
        assert any((root / path).is_file() for root in roots), f"the guide points to {path}, which doesn't exist"


# ---- `tinygrad-core new-backend`: the guide's TOY backend, written out under another name ----
def test_new_backend_templates_are_the_guide_code():
    """What new-backend writes for "toy" is, file for file, what the guide shows: neither can drift from the other."""
    written = scaffold.files("toy")
    for path, source in guide_files().items():
        assert written[path] == source, f"{path}: the guide and tinygrad_core/conformance/scaffold.py differ"
    assert {"README.md", "tests/test_conformance.py"} <= set(written)


def new_backend(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tinygrad_core.cli", "new-backend", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, check=False)


def test_new_backend_installs_and_conforms_as_written(tmp_path):
    done = new_backend("Sketch", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    source = tmp_path / "tinygrad-sketch"
    assert "class SketchRenderer(Renderer):" in (source / "tinygrad_sketch" / "backend.py").read_text()
    # a real install of the written distribution (into a folder of its own, which a subprocess puts on its path)
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--target", str(site), str(source)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    listing = run_python(["-m", "tinygrad_core.cli", "backends"], site)
    row = next(line for line in listing.stdout.splitlines() if line.startswith("SKETCH "))
    assert "tinygrad-sketch" in row and " ok " in f"{row} ", row
    done, report = conformance("SKETCH", site)
    assert done.returncode == 0 and "CONFORMS" in done.stdout, done.stdout[-4000:]
    assert report["passed"] and report["distribution"] == "tinygrad-sketch"
    assert all(counts["failed"] == 0 for counts in report["sections"].values()), report["sections"]
    # and its own test, which runs the same suite
    done = run_python(["-m", "pytest", "-q", "-p", "no:cacheprovider", str(source / "tests")], site)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-4000:]


def test_new_backend_refuses_what_it_cannot_write(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    for args, message in ((("Sketch", "taken"), "not an empty folder"), (("my-chip",), "letters and digits"),
                          (("gpu",), "GPU is reserved"), (("cpu",), "CPU is already the name of a backend")):
        done = new_backend(*args, cwd=tmp_path)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["notes.txt", "taken"]      # nothing was written
