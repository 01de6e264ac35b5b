"""Backend discovery: pluggy hookspecs and the loader over the entry-point group "tinygrad_core.backends".

A plugin that fails to import, raises, or declares an incompatible API is recorded as broken with the reason; it
never stops the other backends from loading, and claiming a name another plugin holds never takes that name."""
from dataclasses import dataclass, field
import importlib.metadata
import os
import traceback
from typing import Callable
import pluggy

BACKEND_API = (2, 2)          # major must match; a plugin's minor must be <= the core's minor
ENTRY_POINT_GROUP = "tinygrad_core.backends"
FIRST_PARTY = {"tinygrad-cpu", "tinygrad-opencl", "tinygrad-cuda", "tinygrad-python"}   # they keep their names
# what to install for a first-party device (PYTHON's distribution is on no index: it comes from a checkout)
INSTALL = {"CPU": "pip install tinygrad-cpu", "CL": "pip install 'tinygrad-opencl[pocl]'",
           "CUDA": "pip install tinygrad-cuda", "PYTHON": "pip install ./plugins/tinygrad_python (from a checkout)"}

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
    lost_to: str | None = None                  # the distribution holding the name this backend also claims
    clash: str = ""                             # on each claimant of a contested name: who holds it, how to choose
    _reason: str | None = field(default=None, repr=False)
    _probed: bool = field(default=False, repr=False)

    @property
    def reason(self) -> str | None:
        """Why this backend can't be used (None when it can). probe() runs once, on first ask."""
        if self.error is not None or self.lost_to is not None:
            return self.error or f"name clash: {self.name} is held by {self.lost_to}"
        if not self._probed:
            self._probed = True
            try:
                reason = self.spec.probe()
            except Exception as e:                       # a probe that raises is a broken probe, not a crash
                reason = f"probe() raised {type(e).__name__}: {e}"
            hint = f" ({self.spec.install_hint})" if self.spec.install_hint else ""
            self._reason = None if reason is None else f"{reason}{hint}"      # a non-str reason must not crash
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
        return "broken" if self.error else "clash" if self.lost_to else "unavailable" if self.reason else "ok"


def api_compatible(version) -> bool:
    return (isinstance(version, (tuple, list)) and len(version) == 2 and all(isinstance(v, int) for v in version)
            and version[0] == BACKEND_API[0] and version[1] <= BACKEND_API[1])


class Registry:
    """All backends found through entry points (plus any registered by hand, e.g. in tests)."""

    def __init__(self):
        self.pm = pluggy.PluginManager("tinygrad_core")
        self.pm.add_hookspecs(Hooks)
        self.backends: dict[str, Backend] = {}    # name -> the backend holding it
        self.claims: dict[str, list[Backend]] = {}   # name -> every backend claiming it, the holder first
        self.broken: list[Backend] = []          # plugins that failed before naming a backend
        self.discovered = False
        self._usable: list[Backend] | None = None

    def discover(self):
        if self.discovered:
            return
        self.discovered = True
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

    def add_plugin(self, plugin, distribution: str, version: str = "0", label: str | None = None):
        """Register one plugin object (a module or instance with the hook) and record what it provides."""
        label = label or distribution
        self._usable = None

        def register(spec):
            if not (isinstance(spec, BackendSpec) and isinstance(spec.name, str) and isinstance(spec.priority, int)) \
                    or spec.name.upper() == "GPU":      # (GPU is the alias for the best usable GPU backend)
                raise TypeError(f"register() takes a BackendSpec with a str name other than GPU and an int priority, "
                                f"got {spec!r}")
            backend = Backend(spec.name.upper(), distribution, version, spec)
            if not api_compatible(spec.api_version):
                backend.error = (f"incompatible backend API {spec.api_version}: this tinygrad-core speaks "
                                 f"{BACKEND_API} (same major, minor <= {BACKEND_API[1]}); upgrade the plugin or core")
            self.claims.setdefault(backend.name, []).append(backend)
            self._settle(backend.name)

        try:
            self.pm.register(plugin, name=f"{label}:{id(plugin)}")
            hook = self.pm.subset_hook_caller("tinygrad_core_register_backends",
                                              remove_plugins=[p for p in self.pm.get_plugins() if p is not plugin])
            hook(register=register)
        except Exception as e:
            detail = traceback.format_exception_only(type(e), e)[-1].strip()
            self.broken.append(Backend(label.upper(), distribution, version, error=f"registration raised {detail}"))

    def _settle(self, name: str):
        """Give a contested name to, in order: the distribution in TINYGRAD_BACKEND_<NAME>, a first-party one, a
        usable one, the first by distribution name; never by discovery order or priority, so no plugin hijacks it."""
        if len(claims := self.claims[name]) > 1:        # probe only contested names: discovery stays cheap
            chosen = os.environ.get(f"TINYGRAD_BACKEND_{name}")
            for backend in claims:
                backend.lost_to = None
            claims.sort(key=lambda b: (b.distribution != chosen, b.distribution not in FIRST_PARTY,
                                       b.reason is not None, b.distribution))
            claims[0].clash = (f"holds {name} over {', '.join(b.distribution for b in claims[1:])}; "
                               f"TINYGRAD_BACKEND_{name}=<distribution> picks another")
            for backend in claims[1:]:
                backend.lost_to = claims[0].distribution
                backend.clash = f"TINYGRAD_BACKEND_{name}={backend.distribution} picks this one"
        self.backends[name] = claims[0]

    def all(self) -> list[Backend]:
        self.discover()
        claims = (backend for claims in self.claims.values() for backend in claims)     # holders first, best first
        return sorted(claims, key=lambda b: (b.lost_to is not None, -b.spec.priority, b.name)) + self.broken

    def usable(self) -> list[Backend]:
        """Usable backends, best first (kept: Device.DEFAULT asks on every tensor made without a device)."""
        if self._usable is None:
            self._usable = [b for b in self.all() if b.spec is not None and b.reason is None]
        return self._usable


registry = Registry()
