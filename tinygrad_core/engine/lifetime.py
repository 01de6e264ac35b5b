"""What a realize computes and which graphs it keeps: the tensors asked for, with the lazy tensors that read a buffer
they overwrite; each tensor then drops its graph for the buffer holding its value, unless a later backward() must go
through it. A graph kept is what keeps buffers alive: the schedule frees every other buffer it makes after its last
reader, so chains of updates (an optimizer's steps) don't grow without end."""
from tinygrad_core.buffers import buffer_of, realized, settled, storage
from tinygrad_core.engine.realize import kept_nodes, run_schedule
from tinygrad_core.multi import lowered, realized_view
from tinygrad_core.ops import GroupOp, Ops, reachable, reaches
from tinygrad_core.schedule import create_schedule


def realize_tensors(tensors: list, live, grad_leaves: set):
    """Computes tensors (Tensor objects: their .uop is replaced by their buffer's). live() lists every live tensor;
    grad_leaves are the graphs of those that require a gradient."""
    if all(t.uop not in realized and buffer_of(t.uop) is not None for t in tensors):
        return          # (plain buffers already, as a jitted step's loss for .item(): nothing to run or drop)
    tensors = list(tensors) + readers_of_overwritten(tensors, live())
    # backward() still needs the graph of a tensor that reaches one requiring a gradient (other than through a DETACH)
    # and isn't itself such a leaf (its buffer is found through `realized` then)
    needs_graph = reaches(grad_leaves, stop={Ops.DETACH, Ops.ASSIGN}, floats_only=True)    # (no gradient flows there)
    dropping = {id(t) for t in tensors if not (grad_leaves and not t.requires_grad and needs_graph(t.uop))}
    # a view of a buffer (or of a write into one) stays a view: what is computed is the write, if any
    views = {id(t) for t in tensors if t.uop.op in GroupOp.VIEW and storage(t.uop).op in (Ops.BUFFER, Ops.ASSIGN)}
    # (a multi-device tensor is scheduled as its parts, one graph per device: multi.py)
    uops, outs = lowered([storage(t.uop) if id(t) in views else t.uop for t in tensors]), {id(t) for t in tensors}
    schedule = create_schedule(uops)
    run_schedule(schedule, kept_nodes(schedule, uops, [t.uop for t in tensors if id(t) not in dropping],
                                      lambda: [t for t in live() if id(t) not in outs]))
    for t in tensors:       # (realized_view notes a multi-device value's parts in realized: kept graphs find it)
        if (view := settled(t.uop) if id(t) in views else realized_view(t.uop)) is not None and id(t) in dropping:
            t.uop = view


def readers_of_overwritten(tensors: list, live: list) -> list:
    """Lazy tensors elsewhere that read a buffer these tensors' ASSIGNs overwrite. They are computed in the same
    schedule, before the write (PyTorch would have computed them already): e.g. the loss, after optimizer.step()."""
    if not (targets := {storage(u.src[0]) for u in reachable([t.uop for t in tensors]) if u.op is Ops.ASSIGN}):
        return []
    # (or an earlier write computed into one of them. Readers of a write still to run read its new value: they run
    # after it, and no longer keep its graph)
    targets |= {node for node, held in list(realized.items()) if node.op is Ops.ASSIGN and storage(held) in targets}
    chosen, reads = set(map(id, tensors)), reaches(targets)
    return [t for t in live if id(t) not in chosen and buffer_of(t.uop) is None and reads(t.uop)]
