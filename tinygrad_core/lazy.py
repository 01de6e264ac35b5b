"""Compatibility: older tinygrad code imports LazyBuffer; here every lazy value is a UOp graph node."""
from tinygrad_core.ops import UOp as LazyBuffer  # noqa: F401 (re-exported)
