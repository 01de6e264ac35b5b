"""Backend discovery: pluggy hookspecs and the loader over the entry-point group "tinygrad_core.backends".

A plugin that fails to import, raises, or declares an incompatible API is recorded as broken with the reason; it
never stops the other backends from loading."""
from __future__ import annotations
from dataclasses import dataclass, field
import importlib.metadata
import time
import traceback
from typing import Callable
import pluggy

BACKEND_API = (1, 0)          # major must match; a plugin's minor must be <= the core's minor
ENTRY_POINT_GROUP = "tinygrad_core.backends"

hookspec = pluggy.HookspecMarker("tinygrad_core")
hookimpl = pluggy.HookimplMarker("tinygrad_core")


class Hooks:
    @hookspec
    def tinygrad_core_register_backends(self, register):
        """Call register(BackendSpec(...)) once per backend this plugin provides.

        Must be cheap: no device is opened and no heavy module imported here; do that in BackendSpec.load()."""


@dataclass(frozen=True)
class BackendSpec:
    name: str                                   # "CPU", "CL", "CUDA", ... (matched case-insensitively)
    load: Callable[[str], object]               # load(device) -> Compiled; imports heavy dependencies lazily
    probe: Callable[[], str | None] = lambda: None   # None if usable, else the human reason it is not
    api_version: tuple[int, int] = BACKEND_API
    priority: int = 0                           # the usable backend with the highest priority is the default
    is_gpu: bool = False                        # "GPU" selects the best usable backend with is_gpu
    install_hint: str = ""                      # what to do when probe() says no
    describe: Callable[[], str] | None = None   # the devices behind the backend, for `tinygrad-core backends`


@dataclass
class Backend:
    """One discovered backend, as `tinygrad-core backends` shows it."""
    name: str
    distribution: str
    version: str
    spec: BackendSpec | None = None
    error: str | None = None                    # set when the plugin is broken (import error, bad API, ...)
    _reason: str | None = field(default=None, repr=False)
    _probed: bool = field(default=False, repr=False)

    @property
    def reason(self) -> str | None:
        """Why this backend can't be used (None when it can). probe() runs once, on first ask."""
        if self.error is not None:
            return self.error
        if not self._probed:
            self._probed = True
            try:
                self._reason = self.spec.probe()
            except Exception as e:                       # a probe that raises is a broken probe, not a crash
                self._reason = f"probe() raised {type(e).__name__}: {e}"
            if self._reason and self.spec.install_hint:
                self._reason += f" ({self.spec.install_hint})"
        return self._reason

    def assume_usable(self):
        """Skip probe() and treat this backend as usable: for compile-only runs (rendering and compiling kernels
        for a device this machine lacks), where nothing is allocated or launched."""
        if self.error is not None:
            raise RuntimeError(f"backend {self.name} is broken and can't be used even to compile: {self.error}")
        self._probed, self._reason = True, None
        registry._usable = None

    @property
    def status(self) -> str:
        return "broken" if self.error else "unavailable" if self.reason else "ok"


def api_compatible(version) -> bool:
    try:
        major, minor = version
    except (TypeError, ValueError):
        return False
    return major == BACKEND_API[0] and minor <= BACKEND_API[1]


class Registry:
    """All backends found through entry points (plus any registered by hand, e.g. in tests)."""

    def __init__(self):
        self.pm = pluggy.PluginManager("tinygrad_core")
        self.pm.add_hookspecs(Hooks)
        self.backends: dict[str, Backend] = {}
        self.broken: list[Backend] = []          # plugins that failed before naming a backend, and name clashes
        self.discovered = False
        self._usable: list[Backend] | None = None

    def discover(self):
        if self.discovered:
            return
        self.discovered = True
        started = time.perf_counter()
        for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = entry_point.dist
            dist_name, dist_version = (dist.name, dist.version) if dist is not None else (entry_point.value, "?")
            try:
                module = entry_point.load()
            except Exception as e:
                self.broken.append(Backend(entry_point.name.upper(), dist_name, dist_version,
                                           error=f"import failed: {type(e).__name__}: {e}"))
                continue
            self.add_plugin(module, dist_name, dist_version, entry_point.name)
        self.discovery_seconds = time.perf_counter() - started

    def add_plugin(self, plugin, distribution: str, version: str = "0", label: str | None = None):
        """Register one plugin object (a module or instance with the hook) and record what it provides."""
        label = label or distribution
        self._usable = None

        def register(spec):
            if not isinstance(spec, BackendSpec):
                raise TypeError(f"register() takes a BackendSpec, got {type(spec).__name__}")
            backend = Backend(spec.name.upper(), distribution, version, spec)
            if not api_compatible(spec.api_version):
                backend.error = (f"incompatible backend API {spec.api_version}: this tinygrad-core speaks "
                                 f"{BACKEND_API} (same major, minor <= {BACKEND_API[1]}); upgrade the plugin or the "
                                 f"core")
            if (existing := self.backends.get(backend.name)) is not None and existing.error is None:
                backend.error = f"name clash: {backend.name} is already provided by {existing.distribution}"
                self.broken.append(backend)
                return
            self.backends[backend.name] = backend

        try:
            self.pm.register(plugin, name=f"{label}:{id(plugin)}")
            hook = self.pm.subset_hook_caller("tinygrad_core_register_backends",
                                              remove_plugins=[p for p in self.pm.get_plugins() if p is not plugin])
            hook(register=register)
        except Exception as e:
            detail = traceback.format_exception_only(type(e), e)[-1].strip()
            self.broken.append(Backend(label.upper(), distribution, version, error=f"registration raised {detail}"))

    def all(self) -> list[Backend]:
        self.discover()
        return sorted(self.backends.values(), key=lambda b: (-b.spec.priority if b.spec else 0, b.name)) + self.broken

    def usable(self) -> list[Backend]:
        """Usable backends, best first (kept: Device.DEFAULT asks on every tensor made without a device)."""
        if self._usable is None:
            self._usable = [b for b in self.all() if b.spec is not None and b.reason is None]
        return self._usable


registry = Registry()
