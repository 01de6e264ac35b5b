"""Every primitive op, cast and bitcast in every dtype the CL device declares, against the reference semantics."""
import numpy as np
import pytest
from tinygrad_core import Device, Tensor
from tinygrad_core.dtype import dtypes
from tinygrad_core.ops import Ops
import op_check


def declared_dtypes():
    return sorted(Device["CL"].renderer.supported_dtypes, key=lambda d: d.priority)


def test_every_alu_op_matches_reference():
    checks = op_check.Checks("CL")
    op_check.add_alu_checks(checks, declared_dtypes())
    assert checks.run() == []


def test_every_cast_matches_reference():
    checks = op_check.Checks("CL")
    op_check.add_cast_checks(checks, declared_dtypes())
    assert checks.run() == []


def test_every_bitcast_matches_reference():
    checks = op_check.Checks("CL")
    op_check.add_bitcast_checks(checks, declared_dtypes())
    assert checks.run() == []


def test_the_op_check_catches_a_wrong_answer():
    # the fused checks must see each segment's own result: a deliberately wrong expectation is reported
    checks = op_check.Checks("CL")
    a = op_check.sample(dtypes.int32, 1)
    checks.add(dtypes.int32, "NEG(int) vs wrong", checks.tensor(a, dtypes.int32).alu(Ops.NEG), -a + 1)
    checks.add(dtypes.int32, "NEG(int)", checks.tensor(a, dtypes.int32).alu(Ops.NEG), -a)
    failures = checks.run()
    assert len(failures) == 1 and failures[0].startswith("NEG(int) vs wrong")


def test_float_to_half_rounds_every_bit_pattern_like_numpy():
    # half may be computed through float (no cl_khr_fp16): its rounding helper must agree with numpy everywhere
    rng = np.random.default_rng(0)
    sign = rng.integers(0, 2, 4000).astype(np.uint32) << 31
    exponent = rng.integers(96, 146, 4000).astype(np.uint32) << 23     # around the half range, subnormals included
    bits = np.concatenate([sign | exponent | rng.integers(0, 2 ** 23, 4000).astype(np.uint32),
                           rng.integers(0, 2 ** 32, 1000, dtype=np.uint64).astype(np.uint32)])
    values = bits.view(np.float32)
    got = Tensor(values, device="CL").cast(dtypes.half).bitcast(dtypes.uint16).numpy()
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, values.astype(np.float16).view(np.uint16))


@pytest.mark.skipif("not __import__('tinygrad_core').Device['CL'].renderer.has_fp64")
def test_double_to_half_rounds_once_like_numpy():
    rng = np.random.default_rng(1)
    values = rng.normal(0, 1000, 3000) * (1 + rng.normal(0, 1e-9, 3000))
    got = Tensor(values, device="CL", dtype=dtypes.float64).cast(dtypes.half).bitcast(dtypes.uint16).numpy()
    np.testing.assert_array_equal(got, values.astype(np.float16).view(np.uint16))


def test_half_to_float_is_exact_for_every_half():
    bits = np.arange(2 ** 16, dtype=np.uint16)
    got = Tensor(bits, device="CL").bitcast(dtypes.half).cast(dtypes.float32).numpy()
    want = bits.view(np.float16).astype(np.float32)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all()


def test_rendering_kernels_leaves_the_shared_renderer_as_it_was():
    """Each kernel is written by a writer object of its own (CKernel): what one kernel needs (its names, the helper
    functions it calls, its constant divisors) is never kept on the renderer, which all the device's kernels share."""
    from tinygrad_core.engine.realize import CompiledRunner
    renderer = Device["CL"].renderer
    before = dict(vars(renderer))
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="CL")
    helper, division = (CompiledRunner("CL", t.schedule()[-1].ast).src
                        for t in (x.cast(dtypes.bfloat16) * 2, x.cast(dtypes.int32) // 3))
    assert "tg_float_to_bfloat16" in helper and "/3)" in division and "==0" not in division
    assert vars(renderer) == before
