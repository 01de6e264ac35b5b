"""The on-disk kernel cache: a hit skips the compiler; a corrupt or truncated entry is compiled again, never
returned and never a crash."""
from __future__ import annotations
import pytest
from tinygrad_core.device import Compiler
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
    import hashlib
    return cache_dir() / "kernels" / CountingCompiler.cachekey / hashlib.sha256(src.encode()).hexdigest()


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
    monkeypatch.setattr(realize, "linear_program", no_lowering)
    if Device[device].renderer.cache_programs:
        again = realize.CompiledRunner(device, ast)
        assert (again.src, again.opts, again.global_size, again.name) == (first.src, first.opts, first.global_size,
                                                                          first.name)
    with Context(NOOPT=1), pytest.raises(AssertionError, match="lowered again"):
        realize.CompiledRunner(device, ast)
    with pytest.raises(AssertionError, match="lowered again"):
        realize.CompiledRunner(device, ast, first.opts)
    assert Renderer.cache_programs is False      # third-party renderers opt in
