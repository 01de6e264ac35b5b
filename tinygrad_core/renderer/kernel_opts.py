"""What a renderer's `kernel_opts` hook builds on (part of the backend API, docs/PLUGINS.md): the `KernelOpts` it
returns, and `load_strides`, how each load of a kernel walks memory. Both are the codegen's (codegen/opts.py): the
choices are the backend's; this analysis of the kernel is the same for every one."""
from tinygrad_core.codegen.opts import KernelOpts as KernelOpts, load_strides as load_strides
