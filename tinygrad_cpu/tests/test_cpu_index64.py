"""Buffers of 2**31 elements and more on the CPU: index arithmetic turns 64-bit there (and only there), so the last
elements are read and written where they are, not 2**32 elements earlier."""
import os
import numpy as np
import pytest
from tinygrad_core import Tensor
from tinygrad_core.dtype import dtypes
from tinygrad_core.engine.realize import CompiledRunner
from tinygrad_core.ops import Variable
from tinygrad_core.schedule import create_schedule


def free_memory() -> int:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


@pytest.mark.skipif(free_memory() < 6 * 2 ** 30, reason="needs about 2.2 GB of memory for the buffer, and room")
def test_a_uint8_buffer_past_2_31_elements_is_written_and_read_to_its_end():
    n = 2 ** 31 + 64
    ones = Tensor.ones(n, dtype=dtypes.uint8).contiguous().realize()
    tail = (ones[-70:] * np.arange(70, dtype=np.uint8)).numpy()    # a kernel reading at offsets past 2**31
    np.testing.assert_array_equal(tail, np.arange(70, dtype=np.uint8))
    del ones


def test_a_symbolic_size_joins_64_bit_index_math_sign_extended():
    # up to 100 rows of 2**25: the kernel is wide, and the Variable (an i32 argument) is widened where it is used
    rows = Variable("rows", 1, 100).bind(3)
    total = (Tensor.empty(rows, 2 ** 25, dtype=dtypes.uint8) + 1).sum(0)
    ast = next(item.ast for item in create_schedule([total.uop]) if item.ast.op.name == "SINK")
    src = CompiledRunner("CPU", ast).src          # compiling checks the IR's types too
    assert "i32 %var0" in src and "sext i32 %var0 to i64" in src and "phi i64" in src
