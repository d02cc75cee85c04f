"""`python -m fake_gpus`: print ResourceSlices, DeviceClasses, node profiles and topology.

Subcommands:
  slices --profile P --node N [--mig none|static|dynamic] [--driver D] [--nic-driver D]
         [--kubernetes-version V] [-o yaml|json]
  deviceclasses [--driver D] [--nic-driver D] [--compute-domains] [-o yaml|json]
  profiles                      table: name, GPUs, NICs, MIG mode, description
  topo --profile P              the nvidia-smi-topo-like matrix

Adding a subcommand from another module: list the module in `SUBCOMMAND_MODULES` (the plugin's
`fake_gpus.plugin.cli` is already there). The module defines `register(subparsers)`, which calls
`subparsers.add_parser(...)` and sets `func=handler` via `set_defaults`; the handler takes the
parsed `argparse.Namespace` and returns the exit code. A module that cannot be imported is
skipped, so the CLI works without it. Exit codes: 0 ok, 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any

import yaml

from fake_gpus import computedomain
from fake_gpus.catalog import MIG_MODES, CatalogError, load_node_profile, node_profiles
from fake_gpus.errors import FakeGpusError
from fake_gpus.slices import GPU_DRIVER, NIC_DRIVER, build_slices, device_classes
from fake_gpus.topology import format_topology_matrix

SUBCOMMAND_MODULES = ("fake_gpus.plugin.cli", "fake_gpus.cdcontroller")

# libyaml's dumper is ~10x faster for large slice lists; same output shape as SafeDumper
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

Registrar = Callable[[Any], Any]


class _Parser(argparse.ArgumentParser):
    """argparse exits with status 2 on usage errors already; keep its one-line message."""


def number(lo: float, hi: float) -> Callable[[str], float]:
    """An argparse type: a finite number in [lo, hi], else argparse's error naming the option, exit 2
    (fake_gpus's own: it imports nothing from labkit, whose commands use labkit.cli_types)."""

    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number; give one in [{lo:g}, {hi:g}]") from None
        if not math.isfinite(x):
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a finite number; give one in [{lo:g}, {hi:g}]")
        if not lo <= x <= hi:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is out of range [{lo:g}, {hi:g}]")
        return x

    parse.__name__ = "number"
    return parse


def dump(objs: list[dict[str, Any]], fmt: str) -> str:
    """Deterministic text: YAML documents (`---` separated) or a JSON list."""
    if fmt == "json":
        return json.dumps(objs, indent=2, sort_keys=True) + "\n"
    return yaml.dump_all(objs, Dumper=_DUMPER, sort_keys=True, default_flow_style=False, explicit_start=True)


def _cmd_slices(args: argparse.Namespace) -> int:
    slices = build_slices(args.profile, args.node, mig_mode=args.mig, driver=args.driver,
                          nic_driver=args.nic_driver, kubernetes_version=args.kubernetes_version,
                          topology_attributes=args.topology_attributes)
    sys.stdout.write(dump(slices, args.output))
    return 0


def _cmd_deviceclasses(args: argparse.Namespace) -> int:
    classes = computedomain.device_classes() if args.compute_domains else device_classes(args.driver, args.nic_driver)
    sys.stdout.write(dump(classes, args.output))
    return 0


def _cmd_profiles(args: argparse.Namespace) -> int:
    rows = [("NAME", "GPUS", "NICS", "MIG", "DESCRIPTION")]
    for name in node_profiles():
        try:
            p = load_node_profile(name)
        except CatalogError as e:
            rows.append((name, "-", "-", "-", f"INVALID: {e}"))
            continue
        models: dict[str, int] = {}
        for g in p.gpus:
            models[g.model.name] = models.get(g.model.name, 0) + 1
        gpus = "+".join(f"{n}x{m}" for m, n in models.items()) or "0"
        rows.append((p.name, gpus, str(len(p.nics)), p.mig_mode, p.description))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4] + "\n")
    return 0


def _cmd_topo(args: argparse.Namespace) -> int:
    sys.stdout.write(format_topology_matrix(load_node_profile(args.profile)))
    return 0


def _register_builtin(sub: Any) -> None:
    p = sub.add_parser("slices", help="print the ResourceSlices a node publishes")
    p.add_argument("--profile", required=True, help="node profile name or YAML file (see `profiles`)")
    p.add_argument("--node", required=True, help="node name (also the pool name)")
    p.add_argument("--mig", choices=MIG_MODES, default=None, help="MIG mode (default: the profile's)")
    p.add_argument("--topology-attributes", action="store_true",
                   help="also publish LabKit's own topology.fake-gpus.dev/* attributes (not NVIDIA's)")
    p.add_argument("--driver", default=GPU_DRIVER, help=f"GPU driver name (default {GPU_DRIVER})")
    p.add_argument("--nic-driver", default=NIC_DRIVER, help=f"NIC driver name (default {NIC_DRIVER})")
    p.add_argument("--kubernetes-version", default="1.37", help="slice layout for this version (default 1.37)")
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    p.set_defaults(func=_cmd_slices)

    p = sub.add_parser("deviceclasses", help="print the DeviceClasses for the drivers")
    p.add_argument("--driver", default=GPU_DRIVER)
    p.add_argument("--nic-driver", default=NIC_DRIVER)
    p.add_argument("--compute-domains", action="store_true",
                   help="the compute-domain plugin's two DeviceClasses instead (channel, daemon)")
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    p.set_defaults(func=_cmd_deviceclasses)

    p = sub.add_parser("profiles", help="list the node profiles")
    p.set_defaults(func=_cmd_profiles)

    p = sub.add_parser("topo", help="print the nvidia-smi-topo-like matrix of a profile")
    p.add_argument("--profile", required=True)
    p.set_defaults(func=_cmd_topo)


def build_parser(extra_modules: tuple[str, ...] = SUBCOMMAND_MODULES) -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m fake_gpus", description="Fake NVIDIA GPU DRA driver tools")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _register_builtin(sub)
    for mod_name in extra_modules:
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        except Exception as e:  # a broken extension must not take the built-in commands down
            sys.stderr.write(f"warning: {mod_name} not loaded ({type(e).__name__}: {e})\n")
            continue
        register: Registrar | None = getattr(mod, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    prog = f"fake_gpus {args.command}"  # every message starts like labkit's: `<program> <command>: `
    try:
        return int(args.func(args) or 0)
    except FakeGpusError as e:  # every deliberate error: one line, its kind's exit code
        sys.stderr.write(f"{prog}: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}\n")
        return e.exit_code
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - never a traceback; FAKE_GPUS_DEBUG=1 shows it
        if os.environ.get("FAKE_GPUS_DEBUG") == "1":
            raise
        sys.stderr.write(f"{prog}: internal error: {type(e).__name__}: {e} (a bug: please report it)\n")
        return 70
