"""``python -m fake_gpus plugin``: run the fake GPU kubelet plugin until SIGTERM/SIGINT;
``python -m fake_gpus inject-health``: hand a running plugin a GPU health event (``healthspool``).

``register(subparsers)`` adds the subcommand to the ``fake_gpus`` CLI (the handler is
``args.func(args) -> int``); ``main(argv)`` runs it standalone.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import yaml

from fake_gpus import computedomain, featuregates
from fake_gpus.errors import EngineError, InputError
from fake_gpus.health_events import HealthEventError
from fake_gpus.slices import device_classes

from . import healthspool, paths
from .cdgate import ChannelGate
from .health import GATE, HealthEvents

log = logging.getLogger("fake_gpus.plugin")

DEFAULT_DRIVER = "gpu.nvidia.com"
DEFAULT_NIC_DRIVER = "nic.fake-gpus.dev"  # fake_gpus.slices.NIC_DRIVER


class UsageError(InputError):
    """Bad input: printed as one line, exit code 2."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", help="node profile name or file (see `python -m fake_gpus profiles`)")
    p.add_argument("--node", required=True, help="node name (also the ResourceSlice pool name)")
    p.add_argument("--driver", default=DEFAULT_DRIVER, help=f"GPU DRA driver name (default {DEFAULT_DRIVER})")
    p.add_argument("--nic-driver", default=DEFAULT_NIC_DRIVER,
                   help=f"NIC DRA driver name (default {DEFAULT_NIC_DRIVER}); served too when the node has NICs")
    p.add_argument("--no-nic", action="store_true", help="serve only the GPU driver, not the NIC driver")
    p.add_argument("--mig", dest="mig_mode", default=None, help="MIG mode passed to build_slices")
    p.add_argument("--topology-attributes", action="store_true",
                   help="also publish LabKit's own topology.fake-gpus.dev/* attributes (not NVIDIA's)")
    p.add_argument("--kubernetes-version", default="1.37", help="slice layout version (default 1.37)")
    p.add_argument("--feature-gates", default="",
                   help="NVIDIA driver feature gates, Name=true|false,... (fake_gpus.featuregates)")
    p.add_argument("--consumable-shares", default=None,
                   help="NVIDIA's --consumable-shares: disabled, memory, unlimited or N (default: the profile's);"
                        " anything but disabled needs --feature-gates ConsumableShares=true")
    p.add_argument("--slices", type=Path, help="publish these ResourceSlices (YAML) instead of --profile's")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config, then ~/.kube/config)")
    p.add_argument("--claims", type=Path,
                   help="read ResourceClaims from this YAML file (re-read on every prepare) instead of "
                        "the API server; for offline use and tests")
    p.add_argument("--registry-dir", default=paths.DEFAULT_REGISTRY_DIR,
                   help=f"kubelet plugin registry dir (default {paths.DEFAULT_REGISTRY_DIR})")
    p.add_argument("--plugins-dir", default=paths.DEFAULT_PLUGINS_DIR,
                   help=f"kubelet plugins dir; the plugin uses <dir>/<driver>/ (default {paths.DEFAULT_PLUGINS_DIR})")
    p.add_argument("--cdi-dir", default=paths.DEFAULT_CDI_DIR, help=f"CDI spec dir (default {paths.DEFAULT_CDI_DIR})")
    p.add_argument("--no-publish", action="store_true", help="do not publish ResourceSlices")
    p.add_argument("--keep-slices", action="store_true", help="leave the published slices on shutdown")
    p.add_argument("--apply-device-classes", action="store_true", help="create/update the driver's DeviceClasses")
    p.add_argument("--health", action="store_true",
                   help="also serve DRAResourceHealth (v1, v1alpha1): every device Healthy until a health event")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def register(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("plugin", help="run the fake GPU DRA kubelet plugin (gRPC on unix sockets)",
                              description=__doc__.splitlines()[0])
    add_arguments(p)
    p.set_defaults(func=run)
    h = subparsers.add_parser("inject-health", help="hand the plugin on this node a GPU health event (XID, ...)",
                              description="Write a health event into the running plugin's spool "
                                          "(<plugins-dir>/<driver>/health-events/) and print its answer. "
                                          "The plugin needs --feature-gates NVMLDeviceHealthCheck=true.")
    add_inject_arguments(h)
    h.set_defaults(func=inject_health)
    return p


def add_inject_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", required=True, help="the device's name in the node's ResourceSlice, e.g. gpu-0")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--xid", type=int, help="an XID error, e.g. 79 (fallen off the bus) or 13 (application)")
    what.add_argument("--gpu-lost", action="store_true", help="the GPU is lost")
    what.add_argument("--unmonitored", action="store_true", help="the GPU's health cannot be watched")
    what.add_argument("--repair", action="store_true", help="the GPU was replaced: its health taints go, Healthy")
    p.add_argument("--driver", default=DEFAULT_DRIVER, help=f"GPU DRA driver name (default {DEFAULT_DRIVER})")
    p.add_argument("--plugins-dir", default=paths.DEFAULT_PLUGINS_DIR,
                   help=f"the plugin's --plugins-dir (default {paths.DEFAULT_PLUGINS_DIR})")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the plugin's answer (default 30)")


def inject_health(args: argparse.Namespace) -> int:
    """Drop the event into the spool, wait for the plugin's answer, print it (exit 2: refused)."""
    kind = ("gpu-lost" if args.gpu_lost else "unmonitored" if args.unmonitored
            else healthspool.REPAIR if args.repair else "xid")
    try:
        doc = healthspool.event_doc(args.device, kind, args.xid)
    except HealthEventError as exc:
        raise UsageError(str(exc)) from exc
    spool = healthspool.spool_dir(args.plugins_dir, args.driver)
    if not spool.parent.is_dir():
        raise UsageError(f"no plugin data dir {spool.parent}: is the {args.driver} plugin running on this node "
                         "(pass its --plugins-dir)?")
    event_id = healthspool.write_event(spool, doc)
    got = healthspool.wait_result(spool, event_id, args.timeout)
    if got is None:
        (spool / f"{event_id}{healthspool.EVENT_SUFFIX}").unlink(missing_ok=True)
        raise PluginSilent(f"no answer from the {args.driver} plugin in {args.timeout:g}s (spool {spool}): "
                           "is it running, and new enough to read health events?")
    if not got.get("ok"):
        raise UsageError(str(got.get("message")))
    print(got.get("message"))
    return 0


class PluginSilent(EngineError):
    """The plugin did not answer a health event: exit code 1."""


class FileClaimSource:
    """Claims from a YAML file, re-read on every lookup so it can be edited while running."""

    def __init__(self, path: Path):
        self.path = path

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        for doc in _load_yaml(self.path, "--claims"):
            meta = doc.get("metadata") or {}
            if (doc.get("kind") == "ResourceClaim" and meta.get("name") == name
                    and meta.get("namespace", "default") == namespace):
                return doc
        return None


def _load_yaml(path: Path, flag: str) -> list[dict[str, Any]]:
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise UsageError(f"{flag} {path}: not valid YAML: {str(exc).splitlines()[0]}") from exc
    out: list[dict[str, Any]] = []
    for d in docs:
        if isinstance(d, dict) and isinstance(d.get("items"), list):
            out.extend(x for x in d["items"] if isinstance(x, dict))
        elif isinstance(d, dict):
            out.append(d)
    return out


def load_slices(args: argparse.Namespace) -> list[dict[str, Any]]:
    gates = featuregates.parse(getattr(args, "feature_gates", "") or "")
    if args.slices:
        slices = [d for d in _load_yaml(args.slices, "--slices") if d.get("kind") == "ResourceSlice"]
        if not slices:
            raise UsageError(f"--slices {args.slices}: no ResourceSlice in the file")
        return slices
    if not args.profile:
        raise UsageError("one of --profile or --slices is required")
    try:
        # lazy: optional dependency (a copy without the catalog runs with --slices; see the except)
        from fake_gpus.catalog import load_node_profile
        from fake_gpus.slices import build_slices
    except ImportError as exc:
        raise UsageError(f"--profile needs fake_gpus.catalog and fake_gpus.slices ({exc}); use --slices FILE") from exc
    try:
        profile = load_node_profile(args.profile)
        shares = getattr(args, "consumable_shares", None)
        if shares is not None:
            profile = dataclasses.replace(profile, consumable_shares=featuregates.check_consumable_shares(shares, gates))
        kwargs: dict[str, Any] = {"driver": args.driver, "nic_driver": args.nic_driver,
                                  "kubernetes_version": args.kubernetes_version,
                                  "topology_attributes": bool(getattr(args, "topology_attributes", False))}
        if args.mig_mode:  # "" (e.g. an unset $(MIG_MODE) in the DaemonSet) = the profile's default
            kwargs["mig_mode"] = args.mig_mode
        return build_slices(profile, args.node, **kwargs)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        msg = exc.args[0] if exc.args else exc
        raise UsageError(f"building slices for --profile {args.profile}: {msg}") from exc


def _setup_logging(level: str) -> None:
    """Own stderr handler for the `fake_gpus` loggers when run as a program; when embedded
    (not the main thread) only set the level and leave handlers to the host application."""
    root = logging.getLogger("fake_gpus")
    root.setLevel(level)
    if threading.current_thread() is not threading.main_thread():
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s fake-gpus-plugin %(levelname)s %(message)s"))
    root.handlers[:] = [handler]
    root.propagate = False


def served_drivers(args: argparse.Namespace, slices: list[dict[str, Any]]) -> list[str]:
    """The GPU driver, then every other driver that has slices (unless --no-nic)."""
    drivers = [args.driver]
    if not args.no_nic:
        for s in slices:
            d = (s.get("spec") or {}).get("driver")
            if d and d not in drivers:
                drivers.append(d)
    return drivers


def run(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    """Serve until SIGTERM/SIGINT (or until ``stop`` is set, for callers that embed the plugin
    in a thread, where signal handlers cannot be installed). Returns the exit code."""
    # lazy: start-up (grpc and the gRPC server; python -m fake_gpus --help imports this module)
    from .checkpoint import CheckpointError
    from .claims import KubeClaimSource, kube_api_client
    from .kube import KubeError, KubeRest
    from .publisher import SlicePublisher, apply_device_classes
    from .server import PluginServer
    from .state import DriverState

    _setup_logging(args.log_level)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: stop.set())
    servers: list[PluginServer] = []
    publishers: list[SlicePublisher] = []
    try:
        slices = load_slices(args)
        api_client = None
        if not args.no_publish or args.apply_device_classes or not args.claims:
            try:
                api_client = kube_api_client(args.kubeconfig)
            except Exception as exc:
                raise UsageError(f"cannot load a kubeconfig ({str(exc).splitlines()[0]}); pass --kubeconfig, "
                                 "or --no-publish with --claims FILE to run without an API server") from exc
        claims = FileClaimSource(args.claims) if args.claims else KubeClaimSource(api_client)
        for driver in served_drivers(args, slices):
            state = DriverState(driver, claims, cdi_dir=args.cdi_dir,
                                checkpoint_path=paths.checkpoint_path(args.plugins_dir, driver), slices=slices)
            if driver == computedomain.DRIVER and api_client is not None:
                gate = ChannelGate(KubeRest(api_client), args.node)
                state.precheck, state.daemon_env = gate, gate.daemon_env
            server = PluginServer(state, registry_dir=args.registry_dir, plugins_dir=args.plugins_dir,
                                  health=args.health)
            server.start()
            servers.append(server)
        if args.apply_device_classes:
            apply_device_classes(api_client, device_classes(args.driver, args.nic_driver))
        if not args.no_publish:
            for server in servers:
                driver = server.state.driver
                pub = SlicePublisher(api_client, args.node, driver)
                publishers.append(pub)
                pub.publish([s for s in slices if (s.get("spec") or {}).get("driver") == driver])
        events = _health_events(args, slices, servers, publishers)
        for server in servers:
            ours = [s for s in slices if (s.get("spec") or {}).get("driver") == server.state.driver]
            log.info("ready: driver %s on node %s, %d device(s) in %d slice(s), socket %s",
                     server.state.driver, args.node,
                     sum(len((s.get("spec") or {}).get("devices") or []) for s in ours), len(ours),
                     server.dra_socket)
        events.poll()  # events spooled while the plugin was down
        while not stop.wait(0.5):
            events.poll()
        log.info("shutting down")
        return 0
    except (UsageError, paths.SocketPathError, CheckpointError, KubeError) as exc:
        print(f"fake_gpus plugin: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"fake_gpus plugin: error: {exc}", file=sys.stderr)
        return 1
    finally:
        for server in servers:
            server.stop()
        if not args.keep_slices:
            for pub in publishers:
                try:
                    pub.delete_all()
                except KubeError as exc:
                    print(f"fake_gpus plugin: warning: slices of {pub.driver} not deleted: {exc}", file=sys.stderr)


def _health_events(args: argparse.Namespace, slices: list[dict[str, Any]], servers: list[Any],
                   publishers: list[Any]) -> Any:
    """The GPU driver's health events (its spool, slices, publisher and HealthBoard)."""
    server = next(s for s in servers if s.state.driver == args.driver)
    pub = next((p for p in publishers if p.driver == args.driver), None)
    spool = healthspool.spool_dir(args.plugins_dir, args.driver)
    spool.mkdir(parents=True, exist_ok=True)
    gate = featuregates.parse(getattr(args, "feature_gates", "") or "")[GATE]
    log.info("health events: spool %s, %s %s", spool, GATE, "on: events taint devices" if gate else "off: refused")
    return HealthEvents(args.driver, args.node, slices, spool=spool, gate=gate, board=server.health,
                        publish=pub.publish if pub is not None else None)


def main(argv: list[str] | None = None, stop: threading.Event | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fake_gpus plugin", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv), stop)
