"""Buffer identity: which graph node stands for which buffer, and which computed nodes live on in buffers.

Below the scheduler, beside device.py: the tensor layer, the scheduler, the engine and the layers above them all
ask these questions, and none of them needs the scheduler to ask them."""
import weakref
from tinygrad_core.device import Buffer
from tinygrad_core.ops import Ops, UOp, GroupOp

# every node that has been computed, mapped to the buffer view that holds its value (while the node lives)
realized: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def buffer_uop(buf: Buffer, version: int = 0) -> UOp:
    """The graph leaf for a buffer. Writing a buffer (ASSIGN) bumps the version, so graphs built afterwards are new
    nodes and can never be answered from `realized` with the value from before the write."""
    return UOp(Ops.BUFFER, buf.dtype, (), (buf, version))


def buffer_of(u: UOp, planned: dict[UOp, UOp] | None = None) -> Buffer | None:
    """The Buffer holding u's value when u is a plain (contiguous, whole) view of one, else None."""
    return leaf.arg[0] if (leaf := buffer_leaf(resolve(u, planned))) is not None else None


def buffer_leaf(view: UOp) -> UOp | None:
    """The BUFFER node under a plain view of one (the node itself, or a reshape of it); None for any other graph."""
    leaf = view.src[0] if view.op is Ops.RESHAPE else view
    return leaf if leaf.op is Ops.BUFFER else None


def settled(u: UOp) -> UOp:
    """u with the nodes under its views (GroupOp.VIEW) that have been computed replaced by the buffer views holding
    them: a view of a buffer is then views over the BUFFER node (a view of a lazy graph, over that graph)."""
    u = realized.get(u, u)
    return u.replace(src=(settled(u.src[0]),)) if u.op in GroupOp.VIEW else u


def storage(u: UOp) -> UOp:
    """The node under u's views, settled: a BUFFER when u views a buffer, an ASSIGN when it views a pending write."""
    while (u := realized.get(u, u)).op in GroupOp.VIEW:
        u = u.src[0]
    return u


def resolve(u: UOp, planned: dict[UOp, UOp] | None = None) -> UOp:
    """What stands for u's value: the buffer view it is planned to be written to (by the schedule being built) or was
    computed into, else u itself."""
    found = planned.get(u) if planned else None
    return found if found is not None else realized.get(u, u)
