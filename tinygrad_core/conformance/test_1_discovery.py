"""Section 1, discovery and metadata: the backend arrives through its entry point, its BackendSpec is well formed,
probe() is fast and explains itself, its API version fits this core, and load() returns a complete Compiled."""
from __future__ import annotations

import importlib.metadata
import time

from tinygrad_core.device import Allocator, Compiled, Compiler, Device, Program
from tinygrad_core.dtype import ALL, DType, dtypes
from tinygrad_core.ops import GroupOp, Ops
from tinygrad_core.plugins import BACKEND_API, ENTRY_POINT_GROUP, BackendSpec, api_compatible, registry
from tinygrad_core.renderer import Renderer


def test_found_through_an_entry_point(dut):
    dist = importlib.metadata.distribution(dut.backend.distribution)
    groups = [ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
    assert groups, (f"distribution {dist.name} has no entry point in group {ENTRY_POINT_GROUP!r}; declare one in "
                    f"pyproject.toml under [project.entry-points.\"{ENTRY_POINT_GROUP}\"]")
    assert dist.version == dut.backend.version


def test_spec_is_well_formed(dut):
    spec = dut.backend.spec
    assert isinstance(spec, BackendSpec)
    assert spec.name == spec.name.upper() and spec.name.isidentifier() and spec.name != "GPU", \
        f"backend name {spec.name!r} must be an upper-case identifier other than GPU (the alias for the best GPU)"
    assert callable(spec.load) and callable(spec.probe)
    assert isinstance(spec.priority, int) and isinstance(spec.is_gpu, bool) and isinstance(spec.install_hint, str)


def test_api_version_is_compatible(dut):
    version = dut.backend.spec.api_version
    assert isinstance(version, tuple) and len(version) == 2 and all(isinstance(v, int) for v in version)
    assert api_compatible(version), f"backend API {version} doesn't fit this core's {BACKEND_API}"


def test_probe_is_fast_and_explains_itself(dut):
    started = time.perf_counter()
    reason = dut.backend.spec.probe()
    seconds = time.perf_counter() - started
    assert seconds < 2.0, f"probe() took {seconds:.2f} s; it runs at every start, keep it cheap (no compiling)"
    assert reason is None or (isinstance(reason, str) and reason.strip()), \
        f"probe() must return None (usable) or a non-empty reason, got {reason!r}"
    if not dut.compile_only:
        assert reason is None


def test_holds_its_name_and_not_broken(dut):
    # another plugin may claim the same name (it shows as a clash row): what matters is that this one holds it
    claims = [b for b in registry.all() if b.name == dut.name]
    holder = [b for b in claims if b.lost_to is None]
    assert len(holder) == 1, f"{dut.name} is claimed by: {[(b.distribution, b.error, b.lost_to) for b in claims]}"
    assert holder[0].error is None, holder[0].error


def test_load_returns_a_complete_compiled(dut):
    compiled = dut.compiled
    assert isinstance(compiled, Compiled)
    assert isinstance(compiled.allocator, Allocator)
    assert isinstance(compiled.renderer, Renderer)
    assert isinstance(compiled.compiler, Compiler)
    program_class = getattr(compiled.runtime, "func", compiled.runtime)    # a class, or a functools.partial of one
    assert callable(compiled.runtime) and isinstance(program_class, type) and issubclass(program_class, Program), \
        f"Compiled.runtime must make Program instances (a Program subclass), got {compiled.runtime!r}"
    assert Device[dut.name.lower()] is compiled, "device names are case-insensitive and open once"


def test_renders_the_required_ops(dut):
    missing = GroupOp.REQUIRED - set(dut.renderer.code_for_op)
    assert not missing, (f"code_for_op lacks {sorted(op.name for op in missing)}: every backend renders "
                         f"GroupOp.REQUIRED (the core decomposes the other ops into these)")
    unknown = [op for op in dut.renderer.code_for_op if not isinstance(op, Ops)]
    assert not unknown, f"code_for_op keys must be Ops members, got {unknown}"


def test_capabilities_are_declared_as_data(dut):
    r = dut.renderer
    assert r.supported_dtypes and all(isinstance(dt, DType) and dt in ALL for dt in r.supported_dtypes)
    for dt in (dtypes.bool, dtypes.int32, dtypes.float32):     # index arithmetic and valid masks need these
        assert dt in r.supported_dtypes, f"every backend must support {dt} (supported_dtypes lacks it)"
    for limit in (r.global_max, r.local_max):
        assert limit is None or (isinstance(limit, tuple) and all(isinstance(n, int) and n > 0 for n in limit))
    if r.has_local:
        assert r.local_max is not None, "a renderer with has_local must declare local_max"
    if r.has_shared:
        assert r.has_local and r.shared_max > 0, "has_shared needs has_local and a shared_max in bytes"
    assert r.max_upcast >= 1 and r.max_unroll >= 1 and r.default_local_size >= 1
