"""Survey disagreements by hand: python -m tests.differential.survey [--examples N] [--version 1.37] [--keep DIR].

Generates seeded scenarios, runs the oracle once (--batch) and labkit per scenario, and prints
each disagreement grouped by kind and by the first differing field, with example seeds.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections import defaultdict
from pathlib import Path

from tests.differential import harness
from tests.differential.draw import RandomDraw
from tests.differential.generator import Scenario, generate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=500)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--version", default="1.37")
    ap.add_argument("--keep", type=Path, help="write the scenarios here instead of a temp dir")
    ap.add_argument("--save-open", type=int, default=0, metavar="K",
                    help="shrink the first example of up to K groups into tests/differential/regressions-open/")
    args = ap.parse_args(argv)
    minor = "0." + args.version.split(".")[1]
    oracle, reason = harness.ensure_oracle(minor)
    if oracle is None:
        raise SystemExit(reason)
    root = args.keep or Path(tempfile.mkdtemp(prefix="labkit-survey-"))
    for seed in range(args.start, args.start + args.examples):
        generate(RandomDraw(seed), args.version).write(root / f"{seed:05d}")
    rows = harness.run_oracle_batch(oracle, root)
    groups: dict[str, list[str]] = defaultdict(list)
    first: dict[str, tuple[int, str]] = {}
    for name, row in sorted(rows.items()):
        diff = harness.compare(row, harness.run_labkit(root / name))
        if diff.kind:
            key = diff.kind + ": " + re.sub(r"\d+", "N", diff.detail.split(":")[0])[:100]
            groups[key].append(f"{root / name}: {diff.detail[:300]}")
            first.setdefault(key, (int(name), diff.kind))
    print(f"{args.examples} scenarios for {args.version} in {root}; {sum(map(len, groups.values()))} differ")
    for key, items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"\n[{len(items)}] {key}")
        for item in items[:3]:
            print("   ", item)
    for key, (seed, kind) in list(first.items())[:args.save_open]:
        dest = _shrink_save(oracle, root / "_shrink", seed, kind, args.version, key)
        print(f"saved {key} -> {dest}")
    return 0


def _shrink_save(oracle: Path, work: Path, seed: int, kind: str, version: str, key: str) -> Path:
    def fails(sc: Scenario) -> bool:
        d = sc.write(work / "one" / "case")
        return harness.compare(harness.run_oracle_one(oracle, d), harness.run_labkit(d)).kind == kind

    draw = RandomDraw(seed)
    generate(draw, version)
    small = harness.shrink(draw.choices, fails, budget=120, version=version)
    final = small.write(work / "final" / "case")
    row = harness.run_oracle_one(oracle, final)
    diff = harness.compare(row, harness.run_labkit(final))
    return harness.save_regression(final, row, harness.REGRESSIONS_OPEN,
                                   f"{version} seed {seed}: {diff.kind}: {diff.detail}\n(group: {key})")



if __name__ == "__main__":
    raise SystemExit(main())
