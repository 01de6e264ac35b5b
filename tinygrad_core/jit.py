"""`from tinygrad_core.jit import TinyJit`, where tinygrad users look for it."""
from tinygrad_core.engine.jit import TinyJit, JitError  # noqa: F401 (re-exported)
