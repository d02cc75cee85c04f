"""The backend-neutral `Cluster` interface (the registry of backends: `labkit.cluster.backends`).

A notebook cell written against `Cluster` runs unchanged on every backend: ``sim`` (embedded,
in-process), ``local`` (real control-plane binaries as local processes), ``kind`` and
``kubeconfig`` (an existing cluster).

Writing a backend
-----------------
Subclass `Cluster` (or `labkit.cluster.backends.kubeapi.KubeCluster` for one with a real API
server), implement the abstract methods, and register the class when its package is imported::

    # labkit/cluster/backends/local/__init__.py
    from labkit.cluster.backends import register_backend

    class LocalCluster(KubeCluster):
        backend = "local"
        ...

    register_backend("local", LocalCluster)

`down()` must also work on a fresh instance whose ``profile`` attribute was set (no ``up()``), so
that ``labkit cluster down --backend B --profile P`` can stop a cluster an earlier process started;
``status()`` likewise (override it to describe the live cluster).

Objects are plain dicts (see docs/architecture.md). Shared helpers that need no backend:
`labkit.cluster.placements.build_placements` (the `placements()` table from pods and claims) and
`labkit.model.profiles.load_profile` (cluster profiles).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from labkit.api import LoadError, load
from labkit.api.features import DEFAULT_VERSION, FeatureGateError, resolve_gates
from labkit.cluster.placements import PlacementTable
from labkit.errors import EngineError, InputError, LabkitError, NotFoundError
from labkit.model.profiles import load_profile

T = TypeVar("T")

#: source accepted by `Cluster.apply`: YAML/JSON text, one object, a list of objects, or a path
Source = str | Path | dict[str, Any] | list[dict[str, Any]]


class ClusterError(EngineError):
    """A one-line, user-facing problem with a cluster operation (no traceback wanted)."""


class NotFound(NotFoundError, ClusterError):
    """The named object does not exist."""


class ClusterInputError(InputError, ClusterError):
    """What the user handed a cluster (objects, a profile, a dump, a kubeconfig) is wrong (exit 2)."""


def check_gpu_plugin(backend: str, profile: Any) -> None:
    """A profile whose GPUs come through NVIDIA's device plugin (`gpuPlugin: device-plugin`) runs on the sim
    only: the real backends run the fake DRA driver, which would publish the GPUs through DRA instead."""
    plugin = getattr(profile, "gpu_plugin", "dra")
    if backend != "sim" and plugin != "dra":
        raise ClusterInputError(f"gpuPlugin: {plugin} (GPUs through NVIDIA's device plugin) is modelled on the sim "
                                f"backend only; the {backend} backend runs the fake DRA driver",
                                obj=f"cluster profile {profile.name}", fix="use --backend sim for this profile")


class RefusedObjects(ClusterInputError):
    """`apply` stored the valid objects and refused the others, as `kubectl apply` does (it goes on
    past a refused object and reports every one: kubectl/pkg/cmd/apply/apply.go, Run). `problems`:
    one line per problem of every refused object, all of them (the CLI prints each); `stored`: the
    objects stored meanwhile, as the cluster returned them."""

    def __init__(self, problems: list[str], stored: list[dict[str, Any]] | None = None) -> None:
        self.problems = list(problems)
        self.stored = list(stored or [])
        super().__init__("\n".join(self.problems))

    @classmethod
    def merge(cls, errors: list[RefusedObjects], stored: list[dict[str, Any]]) -> RefusedObjects:
        """One error for several applies (files, or the tiers of one apply): every problem, in order."""
        return cls([p for e in errors for p in e.problems], stored)


#: how to get what a live backend needs: the README's one command, or the package
FULL_KIT = "install the full kit (README: make lab; or pip install dra-labkit)"


class MissingPackage(ClusterError):
    """A live backend (local, kind, kubeconfig) needs a Python package that is not installed here
    (a pure-Python install, or Pyodide in a browser tab): `.name` is the package's import name."""

    def __init__(self, backend: str, name: str) -> None:
        super().__init__(f"backend {backend!r} needs the Python package {name}, which is not installed here: "
                         f"{FULL_KIT}")
        self.name = name


def cluster_error(exc: BaseException) -> ClusterError:
    """``exc`` as the ClusterError of its kind (input 2, not found 3, else engine 1), with its
    ``obj``/``field``/``fix`` kept: callers still catch ``ClusterError``, the CLI still sees the kind."""
    if isinstance(exc, ClusterError):
        return exc
    cls = NotFound if isinstance(exc, NotFoundError) else ClusterInputError if isinstance(exc, InputError) \
        else ClusterError
    if isinstance(exc, LabkitError) and "\n" not in str(exc).strip():
        return cls(exc.line())  # object, field and fix on the one line, as `str()` shows it
    if isinstance(exc, LabkitError):  # several problems, one per line: keep them, and the context
        return cls(str(exc), obj=exc.obj, field=exc.field, fix=exc.fix)
    return cls(str(exc))


def server_minor(git_version: str) -> str:
    """ "v1.37.1-gke.100" / "v1.36.0+k3s1" -> "1.37" / "1.36": the minor of a server's gitVersion."""
    parts = str(git_version).strip().lstrip("v").split(".")
    return ".".join(p.split("-")[0].rstrip("+").split("+")[0] for p in parts[:2])


class Cluster(ABC):
    """A Kubernetes cluster with DRA, seen through plain-dict objects."""

    #: registry name of the backend ("sim", "local", "kind")
    backend: ClassVar[str] = ""

    def __init__(self, *, progress: bool = True, **unknown: Any) -> None:
        if unknown:
            raise ClusterError(_unknown_options(type(self), sorted(unknown)))
        self.profile: Any = None  # labkit.model.profiles.ClusterProfile once up
        self.show_progress = progress

    # -- what the cluster is ----------------------------------------------------------------
    @property
    def kubernetes_version(self) -> str:
        """The Kubernetes minor the cluster runs, or emulates ("1.37"): its profile's for a cluster the kit
        made; a server's own for one it attached to (KubeCluster)."""
        return str(getattr(self.profile, "kubernetes_version", "") or DEFAULT_VERSION)

    def feature_gates(self) -> dict[str, bool]:
        """The feature gates the cluster runs with: its version's defaults with the profile's settings (a
        backend that can read the server's own says those instead). {} for settings the version refuses."""
        try:
            gates, _warnings = resolve_gates(self.kubernetes_version,
                                             dict(getattr(self.profile, "feature_gates", None) or {}))
        except (FeatureGateError, KeyError):
            return {}
        return gates

    @classmethod
    def available(cls, kubernetes_version: str = DEFAULT_VERSION) -> tuple[bool, str]:
        """Can this backend run a cluster of `kubernetes_version` on this machine? (yes or no, and why: what
        is missing and the command that fixes it). The course's environment check asks every backend."""
        return True, "nothing to install"

    # -- lifecycle -------------------------------------------------------------------------
    @abstractmethod
    def up(self, profile: Any = "workshop") -> Cluster:
        """Create (or attach to) a cluster of `profile` (name, path or ClusterProfile); returns self."""

    @abstractmethod
    def down(self) -> None:
        """Tear the cluster down; safe to call twice."""

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    # -- objects ---------------------------------------------------------------------------
    @abstractmethod
    def apply(self, source: Source) -> list[dict]:
        """Create or update the objects in `source`; returns them as stored (with uid, status...)."""

    @abstractmethod
    def delete(self, kind: str, name: str, namespace: str | None = "default") -> None:
        """Delete one object (namespace ignored for cluster-scoped kinds). Raises NotFound."""

    @abstractmethod
    def get(self, kind: str, name: str, namespace: str | None = "default") -> dict:
        """One object as a dict. Raises NotFound."""

    def find(self, kind: str, name: str, namespace: str | None = "default") -> dict | None:
        """`get`, or None when there is no such object (for loops that poll many objects)."""
        try:
            return self.get(kind, name, namespace)
        except NotFound:
            return None

    @abstractmethod
    def list(self, kind: str, namespace: str | None = None) -> list[dict]:
        """All objects of `kind` (in `namespace`, or everywhere when None), sorted by namespace/name."""

    def watch(self, kind: str, namespace: str | None = None, *, timeout: float = 60.0) -> Iterator[tuple[str, dict]]:
        """(event type, object) of `kind` (in `namespace`, or everywhere) as kubectl get --watch sees
        them: ADDED for every object there is, then ADDED / MODIFIED / DELETED as they happen, for
        `timeout` seconds (sim seconds on the sim)."""
        raise ClusterError(f"watch is not supported on the {self.backend or type(self).__name__} backend")

    # -- running ---------------------------------------------------------------------------
    @abstractmethod
    def wait(self, until: Callable[[Cluster], bool] | None = None, timeout: float = 60.0) -> bool:
        """Run until `until(self)` is true, or until nothing changes when `until` is None.

        Returns True when the condition was met (or the cluster settled) within `timeout` seconds.
        """

    @abstractmethod
    def events(self) -> list[dict]:
        """Kubernetes Events (core/v1 shape), oldest first."""

    # -- looking ---------------------------------------------------------------------------
    @abstractmethod
    def placements(self) -> PlacementTable:
        """Which device every running pod got (see `labkit.cluster.placements`)."""

    @abstractmethod
    def explain(self, pod: str, namespace: str = "default") -> str:
        """Why a pod is where it is, or why it is Pending (from the allocator's explanations)."""

    @abstractmethod
    def pod_env(self, pod: str, namespace: str = "default", container: str | None = None) -> dict[str, str]:
        """Environment a container gets from its prepared devices (CDI env): exactly the devices
        of the claims/requests it references. No container: the union over the pod's containers."""

    def inject_health_event(self, node: str, device: str, xid: int | None = None, *, kind: str = "xid") -> None:
        """Make the GPU driver on `node` report a health event for `device` (its name in the node's
        ResourceSlice, e.g. gpu-3): `kind` "xid" (with `xid`, e.g. 79 or 13), "gpu-lost" or
        "unmonitored", or the lab's "repair" (the GPU replaced: its health taints off, Healthy again).
        The driver taints the device as NVIDIA's does with its NVMLDeviceHealthCheck gate on
        (fake_gpus.health_events) and reports it Unhealthy for a fatal event; the kubelet writes the
        pods' allocatedResourcesStatus. Returns once the cluster saw it."""
        raise ClusterError(f"inject_health_event is not supported on the {self.backend or type(self).__name__} "
                           "backend; use the sim or kind backend")

    @staticmethod
    def _check_container(pod: dict, container: str | None) -> None:
        """One line when `container` is not a container of `pod` (for pod_env)."""
        names = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
        if container is not None and container not in names:
            m = pod.get("metadata") or {}
            raise ClusterError(f"pod {m.get('namespace', 'default')}/{m.get('name')}: no container {container!r}; "
                               f"it has: {', '.join(names)}")

    def status(self) -> str:
        """A short human summary of the cluster (used by `labkit cluster up|status`)."""
        name = getattr(self.profile, "name", self.profile)
        return f"{self.backend} cluster, profile {name}"

    # -- `labkit cluster up|down|status --backend <this>` -----------------------------------
    @classmethod
    def manage(cls, action: str, profile: Any, *, name: str | None = None, swap_images: bool | None = None,
               progress: bool = False) -> int:
        """Run `labkit cluster <action>` for this backend and print what happened; returns the
        exit code (`status`: 3 when no such cluster runs). The CLI asks the registry for the class
        and calls this; a backend whose clusters outlive the command overrides it."""
        profile = load_profile(profile)
        c = cls()
        c.profile = profile
        if action == "up":
            c = cls(progress=progress).up(profile)  # what connect(cls.backend, ...) does
        elif action == "down":
            c.down()
        print(c.status())
        return 0

    @classmethod
    def is_running(cls, state: dict[str, Any]) -> bool:
        """Whether the cluster recorded in `state` (labkit.cluster.runstate) still runs."""
        return False

    # -- helpers for subclasses ------------------------------------------------------------
    def progress(self, items: Iterable[T], desc: str, total: int | None = None) -> Iterable[T]:
        """Wrap a slow loop in a tqdm.auto bar (widget in notebooks, text in a terminal)."""
        if not self.show_progress:
            return items
        from tqdm.auto import tqdm

        return tqdm(items, desc=desc, total=total, leave=False)

    def __repr__(self) -> str:
        name = getattr(self.profile, "name", self.profile)
        return f"<{type(self).__name__} backend={self.backend!r} profile={name!r}>"


def load_source(source: Source) -> list[dict]:
    """Objects from YAML/JSON text, a path, a dict or a list (labkit.api.load), as one-line errors. A Path
    is read as a file whatever its name holds (a str that looks like YAML is taken as YAML text)."""
    try:
        return load(source)
    except LoadError as exc:
        raise cluster_error(exc) from None


def _unknown_options(cls: type, names: list[str]) -> str:
    """One line naming the bad options, the ones this backend takes, and the usual mix-up."""
    import inspect

    accepted: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            accepted |= {p.name for p in inspect.signature(init).parameters.values()
                         if p.kind is inspect.Parameter.KEYWORD_ONLY}
    message = (f"the {getattr(cls, 'backend', cls.__name__)} backend has no option {', '.join(map(repr, names))}; "
               f"it takes: {', '.join(sorted(accepted))}")
    if any("version" in n or "gate" in n for n in names):
        message += (" (the Kubernetes version and feature gates belong to the cluster profile: "
                    "kubernetesVersion / featureGates in its YAML, or dataclasses.replace(load_profile(...), "
                    "kubernetes_version=...))")
    return message
