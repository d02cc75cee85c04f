"""Run scenarios through the Go oracle and through `labkit allocate`, compare, shrink, save.

The oracle is the real Kubernetes structured allocator (tools/oracle); `labkit allocate` is run
in-process. Both print `{"status", "allocations", "error", "explanation"}`; `explanation` is
not compared, `error` text differences are recorded but only status + allocations must agree.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.differential.draw import ReplayDraw
from tests.differential.generator import Scenario, generate

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
REGRESSIONS = HERE / "regressions"
REGRESSIONS_OPEN = HERE / "regressions-open"
HAND_CASES = REPO / "tests" / "data" / "allocator"
BUILD_SCRIPT = REPO / "tools" / "build-oracle.sh"


def cache_dir() -> Path:
    return Path(os.environ.get("LABKIT_CACHE", str(Path.home() / ".cache" / "dra-labkit")))


def oracle_path(minor: str = "0.37") -> Path:
    return cache_dir() / "oracle" / f"oracle-{minor}"


def ensure_oracle(minor: str = "0.37") -> tuple[Path | None, str]:
    """Build (or find) the oracle. Returns (path, "") or (None, reason to skip)."""
    path = oracle_path(minor)
    if shutil.which("go"):
        proc = subprocess.run(["bash", str(BUILD_SCRIPT), minor], capture_output=True, text=True)
        if proc.returncode != 0:
            if path.exists():
                return path, ""
            return None, f"tools/build-oracle.sh failed: {proc.stderr.strip()[-500:]}"
        return path, ""
    if path.exists():
        return path, ""
    return None, f"Go oracle not found at {path} and Go is not installed (install Go, then run make oracle)"


CEL_BUILD_SCRIPT = REPO / "tools" / "build-cel-oracle.sh"


def ensure_cel_oracle() -> tuple[Path | None, str]:
    """Build (or find) the CEL oracle: LABKIT_CEL_ORACLE if set, else the path build-cel-oracle.sh
    writes. Returns (path, "") or (None, reason to skip: only where it cannot be built here)."""
    given = os.environ.get("LABKIT_CEL_ORACLE")
    path = Path(given or cache_dir() / "cel-oracle" / "cel-oracle")
    if given:
        if path.exists():
            return path, ""
        return None, f"LABKIT_CEL_ORACLE={given} does not exist (unset it to build tools/cel-oracle here)"
    if shutil.which("go"):
        proc = subprocess.run(["bash", str(CEL_BUILD_SCRIPT)], capture_output=True, text=True)
        if proc.returncode != 0 and not path.exists():
            return None, f"tools/build-cel-oracle.sh failed: {proc.stderr.strip()[-500:]}"
    if path.exists():
        return path, ""
    return None, f"CEL oracle not found at {path} and Go is not installed (install Go, then run make oracle)"


# ---- running ---------------------------------------------------------------------------

def _env() -> dict[str, str]:
    return {**os.environ, "LABKIT_DETERMINISTIC_SHAREID": "1"}


def run_oracle_batch(oracle: Path, directory: Path) -> dict[str, dict[str, Any]]:
    proc = subprocess.run([str(oracle), "--batch", str(directory)], capture_output=True, text=True,
                          env=_env(), check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"oracle --batch {directory} failed: {proc.stderr.strip()}")
    out = {}
    for line in proc.stdout.splitlines():
        rec = json.loads(line)
        out[rec["name"]] = rec
    return out


def read_case(directory: Path) -> dict[str, Any]:
    case = yaml.safe_load((directory / "case.yaml").read_text()) or {}
    gates = case.get("featureGates") or {}
    if isinstance(gates, dict):
        gates = ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()))
    return {"node": case.get("node", ""), "version": str(case.get("kubernetesVersion", "1.37")),
            "gates": gates}


def run_labkit(directory: Path, validate: bool = False) -> dict[str, Any]:
    """`labkit allocate` in-process on directory/input.yaml with case.yaml's settings."""
    case = read_case(directory)
    try:
        from labkit.allocator.cli import EXIT, allocate_files
    except ImportError:
        return _run_labkit_cli(directory, case, validate)
    old = os.environ.get("LABKIT_DETERMINISTIC_SHAREID")
    os.environ["LABKIT_DETERMINISTIC_SHAREID"] = "1"
    try:
        doc = allocate_files([str(directory / "input.yaml")], case["node"], feature_gates=case["gates"],
                             kubernetes_version=case["version"], validate_input=validate, warn=lambda s: None)
        doc = json.loads(json.dumps(doc))
    except Exception as exc:  # a crash is a finding, not a harness failure
        return {"exit": -1, "output": {"status": "crash", "allocations": {},
                                       "error": f"{type(exc).__name__}: {exc}"}}
    finally:
        _restore_env(old)
    return {"exit": EXIT.get(doc.get("status"), -1), "output": doc}


def _restore_env(old: str | None) -> None:
    if old is None:
        os.environ.pop("LABKIT_DETERMINISTIC_SHAREID", None)
    else:
        os.environ["LABKIT_DETERMINISTIC_SHAREID"] = old


def _run_labkit_cli(directory: Path, case: dict[str, Any], validate: bool) -> dict[str, Any]:
    """Fallback: `labkit allocate` through the CLI entry point, stdout captured."""
    from labkit.cli import main

    argv = ["allocate", "-f", str(directory / "input.yaml"), "--node", case["node"],
            "--kubernetes-version", case["version"], "-o", "json"]
    if case["gates"]:
        argv += ["--feature-gates", case["gates"]]
    if not validate:
        argv.append("--no-validate")
    buf, err = io.StringIO(), io.StringIO()
    old = os.environ.get("LABKIT_DETERMINISTIC_SHAREID")
    os.environ["LABKIT_DETERMINISTIC_SHAREID"] = "1"
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse
                code = int(exc.code or 0)
            except Exception as exc:  # a crash is a finding, not a harness failure
                return {"exit": -1, "output": {"status": "crash", "allocations": {},
                                               "error": f"{type(exc).__name__}: {exc}"}}
    finally:
        _restore_env(old)
    text = buf.getvalue().strip()
    try:
        output = json.loads(text)
    except json.JSONDecodeError:
        output = {"status": "crash", "allocations": {},
                  "error": f"unparsable output (exit {code}): {text[:200]!r} {err.getvalue()[-300:]!r}"}
    return {"exit": code, "output": output}


# ---- comparing -------------------------------------------------------------------------

@dataclass
class Diff:
    kind: str  # "status" | "allocations" | "exit" | "error-text" | "oracle-timeout" | "labkit-timeout" | "" (agree)
    detail: str = ""

    @property
    def agrees(self) -> bool:
        return self.kind in ("", "error-text", "oracle-timeout", "labkit-timeout")


ORACLE_TIMEOUT = "timed out trying to allocate devices"


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if type(a) is not type(b):
        return f"{path or '.'}: oracle {json.dumps(a)[:160]} vs labkit {json.dumps(b)[:160]}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: oracle {json.dumps(a.get(k))[:160]} vs labkit {json.dumps(b.get(k))[:160]}"
            if a[k] != b[k]:
                return _first_difference(a[k], b[k], f"{path}.{k}")
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: oracle has {len(a)} entries, labkit {len(b)}: {json.dumps(a)[:200]} vs {json.dumps(b)[:200]}"
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return f"{path or '.'}: oracle {json.dumps(a)[:160]} vs labkit {json.dumps(b)[:160]}"


def compare(oracle: dict[str, Any], labkit: dict[str, Any]) -> Diff:
    """oracle/labkit: {"exit": int, "output": {...}}."""
    o, lk = oracle["output"], labkit["output"]
    if o.get("error") == ORACLE_TIMEOUT:  # the real allocator gave up (scheduler filterTimeout, 10 s)
        return Diff("oracle-timeout", f"labkit said {lk.get('status')}")
    if lk.get("error") == ORACLE_TIMEOUT:  # labkit gave up the same way (Allocator.allocate timeout)
        return Diff("labkit-timeout", f"oracle said {o.get('status')}")
    if o.get("status") != lk.get("status"):
        return Diff("status", f"oracle {o.get('status')} ({(o.get('error') or '')[:200]}) vs labkit "
                              f"{lk.get('status')} ({(lk.get('error') or '')[:200]})")
    if o.get("allocations") != lk.get("allocations"):
        return Diff("allocations", _first_difference(o.get("allocations"), lk.get("allocations"), "allocations"))
    if oracle["exit"] != labkit["exit"]:
        return Diff("exit", f"oracle exit {oracle['exit']} vs labkit exit {labkit['exit']}")
    if (o.get("error") or None) != (lk.get("error") or None):
        return Diff("error-text", f"oracle {o.get('error')!r} vs labkit {lk.get('error')!r}")
    return Diff("")


# ---- shrinking and saving ----------------------------------------------------------------

def run_oracle_one(oracle: Path, directory: Path) -> dict[str, Any]:
    batch = directory.parent
    # --batch reads every subdir; keep a one-case parent so only this one runs
    result = run_oracle_batch(oracle, batch)
    return result[directory.name]


def shrink(choices: Sequence[int], fails: Callable[[Scenario], bool], budget: int = 250,
           version: str = "1.37") -> Scenario:
    """Greedy shrink over the choice list (delete blocks, then lower values)."""
    best = list(choices)
    best_sc = generate(ReplayDraw(best), version)
    tries = 0

    def attempt(cand: list[int]) -> bool:
        nonlocal best, best_sc, tries
        tries += 1
        draw = ReplayDraw(cand)
        sc = generate(draw, version)
        if fails(sc):
            best, best_sc = draw.choices, sc
            return True
        return False

    improved = True
    while improved and tries < budget:
        improved = False
        for size in (8, 4, 2, 1):
            i = 0
            while i < len(best) and tries < budget:
                cand = best[:i] + best[i + size:]
                if cand != best and attempt(cand):
                    improved = True
                else:
                    i += size
        for i in range(len(best)):
            if tries >= budget:
                break
            for v in (0, best[i] // 2, best[i] - 1):
                if 0 <= v < best[i]:
                    cand = best[:i] + [v] + best[i + 1:]
                    if attempt(cand):
                        improved = True
                        break
    return best_sc


def scenario_hash(directory: Path) -> str:
    h = hashlib.sha1()
    for name in ("input.yaml", "case.yaml"):
        h.update((directory / name).read_bytes())
    return h.hexdigest()[:10]


def save_regression(src: Path, oracle_result: dict[str, Any], dest_root: Path, note: str) -> Path:
    """Copy a scenario dir to dest_root/<hash>/ with oracle.json (+ note.txt); returns the dir."""
    dest = dest_root / scenario_hash(src)
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("input.yaml", "case.yaml"):
        shutil.copyfile(src / name, dest / name)
    (dest / "oracle.json").write_text(json.dumps(oracle_result["output"], indent=2, sort_keys=True) + "\n")
    (dest / "note.txt").write_text(note.strip() + "\n")
    return dest


def known_regressions() -> set[str]:
    return {p.name for root in (REGRESSIONS, REGRESSIONS_OPEN) if root.is_dir() for p in root.iterdir()
            if (p / "input.yaml").exists()}
