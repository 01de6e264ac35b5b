"""Fusion, counted: how many kernels common expressions take (GlobalCounters.kernel_count); and transparency:
the text and DOT dumps of the lazy graph, Context(DEBUG=n) output, GlobalCounters, per-device memory."""
import gc
import numpy as np
import pytest
from helpers import assert_close, rand_array

from tinygrad_core import Context, Device, Function, GlobalCounters, Tensor, dtypes, schedule
from tinygrad_core.helpers import DEBUG, getenv, prod
from tinygrad_core.ops import Ops


def realized_inputs(*shapes):
    arrays = [rand_array(s, seed=i) for i, s in enumerate(shapes)]
    return arrays, [Tensor(a).realize() for a in arrays]


def kernels_for(t: Tensor) -> int:
    GlobalCounters.reset()
    t.realize()
    return GlobalCounters.kernel_count


def test_elementwise_chain_is_one_kernel():
    (x, y, z), (tx, ty, tz) = realized_inputs((4, 5), (4, 5), (4, 5))
    out = ((tx * ty + tz).relu() * 0.5).exp()
    assert kernels_for(out) == 1
    assert_close(out.numpy(), np.exp(np.maximum(x * y + z, 0) * 0.5), rtol=1e-5)


def test_elementwise_with_broadcast_and_movement_is_one_kernel():
    (x, y), (tx, ty) = realized_inputs((4, 5), (5,))
    out = (tx.permute(1, 0).flip(0) * ty.reshape(5, 1) + 1).pad(((1, 0), (0, 1)))
    assert kernels_for(out) == 1
    assert_close(out.numpy(), np.pad(x.T[::-1] * y.reshape(5, 1) + 1, ((1, 0), (0, 1))))


def test_reduce_with_epilogue_is_one_kernel():
    (x,), (tx,) = realized_inputs((4, 6))
    out = (tx.sum(axis=1) * 0.5 + 1).exp()
    assert kernels_for(out) == 1
    assert_close(out.numpy(), np.exp(x.sum(1) * 0.5 + 1), rtol=1e-5)


def test_reduce_with_prologue_and_epilogue_is_one_kernel():
    (x, y), (tx, ty) = realized_inputs((4, 6), (4, 6))
    out = (tx * ty).exp().sum(axis=1) + 3
    assert kernels_for(out) == 1
    assert_close(out.numpy(), np.exp(x * y).sum(1) + 3, rtol=1e-5)


def test_softmax_is_at_most_three_kernels():
    (x,), (tx,) = realized_inputs((3, 8))
    out = tx.softmax(-1)
    assert kernels_for(out) <= 3
    e = np.exp(x - x.max(-1, keepdims=True))
    assert_close(out.numpy(), e / e.sum(-1, keepdims=True))


def test_log_softmax_is_at_most_three_kernels():
    _, (tx,) = realized_inputs((3, 8))
    assert kernels_for(tx.log_softmax(-1)) <= 3


def test_matmul_is_one_kernel():
    (a, b), (ta, tb) = realized_inputs((3, 4), (4, 5))
    out = ta @ tb
    assert kernels_for(out) == 1
    assert_close(out.numpy(), a @ b, rtol=1e-5)


def test_realized_tensor_runs_no_kernel_again():
    _, (tx,) = realized_inputs((4,))
    out = (tx + 1).realize()
    assert kernels_for(out) == 0
    GlobalCounters.reset()
    out.numpy()
    assert GlobalCounters.kernel_count == 0


def test_constants_need_no_input_kernel():
    assert kernels_for(Tensor.ones(3, 4) * 2 + Tensor.full((3, 4), 1.5)) == 1


def test_schedule_lists_kernels_without_running_them():
    _, (tx,) = realized_inputs((3, 8))
    out = tx.softmax(-1)
    GlobalCounters.reset()
    items = out.schedule()
    assert GlobalCounters.kernel_count == 0
    assert 1 <= len(items) <= 3


def test_global_counters_count_work():
    _, (tx, ty) = realized_inputs((16, 16), (16, 16))
    GlobalCounters.reset()
    (tx * ty + 1).realize()
    assert GlobalCounters.kernel_count == 1
    assert GlobalCounters.global_ops >= 2 * 256            # a multiply and an add per element
    assert GlobalCounters.global_mem >= 3 * 256 * 4        # two inputs read, one output written
    GlobalCounters.reset()
    assert GlobalCounters.kernel_count == 0 and GlobalCounters.global_ops == 0 and GlobalCounters.global_mem == 0


def test_memory_in_use_is_tracked():
    # other tests' buffers may be freed by the garbage collector at any time: only count what this test holds
    a = Tensor.ones(1000).contiguous().realize()
    b = (a + 1).realize()
    assert GlobalCounters.mem_used >= 8000
    assert Device[a.device].memory_used() >= 8000
    Device[a.device].synchronize()
    assert b.numpy()[0] == 2.0


def test_a_realize_frees_its_intermediate_buffers_without_the_garbage_collector():
    # a reference cycle around a kernel's buffers kept every intermediate of a non-jitted training step allocated
    # until Python's gc next ran: each step took fresh memory (page faults, in the kernels' time) instead of reusing it
    a = Tensor(rand_array((64, 64))).realize()
    gc.collect()
    gc.disable()
    try:
        used = Device[a.device].memory_used()
        assert (a @ a).softmax(-1).sum().item() == pytest.approx(64, rel=1e-4)     # several kernels, 64x64 between
        assert Device[a.device].memory_used() == used
    finally:
        gc.enable()


# ---- transparency ----
def test_graph_text_dump():
    x = Tensor([1.0, 2.0, 3.0])
    y = (x * 2 + 1).sum()
    text = y.graph()
    lines = text.splitlines()
    assert any("BUFFER" in line for line in lines)
    assert any("MUL" in line for line in lines) and any("ADD" in line for line in lines)
    assert any("REDUCE_AXIS" in line for line in lines)
    assert "float" in text
    assert lines[-1].startswith("%") and "<-" in lines[-1]     # the root comes last and names its sources


def test_graph_dot_export():
    x = Tensor([[1.0, 2.0]])
    dot = (x.exp() @ x.T).to_dot()
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    assert "->" in dot and "EXP2" in dot and "REDUCE_AXIS" in dot
    assert dot.count("{") == dot.count("}")


def test_debug_1_reports_each_realize(capsys):
    _, (tx,) = realized_inputs((4,))
    with Context(DEBUG=1):
        (tx * 3).realize()
    out = capsys.readouterr().out
    assert "realized 1 items" in out and "ms" in out


def test_debug_2_reports_each_kernel(capsys):
    _, (tx,) = realized_inputs((4, 6))
    with Context(DEBUG=2):
        (tx * 3).sum(1).realize()
    out = capsys.readouterr().out
    assert "r_" in out and "ms" in out and "4" in out


def test_debug_3_prints_the_schedule(capsys):
    _, (tx,) = realized_inputs((3, 8))
    with Context(DEBUG=3):
        tx.softmax().realize()
    out = capsys.readouterr().out
    assert "schedule:" in out and "KERNEL" in out


def test_debug_4_prints_generated_source(capsys):
    _, (tx,) = realized_inputs((7,))
    with Context(DEBUG=4):
        (tx * 7.25 + 1).realize()       # a kernel no other test compiles (source is printed when compiling)
    lines = capsys.readouterr().out.splitlines()
    # besides the schedule (DEBUG 3) and timing (DEBUG 2) lines, the kernel's source, which names the kernel
    source = [line for line in lines if not line.startswith(("  ", "schedule:", "realized"))]
    assert any("E_7" in line for line in source), lines


def test_debug_0_is_silent(capsys):
    _, (tx,) = realized_inputs((5,))
    with Context(DEBUG=0):
        (tx * 2).realize()
    assert capsys.readouterr().out == ""


def test_context_restores_and_getenv_sees_it():
    old = DEBUG.value
    with Context(DEBUG=3):
        assert DEBUG >= 3 and getenv("DEBUG") == 3
    assert DEBUG.value == old
    with pytest.raises(KeyError, match="SOME_NEW_SETTING"):      # as tinygrad: only known settings
        with Context(SOME_NEW_SETTING=5):
            pass


def test_float16_kernel_and_int_kernel_fuse_too():
    a = Tensor(np.arange(6, dtype=np.int32)).realize()
    assert kernels_for((a * 2 + 1).cast(dtypes.float32).sqrt()) == 1


@pytest.mark.parametrize("stride, size", [(1, 16), (2, 16), (1, 7)], ids=["in-place", "im2col-strided", "im2col-rows"])
def test_conv_gradients_never_copy_out_windows_of_a_realized_input(stride, size):
    # the windows of a 3x3 convolution are 9x its input: the weight's gradient reads them in place (stride 1, rows of
    # whole vectors) or as im2col rows (one row per output position), never as a 6-d copy of the windows
    (x_np, w_np), (x, _) = realized_inputs((2, 4, size, size), (8, 4, 3, 3))
    w = Tensor(w_np, requires_grad=True)
    out = x.conv2d(w, padding=1, stride=stride).realize()      # (the padded input is realized too: a buffer now)
    out.relu().mean().backward()
    shapes = [item.node.shape for item in w.grad.schedule()]
    assert not any(len(shape) == 6 for shape in shapes), shapes
    assert w.grad.numpy().shape == w_np.shape


def test_im2col_conv_output_is_written_as_the_matmul_makes_it():
    # fused into an elementwise consumer (an eval-mode batchnorm, a relu), the matmul would be computed in the
    # consumer's channels-first order; it gets a kernel of its own, rows of output channels
    (_, _), (x, w) = realized_inputs((2, 4, 14, 14), (8, 4, 3, 3))
    shapes = [item.node.shape for item in x.conv2d(w, padding=1, stride=2).relu().schedule()]
    assert (2, 7, 7, 8) in shapes and shapes[-1] == (2, 8, 7, 7), shapes


def test_a_reduce_cut_late_keeps_its_product_in_its_own_kernel():
    # a conv whose output a max-pool reads twice: the pool's walk went inside the conv's reduce before cutting it, and
    # the product it had seen there was then copied out as "read by two kernels" (10000 images: 381 GB)
    from tinygrad_core import nn
    convs = nn.Conv2d(1, 4, 5), nn.Conv2d(4, 4, 5), nn.Conv2d(4, 8, 3)
    x = Tensor.rand(2, 1, 28, 28).realize()
    renderer = Device[Device.DEFAULT].renderer
    old, renderer.im2col_bytes = renderer.im2col_bytes, 0      # in-place windows, as a large batch takes
    try:
        out = convs[2](convs[1](convs[0](x).relu()).relu().max_pool2d((2, 2))).sum()
        biggest = max(item.bufs[0].size for item in out.schedule())
    finally:
        renderer.im2col_bytes = old
    assert biggest <= 2 * 4 * 24 * 24, biggest


# ---- the cut rules (tinygrad_core/schedule.py): each one, shown on a graph it cuts ----


def roots_of(*tensors: Tensor) -> list:
    """The nodes the schedule computes into buffers, in run order (nothing is run)."""
    return [item.node for item in schedule.create_schedule([t.uop for t in tensors])]


def test_cut_realize_point_contiguous_and_assign():
    _, (tx,) = realized_inputs((4, 6))
    kept = (tx + 1).contiguous()
    out = kept * 2
    assert schedule._realize_point(kept.uop) == (kept.uop,) and schedule._realize_point(out.uop) == ()
    assert roots_of(out) == [kept.uop, out.uop]        # fused, (tx + 1) * 2 would be one kernel


def test_cut_copy_source_is_computed_before_the_transfer():
    other = "CPU" if Device.DEFAULT == "PYTHON" else "PYTHON"
    (x,), (tx,) = realized_inputs((4, 6))
    computed = tx + 1
    moved = computed.to(other)
    assert moved.uop.op is Ops.COPY and schedule._copy_source(moved.uop) == (computed.uop,)
    assert roots_of(moved) == [computed.uop, moved.uop]
    assert_close(moved.numpy(), x + 1)


def test_cut_repeated_reduce_broadcast_or_read_by_two_kernels():
    (x,), (tx,) = realized_inputs((4, 6))
    total = tx.sum(1, keepdim=True)
    centred = tx - total                                # the sum is read once per element of its row
    cut, rest = roots_of(centred)          # (the sum as laid out: its float32 values summed in float64, _long_sum)
    assert cut.op is Ops.REDUCE_AXIS and cut.src[0].src[0] is total.uop.src[0] and rest is centred.uop
    assert_close(centred.numpy(), x - x.sum(1, keepdims=True), rtol=1e-5)
    shared = tx.max(1, keepdim=True)
    first, second = shared * 2, shared + 1              # two kernels would each compute it
    cut, *rest = roots_of(first, second)
    assert cut is shared.uop and set(rest) == {first.uop, second.uop}
    fused = tx.sum(1) * 2                               # read once, by one kernel: no cut
    assert roots_of(fused) == [fused.uop]


def test_cut_costly_work_broadcast_into_reduce():
    _, (tx, tw) = realized_inputs((4, 6), (5, 6))
    costly = tx.exp().sqrt().log()                      # weighted work 14 >= COSTLY_ELEMENTWISE
    product = (costly.reshape(4, 1, 6) * tw).sum(-1)    # the reduce reads it once for each of tw's 5 rows
    assert roots_of(product) == [costly.uop, product.uop]
    cheap = (tx + 1).reshape(4, 1, 6)
    assert len(roots_of((cheap * tw).sum(-1))) == 1    # cheap work is recomputed, not written out
    padded = tx.pad(((0, 0), (1, 1))).shrink(((0, 4), (0, 6))).reshape(4, 1, 6)
    assert len(roots_of((padded * tw).sum(-1))) == 1   # views alone are never copied out


def test_cut_costly_work_read_by_two_kernels():
    _, (tx,) = realized_inputs((4, 6))
    costly = tx.exp2().sqrt().log2()      # (primitives: exp and log are custom ops, which the rule cuts below)
    by_rows, by_columns = costly.sum(1), costly.sum(0)
    cut, *rest = roots_of(by_rows, by_columns)
    assert cut is costly.uop and set(rest) == {by_rows.uop, by_columns.uop}
    cheap = tx * 2
    assert len(roots_of(cheap.sum(1), cheap.sum(0))) == 2     # cheap work is computed by both


def test_cut_costly_work_read_by_two_kernels_not_inside_a_reduce_cut_since():
    # the seed CNN's fc1 (pool -> flatten -> linear, its output read by the relu and by the relu's gradient): the first
    # kernel fused the matmul and saw its product, the second cut the matmul into a kernel of its own, whose walk then
    # took the product it had itself to compute for one "read by two kernels" and wrote it out (batch 64: 2.1 GB)
    (x, w, b), (tx, tw, tb) = realized_inputs((2, 4, 8, 8), (64, 16), (16,))
    z = tx.avg_pool2d(2).reshape(2, 64).linear(tw, tb)
    relu, doubled = z.relu(), z * 2
    roots = roots_of(relu, doubled)                    # the pool, the matmul, its two readers: nothing larger
    assert len(roots) == 4 and max(prod(r.shape) for r in roots) == 2 * 4 * 4 * 4, [r.shape for r in roots]
    assert len(roots_of(relu)) == 2                     # read by one kernel: the matmul fuses with its epilogue
    expected = x.reshape(2, 4, 4, 2, 4, 2).mean((3, 5)).reshape(2, 64) @ w + b
    assert_close(relu.numpy(), np.maximum(expected, 0), rtol=1e-4, atol=1e-5)
    assert_close(doubled.numpy(), expected * 2, rtol=1e-4, atol=1e-5)


def test_cut_assign_reading_other_elements():
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).realize()
    flipped = x.flip(0) + 1
    write = x.assign(flipped)                           # in place, row 0 would read row 2 already overwritten
    assert schedule._assign_reading_other_elements(schedule._Plan(), write.uop) is flipped.uop
    assert roots_of(write) == [flipped.uop, write.uop]
    assert_close(write.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4)[::-1] + 1)
    in_place = x.assign(x * 2)                          # each element reads only itself
    assert schedule._assign_reading_other_elements(schedule._Plan(), in_place.uop) is None
    assert len(roots_of(in_place)) == 1


def test_cut_assign_counts_only_what_its_own_kernel_reads():
    # an SGD step in the same schedule as the forward pass: the gradient is a kernel of its own that reads the weight
    # transposed; the update reads only that kernel's result and the weight in place, so it writes the weight directly
    # (it was computed into a buffer of its own and copied over: one more kernel per parameter per step)
    rng = np.random.default_rng(0)
    x_np, w_np = rng.standard_normal((8, 5), dtype=np.float32), rng.standard_normal((3, 5), dtype=np.float32)
    x, w = Tensor(x_np), Tensor(w_np, requires_grad=True)
    loss = (x @ w.T).relu().sum()
    loss.backward()
    target = schedule.buffer_of(w.realize().uop)
    update = w.assign(w - 0.1 * w.grad)
    items = schedule.create_schedule([loss.uop, update.uop])
    writes = [i for i in items if i.node is update.uop]
    assert len(writes) == 1 and writes[0].bufs[0] is target
    assert len(items) == 4, [i.node.op for i in items]     # the matmul, the gradient, the update, the loss
    Tensor.realize_all(loss, update)
    grad = (x_np @ w_np.T > 0).astype(np.float32).T @ x_np
    assert_close(w.numpy(), w_np - 0.1 * grad, rtol=1e-5, atol=1e-6)


def simd_cpu_only():
    if not (renderer := Device[Device.DEFAULT].renderer).simd_width or not renderer.panel_columns:
        pytest.skip(f"{Device.DEFAULT} is no SIMD CPU backend packing matmul operands (simd_width, panel_columns)")


def test_cut_pack_panels_copies_far_apart_rows_into_panels_first(monkeypatch):
    simd_cpu_only()
    monkeypatch.setattr(schedule, "recipes", {})     # planned here, not replayed from an earlier test's matmul
    (a, b), (ta, tb) = realized_inputs((1024, 1024), (1024, 1024))
    out = ta @ tb                                      # b's rows lie 4 KiB apart: read down its columns
    product_sum = out.uop.src[0]                       # (Tensor.dot builds the plain product; the pass rewrites it)
    assert product_sum.op is Ops.REDUCE_AXIS and schedule._pack_panels(product_sum) is not None
    panels, product = out.schedule()
    assert panels.node.op is Ops.CONTIGUOUS and panels.node.shape == (16, 1024, 64)   # (n/panel, k, panel)
    assert product.node is out.uop and product.bufs[1:] == [schedule.buffer_of(ta.uop), panels.bufs[0]]
    assert kernels_for(out) == 2
    assert_close(out.numpy(), a @ b, rtol=1e-4, atol=1e-3)
    _, (_, tc) = realized_inputs((4, 1024), (1024, 512))
    assert schedule._pack_panels((ta @ tc).uop.src[0]) is None and kernels_for(ta @ tc) == 1    # rows 2 KiB apart
    assert kernels_for(ta @ tb.T) == 1                 # b.T is read along b's rows already
    assert_close((ta @ tb.T).numpy(), a @ b.T, rtol=1e-4, atol=1e-3)


def test_cut_long_sum_accumulates_in_float64_and_sums_one_vector_of_outputs_over_many_elements_in_parts_first():
    simd_cpu_only()
    lanes = Device[Device.DEFAULT].renderer.simd_width // 4          # float32 outputs in one SIMD register
    (x, big), (tx, tbig) = realized_inputs((256, lanes, 14, 14), (1 << 20,))
    stats = tx.sum((0, 2, 3), keepdim=True)            # a batchnorm's: a vector of channels over 256x14x14 pixels
    laid = schedule._long_sum(stats.uop)               # (its float32 values summed as float64, rounded once)
    assert laid.op is Ops.CAST and laid.dtype == dtypes.float32 and laid.src[0].src[0].dtype == dtypes.float64
    parts, total = stats.schedule()
    assert parts.node.op is Ops.CONTIGUOUS and parts.node.shape == (16, 1, lanes, 1, 1)  # batch cut in 16 parts of 16
    assert total.node is stats.uop and total.bufs[1:] == [parts.bufs[0]]
    assert_close(stats.numpy(), x.sum((0, 2, 3), keepdims=True, dtype=np.float64), rtol=1e-5, atol=1e-3)
    assert kernels_for(tbig.sum()) == 2
    assert_close(tbig.sum().numpy(), big.sum(dtype=np.float64), rtol=1e-6, atol=1e-3)
    assert kernels_for(tbig.reshape(lanes, -1).sum(1)) == 2
    assert kernels_for(tbig.reshape(2 * lanes, -1).sum(1)) == 1     # two registers: tiled over two threads already
    assert kernels_for(tbig.max()) == 1                # (a sum only)
    _, (small, odd) = realized_inputs((1 << 16,), (3, 5, 17, 13 * 7 * 61))
    assert kernels_for(small.sum()) == 1               # too few elements to pay for a second kernel
    assert kernels_for(odd.sum((0, 2, 3))) == 1        # no reduced axis 16 divides
    ints = Tensor(np.arange(1 << 18, dtype=np.int32) - (1 << 17))
    assert kernels_for(ints.sum()) == 2 and ints.sum().item() == -(1 << 17)


def test_cut_pack_panels_in_the_backward_where_a_matmul_matches():
    simd_cpu_only()
    (x, w, g), (tx, _, tg) = realized_inputs((8, 1024), (1024, 1024), (8, 1024))
    tw = Tensor(w, requires_grad=True)
    tx.requires_grad = True
    (tx @ tw * tg).sum().backward()
    items = schedule.create_schedule([tx.grad.uop, tw.grad.uop])
    # the gradients' matmuls reduce over a leading axis (w.grad sums over x's rows): opts.py tiles those, unpacked
    assert not any(item.node.op is Ops.CONTIGUOUS for item in items), [item.node.shape for item in items]
    assert_close(tw.grad.numpy(), x.T @ g, rtol=1e-4, atol=1e-4)
    assert_close(tx.grad.numpy(), g @ w.T, rtol=1e-4, atol=1e-3)

    class Dense(Function):      # a backward written with matmuls: x.T @ grad reads grad down its columns
        def forward(self, x, w):
            self.x, self.w = x, w
            return x @ w

        def backward(self, grad):
            return grad @ self.w.T, self.x.T @ grad

    tx.grad = tw.grad = None
    (Dense.apply(tx, tw) * tg).sum().backward()
    shapes = [item.node.shape for item in tw.grad.schedule() if item.node.op is Ops.CONTIGUOUS]
    assert shapes == [(16, 8, 64)], shapes             # the gradient's panels, by the pass, not by gradient.py
    assert_close(tw.grad.numpy(), x.T @ g, rtol=1e-4, atol=1e-4)
    assert_close(tx.grad.numpy(), g @ w.T, rtol=1e-4, atol=1e-3)


def test_every_cut_rule_is_tested_here():
    rules = schedule.NODE_CUTS + schedule.WALK_CUTS + schedule.KERNEL_CUTS + schedule.LAYOUTS
    with open(__file__) as f:
        source = f.read()
    untested = [rule.__name__ for rule in rules if f"def test_cut{rule.__name__}" not in source]
    assert not untested, f"cut rules without a test_cut<rule name> here: {untested}"
