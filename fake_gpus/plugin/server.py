"""gRPC servers on unix sockets: kubelet plugin registration and the DRA service (v1, v1beta1)."""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent import futures
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc

from fake_gpus.errors import EngineError

from .devices import ClaimError
from .gen import (
    dra_health_v1_pb2,
    dra_health_v1_pb2_grpc,
    dra_health_v1alpha1_pb2,
    dra_health_v1alpha1_pb2_grpc,
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    pluginregistration_pb2,
    pluginregistration_pb2_grpc,
)
from .health import HEALTH_SERVICES, HealthBoard, make_health_servicer
from .paths import MAX_SOCKET_PATH, check_socket_path, dra_socket_path, registration_socket_path
from .state import DriverState

log = logging.getLogger("fake_gpus.plugin")

PLUGIN_TYPE = "DRAPlugin"
#: fault testing (tests/e2e/test_kind_faults.py): seconds each NodePrepareResources /
#: NodeUnprepareResources call pauses after changing the CDI specs and before writing the
#: checkpoint, the worst moment for the plugin to die; unset or 0 = no pause
FAULT_DELAY_ENV = "FAKE_GPUS_FAULT_DELAY_SECONDS"
#: the log lines around that pause; a log that ends after a BEGIN was killed inside the call
FAULT_BEGIN, FAULT_END = "fault-window BEGIN", "fault-window END"
SUPPORTED_VERSIONS = ["v1.DRAPlugin", "v1beta1.DRAPlugin"]


class RegistrationFailed(EngineError, RuntimeError):
    pass


class RegistrationServicer(pluginregistration_pb2_grpc.RegistrationServicer):
    def __init__(self, driver: str, endpoint: Path, versions: list[str]):
        self.driver = driver
        self.endpoint = endpoint
        self.versions = versions
        self.status: tuple[bool, str] | None = None
        self.notified = threading.Event()

    def GetInfo(self, request: Any, context: grpc.ServicerContext) -> Any:
        return pluginregistration_pb2.PluginInfo(type=PLUGIN_TYPE, name=self.driver, endpoint=str(self.endpoint),
                                                 supported_versions=self.versions)

    def NotifyRegistrationStatus(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.status = (request.plugin_registered, request.error)
        if request.plugin_registered:
            log.info("kubelet registered driver %s (endpoint %s)", self.driver, self.endpoint)
        else:
            log.error("kubelet refused to register driver %s: %s", self.driver, request.error or "no reason given")
        self.notified.set()
        return pluginregistration_pb2.RegistrationStatusResponse()


def _check_claims(claims: Any, context: grpc.ServicerContext) -> None:
    for i, c in enumerate(claims):
        missing = [f for f in ("namespace", "name", "uid") if not getattr(c, f)]
        if missing:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"claims[{i}] (namespace={c.namespace!r}, name={c.name!r}, uid={c.uid!r}): "
                          f"{', '.join(missing)} must not be empty; send the ResourceClaim's "
                          "metadata.namespace, metadata.name and metadata.uid")


def _flush(state: DriverState, context: grpc.ServicerContext) -> None:
    """Persist the call's changes before answering; if that fails the kubelet must retry."""
    try:
        state.checkpoint.flush()
    except OSError as exc:
        log.exception("writing checkpoint %s failed", state.checkpoint.path)
        context.abort(grpc.StatusCode.INTERNAL, f"writing checkpoint {state.checkpoint.path} failed: {exc}")


def fault_delay() -> float:
    """The pause of FAULT_DELAY_ENV (0 when unset or not a number >= 0)."""
    try:
        return max(0.0, float(os.environ.get(FAULT_DELAY_ENV) or 0))
    except ValueError:
        log.warning("%s=%r is not a number of seconds; no pause", FAULT_DELAY_ENV, os.environ.get(FAULT_DELAY_ENV))
        return 0.0


def _fault_window(call: str, claims: Any, delay: float) -> None:
    if delay <= 0:
        return
    uids = ",".join(c.uid for c in claims)
    log.info("%s %s %s", FAULT_BEGIN, call, uids)
    time.sleep(delay)
    log.info("%s %s %s", FAULT_END, call, uids)


def make_dra_servicer(state: DriverState, pb2: ModuleType, base: type, with_share_id: bool) -> Any:
    """A DRAPlugin servicer for one API version (the messages differ only in share_id)."""

    delay = fault_delay()

    class Servicer(base):  # type: ignore[misc, valid-type]  # base: the generated servicer, per API version
        def NodePrepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
            _check_claims(request.claims, context)
            resp = pb2.NodePrepareResourcesResponse()
            for c in request.claims:
                out = resp.claims[c.uid]
                try:
                    prepared = state.prepare(c.namespace, c.name, c.uid, save=False)
                except ClaimError as exc:
                    log.warning("prepare %s/%s (uid %s) failed: %s", c.namespace, c.name, c.uid, exc)
                    out.error = str(exc)
                    continue
                except Exception as exc:  # keep serving; the kubelet retries
                    log.exception("prepare %s/%s (uid %s) failed", c.namespace, c.name, c.uid)
                    out.error = f"claim {c.namespace}/{c.name}: preparing failed: {exc}"
                    continue
                for d in prepared.devices:
                    dev = out.devices.add(request_names=d.request_names, pool_name=d.pool_name,
                                          device_name=d.device_name, cdi_device_ids=d.cdi_device_ids)
                    if with_share_id and d.share_id:
                        dev.share_id = d.share_id
            _fault_window("NodePrepareResources", request.claims, delay)
            _flush(state, context)
            return resp

        def NodeUnprepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
            _check_claims(request.claims, context)
            resp = pb2.NodeUnprepareResourcesResponse()
            for c in request.claims:
                out = resp.claims[c.uid]
                try:
                    state.unprepare(c.namespace, c.name, c.uid, save=False)
                except Exception as exc:
                    log.exception("unprepare %s/%s (uid %s) failed", c.namespace, c.name, c.uid)
                    out.error = f"claim {c.namespace}/{c.name}: unpreparing failed: {exc}"
            _fault_window("NodeUnprepareResources", request.claims, delay)
            _flush(state, context)
            return resp

    return Servicer()


def _bind(server: grpc.Server, path: Path) -> int:
    """Listen on `path`; returns the socket file's inode (see `_unlink_own`).

    gRPC removes the path it bound when the server stops. While an old plugin pod terminates (a
    force delete, a node restart), its replacement may already listen on the same path, so the
    socket is bound under a hidden name of this process and renamed into place: the old process's
    shutdown then removes only its own name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.{os.getpid()}")  # the kubelet ignores dot files
    if len(str(staged).encode()) > MAX_SOCKET_PATH:
        staged = path  # no room for the staged name: bind in place
    for stale in (path, staged):  # from a previous run
        stale.unlink(missing_ok=True)
    try:
        port = server.add_insecure_port(f"unix://{staged}")
    except RuntimeError as exc:
        raise OSError(f"cannot listen on unix socket {path}: {exc}") from exc
    if port == 0:
        raise OSError(f"cannot listen on unix socket {path}")
    if staged != path:
        os.replace(staged, path)
    return path.stat().st_ino


def _unlink_own(path: Path, inode: int | None) -> None:
    """Remove the socket only if it is still ours (not a replacement's, see `_bind`)."""
    try:
        if inode is None or path.stat().st_ino == inode:
            path.unlink(missing_ok=True)
        else:
            log.info("leaving %s: another plugin process listens there now", path)
    except FileNotFoundError:
        pass


class PluginServer:
    """Serves the DRA service on ``<plugins>/<driver>/dra.sock`` and registration on
    ``<registry>/<driver>-reg.sock``. The DRA socket is up before the registration socket
    appears, because the kubelet dials the endpoint as soon as it sees the latter.

    health=True also serves DRAResourceHealth (v1, v1alpha1) and advertises it; ``self.health``
    is then the HealthBoard a lab uses to mark devices unhealthy."""

    def __init__(self, state: DriverState, *, registry_dir: str | Path, plugins_dir: str | Path,
                 max_workers: int = 8, health: bool = False, health_resend_seconds: float = 10.0):
        self.state = state
        self.dra_socket = dra_socket_path(plugins_dir, state.driver)
        self.registration_socket = registration_socket_path(registry_dir, state.driver)
        check_socket_path(self.dra_socket, "--plugins-dir")
        check_socket_path(self.registration_socket, "--registry-dir")
        self.health = HealthBoard(state.devices()) if health else None
        self._health_resend = health_resend_seconds
        versions = SUPPORTED_VERSIONS + (HEALTH_SERVICES if health else [])
        self.registration = RegistrationServicer(state.driver, self.dra_socket, versions)
        self._max_workers = max_workers
        self._dra: grpc.Server | None = None
        self._reg: grpc.Server | None = None
        self._inodes: dict[str, int] = {}

    def start(self) -> None:
        dra = grpc.server(futures.ThreadPoolExecutor(max_workers=self._max_workers,
                                                     thread_name_prefix="dra"))
        dra_v1_pb2_grpc.add_DRAPluginServicer_to_server(
            make_dra_servicer(self.state, dra_v1_pb2, dra_v1_pb2_grpc.DRAPluginServicer, True), dra)
        dra_v1beta1_pb2_grpc.add_DRAPluginServicer_to_server(
            make_dra_servicer(self.state, dra_v1beta1_pb2, dra_v1beta1_pb2_grpc.DRAPluginServicer, False), dra)
        if self.health is not None:
            dra_health_v1_pb2_grpc.add_DRAResourceHealthServicer_to_server(make_health_servicer(
                self.health, dra_health_v1_pb2, dra_health_v1_pb2_grpc.DRAResourceHealthServicer,
                self._health_resend), dra)
            dra_health_v1alpha1_pb2_grpc.add_DRAResourceHealthServicer_to_server(make_health_servicer(
                self.health, dra_health_v1alpha1_pb2, dra_health_v1alpha1_pb2_grpc.DRAResourceHealthServicer,
                self._health_resend), dra)
        self._inodes["_dra"] = _bind(dra, self.dra_socket)
        dra.start()
        self._dra = dra
        reg = grpc.server(futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="reg"))
        pluginregistration_pb2_grpc.add_RegistrationServicer_to_server(self.registration, reg)
        try:
            self._inodes["_reg"] = _bind(reg, self.registration_socket)
        except OSError:
            self.stop()
            raise
        reg.start()
        self._reg = reg
        log.info("DRA service for %s on %s; registration on %s", self.state.driver, self.dra_socket,
                 self.registration_socket)

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving and remove the sockets (registration first, so the kubelet unregisters)."""
        if self.health is not None:
            self.health.close()  # ends open health streams
        for attr, path in (("_reg", self.registration_socket), ("_dra", self.dra_socket)):
            server = getattr(self, attr)
            if server is not None:
                server.stop(grace).wait()
                setattr(self, attr, None)
            _unlink_own(path, self._inodes.pop(attr, None))

    def wait_for_registration(self, timeout: float | None = None) -> bool:
        """True once the kubelet reported success; raises RegistrationFailed on a refusal."""
        if not self.registration.notified.wait(timeout):
            return False
        ok, err = self.registration.status or (False, "")
        if not ok:
            raise RegistrationFailed(f"kubelet refused driver {self.state.driver}: {err or 'no reason given'}")
        return True

    def __enter__(self) -> PluginServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
