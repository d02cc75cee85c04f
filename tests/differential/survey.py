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
from tests.differential.generator import generate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=500)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--version", default="1.37")
    ap.add_argument("--keep", type=Path, help="write the scenarios here instead of a temp dir")
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
    for name, row in sorted(rows.items()):
        diff = harness.compare(row, harness.run_labkit(root / name))
        if diff.kind:
            key = diff.kind + ": " + re.sub(r"\d+", "N", diff.detail.split(":")[0])[:100]
            groups[key].append(f"{root / name}: {diff.detail[:300]}")
    print(f"{args.examples} scenarios for {args.version} in {root}; {sum(map(len, groups.values()))} differ")
    for key, items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"\n[{len(items)}] {key}")
        for item in items[:3]:
            print("   ", item)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
