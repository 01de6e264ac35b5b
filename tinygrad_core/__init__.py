"""tinygrad-core: a small, readable deep-learning framework whose backends are plugins.

from tinygrad_core import Tensor, Device, dtypes, TinyJit, nn"""
import importlib.metadata
from tinygrad_core.tensor import Tensor, Function
from tinygrad_core.dtype import dtypes, DType
from tinygrad_core.device import Device
from tinygrad_core.helpers import Context, getenv, GlobalCounters, DEBUG, fetch
from tinygrad_core.debug import gradcheck
from tinygrad_core.engine.jit import TinyJit
from tinygrad_core.ops import Variable

__version__ = importlib.metadata.version("tinygrad-core")     # (the repository's VERSION, as installed)
__all__ = ["Tensor", "Function", "dtypes", "DType", "Device", "Context", "getenv", "GlobalCounters", "DEBUG", "fetch",
           "gradcheck", "TinyJit", "Variable"]   # `from tinygrad_core import nn` imports the subpackage
