"""Lazy graph -> list of kernels. Every fusion decision lives here, and only here.

A kernel computes one node ("a realize point") into a buffer of its own. Elementwise and movement ops fuse into the
loads of whoever uses them; a reduce fuses with the elementwise ops before it and after it. A reduce is cut into
its own kernel when its result is broadcast (EXPAND) or used by several nodes: fusing it there would recompute
the whole reduction for every element that reads it.

create_schedule runs in steps: order the graph that isn't computed yet (`_graph_order`); lay it out (`_lay_out`: the
passes of LAYOUTS rewrite what a kernel would read in a bad order, such as a matmul operand read down its columns);
find the kernel roots (`_find_roots`) by the cut rules, which are listed in the order they apply: NODE_CUTS, for each
node; WALK_CUTS, met while walking what would fuse into a kernel; KERNEL_CUTS, once a kernel's walk is done; and
build one item per root, in run order (`_order_roots`, `_build_items`). A call's planning state (the nodes laid out
anew, a `_Plan`, then the planned buffer views) is passed from step to step, never kept in the module."""
from dataclasses import dataclass, field
from tinygrad_core.buffers import buffer_of, buffer_uop, realized, resolve, storage
from tinygrad_core.device import Buffer, Device
from tinygrad_core.dtype import dtypes
from tinygrad_core.helpers import all_int, prod
from tinygrad_core.ops import Ops, UOp, GroupOp, arg_key, dependency_order, reachable
from tinygrad_core.sizes import max_value, unbind


@dataclass
class ScheduleItem:
    ast: UOp                 # SINK(STORE(DEFINE_GLOBAL 0, value)) for a kernel; the COPY node for a transfer
    bufs: list[Buffer]       # output first, then the inputs in DEFINE_GLOBAL order
    node: UOp                # the graph node this item computes
    becomes: UOp | None = None   # the buffer view that holds node's value once the item has run
    var_vals: dict[str, int] = field(default_factory=dict)   # the values of the Variables in ast's sizes


# what was planned for each graph structure (`_structure`) met lately: a graph built again the same way over other
# buffers (an eager loop's matmul, a forward pass per batch) gets its kernels without planning them again
recipes: dict[tuple, list[tuple]] = {}
MOST_RECIPES = 256
NOT_REPLAYED = (Ops.ASSIGN, Ops.COPY)     # writes and transfers


def create_schedule(outs: list[UOp]) -> list[ScheduleItem]:
    """The items that compute outs, in run order (the steps are named in the module docstring), from the recipe of a
    graph of the same structure where there is one."""
    key, at, slots = _structure(outs := [resolve(u) for u in outs], order := _graph_order(outs))
    if (recipe := recipes.get(key)) is not None:
        return _replay(recipe, order, list(slots))
    laid, laid_order, was = _lay_out(outs, order)
    plan = _find_roots(laid, laid_order)
    items = _build_items(_order_roots(plan.roots, {u: i for i, u in enumerate(laid_order)}, plan.is_root),
                         plan.is_root, was)
    if key is not None and len(items) == len(plan.roots) and (recipe := _recipe(items, at, slots)) is not None:
        if len(recipes) >= MOST_RECIPES:
            recipes.clear()
        recipes[key] = recipe
    return items


def _structure(outs: list[UOp], order: list[UOp]) -> tuple[tuple | None, dict[UOp, int], dict[Buffer, int]]:
    """A key for how the graph is built: each node's op, type, arg and sources by their place in order, a buffer by
    when it is first read (with its size, type and device), so that every decision of planning is the same for two
    graphs with one key (a custom op's function is named by its class: planning reads only its forward graph). And
    each node's place, and each buffer's. The key is None for a graph that NOT_REPLAYED rules out."""
    at, slots = {u: i for i, u in enumerate(order)}, {}

    def place(u: UOp):
        if (u := resolve(u)).op is not Ops.BUFFER:
            return at[u]
        return -1 - slots.setdefault(buf := u.arg[0], len(slots)), buf.size, buf.dtype, buf.device
    if any(u.op in NOT_REPLAYED for u in order):
        return None, at, slots
    return (tuple((u.op, u.dtype, type(u.arg) if u.op is Ops.CUSTOM else arg_key(u.arg), tuple(map(place, u.src)))
                  for u in order),
            tuple(map(place, outs))), at, slots


def _recipe(items: list[ScheduleItem], at: dict[UOp, int], slots: dict[Buffer, int]) -> list[tuple] | None:
    """Per item: its kernel, its node's place in order (None for a node a layout pass made), where each buffer it reads
    comes from (>= 0: the graph's buffer there; < 0: an earlier item's output), its output's device, size, type and
    shape. None unless every item writes a buffer of its own, with no Variable's value."""
    made, recipe = {}, []
    for item in items:
        out = item.bufs[0]
        if item.var_vals or out in slots or any(b not in slots and b not in made for b in item.bufs[1:]):
            return None
        made[out] = -1 - len(recipe)
        recipe.append((item.ast, at.get(item.node), tuple(slots.get(b, made.get(b)) for b in item.bufs[1:]),
                       out.device, out.size, out.dtype, item.node.shape))
    return recipe


def _replay(recipe: list[tuple], order: list[UOp], leaves: list[Buffer]) -> list[ScheduleItem]:
    """The items of a recipe for this graph's nodes and buffers (a node a layout pass made is named by its buffer)."""
    items = []
    for ast, place, reads, device, size, dtype, shape in recipe:
        view = buffer_uop(out := Buffer(device, size, dtype)).reshape(shape)
        bufs = [out] + [leaves[r] if r >= 0 else items[-1 - r].bufs[0] for r in reads]
        items.append(ScheduleItem(ast, bufs, view if place is None else order[place], view))
    return items


def _graph_order(outs: list[UOp]) -> list[UOp]:
    """A dependency order (sources first) of the part of the graph that isn't computed yet."""
    return dependency_order(outs, lambda u: [s for s in map(resolve, u.src) if s.op is not Ops.BUFFER])


@dataclass
class _Plan:
    """The kernel roots found so far, in the order found (the order their kernels are walked in), and the kernel
    whose walk reached each reduce or elementwise node inside a reduce first, with that reduce (a second kernel
    reaching it may cut it)."""
    roots: list[UOp] = field(default_factory=list)
    is_root: set[UOp] = field(default_factory=set)
    reached_by: dict[UOp, tuple[UOp, UOp | None]] = field(default_factory=dict)

    def cut(self, u: UOp):
        if u not in self.is_root:
            self.is_root.add(u)
            self.roots.append(u)

    def reached_first(self, u: UOp, root: UOp, in_reduce: UOp | None) -> bool:
        """Whether root's kernel is the first to reach u, or reaches it inside the same reduce as the first: that
        reduce was cut into a kernel of its own since, so what the first kernel's walk saw inside it is now its own."""
        first, inside = self.reached_by.setdefault(u, (root, in_reduce))
        return first is root or inside is not None and inside is in_reduce


def _find_roots(outs: list[UOp], order: list[UOp]) -> _Plan:
    """The kernel roots: the outputs not computed yet, what NODE_CUTS cut, then, walking each root's kernel in turn
    (roots found on the way are walked too), what WALK_CUTS and KERNEL_CUTS cut."""
    plan = _Plan()
    for r in [u for u in outs if buffer_of(u) is None and u.op is not Ops.BUFFER] + \
            [cut for u in order for rule in NODE_CUTS for cut in rule(u)]:
        plan.cut(r)
    for root in plan.roots:            # (grows while walked)
        _walk_kernel(plan, root)
        for cut in filter(None, (rule(plan, root) for rule in KERNEL_CUTS)):
            plan.cut(cut)
    return plan


def _walk_kernel(plan: _Plan, root: UOp):
    """Walk what fuses into root's kernel, cutting what the first matching rule of WALK_CUTS says (the walk doesn't go
    past a cut)."""
    walked: set = set()
    # (node, reached through an EXPAND or a reduce: computed more than once per element, the reduce it is inside)
    inside = root if root.op is Ops.REDUCE_AXIS else None
    stack = [(s, inside is not None, inside) for s in _kernel_inputs(root)]
    while stack:
        u, repeated, in_reduce = stack.pop()
        u = resolve(u)
        if (u, repeated) in walked or u.op in (Ops.BUFFER, Ops.DEVICE) or (u in plan.is_root and u is not root):
            continue
        walked.add((u, repeated))
        for rule in WALK_CUTS:
            if (cut := rule(plan, root, u, repeated, in_reduce)) is not None:
                plan.cut(cut)
                break
        else:
            reduce = in_reduce or (u if u.op is Ops.REDUCE_AXIS else None)
            stack.extend((s, repeated or u.op in (Ops.EXPAND, Ops.REDUCE_AXIS), reduce) for s in u.src)


# ---- the cut rules ----
def _realize_point(u: UOp) -> tuple[UOp, ...]:
    """What the program asks to be computed into a buffer: a CONTIGUOUS, a write (ASSIGN), a transfer (COPY)."""
    return (u,) if u.op in (Ops.CONTIGUOUS, Ops.COPY, Ops.ASSIGN) else ()


def _copy_source(u: UOp) -> tuple[UOp, ...]:
    """A transfer copies a buffer: a source that isn't one yet is computed into one first."""
    return tuple(s for s in map(resolve, u.src) if buffer_of(s) is None) if u.op is Ops.COPY else ()


def _repeated_reduce(plan: _Plan, root: UOp, u: UOp, repeated: bool, in_reduce: UOp | None) -> UOp | None:
    """A reduce seen through an EXPAND or inside another reduce (fused, it would be recomputed for every element that
    reads it), or from a second kernel (both would compute it)."""
    return u if u.op is Ops.REDUCE_AXIS and (repeated or not plan.reached_first(u, root, in_reduce)) else None


def _costly_work_broadcast_into_reduce(plan: _Plan, root: UOp, u: UOp, repeated: bool, in_reduce: UOp | None):
    """Costly elementwise work that a reduce reads through an EXPAND: a batchnorm's backward feeding a convolution's
    gradients would be recomputed for every input channel and kernel position. Views alone are not copied out: a copy
    of a convolution's windows would be 9x its input, and read in a worse order than the input itself. (A buffer or a
    reduce under the views, as a matmul's operands are, is no work: _elementwise_work stops there.)"""
    if u.op is Ops.EXPAND and in_reduce and (expanded := _under_views(u.src[0])).op not in (Ops.BUFFER,
            Ops.REDUCE_AXIS) and _elementwise_work(expanded, plan.is_root) >= COSTLY_ELEMENTWISE and \
            _elementwise_work(expanded, plan.is_root, views=False) > 0:
        return expanded


def _costly_work_read_by_two_kernels(plan: _Plan, root: UOp, u: UOp, repeated: bool, in_reduce: UOp | None):
    """Costly elementwise work that reduces of two kernels read (a convolution's input gradient feeding a batchnorm's
    backward): computed once, not twice."""
    return u if u.op in GroupOp.ELEMENTWISE and u.op is not Ops.CAST and in_reduce and \
        not plan.reached_first(u, root, in_reduce) and _elementwise_work(u, plan.is_root) >= COSTLY_ELEMENTWISE else None


def _assign_reading_other_elements(plan: _Plan, root: UOp) -> UOp | None:
    """x.assign(f(x)) is safe when f reads x only at the element being written: through the view written (the same
    node), or for a write of the whole buffer through reshapes of it. Otherwise f(x) is computed first. Only what this
    kernel reads counts: other kernels (an optimizer's update reads the forward pass, which read the weight
    transposed) have run before the write."""
    if root.op is not Ops.ASSIGN:
        return None
    written = resolve(root.src[2] if len(root.src) > 2 else root.src[0])
    target = storage(written)

    def elsewhere(u: UOp) -> bool:       # u, the first view of the target on a path down the value, reads elsewhere
        while u is not written and len(root.src) == 2 and u.op in (Ops.RESHAPE, Ops.DETACH):
            u = resolve(u.src[0])
        return u is not written and (len(root.src) > 2 or u is not target)
    reads = reachable([root.src[1]], lambda u: u.op is Ops.BUFFER or u in plan.is_root and u is not root or
                      u.op in GroupOp.VIEW and storage(u) is target, resolve)
    return resolve(root.src[1]) if any(storage(u) is target and elsewhere(u) for u in reads
                                        if u.op in GroupOp.VIEW or u.op is Ops.BUFFER) else None


NODE_CUTS = (_realize_point, _copy_source)
WALK_CUTS = (_repeated_reduce, _costly_work_broadcast_into_reduce, _costly_work_read_by_two_kernels)
KERNEL_CUTS = (_assign_reading_other_elements,)


# ---- layout: which matmul and convolution operands are computed into buffers of their own layout ----
def _lay_out(outs: list[UOp], order: list[UOp]) -> tuple[list[UOp], list[UOp], dict[UOp, UOp]]:
    """The graph with each node that a pass of LAYOUTS rewrites replaced by its new form (sources first: a pass sees
    its node's sources laid out already), the graph's order again, and the node of the program each rewritten node
    stands for: the item computing it is named by that node (run_schedule records its value there). Forward and
    backward alike: the passes see whatever graph reaches the scheduler."""
    new: dict[UOp, UOp] = {}
    for u in order:
        v = u.replace(src=tuple(new.get(s, s) for s in u.src)) if new and any(s in new for s in u.src) else u
        if (v := next((f for rule in LAYOUTS if (f := rule(v)) is not None), v)) is not u:
            new[u] = v
    outs = [new.get(u, u) for u in outs]
    return (outs, _graph_order(outs), {v: u for u, v in new.items()}) if new else (outs, order, {})


def _pack_panels(u: UOp) -> UOp | None:
    """A matmul reading a row-major operand w (k, n) down its columns, rows Renderer.far_rows_bytes or more apart,
    on a renderer that packs (Renderer.panel_columns, a CPU's: GPUs read a column block across threads, coalesced):
    each step of the reduce would jump a row, and rows a page apart compete for the same cache sets. w is copied into
    panels (n/panel, k, panel), each contiguous (BLAS libraries call this
    packing), by a kernel of its own, and the product reads them; the reduce over k stays one loop. A matmul as
    Tensor.dot builds it: the reduce over the last axis, along the other operand's rows, which doesn't vary along w's
    columns, the output's last. (The matmuls of its gradients reduce over a leading axis: a backend's kernel opts
    tile those along their output rows, and they ran slower packed, in either operand.)"""
    if u.op is not Ops.REDUCE_AXIS or u.arg != (Ops.ADD, (k := len(u.shape) - 1,)) or \
            not (panel := (renderer := Device[u.device].renderer).panel_columns):
        return None
    cast, product = (u.src[0], u.src[0].src[0]) if u.src[0].op is Ops.CAST else (None, u.src[0])  # (fp16 adds in fp32)
    # w's columns are the output's axis k - 1 (w seen through views, then the product, which has w's type): every sum
    # over a last axis is asked, so the sizes that rule packing out are checked before the operands are looked at
    if k < 1 or not isinstance(n := u.shape[k - 1], int) or n % panel or n * product.dtype.itemsize < renderer.far_rows_bytes:
        return None
    for i, (side, other) in enumerate((product.src, product.src[::-1]) if product.op is Ops.MUL else ()):
        w, (rows, cols) = _rows_and_columns(side.src[0] if side.op is Ops.EXPAND else side) or (None, (-1, 0))
        if (rows, cols) != (k, k - 1) or other.op is not Ops.EXPAND or other.src[0].shape[cols] != 1:
            continue
        panels = w.reshape((w.shape[0], n // panel, panel)).permute((1, 0, 2))      # (n/panel, k, panel)
        panels = UOp(Ops.CONTIGUOUS, w.dtype, (panels,)).broadcast_to(shape := product.shape[:cols] + panels.shape)
        rest = other.src[0].reshape(other.src[0].shape + (1,)).expand(shape)
        packed = UOp(Ops.MUL, product.dtype, (panels, rest) if i == 0 else (rest, panels))
        return (packed if cast is None else packed.cast(cast.dtype)).reduce(Ops.ADD, (k,)).reshape(u.shape)


def _rows_and_columns(view: UOp) -> tuple[UOp, tuple[int, ...]] | None:
    """(w, the axes of view that w's rows and columns are on) where view is a 2-D node w seen through permutes and
    reshapes that only add or drop axes of size 1 (w's own layout then decides how view is read), else None."""
    src = view.src[0] if view.op is Ops.PERMUTE or view.op is Ops.RESHAPE and \
        [s for s in view.shape if s != 1] == [s for s in view.src[0].shape if s != 1] else None
    if src is None or (found := _rows_and_columns(src)) is None:
        return (view, (0, 1)) if len(view.shape) == 2 and 1 not in view.shape else None
    big, small = [i for i, s in enumerate(view.shape) if s != 1], [i for i, s in enumerate(src.shape) if s != 1]
    return found[0], tuple(view.arg.index(a) if view.op is Ops.PERMUTE else big[small.index(a)] for a in found[1])


def _long_sum(u: UOp) -> UOp | None:
    """A float32 sum accumulates in float64 where the renderer has it, and rounds once: its error is the final
    rounding's, at most PyTorch's (tests/test_long_reductions.py). Not a product-sum, an operand broadcast (a matmul's,
    a convolution's): the opts tile those, and they would run at half the rate. And a sum to no more outputs than one
    SIMD register holds (Renderer.simd_width; 64 bytes elsewhere) over Renderer.split_sum_elements or more (a
    batchnorm's statistics: 16 channels over 128x14x14 pixels, or a whole tensor's sum), as one kernel one register
    tile (one thread), is cut into split_sum_parts parts along its first reduced axis that the count divides: a kernel
    of its own sums each part, and the sum of the parts follows. (Wider sums are tiled into as many threads' work
    already; cut, they changed what the kernels around them fuse.)"""
    if u.op is not Ops.REDUCE_AXIS or u.arg[0] is not Ops.ADD:
        return None
    renderer, x, axes = Device[u.device].renderer, u.src[0], u.arg[1]
    product = (m := _under_views(x)).op is Ops.MUL and any(v.op is Ops.EXPAND for s in m.src for v in reachable(
        [s], lambda v: v.op not in GroupOp.MOVEMENT))
    if wide := u.dtype == dtypes.float32 and dtypes.float64 in renderer.supported_dtypes and not product:
        x = x.cast(dtypes.float64)
    shape = x.shape
    if all_int(shape) and prod(u.shape) * u.dtype.itemsize <= (renderer.simd_width or 64) and \
            prod(shape) >= renderer.split_sum_elements and \
            (axis := next((a for a in axes if shape[a] % (parts := renderer.split_sum_parts) == 0), None)) is not None:
        cut = shape[:axis] + (parts, shape[axis] // parts) + shape[axis + 1:]
        x, axes = UOp(Ops.CONTIGUOUS, x.dtype, (x.reshape(cut).reduce(Ops.ADD, tuple(a + (a >= axis) for a in axes)),)), (axis,)
    elif not wide:
        return None
    return x.reduce(Ops.ADD, axes).reshape(u.shape).cast(u.dtype)


LAYOUTS = (_pack_panels, _long_sum)


def conv_reads_windows_in_place(windows: UOp, strides: tuple[int, ...]) -> bool:
    """Whether a convolution's product-sum reads its input's windows (batch, channels, *outputs, *kernel) in place,
    else as im2col rows (the windows copied out, one row per output position, multiplied by the weight as a matmul).
    In place at stride 1 with output rows of whole vectors (counted in float32 lanes of Renderer.simd_width, the hook
    asked here; any rows without SIMD): neighbouring outputs read neighbouring inputs, so the loads vectorise along
    the rows. Strided, they would gather inputs a stride apart, or rows would end mid-vector. And in place when im2col
    would copy out more than Renderer.im2col_bytes (a 10000-image batch through a 5x5 conv is gigabytes). Decided when the op is built, not by a pass of LAYOUTS: the gradients are built from the form
    chosen (im2col's are matmuls, through contiguous_backward), before the scheduler sees the graph."""
    lanes = max(1, (renderer := Device[windows.device].renderer).simd_width // 4)
    return all(s == 1 for s in strides) and windows.shape[1 + len(strides)] % lanes == 0 or \
        prod(windows.shape) * windows.dtype.itemsize > renderer.im2col_bytes


def _build_items(roots: list[UOp], is_root: set[UOp], was: dict[UOp, UOp]) -> list[ScheduleItem]:
    """One item per root, in run order, named by the program's node it computes (`was`, for a node laid out anew).
    Each root is planned to be read from its output buffer by the items after it; run_schedule publishes that to
    `realized` once the item has run."""
    planned, items = {}, []
    for root in roots:
        # a symbolic size gets a buffer for its largest value, so one buffer serves every value (TinyJit)
        out = None if root.op is Ops.ASSIGN else Buffer(root.device, max_value(prod(root.shape)), root.dtype)
        item = _make_item(root, out, is_root, planned)
        version = resolve(root.src[0], planned).base.arg[1] + 1 if root.op is Ops.ASSIGN else 0
        planned[root] = view = buffer_uop(item.bufs[0] if item is not None else out, version).reshape(root.shape)
        if item is None:               # an empty result: nothing to compute
            realized[was.get(root, root)] = view
        else:
            item.node, item.becomes = was.get(root, root), view
            items.append(item)
    return items


def _order_roots(roots: list[UOp], position: dict, is_root: set[UOp]) -> list[UOp]:
    """Kernels in run order: each after the kernels it reads, and every kernel that reads a buffer's old value before
    the ASSIGN that overwrites it (else a weight's gradient could read the weight already updated by the optimizer)."""
    if len(roots) == 1:     # (one kernel, the most common schedule, reads no other and is its own order)
        return roots
    after, readers = {}, {}     # root -> the roots it reads; buffer -> the roots that read it
    for root in roots:
        read = _kernel_reads(root, is_root)
        after[root] = {u for u in read if u in is_root and u is not root}
        for buf in {u.arg[0] for u in read if u.op is Ops.BUFFER}:
            readers.setdefault(buf, set()).add(root)
    for root in roots:
        if root.op is Ops.ASSIGN and (target := buffer_of(root.src[0])) is not None:
            after[root] |= readers.get(target, set()) - {root}

    def last_first(nodes):      # (dependency_order goes down the last root, and the last source, first)
        return sorted(nodes, key=position.__getitem__, reverse=True)
    ordered = dependency_order(last_first(roots), lambda root: last_first(after[root]))
    at = {root: i for i, root in enumerate(ordered)}
    if any(at[dep] > at[root] for root in ordered for dep in after[root]):     # a cycle: no order can run them
        raise RuntimeError("one computation reads both the old and the assigned value of a buffer; realize a "
                           "copy of the old value first (x.contiguous().realize()) or realize the assign first")
    return ordered


COSTLY_ELEMENTWISE = 12     # weighted ops (OP_WEIGHT)
# a square root or a division counts as several ops (FDIV as the MUL by RECIP it replaced, so kernels fuse as they
# did); a reshape of a view costs a division and a remainder per index,
# a pad a bounds check
OP_WEIGHT = {Ops.SQRT: 4, Ops.RECIP: 4, Ops.FDIV: 5, Ops.EXP2: 4, Ops.LOG2: 4, Ops.SIN: 4, Ops.RESHAPE: 2, Ops.PAD: 1}


def _under_views(u: UOp) -> UOp:
    u = resolve(u)
    while u.op in GroupOp.MOVEMENT:
        u = resolve(u.src[0])
    return u


def _elementwise_work(u: UOp, is_root: set[UOp], views: bool = True) -> int:
    """How many ALU ops a kernel fusing u computes per element of u (stopping at buffers, reduces, other kernels),
    the index math of views included unless views=False."""
    fused = reachable([u], lambda n: n.op in (Ops.BUFFER, Ops.DEVICE, Ops.REDUCE_AXIS) or n in is_root and n is not u,
                      resolve)
    return sum(OP_WEIGHT.get(n.op, 1 if n.op in GroupOp.ALU else 0) for n in fused   # (not other kernels' roots)
               if (n not in is_root or n is u) and (views or n.op not in GroupOp.MOVEMENT))


def _kernel_reads(root: UOp, is_root: set[UOp]) -> set[UOp]:
    """What root's kernel fuses and reads: its nodes, down to buffers and the other kernels (their results)."""
    return reachable(root.src if root.op is Ops.COPY else _kernel_inputs(root),
                     lambda u: u.op is Ops.BUFFER or u in is_root and u is not root, resolve)


def _kernel_inputs(root: UOp) -> tuple[UOp, ...]:
    return (root.src[1],) if root.op is Ops.ASSIGN else () if root.op is Ops.COPY else root.src


def _make_item(root: UOp, out: Buffer | None, is_root: set[UOp], planned: dict[UOp, UOp]) -> ScheduleItem | None:
    if root.op is Ops.ASSIGN and (out := buffer_of(root.src[0], planned)) is None:
        raise RuntimeError(f"assign target must be a realized tensor, got a {root.src[0].op.name} graph; "
                           f"call .realize() on it first")
    if out.size == 0:
        return None
    if root.op is Ops.COPY:
        return ScheduleItem(root, [out] + [buffer_of(s, planned) for s in root.src], root)
    # bufs: out, then each buffer read, in DEFINE_GLOBAL order; var_vals: the values of the Variables unbound from sizes
    bufs, globals_by_buffer, memo, var_vals = [out], {}, {}, {}
    dest = UOp(Ops.DEFINE_GLOBAL, out.dtype, (), 0)
    if into_view := root.op is Ops.ASSIGN and len(root.src) > 2:   # a write into a view runs over the view, storing
        globals_by_buffer[out] = dest               # through it (and its reads of the target are of that argument)

    def load(buf: Buffer, size=None) -> UOp:
        if buf not in globals_by_buffer:
            globals_by_buffer[buf] = UOp(Ops.DEFINE_GLOBAL, buf.dtype, (), len(bufs))
            bufs.append(buf)
        return UOp(Ops.INPUT, buf.dtype, (globals_by_buffer[buf],), buf.size if size is None else size)

    def to_ast(u: UOp) -> UOp:
        if u in memo:
            return memo[u]
        r = resolve(u, planned)
        if r.op is Ops.BUFFER:
            made = load(r.arg[0])
        elif r is not u:
            made = to_ast(r)
        elif u in is_root and u is not root:
            raise AssertionError("a realize point must be realized before its users")
        elif u.op is Ops.CONST:
            made = UOp(Ops.CONST, u.dtype, (), unbind(u.arg, var_vals))
        elif u.op is Ops.CUSTOM:       # a custom op's value is its forward graph; the rest is for gradients
            made = to_ast(u.src[0])
        elif u.op is Ops.RESHAPE:      # reshapes compose (row-major order): one reshape of the innermost source
            shape, inner = unbind(u.arg, var_vals), to_ast(u.src[0])
            inner = inner.src[0] if inner.op is Ops.RESHAPE else inner
            if inner.op is Ops.INPUT and not all(isinstance(s, int) for s in shape):
                # a buffer seen with a symbolic shape (a TinyJit input): its size is that shape's, so the kernel
                # doesn't depend on the size of the buffer it is given
                inner = load(bufs[inner.src[0].arg], prod(shape))
            made = inner.reshape(shape)
        else:   # sizes in movement ops lose their values: the kernel is the same for every value of a Variable (other
            # ops' args hold no sizes)
            arg = unbind(u.arg, var_vals) if u.op in GroupOp.MOVEMENT else u.arg
            made = UOp(u.op, u.dtype, tuple(map(to_ast, u.src)), arg)
        memo[u] = made
        return made

    value = root.src[1] if root.op is Ops.ASSIGN else root
    if root.op is Ops.ASSIGN and root.src[1] in is_root and resolve(root.src[1], planned) is root.src[1]:
        raise AssertionError("assign value must be realized first")
    body = to_ast(value.src[0]) if value is root and value.op is Ops.CONTIGUOUS else to_ast(value)
    dest = to_ast(root.src[2]) if into_view else dest
    del to_ast      # (it refers to itself: a cycle that would keep `bufs` allocated until Python's gc next runs)
    # a reshape (or a detach) on top changes no byte of the result: the kernel computes in the shape before it, where
    # a reduce's output axes are its own (codegen/opts.py tiles a kernel along them). (Not when stored through a view)
    while body.op in (Ops.RESHAPE, Ops.DETACH) and body.src[0].op is not Ops.INPUT and not into_view:
        body = body.src[0]
    if body.op is Ops.INPUT:         # a plain copy still needs a shape to index it
        body = body.reshape(unbind(value.shape, var_vals))
    ast = UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (dest, body)),))
    return ScheduleItem(ast, bufs, root, var_vals=var_vals)


def graph_roots_in_order(items: list[ScheduleItem]) -> str:
    """A text view of a schedule (DEBUG >= 3)."""
    lines = []
    for i, item in enumerate(items):
        kind = item.ast.op.name if item.ast.op is not Ops.SINK else "KERNEL"
        ops = sorted({u.op.name for u in item.ast.toposort() if u.op in GroupOp.ALU or u.op is Ops.REDUCE_AXIS})
        lines.append(f"  [{i}] {kind} -> {item.node.shape} {item.node.dtype.name}  reads {len(item.bufs) - 1} "
                     f"buffers  ops: {' '.join(ops)}")
    return "\n".join(lines)
