"""BEAM=1: every candidate opts computes the same result, and the fastest one is remembered on disk."""
from __future__ import annotations
import dataclasses
import json
import numpy as np
from tinygrad_core import Context, Device, Tensor
from tinygrad_core.codegen.cache import opts_from_json, opts_to_json
from tinygrad_core.codegen.opts import KernelOpts
from tinygrad_core.engine import search
from tinygrad_core.engine.realize import CompiledRunner
from helpers import assert_close


def _last_kernel(t: Tensor):
    while len(items := t.schedule()) > 1:       # realize the inputs of the last kernel first
        Tensor(items[0].node).realize()
    return items[0]


def test_every_candidate_computes_the_same_matmul_and_conv():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((32, 48)).astype(np.float32), rng.standard_normal((48, 64)).astype(np.float32)
    x, w = rng.standard_normal((2, 3, 8, 8)).astype(np.float32), rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    cases = [(Tensor(a) @ Tensor(b), a @ b),
             (Tensor(x).conv2d(Tensor(w), padding=1), Tensor(x).conv2d(Tensor(w), padding=1).numpy())]
    for t, expected in cases:
        item = _last_kernel(t)
        renderer = Device[Device.DEFAULT].renderer
        options = search.candidates(item.ast, renderer)
        assert len(options) > 1 or (renderer.max_upcast == renderer.max_unroll == 1 and not renderer.has_local)
        for opts in options:
            CompiledRunner(Device.DEFAULT, item.ast, opts)(item.bufs)
            assert_close(item.bufs[0].numpy().reshape(expected.shape), expected, what=str(opts))


def test_the_search_result_is_kept_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYGRAD_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32)
    cache = Device[Device.DEFAULT].kernel_cache
    cache.clear()
    with Context(BEAM=1):
        assert_close((Tensor(a) @ Tensor(b)).numpy(), a @ b)
    assert list((tmp_path / "opts").iterdir())
    chosen = [r.opts for r in cache.values()]
    cache.clear()

    def no_timing(*args):
        raise AssertionError("searched again instead of reading the kept choice")
    monkeypatch.setattr(search, "candidates", no_timing)
    with Context(BEAM=1):
        assert_close((Tensor(a) @ Tensor(b)).numpy(), a @ b)
    assert [r.opts for r in cache.values()] == chosen


def test_kept_opts_come_back_with_every_field(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYGRAD_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32)
    chosen = KernelOpts(upcast=((1, 4),), unroll=2, order=(1, 0, 2))   # (a 1024^3 matmul's order came back as ())
    monkeypatch.setattr(search, "candidates", lambda ast, renderer: [chosen])
    cache = Device[Device.DEFAULT].kernel_cache
    cache.clear()
    with Context(BEAM=1):
        assert_close((Tensor(a) @ Tensor(b)).numpy(), a @ b)
    cache.clear()
    monkeypatch.setattr(search, "candidates", lambda ast, renderer: [KernelOpts()])    # a search would pick these
    with Context(BEAM=1):
        assert_close((Tensor(a) @ Tensor(b)).numpy(), a @ b)
    assert [r.opts for r in cache.values()] == [chosen]


def test_opts_are_kept_by_field_name_and_an_entry_of_another_form_is_searched_again():
    every_field = KernelOpts(upcast=((0, 4), (2, 2)), local_size=32, unroll=4, tensor_core=True, local_tiles=True,
                             order=(2, 0, 1))
    assert all(getattr(every_field, f.name) != f.default for f in dataclasses.fields(KernelOpts))
    assert opts_from_json(json.loads(json.dumps(opts_to_json(every_field)))) == every_field
    assert opts_from_json([[[0, 4]], 1, 4, False, False]) is None         # the old positional form lost `order`
    assert opts_from_json({**dataclasses.asdict(every_field), "retired": 1}) is None
    assert opts_from_json({k: v for k, v in dataclasses.asdict(every_field).items() if k != "order"}) is None


def test_the_search_is_handed_its_runner_and_does_not_import_realize():
    """engine/realize calls the search (BEAM=1) with a builder; the search takes its keys and entries from cache.py,
    so the two modules don't import each other."""
    import ast
    import inspect
    imported = {node.module for node in ast.walk(ast.parse(inspect.getsource(search)))
                if isinstance(node, ast.ImportFrom)}
    assert "tinygrad_core.cache" in imported and not any(m.startswith("tinygrad_core.engine") for m in imported)
