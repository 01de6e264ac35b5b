"""Devices: the Allocator / Compiler / Program / Compiled bases a backend fills in, Buffer, and the Device registry.

The core reaches hardware only through these classes; which ones exist is decided by plugins.py at runtime."""
from __future__ import annotations
import contextlib
import functools
import os
import weakref
from typing import Any
import numpy as np
from tinygrad_core.cache import entry_path, package_digest, read_entry, write_entry
from tinygrad_core.dtype import DType, dtypes
from tinygrad_core.helpers import ContextVar, GlobalCounters, getenv
from tinygrad_core.plugins import INSTALL, registry, Backend


class CompileError(Exception):
    """A kernel failed to compile. Carries the source so the report can show what was compiled."""

    def __init__(self, message: str, source: str = ""):
        super().__init__(f"{message}\n--- source ---\n{source}" if source else message)
        self.message, self.source = message, source


class BackendUnavailable(RuntimeError):
    """The device asked for can't be used: no backend by that name, none usable, or it failed to load."""


# ---------------------------------------------------------------------------------------------------------------
# The four parts of a backend.
# ---------------------------------------------------------------------------------------------------------------
class Allocator:
    """Owns device memory. Backends implement _alloc/_free/_copyin/_copyout (and optionally _offset)."""

    def __init__(self):
        self.in_use = 0

    def alloc(self, size: int, options=None):
        if size < 0:
            raise ValueError(f"can't allocate a negative size ({size} bytes)")
        out = self._alloc(max(size, 1), options)
        self.in_use += size
        return out

    def free(self, opaque, size: int, options=None):
        self.in_use -= size
        self._free(opaque, max(size, 1), options)

    def copyin(self, dest, src: memoryview):
        self._copyin(dest, src)

    def copyout(self, dest: memoryview, src):
        self._copyout(dest, src)

    # host-memory backends only: borrow(array) wraps an array's memory (None: can't), as_buffer(opaque) is the memory
    shares_host_memory = False

    def borrow(self, array: np.ndarray):
        if not self.shares_host_memory:
            return None
        self.in_use += array.nbytes
        return self._borrow(array)

    def as_buffer(self, opaque) -> memoryview:
        raise NotImplementedError(f"{type(self).__name__}'s memory isn't host memory")

    def _borrow(self, array: np.ndarray):
        raise NotImplementedError

    def offset(self, opaque, size: int, offset: int):
        """A view of `size` bytes starting `offset` bytes into opaque (backends that can, override)."""
        raise NotImplementedError(f"{type(self).__name__} has no sub-buffer views")

    def _alloc(self, size: int, options):
        raise NotImplementedError

    def _free(self, opaque, size: int, options):
        """Give the memory back (nothing to do where the garbage collector frees it)."""

    def _copyin(self, dest, src: memoryview):
        raise NotImplementedError

    def _copyout(self, dest: memoryview, src):
        raise NotImplementedError


FLUSH_BYTES = 1 << 20
LRU = ContextVar("LRU", 1)      # 0: freed memory goes back to the device at once instead of to the cache


class LRUAllocator(Allocator):
    """Keeps freed buffers by size and hands them out again: allocation is often the slowest thing on a device."""

    def __init__(self):
        super().__init__()
        self.cache: dict[tuple[int, Any], list] = {}

    def alloc(self, size: int, options=None):
        if cached := self.cache.get((max(size, 1), options)):
            self.in_use += size
            return cached.pop()
        if size >= FLUSH_BYTES:     # a new large size: memory kept for other sizes would only add to the peak
            self.free_cache()
        try:
            return super().alloc(size, options)
        except MemoryError:
            self.free_cache()
            return super().alloc(size, options)

    def free(self, opaque, size: int, options=None):
        if not LRU.value:
            return super().free(opaque, size, options)
        self.in_use -= size
        self.cache.setdefault((max(size, 1), options), []).append(opaque)

    def free_cache(self):
        for (size, options), opaques in self.cache.items():
            for opaque in opaques:
                self._free(opaque, size, options)
        self.cache.clear()


class Compiler:
    """Turns rendered source into a binary. `cachekey` names the compiler+version (None: don't cache on disk); the
    core adds the code and version of the compiler's distribution (`package_digest`) to every entry's key."""
    cachekey: str | None = None

    def compile(self, src: str) -> bytes:
        raise NotImplementedError

    def compile_many(self, sources: list[str]) -> list[bytes]:
        """Several kernels at once: a backend whose compiler can use several cores overrides this."""
        return [self.compile(src) for src in sources]

    def compile_cached(self, src: str) -> bytes: return self.compile_cached_many([src])[0]  # noqa: E704

    def compile_cached_many(self, sources: list[str], again: bool = False) -> list[bytes]:
        """The binaries of sources: from the disk cache, the missing ones compiled together by compile_many (all of
        them, again=True: their entries replaced)."""
        if self.cachekey is None:
            return self.compile_many(sources)
        paths = [entry_path(f"kernels/{self.cachekey}", package_digest(type(self).__module__), s) for s in sources]
        binaries = [None if again else read_entry(path) for path in paths]
        missing = [i for i, binary in enumerate(binaries) if binary is None]
        for i, binary in zip(missing, self.compile_many([sources[i] for i in missing])):
            write_entry(paths[i], binary)
            binaries[i] = binary
        return binaries


class Program:
    """A compiled kernel. __call__(*buffers, global_size, local_size, vals, wait) -> seconds if wait else None."""

    def __init__(self, name: str, lib: bytes):
        self.name, self.lib = name, lib

    def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False):
        raise NotImplementedError


class Compiled:
    """A backend instance for one device: the bundle a plugin's load() returns."""

    def __init__(self, device: str, allocator: Allocator, renderer, compiler: Compiler, runtime: type[Program]):
        self.device, self.allocator, self.renderer = device, allocator, renderer
        self.compiler, self.runtime = compiler, runtime
        self.kernel_cache: dict = {}       # kernel AST -> its runner (cache.py describes every cache)

    def synchronize(self):
        """Wait for all queued work on this device (synchronous backends need not override)."""

    def memory_used(self) -> int: return self.allocator.in_use      # noqa: E704


# ---------------------------------------------------------------------------------------------------------------
# Buffer: a typed piece of device memory. Allocated on first use; freed (back to the allocator) when dropped.
# ---------------------------------------------------------------------------------------------------------------
class Buffer:
    """Memory on a device for `size` elements of `dtype`, allocated on first use.

    On backends whose memory is host memory (the allocator implements `_borrow` and `as_buffer`), a buffer may share
    its memory with a numpy array: made from one without a copy (`from_host`), or read out as one (`host_view`).
    Shared memory is never written: the first write gives the buffer memory of its own (copy on write), and the
    shared memory stays with the array."""

    def __init__(self, device: str, size: int, dtype: DType, initial: np.ndarray | None = None):
        self.device, self.size, self.dtype, self.nbytes = device, size, dtype, size * dtype.itemsize
        self._opaque, self._shared = None, False
        if initial is not None:
            self.copyin(initial)

    @staticmethod
    def from_host(device: str, array: np.ndarray, dtype: DType) -> Buffer:
        """A buffer over `array` itself where that is safe: the backend can borrow host memory, the layout allows (C
        order, aligned, the buffer's own element type), and nothing can change the array (it and all it is a view of are
        read-only: np.frombuffer of bytes, a read-only memory map, or an array after a.flags.writeable = False).
        Else a buffer over a copy."""
        buf = Buffer(device, array.size, dtype)
        if array.size and array.dtype == dtype.np and array.flags.c_contiguous and array.flags.aligned and \
                _immutable(array) and (opaque := buf.allocator.borrow(array)) is not None:
            buf._opaque, buf._shared = opaque, True
            GlobalCounters.mem_used += buf.nbytes
            return buf
        return buf.copyin(array)

    def __repr__(self) -> str:
        return f"<Buffer {self.device} {self.size} x {self.dtype.name}{'' if self.is_allocated else ' unallocated'}>"

    @property
    def is_allocated(self) -> bool:
        return self._opaque is not None

    @functools.cached_property
    def allocator(self) -> Allocator:      # (the one that allocated the memory takes it back)
        return Device[self.device].allocator

    def ensure_allocated(self) -> Buffer:
        if self._opaque is None:
            self._opaque = self.allocator.alloc(self.nbytes)
            GlobalCounters.mem_used += self.nbytes
        return self

    @property
    def opaque(self):
        return self._opaque if self._opaque is not None else self.ensure_allocated()._opaque

    def __del__(self):
        with contextlib.suppress(Exception):      # at interpreter exit the device may already be gone
            self.deallocate()

    def deallocate(self):
        """Give the memory back (run_schedule, once nothing will read the buffer again); a later use allocates anew."""
        if getattr(self, "_opaque", None) is not None:
            GlobalCounters.mem_used -= self.nbytes
            self._release()
            self._opaque, self._shared = None, False

    def _release(self):
        if self._shared and self._held():      # the array holds the memory: it isn't the allocator's to hand out again
            self.allocator.in_use -= self.nbytes
        else:
            self.allocator.free(self._opaque, self.nbytes)

    def _held(self) -> bool:
        """An array shares the memory: the one the buffer was made from (_shared is True), or the one host_view gave
        (_shared is a weak reference to it: once that array and every view of it are gone, the memory is the buffer's
        alone again, and a write needs no copy: loss.item() every step would otherwise cost an allocation each)."""
        return self._shared is True or self._shared() is not None

    def prepare_write(self) -> Buffer:
        """Called before anything writes into the buffer: memory shared with a numpy array is replaced by a copy of
        its own (a kernel may read what it overwrites, e.g. x.assign(x + 1))."""
        if self._shared and self._held():
            own = self.allocator.alloc(self.nbytes)
            self.allocator.copyin(own, self.allocator.as_buffer(self._opaque))
            self._release()
            self._opaque = own
        self._shared = False
        return self

    def copyin(self, data: np.ndarray) -> Buffer:
        data = np.ascontiguousarray(data)
        if data.nbytes != self.nbytes:
            raise ValueError(f"copyin of {data.nbytes} bytes into a buffer of {self.nbytes} bytes")
        if self.nbytes == 0:      # an empty tensor: nothing to copy (the allocation itself is at least 1 byte)
            return self
        self.ensure_allocated().prepare_write()
        self.allocator.copyin(self.opaque, memoryview(data.reshape(-1).view(np.uint8)))
        return self

    def numpy(self) -> np.ndarray:
        """The buffer's contents as a new host array (bfloat16 as its raw uint16 bits)."""
        out = np.empty(self.size, dtype=self.dtype.np)
        if self.size:
            Device[self.device].synchronize()
            self.allocator.copyout(memoryview(out.view(np.uint8)), self.opaque)
        return out

    def host_view(self) -> np.ndarray:
        """The contents as a read-only numpy array: the buffer's memory itself where the backend's memory is host
        memory (the buffer copies on its next write, so the array keeps these values), else a copy."""
        if not self.size or not self.allocator.shares_host_memory:
            return self.numpy()
        Device[self.device].synchronize()
        out = np.frombuffer(self.allocator.as_buffer(self.opaque), dtype=self.dtype.np, count=self.size)
        # (a second array while the first lives: one reference can't follow both, so the memory counts as held)
        self._shared = True if self._shared and self._held() else weakref.ref(out)
        out.flags.writeable = False
        return out


def _immutable(array: np.ndarray) -> bool:
    """Nothing can write the array's memory: neither it, nor any array or buffer object it is a view of."""
    base = array
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    try:
        return base is None or memoryview(base).readonly
    except TypeError:
        return False


# ---------------------------------------------------------------------------------------------------------------
# Device: name -> Compiled, loaded through the plugin registry.
# ---------------------------------------------------------------------------------------------------------------
class _Device:
    def __init__(self):
        self._opened: dict[str, Compiled] = {}

    def canonicalize(self, name: str | None) -> str:
        """'cpu' -> 'CPU', 'gpu' -> the best usable GPU backend, 'cl:1' -> 'CL:1'. Unknown names fail loudly."""
        if isinstance(name, (tuple, list)):     # (the devices of a multi-device tensor; just one is that one, as tinygrad)
            names = tuple(map(self.canonicalize, name))
            return names if len(names) > 1 else names[0]
        if (name := name or self.DEFAULT) in self._opened:   # (one in use is named canonically: every tensor asks)
            return name
        base, _, index = str(name).upper().partition(":")
        if base == "GPU":
            if not (gpus := [b for b in registry.usable() if b.spec.is_gpu]):
                raise BackendUnavailable("no usable GPU backend: " + self._summary() +
                                         "; install one, e.g. pip install 'tinygrad-opencl[pocl]'")
            base = gpus[0].name
        backend = self.backend(base)
        if backend.reason is not None:
            raise BackendUnavailable(f"backend {base} ({backend.distribution} {backend.version}) can't be used: "
                                     f"{backend.reason}")
        return f"{base}:{index}" if index and index != "0" else base

    def backend(self, base: str) -> Backend:
        registry.discover()
        name = base.upper()
        if (found := registry.backends.get(name) or next((b for b in registry.broken if b.name == name), None)) is None:
            hint = f"to get it: {INSTALL[name]}" if name in INSTALL else \
                "install the backend that provides it, or check the spelling"
            raise BackendUnavailable(f"unknown device {base!r}; known backends: {self._summary()}. {hint}")
        return found

    def _summary(self) -> str:
        return ", ".join(f"{b.name} ({b.status})" for b in registry.all()) or "none installed"

    def __getitem__(self, name: str) -> Compiled:
        name = self.canonicalize(name[0] if isinstance(name, tuple) else name)  # (several: asked of the first)
        if name not in self._opened:
            backend = self.backend(name.partition(":")[0])
            try:
                compiled = backend.spec.load(name)
                if not isinstance(compiled, Compiled):
                    raise TypeError(f"load({name!r}) returned {type(compiled).__name__}, not a Compiled")
            except Exception as e:          # (broken from now on: never the default, listed with the reason)
                backend.error, registry._usable = f"load({name!r}) failed: {type(e).__name__}: {e}", None
                raise BackendUnavailable(f"backend {backend.name} ({backend.distribution} {backend.version}) failed "
                                         f"to load: {type(e).__name__}: {e}") from e
            self._opened[name] = compiled
        return self._opened[name]

    @property
    def DEFAULT(self) -> str:
        if (chosen := getenv("TINYGRAD_DEVICE", "") or getenv("DEV", "")):
            return self.canonicalize(chosen)
        for backend in registry.usable():     # the best that loads: one that fails to is broken from then on
            with contextlib.suppress(BackendUnavailable):
                return self[backend.name] and backend.name
        raise BackendUnavailable(f"no usable backend: {self._summary()}; from a checkout of tinygrad-core: pip "
                                 f"install ./tinygrad_cpu (or ./plugins/tinygrad_python, the reference)")

    @DEFAULT.setter
    def DEFAULT(self, name: str):
        os.environ["TINYGRAD_DEVICE"] = self.canonicalize(name)


Device = _Device()
__all__ = ["Device", "Buffer", "Allocator", "LRUAllocator", "Compiler", "CompileError", "Program", "Compiled",
           "BackendUnavailable", "dtypes"]
