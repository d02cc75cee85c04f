"""Sweeps: every (policy, trace, seed, fleet) cell of a grid, run in parallel processes.

A cell is one `run_policy` on a fresh sim cluster; it is described by four plain values (names,
paths, a seed), so a worker rebuilds the trace and fleet itself and only a summary row comes
back (a few hundred bytes per cell). Engines:

- serial (`workers=1`): in this process, in grid order;
- local (default): a `ProcessPoolExecutor` with `workers` processes (spawned, not forked);
- Dask distributed (`address="tcp://host:8786"`): an existing scheduler's workers. The workers
  must import the same LabKit (same version, same `PYTHONPATH`); install with the `dask` extra.

Every engine returns the rows in grid order with the same simulated figures: a cell depends
only on its four values (and the shared options), never on which process ran it. Only the
wall-clock keys (`metrics.WALL_CLOCK_KEYS`) differ from run to run.

Specs (one home for what `labkit experiment run` and `sweep` accept):
- trace: `synthetic[:PODS]`, `alibaba-sample`, `alibaba-shape[:PODS]` (generated with the
  published v2023 shape, default 8,152 rows), or a path to a v2023 pod-list CSV;
- fleet: a cluster profile name or YAML path, or `alibaba-shape[:SCALE]` (1,213 nodes / 6,212
  GPUs at scale 1).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import pickle
import time
from collections.abc import Callable, Sequence

# the module, not its ProcessPoolExecutor: that name loads concurrent.futures.process, which needs
# _multiprocessing (Pyodide has none: notebook 12 imports this module in a browser tab)
from concurrent import futures
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from labkit.cli_types import SEED_MAX, shown
from labkit.errors import EngineError, InputError, LabkitError, NotFoundError, one_line
from labkit.experiments.alibaba import SAMPLE, SHAPE_PODS, generate_alibaba, load_alibaba
from labkit.experiments.fleet import alibaba_fleet, build_fleet, fleet_variant
from labkit.experiments.metrics import SUMMARY_KEYS, WALL_CLOCK_KEYS
from labkit.experiments.policies import PolicyFault, get_policy, load_policy, policy_name, policy_spec
from labkit.experiments.runner import collect_run_garbage, run_policy
from labkit.experiments.traces import WorkItem, generate
from labkit.model.profiles import ClusterProfile

#: columns of a sweep row before the policy's summary
CELL_KEYS = ("trace", "fleet", "seed")
ROW_KEYS = CELL_KEYS + SUMMARY_KEYS + ("cpu_s", "trace_items")
#: measured, not simulated: they differ from run to run (cpu_s: the cell's CPU time in its process)
MEASURED_KEYS = (*WALL_CLOCK_KEYS, "cpu_s")
DASK_EXTRA = "dask"

# The bounds of what a run and a sweep take (the CLI's --help says them; labkit.cli_types checks
# the plain numbers, these functions the specs with a number in them).
#: items in one trace at most: a synthetic or alibaba-shape count, --pods, --limit (12x the 8,152
#: rows of the Alibaba v2023 trace; each item is a pod, its claim and their history in the sim)
MAX_PODS = 100_000
#: seeds in one --seeds at most (each is a run of every policy on every trace and fleet)
MAX_SEEDS = 10_000
#: --rate: synthetic arrivals per minute (one per ~17 hours to ~1,700 a second)
RATE_RANGE = (0.001, 100_000.0)
#: --tick: sim seconds per step (a millisecond to a day)
TICK_RANGE = (0.001, 86_400.0)


class SweepError(InputError, ValueError):
    """Bad sweep input (an axis, a seed, a spec) or an engine that cannot be used; one line."""


class TraceNotFound(NotFoundError):
    """A trace file that does not exist (exit 3, like every thing the user named that is not there)."""


@dataclass(frozen=True)
class Options:
    """What every cell shares: synthetic trace size and rate, the tick, a trace prefix limit."""

    pods: int = 500
    rate: float = 6.0
    tick: float = 10.0
    limit: int | None = None


@dataclass(frozen=True)
class Cell:
    policy: Any  # a policy spec (a built-in name, PATH.py[:Class], module:Class) or a policy object
    trace: str
    seed: int
    fleet: str


# ---- specs -----------------------------------------------------------------------------------

def _count(spec: str, default: int) -> int:
    name, _, arg = spec.partition(":")
    if not arg:
        return default
    try:
        n = int(arg) if len(arg) <= 20 else None
    except ValueError:
        raise SweepError(f"trace {shown(spec)}: {shown(arg)} is not a whole number of pods; e.g. {name}:500") from None
    if n is None or not 0 < n <= MAX_PODS:
        raise SweepError(f"trace {shown(spec)}: {shown(arg)[1:-1]} pods; give 1 to {MAX_PODS}, e.g. {name}:500")
    return n


def check_trace(spec: str) -> str:
    """``spec`` when its pod count (``synthetic:PODS``, ``alibaba-shape:PODS``) is a whole number
    in [1, MAX_PODS]; a path or a name is checked when the trace is loaded."""
    if spec.partition(":")[0] in ("synthetic", "alibaba-shape"):
        _count(spec, 1)
    return spec


def check_fleet(spec: str) -> str:
    """``spec`` when its scale (``alibaba-shape:SCALE``) is a number in (0, 10]; a profile name or
    path is checked when the fleet is built."""
    fleet_profile(spec)
    return spec


def fleet_profile(spec: str) -> str | dict:
    """A fleet spec as `run_policy` takes it: a profile name/path, or the alibaba-shape dict."""
    name, _, arg = spec.partition(":")
    if name != "alibaba-shape":
        return spec
    try:
        scale = float(arg) if arg else 1.0
    except ValueError:
        raise SweepError(f"fleet {spec!r}: {arg!r} is not a number; e.g. alibaba-shape:0.1") from None
    try:
        return alibaba_fleet(scale)
    except ValueError as exc:
        raise SweepError(f"fleet {spec!r}: {exc}") from None


def load_trace(spec: str, *, seed: int, pods: int, rate: float, gpu_mem_gib: float) -> tuple[list[WorkItem], str]:
    """(items, display name) for a trace spec (see the module docstring)."""
    name = spec.partition(":")[0]
    if name == "synthetic":
        n = _count(spec, pods)
        return generate(n, seed=seed, rate_per_min=rate), f"synthetic(n={n}, seed={seed}, rate={rate:g}/min)"
    if name == "alibaba-shape":
        n = _count(spec, SHAPE_PODS)
        return generate_alibaba(n, seed, gpu_mem_gib=gpu_mem_gib), f"alibaba-shape(n={n}, seed={seed})"
    if spec == "alibaba-sample":
        return load_alibaba(SAMPLE, gpu_mem_gib=gpu_mem_gib), "alibaba-sample"
    if not Path(spec).exists():
        raise TraceNotFound(f"trace {spec!r}: no such file; use synthetic, alibaba-sample, alibaba-shape or a CSV path")
    return load_alibaba(spec, gpu_mem_gib=gpu_mem_gib), spec


def reference_gpu_mem(fleet: str | dict | ClusterProfile) -> float:
    """The fleet's most common GPU memory (what an Alibaba row's share of one GPU is taken of)."""
    return build_fleet(fleet_variant(fleet, "none")).common_gpu_mem_gib()


# ---- the grid --------------------------------------------------------------------------------

def split_axis(flag: str, text: str) -> list[str]:
    """Comma-separated values of one axis: no empty list, no duplicates. The error names ``flag``
    as its field (``one_line`` prints ``--seeds: ...``; argparse, which names the option itself,
    takes the message alone)."""
    values = [v.strip() for v in text.split(",")]
    if not text.strip() or any(not v for v in values):
        raise SweepError(f"{text!r}: an empty value; give comma-separated values, e.g. {flag} a,b", field=flag)
    seen: set[str] = set()
    for v in values:
        if v in seen:
            raise SweepError(f"{v!r} is given twice; give each value once", field=flag)
        seen.add(v)
    return values


def parse_seeds(text: str) -> list[int]:
    """`0,1,5` or a range `0-4` (inclusive), or both: `0-2,7`. Seeds are whole numbers in
    [0, SEED_MAX], at most MAX_SEEDS of them (counted before a range is expanded)."""
    seeds: dict[int, None] = {}  # in the order given, each once
    for part in split_axis("--seeds", text):
        lo, dash, hi = part.partition("-")
        ends = (lo, hi) if dash else (part, part)
        if not all(e.strip().isascii() and e.strip().isdigit() and len(e.strip()) <= 20 for e in ends):
            raise SweepError(f"{part!r} is not a seed; use whole numbers from 0 to {SEED_MAX} like 0,1,2 or 0-4",
                             field="--seeds")
        a, b = int(ends[0]), int(ends[1])
        if a > b:
            raise SweepError(f"{part!r} runs backwards; write the range low-high, e.g. {b}-{a}", field="--seeds")
        if b > SEED_MAX:
            raise SweepError(f"{part!r}: {b} is out of range [0, {SEED_MAX}]", field="--seeds")
        if b - a + 1 <= MAX_SEEDS:  # a range is counted before it is expanded
            seeds.update(dict.fromkeys(range(a, b + 1)))
        if b - a + 1 > MAX_SEEDS or len(seeds) > MAX_SEEDS:
            raise SweepError(f"{part!r}: more than {MAX_SEEDS} seeds in all; each is a run of every policy on "
                             "every trace and fleet", field="--seeds")
    return list(seeds)


def make_grid(policies: Sequence[str], traces: Sequence[str], seeds: Sequence[int],
              fleets: Sequence[str], options: Options = Options()) -> list[Cell]:
    """The cells in grid order (trace, fleet, seed, policy) after checking every value once here,
    so a bad name fails in one line before any work is sent out."""
    for flag, axis in (("--policies", policies), ("--traces", traces), ("--seeds", seeds), ("--fleets", fleets)):
        if not axis:
            raise SweepError(f"{flag}: empty; give at least one value")
    # cells carry specs (a file path made absolute): a worker loads the policy again from its spec
    loaded = [load_policy(p) for p in policies]
    names = [p.name for p in loaded]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice:
        raise SweepError(f"--policies: policy {twice!r} given twice (policies are told apart by name)")
    policies = [policy_spec(p) for p in loaded]
    for s in seeds:
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            raise SweepError(f"--seeds: {s!r} is not a seed; use whole numbers >= 0")
    if not (0 < options.tick < math.inf and 0 < options.rate < math.inf) or options.pods < 0 \
            or (options.limit is not None and options.limit < 0):
        raise SweepError("--tick and --rate must be finite and > 0, --pods and --limit >= 0")
    mem = {}
    for f in fleets:
        mem[f] = reference_gpu_mem(fleet_profile(f))
    for t in traces:  # parse each trace once with the first fleet's reference GPU (errors only)
        load_trace(t, seed=seeds[0], pods=options.pods, rate=options.rate, gpu_mem_gib=mem[fleets[0]])
    return [Cell(p, t, s, f) for t in traces for f in fleets for s in seeds for p in policies]


def run_cell(cell: Cell, options: Options = Options()) -> dict:
    """One cell (a module-level function: engines pickle it by name). Returns the row, or
    {"error": one line} for a LabKit error (so no exception has to cross a process boundary)."""
    cpu = time.process_time()
    try:
        fleet = fleet_profile(cell.fleet)
        items, trace_name = load_trace(cell.trace, seed=cell.seed, pods=options.pods, rate=options.rate,
                                       gpu_mem_gib=reference_gpu_mem(fleet))
        if options.limit is not None:
            items = items[: options.limit]
        run = run_policy(items, fleet, get_policy(cell.policy), tick=options.tick, seed=cell.seed)
    except PolicyFault as exc:  # the policy failed while it ran: exit 1, not a bad input
        return {"error": f"{cell.trace} / seed {cell.seed} / {cell.fleet}: {one_line(exc)}", "policy_fault": True}
    except LabkitError as exc:
        return {"error": f"{policy_name(cell.policy)} / {cell.trace} / seed {cell.seed} / {cell.fleet}: "
                         f"{one_line(exc)}"}
    return {"trace": trace_name, "fleet": cell.fleet, "seed": cell.seed, **run.summary,
            "cpu_s": time.process_time() - cpu, "trace_items": len(items)}


# ---- engines ---------------------------------------------------------------------------------

@dataclass
class SweepResult:
    rows: list[dict]  # grid order
    engine: str  # "serial" | "local xN" | "dask tcp://..."
    wall_s: float  # the whole sweep, engine start-up included
    workers: int

    @property
    def cell_wall_s(self) -> float:
        """Sum of the cells' own run times (each process warms its caches once, so this is more
        than a serial run of the same cells would take; compare with a `workers=1` run)."""
        return sum(r["wall_s"] for r in self.rows)

    @property
    def cell_cpu_s(self) -> float:
        return sum(r["cpu_s"] for r in self.rows)

    def sim_rows(self) -> list[dict]:
        """Rows without the measured keys (MEASURED_KEYS): equal for every engine."""
        return [{k: v for k, v in r.items() if k not in MEASURED_KEYS} for r in self.rows]

    def to_dict(self) -> dict:
        return {"engine": self.engine, "workers": self.workers, "wall_s": self.wall_s,
                "cell_wall_s": self.cell_wall_s, "cell_cpu_s": self.cell_cpu_s, "rows": self.rows}


def run_sweep(cells: Sequence[Cell], options: Options = Options(), *, workers: int | None = None,
              address: str | None = None, progress: bool | None = None,
              on_row: Callable[[Cell, dict], Any] | None = None) -> SweepResult:
    """Run the cells: on the Dask scheduler at `address`, else in `workers` local processes
    (default: the CPU count; 1 = serially in this process). `progress`: a tqdm bar on stderr
    (None: only when stderr is a terminal). `on_row(cell, row)` is called in this process as
    each cell finishes (in finishing order; rows with "error" are not passed), so a caller can
    keep finished rows of a sweep that is interrupted later."""
    started = time.perf_counter()
    if address or len(cells) > 1 and (workers or os.cpu_count() or 1) > 1:
        for c in cells:
            check_shippable(c.policy)

    def done(i: int, row: dict) -> None:
        if on_row is not None and "error" not in row:
            on_row(cells[i], row)

    rows, engine, n = run_map(partial(run_cell, options=options), cells, workers=workers, address=address,
                              progress=progress, desc="sweep: cells", done=done)
    return SweepResult(rows, engine, time.perf_counter() - started, n)


def run_map(fn: Callable[[Any], dict], items: Sequence[Any], *, workers: int | None = None,
            address: str | None = None, progress: bool | None = None, desc: str = "cells",
            done: Callable[[int, dict], Any] | None = None) -> tuple[list[dict], str, int]:
    """fn(item) for every item, on one of the engines (see the module text): the Dask scheduler
    at `address`, else `workers` local processes (default: the CPU count; 1 = serially here).
    `fn` is a module-level function (or a functools.partial of one: engines pickle it by name)
    returning a dict, {"error": one line} for bad input. Returns (results in item order, engine
    name, workers); the first error is raised as a SweepError (one line). `done(i, result)` is
    called here as each item finishes."""
    bar = tqdm(total=len(items), desc=desc, unit="cell", disable=None if progress is None else not progress)

    def finished(i: int, row: dict) -> None:
        if done is not None:
            done(i, row)
        bar.update(1)

    try:
        if address:
            rows, engine, n = _run_dask(fn, items, address, finished)
        else:
            n = max(1, min(workers or os.cpu_count() or 1, len(items) or 1))
            if n == 1:
                rows, engine = [], "serial"
                for i, c in enumerate(items):
                    rows.append(fn(c))
                    collect_run_garbage()
                    finished(i, rows[-1])
            else:
                rows, engine = _run_local(fn, items, n, finished), f"local x{n}"
    finally:
        bar.close()
    errors = [r for r in rows if "error" in r]
    if errors:
        more = f" (and {len(errors) - 1} more cells failed)" if len(errors) > 1 else ""
        # a policy that failed while it ran keeps its kind (exit 1); anything else is bad input
        raise (PolicyFault if errors[0].get("policy_fault") else SweepError)(errors[0]["error"] + more)
    return rows, engine, n


def check_shippable(policy: Any) -> None:
    """A policy object for worker processes or Dask must pickle, its class importable there (a
    spec string always ships: the worker loads it again)."""
    if isinstance(policy, str):
        return
    cls = type(policy)
    why = ""
    if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        why = f"its class {cls.__qualname__} is defined in {cls.__module__} (a notebook cell or a script)"
    else:
        try:
            pickle.dumps(policy)
        except Exception as exc:  # noqa: BLE001 - whatever pickle says
            why = f"it cannot be pickled ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    if why:
        raise SweepError(f"policy {getattr(policy, 'name', cls.__name__)!r}: cannot go to worker processes: {why}",
                         fix="run serially (workers=1), or put the class in a file and pass 'PATH.py' "
                             "(workers load it again)")


def _run_local(fn: Callable[[Any], dict], items: Sequence[Any], n: int,
               done: Callable[[int, dict], Any]) -> list[dict]:
    rows: list[dict | None] = [None] * len(items)
    # spawn: a fresh interpreter per worker (no forked locks or threads from this process)
    with futures.ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn")) as pool:
        futs = {pool.submit(fn, c): i for i, c in enumerate(items)}
        todo = set(futs)
        while todo:
            finished, todo = futures.wait(todo, return_when=futures.FIRST_COMPLETED)
            for f in finished:
                i = futs[f]
                rows[i] = f.result()
                done(i, rows[i])
    return [r for r in rows if r is not None]


def _run_dask(fn: Callable[[Any], dict], items: Sequence[Any], address: str,
              done: Callable[[int, dict], Any]) -> tuple[list[dict], str, int]:
    try:  # optional dependency (the `dask` extra): imported only for --address
        from distributed import Client, as_completed
    except ImportError:
        raise SweepError(f"--address {address}: running on a Dask cluster needs the '{DASK_EXTRA}' extra; "
                         f"fix: pip install 'dra-labkit[{DASK_EXTRA}]'") from None
    try:
        client = Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise EngineError(f"--address {address}: cannot reach a Dask scheduler ({str(exc).splitlines()[0]})",
                          fix="start one (`dask scheduler` + `dask worker ADDRESS`) or check the address") from None
    try:
        n = max(1, sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values()))
        futs = client.map(fn, list(items), pure=False)
        index = {f.key: i for i, f in enumerate(futs)}
        rows: list[dict | None] = [None] * len(items)
        for f in as_completed(futs):
            i = index[f.key]
            try:
                rows[i] = f.result()
            except Exception as exc:  # noqa: BLE001 - a worker crash or a missing labkit there
                raise EngineError(f"--address {address}: a Dask worker failed ({type(exc).__name__}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else ''})",
                                  fix="the workers must import the same labkit (same PYTHONPATH / install)") from None
            done(i, rows[i])
    finally:
        client.close()
    return [r for r in rows if r is not None], f"dask {address}", n


# ---- a row log: finished cells survive an interrupted sweep -----------------------------------

class RowLog:
    """Sweep rows in a JSON-lines file, one line per finished cell ({"cell", "options", "row"}),
    appended and flushed as each cell finishes. Reopening the file gives the rows of an earlier
    (possibly interrupted) sweep: `run_logged` skips their cells. A torn last line (a kill
    mid-write) is ignored."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.done: dict[str, dict] = {}
        self._torn = False  # the file ends mid-line: the next row starts on a new line
        if self.path.exists():
            text = self.path.read_text(encoding="utf-8")
            self._torn = bool(text) and not text.endswith("\n")
            for line in text.splitlines():
                try:
                    doc = json.loads(line)
                    self.done[doc["key"]] = doc["row"]
                except (ValueError, KeyError, TypeError):
                    continue

    @staticmethod
    def key(cell: Cell, options: Options) -> str:
        """A cell's identity in the log: its four values and the shared options."""
        return json.dumps([asdict(cell), asdict(options)], sort_keys=True)

    def add(self, cell: Cell, options: Options, row: dict) -> None:
        k = self.key(cell, options)
        self.done[k] = row
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(("\n" if self._torn else "") + json.dumps({"key": k, "cell": asdict(cell), "row": row}) + "\n")
            self._torn = False
            fh.flush()
            os.fsync(fh.fileno())


def run_logged(cells: Sequence[Cell], options: Options, log: RowLog, *,
               on_row: Callable[[Cell, dict], Any] | None = None, **engine: Any) -> tuple[SweepResult, int]:
    """`run_sweep` of the cells `log` has no row for, each row appended to the log as it comes;
    returns (result with every cell's row in grid order, how many rows came from the log).
    `engine`: run_sweep's workers / address / progress."""
    todo = [c for c in cells if log.key(c, options) not in log.done]

    def keep(cell: Cell, row: dict) -> None:
        log.add(cell, options, row)
        if on_row is not None:
            on_row(cell, row)

    res = run_sweep(todo, options, on_row=keep, **engine) if todo else SweepResult([], "none (all in the log)", 0.0, 0)
    rows = [log.done[log.key(c, options)] for c in cells]
    return SweepResult(rows, res.engine, res.wall_s, res.workers), len(cells) - len(todo)
