"""The on-disk caches (compiled kernels, rendered programs, BEAM's opts): a hit skips the work; a bad entry (damaged,
of another format, another kernel's) is built again with a DEBUG note, never returned and never a crash. Keys cover
the backend's code and release. A dtype the renderer lacks is refused before any kernel is built."""
from __future__ import annotations
import hashlib
import pathlib
import numpy as np
import pytest
from tinygrad_core.device import Compiler, package_digest
from tinygrad_core.helpers import cache_dir


class CountingCompiler(Compiler):
    cachekey = "test-counting-compiler"

    def __init__(self):
        self.calls = 0

    def compile(self, src: str) -> bytes:
        self.calls += 1
        return ("binary of " + src).encode()


@pytest.fixture
def compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYGRAD_CACHE_DIR", str(tmp_path))
    return CountingCompiler()


def entry(src: str):
    key = f"{package_digest(CountingCompiler.__module__)}|{src}"
    return cache_dir() / "kernels" / CountingCompiler.cachekey / hashlib.sha256(key.encode()).hexdigest()


def test_a_cached_kernel_is_not_compiled_again(compiler):
    assert compiler.compile_cached("kernel a") == b"binary of kernel a"
    assert compiler.compile_cached("kernel a") == b"binary of kernel a"
    assert compiler.calls == 1


@pytest.mark.parametrize("damage", [lambda b: b[:-3], lambda b: b[:10], lambda b: b[:32] + b"garbage",
                                    lambda b: b""])
def test_a_damaged_entry_is_compiled_again(compiler, damage):
    compiler.compile_cached("kernel b")
    path = entry("kernel b")
    path.write_bytes(damage(path.read_bytes()))
    assert compiler.compile_cached("kernel b") == b"binary of kernel b"
    assert compiler.calls == 2
    assert compiler.compile_cached("kernel b") == b"binary of kernel b"   # and the entry was repaired
    assert compiler.calls == 2


def test_an_unwritable_cache_only_costs_a_compile(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TINYGRAD_CACHE_DIR", str(blocker))
    compiler = CountingCompiler()
    assert compiler.compile_cached("kernel c") == b"binary of kernel c"
    assert compiler.compile_cached("kernel c") == b"binary of kernel c"
    assert compiler.calls == 2


class BatchCountingCompiler(CountingCompiler):
    def __init__(self):
        super().__init__()
        self.batches: list[list[str]] = []

    def compile_many(self, sources: list[str]) -> list[bytes]:
        self.batches.append(list(sources))
        return super().compile_many(sources)


def test_a_batch_compiles_only_its_uncached_kernels_and_all_of_them_together(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYGRAD_CACHE_DIR", str(tmp_path))
    compiler = BatchCountingCompiler()
    compiler.compile_cached("kernel d")
    got = compiler.compile_cached_many(["kernel e", "kernel d", "kernel f"])
    assert got == [b"binary of kernel e", b"binary of kernel d", b"binary of kernel f"]
    assert compiler.batches == [["kernel d"], ["kernel e", "kernel f"]]
    assert compiler.compile_cached_many(["kernel f", "kernel e"]) == [b"binary of kernel f", b"binary of kernel e"]
    assert compiler.calls == 3


def test_rendered_programs_are_remembered_only_where_the_renderer_allows(tmp_path, monkeypatch):
    """A renderer with cache_programs gets its programs back from the disk without lowering them again (same source,
    same opts); one without it, NOOPT=1, or explicit opts always build the program."""
    import numpy as np
    from tinygrad_core import Context, Device, Tensor
    from tinygrad_core.engine import realize
    from tinygrad_core.renderer import Renderer
    monkeypatch.setenv("TINYGRAD_CACHE_DIR", str(tmp_path))
    device = Device.DEFAULT
    ast = (Tensor(np.ones((8, 16), np.float32)) @ Tensor(np.ones((16, 4), np.float32))).schedule()[-1].ast
    first = realize.CompiledRunner(device, ast)

    def no_lowering(*args):
        raise AssertionError("lowered again")
    monkeypatch.setattr(realize, "program_for", no_lowering)
    if Device[device].renderer.cache_programs:
        again = realize.CompiledRunner(device, ast)
        assert (again.src, again.opts, again.global_size, again.name) == (first.src, first.opts, first.global_size,
                                                                          first.name)
    with Context(NOOPT=1), pytest.raises(AssertionError, match="lowered again"):
        realize.CompiledRunner(device, ast)
    with pytest.raises(AssertionError, match="lowered again"):
        realize.CompiledRunner(device, ast, first.opts)
    assert Renderer.cache_programs is False      # third-party renderers opt in


# ---------------------------------------------------------------------------------------------------------------
# The fault catalog: whatever the files under the cache hold, a run gives the right numbers (a bad entry is noted at
# DEBUG=1 and built again); never a crash, never another kernel's program.
# ---------------------------------------------------------------------------------------------------------------
def devices_with_caches():
    return [pytest.param(name, marks=pytest.mark.skipif(not available(name), reason=f"{name} isn't available"))
            for name in ("CPU", "CL", "CUDA")]


def available(name: str) -> bool:
    from tinygrad_core import Device
    try:
        Device[name]
    except Exception:
        return False
    return True


X = np.arange(24, dtype=np.float32).reshape(4, 6) / 7 - 1
Y = np.linspace(-3, 5, 24, dtype=np.float32).reshape(4, 6)


def kernels(device: str) -> list[np.ndarray]:
    """A fresh process's view of these kernels (nothing in memory): add and mul take the same arguments, so a program
    of one run for the other would go unnoticed by its argument count."""
    from tinygrad_core import Device, Tensor
    Device[device].kernel_cache.clear()
    x, y = Tensor(X, device=device), Tensor(Y, device=device)
    return [(x + y).numpy(), (x * y).numpy(), (x - y).max(axis=1).numpy(), (x * 2 + y).sum(axis=0).numpy(),
            (x < y).numpy(), x.sum().numpy()]


def expected() -> list[np.ndarray]:
    return [X + Y, X * Y, (X - Y).max(axis=1), (X * 2 + Y).sum(axis=0), X < Y, X.sum()]


def check(results: list[np.ndarray]):
    for got, want in zip(results, expected(), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def entries(root: pathlib.Path) -> dict[str, list[pathlib.Path]]:
    """The entry files of each cache folder (kernels/<compiler>, programs), each folder's sorted."""
    folders: dict[str, list[pathlib.Path]] = {}
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        folders.setdefault(str(f.parent.relative_to(root)), []).append(f)
    return folders


def rotated(files: list[pathlib.Path]):
    """Each file gets the next one's content: every entry is now another kernel's (with its valid checksum)."""
    contents = [f.read_bytes() for f in files]
    for f, content in zip(files, contents[1:] + contents[:1]):
        f.write_bytes(content)


def checksummed(rest: bytes) -> bytes:
    return hashlib.sha256(rest).digest() + rest


def old_head(f: pathlib.Path, data: bytes) -> bytes:
    """The entry as an older format would have written it: the same body under the format's previous number."""
    rest = data[32:].replace(b"tinygrad_core cache 2 ", b"tinygrad_core cache 1 ", 1)
    assert rest != data[32:]
    return checksummed(rest)


FAULTS = {
    "truncated": lambda f, data: data[:len(data) // 2],
    "truncated into the checksum": lambda f, data: data[:20],
    "empty": lambda f, data: b"",
    "garbage with a valid checksum": lambda f, data: checksummed(bytes(range(256)) * 3),
    "wrong format": lambda f, data: checksummed(b'{"name": "E_4_6", "src": "", "flops": 0}'),
    "an old format's entry": lambda f, data: checksummed(data[data.index(b"\n", 32) + 1:]),
    "stale format version": old_head,
}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYGRAD_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("device", devices_with_caches())
@pytest.mark.parametrize("fault", [*FAULTS, "swapped between kernels"])
def test_every_bad_entry_is_noted_and_built_again(cache, device, fault, capsys):
    from tinygrad_core import Context
    check(kernels(device))
    folders = entries(cache)
    assert any(name.startswith("kernels") for name in folders), "the device's binaries weren't cached"
    for files in folders.values():
        if fault == "swapped between kernels":
            assert len(files) >= 2
            rotated(files)
        else:
            for f in files:
                f.write_bytes(FAULTS[fault](f, f.read_bytes()))
    capsys.readouterr()
    with Context(DEBUG=1):
        check(kernels(device))
        noted = capsys.readouterr().out
        assert noted.count("cache: discarding") == sum(map(len, folders.values())), noted
        check(kernels(device))                       # and the entries were written anew
        assert "cache: discarding" not in capsys.readouterr().out


@pytest.mark.parametrize("body", ["not JSON", "JSON of another shape", "a program with another signature"])
def test_a_program_entry_with_a_valid_head_but_the_wrong_body_is_built_again(cache, capsys, body):
    """An entry with a valid checksum and head (as if written for this key) whose body isn't this kernel's program
    is refused by what it holds, not run: what a buggy writer could leave."""
    import json
    from tinygrad_core import Context
    from tinygrad_core.cache import _entry_head
    check(kernels("CPU"))
    programs = entries(cache)["programs"]
    saved = [json.loads(f.read_bytes()[32 + len(_entry_head(f)):]) for f in programs]
    for f, program in zip(programs, saved):
        other = next(s for s in saved if s["signature"] != program["signature"])
        forged = {"not JSON": b"\xff\xfe{", "JSON of another shape": b'[["opts"], 1]',
                  "a program with another signature": json.dumps(other).encode()}[body]
        f.write_bytes(checksummed(_entry_head(f) + forged))
    with Context(DEBUG=1):
        check(kernels("CPU"))
    assert capsys.readouterr().out.count("cache: discarding") == len(programs)


def test_a_read_only_cache_with_bad_entries_costs_only_a_rebuild_every_time(cache, monkeypatch, capsys):
    import os
    import tempfile
    from tinygrad_core import Context
    check(kernels("CPU"))
    for files in entries(cache).values():
        rotated(files)
    folders = [cache, *(p for p in cache.rglob("*") if p.is_dir())]
    for folder in folders:
        folder.chmod(0o555)
    if os.geteuid() == 0:       # (root writes anyway: give it what a read-only folder gives everyone else)
        def read_only(*args, **kwargs):
            raise PermissionError(13, "Read-only file system")
        monkeypatch.setattr(tempfile, "NamedTemporaryFile", read_only)
    try:
        with Context(DEBUG=1):
            for _ in range(2):
                check(kernels("CPU"))
                assert "cache: discarding" in capsys.readouterr().out     # (nothing could be repaired)
    finally:
        for folder in folders:
            folder.chmod(0o755)


WRITER = """
import sys
import numpy as np
sys.path.insert(0, {tests!r})
from test_compile_cache import kernels, check
for _ in range(3):
    check(kernels("CPU"))
print("ok")
"""


def test_concurrent_writers_of_the_same_entries_both_get_right_results(cache, capsys):
    import os
    import subprocess
    import sys
    from tinygrad_core import Context
    script = WRITER.format(tests=str(pathlib.Path(__file__).parent))
    env = {**os.environ, "TINYGRAD_CACHE_DIR": str(cache)}
    writers = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for writer in writers:
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0 and out.strip() == "ok", err
    with Context(DEBUG=1):
        check(kernels("CPU"))
    assert "cache: discarding" not in capsys.readouterr().out      # every entry left is whole


MLP_STEPS = """
import sys
sys.path.insert(0, {examples!r})
import numpy as np
from tinygrad_core import Device, Tensor
from tinygrad_core.nn.optim import Adam
from tinygrad_core.nn.state import get_parameters
from mnist_mlp import TinyMLP
from training import make_train_step
compiler, compiled = Device["CPU"].compiler, []
compile_many = compiler.compile_many
compiler.compile_many = lambda sources: compiled.extend(sources) or compile_many(sources)
Tensor.manual_seed(0)
net = TinyMLP()
step = make_train_step(net, Adam(get_parameters(net), lr=1e-3), jit=True)
rng = np.random.default_rng(0)
losses = [step(Tensor(rng.standard_normal((128, 1, 28, 28), dtype=np.float32)),
               Tensor(rng.integers(0, 10, 128, dtype=np.int32)))[0].item() for _ in range(4)]
print(len(compiled), *losses)
"""


def test_a_second_process_compiles_nothing_for_the_mlp_training_step(cache):
    import os
    import subprocess
    import sys
    examples = str(pathlib.Path(__file__).parent.parent / "examples")
    runs = [subprocess.run([sys.executable, "-c", MLP_STEPS.format(examples=examples)], capture_output=True, text=True,
                           env={**os.environ, "TINYGRAD_CACHE_DIR": str(cache)}, timeout=300, check=False)
            for _ in range(2)]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr[-2000:] + runs[1].stderr[-2000:]
    (first, *losses), (second, *again) = (run.stdout.split() for run in runs)
    assert int(first) >= 10 and int(second) == 0        # every kernel of the step came from the disk
    assert again == losses                              # and computes the same


# ---------------------------------------------------------------------------------------------------------------
# Keys: a program or binary made by other code or another release of the backend is never found again.
# ---------------------------------------------------------------------------------------------------------------
@pytest.fixture
def fresh_digests():
    package_digest.cache_clear()
    yield
    package_digest.cache_clear()


def test_the_digest_covers_every_module_of_the_package_and_the_version(tmp_path, monkeypatch, fresh_digests):
    import importlib.metadata
    import types
    (tmp_path / "tg_toy_backend").mkdir()
    (tmp_path / "tg_toy_backend" / "__init__.py").write_text("")
    (tmp_path / "tg_toy_backend" / "renderer.py").write_text("class ToyRenderer:\n    max_upcast = 4\n")
    (tmp_path / "tg_toy_backend" / "mathlib.py").write_text("SIN = 'sin v1'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = package_digest("tg_toy_backend.renderer")
    assert package_digest.cache_info().currsize and package_digest("tg_toy_backend.renderer") == first
    (tmp_path / "tg_toy_backend" / "mathlib.py").write_text("SIN = 'sin v2'\n")        # a helper module edited
    package_digest.cache_clear()
    helper_edited = package_digest("tg_toy_backend.renderer")
    assert helper_edited != first
    released = types.SimpleNamespace(version="2.0")
    monkeypatch.setattr(importlib.metadata, "distributions", lambda name: iter([released]))
    package_digest.cache_clear()
    assert package_digest("tg_toy_backend.renderer") != helper_edited


def test_beams_choice_is_kept_under_the_programs_key_and_disk_cache_0_turns_off_every_kind(cache):
    """One key scheme and one switch for all three disk caches: BEAM's opts entry is named by the kernel's program
    key, and DISK_CACHE=0 reads and writes no entry at all (BEAM's opts were once still written)."""
    from tinygrad_core import Context, Device, Tensor
    from tinygrad_core.engine import realize
    ast = (Tensor(X) + Tensor(Y)).schedule()[-1].ast
    with Context(BEAM=1, DISK_CACHE=0):
        check(kernels("CPU"))
    assert not entries(cache)
    with Context(BEAM=1):
        check(kernels("CPU"))
    kept = entries(cache)
    assert kept[f"kernels/{Device['CPU'].compiler.cachekey}"]
    assert realize._program_path("CPU", Device["CPU"].renderer, ast).name in \
        {f.name for f in kept[f"opts/{Device['CPU'].compiler.cachekey}"]}


def test_programs_and_binaries_are_keyed_by_the_backends_release(cache, monkeypatch, fresh_digests):
    import importlib.metadata
    import types
    from tinygrad_core import Device, Tensor
    from tinygrad_core.engine import realize
    ast = (Tensor(X) + Tensor(Y)).schedule()[-1].ast
    renderer, compiler = Device["CPU"].renderer, Device["CPU"].compiler
    program = realize._program_path("CPU", renderer, ast)
    runner = realize.CompiledRunner("CPU", ast)
    binaries = set(entries(cache)[f"kernels/{compiler.cachekey}"])
    real = importlib.metadata.distributions

    def upgraded(name):
        found = list(real(name=name))
        return iter([types.SimpleNamespace(version="99.0")] if name == "tinygrad_cpu" else found)
    monkeypatch.setattr(importlib.metadata, "distributions", upgraded)
    package_digest.cache_clear()
    assert realize._program_path("CPU", renderer, ast) != program
    compiler.compile_cached(runner.src)
    assert set(entries(cache)[f"kernels/{compiler.cachekey}"]) > binaries


# ---------------------------------------------------------------------------------------------------------------
# A dtype missing from the renderer's supported_dtypes is refused before any kernel is built (or read from the disk).
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_a_dtype_the_renderer_lacks_is_refused_before_any_kernel_is_built(device, monkeypatch):
    import copy
    from tinygrad_core import Device, Tensor, dtypes
    from tinygrad_core.engine import realize
    if not available(device):
        pytest.skip(f"{device} isn't available")
    base = type(Device[device].renderer)

    class WithoutHalf(base):
        supported_dtypes = base.supported_dtypes - {dtypes.float16}
    renderer = copy.copy(Device[device].renderer)
    renderer.__class__ = WithoutHalf
    monkeypatch.setattr(Device[device], "renderer", renderer)
    monkeypatch.setattr(Device[device], "kernel_cache", {})
    np.testing.assert_allclose((Tensor(X, device=device) * 3).numpy(), X * 3)     # what it declares still runs

    def lowered(*args):
        raise AssertionError("the kernel was lowered")
    monkeypatch.setattr(realize, "program_for", lowered)
    with pytest.raises(NotImplementedError, match=rf"^{device} can't run a kernel using dtypes.half: .*supported: "):
        (Tensor(X.astype(np.float16), device=device) * 3).realize()


def test_the_refusal_names_the_renderer_when_it_names_no_device():
    from tinygrad_core import dtypes
    from tinygrad_core.ops import Ops, UOp
    from tinygrad_core.renderer import Renderer

    class Int32Only(Renderer):
        supported_dtypes = frozenset({dtypes.int32})
    Int32Only().check_dtypes([UOp(Ops.DEFINE_GLOBAL, dtypes.int32, (), 0), UOp(Ops.SINK, dtypes.void, ())])
    with pytest.raises(NotImplementedError, match=r"Int32Only can't run a kernel using dtypes.float: .*supported: int\)"):
        Int32Only().check_dtypes([UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), 0)])


@pytest.mark.parametrize("device", devices_with_caches())
@pytest.mark.parametrize("body", [b"", bytes(range(256)) * 3, b'{"symbol": "x", "buffers": 1, "vars": 0}\nnot an object'])
def test_a_binary_entry_with_a_valid_head_that_wont_load_is_compiled_again(cache, device, body):
    """A kernels/ entry whose checksum and head are right for its key, its body no binary of the kernel (what a
    buggy compiler, or a disk, could leave): the program is compiled again and the entry replaced, not a crash."""
    from tinygrad_core.cache import _entry_head
    check(kernels(device))
    binaries = [f for name, files in entries(cache).items() if name.startswith("kernels") for f in files]
    assert binaries
    for f in binaries:
        f.write_bytes(checksummed(_entry_head(f) + body))
    check(kernels(device))
    assert all(f.read_bytes()[32 + len(_entry_head(f)):] != body for f in binaries)     # (written anew)
    check(kernels(device))
