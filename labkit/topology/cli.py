"""`labkit topology --profile P [--node N] (--png FILE | --json | --matrix)`, and across nodes:
`labkit topology --profile nvl72-two-racks --across rack-a-tray-00/GPU0 rack-b-tray-00/gpu-0 ...`."""

from __future__ import annotations

import argparse
import json
import os
import sys

from fake_gpus.catalog import node_profiles
from labkit.errors import UsageError
from labkit.fileio import cannot_write
from labkit.model.profiles import ProfileError, load_profile, profile_names
from labkit.output import Table, add_output_arg, print_output, print_table, resolve_format
from labkit.topology import fleet_graph, fleet_matrix, format_matrix, node_graph, save_png, stats, topo_matrix


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", required=True,
                   help="a cluster profile (workshop, mig-lab, ...) or a fake_gpus node profile (dgx-a100, ...)"
                   ).completer = _complete_profiles
    p.add_argument("--node", help="node of the cluster profile (default: its first node)")
    p.add_argument("--png", metavar="FILE", help="write a picture of the node")
    p.add_argument("--json", action="store_true", help="print graph statistics as JSON")
    p.add_argument("--matrix", action="store_true", help="print the nvidia-smi topo -m style matrix")
    p.add_argument("--across", nargs="+", metavar="NODE/DEVICE",
                   help="the matrix across nodes of a cluster profile (NV<n> in one NVLink domain, RAIL, NET), "
                        "for devices like rack-a-tray-00/GPU0 or rack-a-tray-00/gpu-0")
    add_output_arg(p, "json", name="KIND/ID of each part of the node (gpu/..., nic/..., socket/...)")
    p.set_defaults(func=run)


def _complete_profiles(prefix: str, **_: object) -> list[str]:
    """Shell completion of --profile: cluster profiles, then fake_gpus node profiles."""
    return [n for n in [*profile_names(), *node_profiles()] if n.startswith(prefix)]


def resolve_node(profile: str, node: str | None) -> tuple[str, str]:
    """(node name, fake_gpus node profile) for a cluster profile + node, or a node profile."""
    if profile in profile_names() or profile.endswith((".yaml", ".yml")) or os.sep in profile:
        cluster = load_profile(profile)
        nodes = {n.name: n for n in cluster.nodes}
        if node is None:
            first = cluster.nodes[0]
            return first.name, first.node_profile
        if node not in nodes:
            shown = ", ".join(list(nodes)[:10])
            raise ProfileError(f"cluster profile {profile}: no node {node!r} (nodes: {shown}...)")
        return node, nodes[node].node_profile
    if profile in node_profiles():
        return node or profile, profile
    raise ProfileError(f"unknown profile {profile!r}: cluster profiles: {', '.join(profile_names())}; "
                       f"node profiles: {', '.join(node_profiles())}")


def run(args: argparse.Namespace) -> int:
    if args.across:
        if args.profile not in profile_names() and not args.profile.endswith((".yaml", ".yml")):
            raise ProfileError(f"--across needs a cluster profile, not {args.profile!r}: {', '.join(profile_names())}")
        print(format_matrix(fleet_matrix(fleet_graph(args.profile), list(args.across))))  # TopologyError: exit 3
        return 0
    node, node_profile = resolve_node(args.profile, args.node)  # ProfileError: labkit.cli, exit 2
    g = node_graph(node_profile, node_name=node)
    if args.png:
        import matplotlib

        matplotlib.use("Agg")  # a command line run: draw to the file, never to a window
        try:
            save_png(g, args.png)
        except OSError as exc:
            raise UsageError(cannot_write(f"--png {args.png}", exc)) from None
        print(f"wrote {args.png}", file=sys.stderr)
    if args.json:
        print(json.dumps(stats(g), indent=2))
    if args.matrix:
        m = topo_matrix(g)
        names = [g.nodes[n].get("device") or n for n in m]
        width = max(len(n) for n in names) + 2
        print("".ljust(width) + "".join(n.ljust(width) for n in names))
        for row, name in zip(m.values(), names, strict=True):
            print(name.ljust(width) + "".join(code.ljust(width) for code in row.values()))
    if not (args.png or args.json or args.matrix):
        st = stats(g)

        def human(fmt: str) -> None:
            print(f"node {st['name']}: {st['nodes']} parts, {st['edges']} links")
            rows = [("part", k, n) for k, n in st["kinds"].items()] + [("link", k, n) for k, n in st["edgeTypes"].items()]
            rows += [("nvlink island", ", ".join(island), len(island)) for island in st.get("nvlinkIslands") or []]
            print_table(Table(("what", "kind", "count"), rows, wrap=[1]), fmt)

        print_output(resolve_format(args.output, "json"), st, human=human,
                     names=lambda: [f"{d.get('kind', 'part')}/{n}" for n, d in g.nodes(data=True)])
    return 0
