"""CEL selector throughput per engine over a 10,000-device inventory.

Compile once, convert every device once with ``device_input`` (as the allocator does), then
evaluate the selector on every device. Prints one table row per (engine, expression).

    python benchmarks/cel_bench.py [--devices 10000] [--engines cel-expr-python,cel-python]
"""

from __future__ import annotations

import argparse
import statistics
import time

from labkit.cel import CelRuntimeError, compile_selector, device_input

DRIVER = "gpu.nvidia.com"
MODELS = [
    ("NVIDIA A100-SXM4-80GB", "80Gi", "8.0.0", 108),
    ("NVIDIA H100 80GB HBM3", "80Gi", "9.0.0", 132),
    ("Tesla T4", "16Gi", "7.5.0", 40),
    ("NVIDIA A100-SXM4-40GB", "40Gi", "8.0.0", 108),
]

EXPRESSIONS = {
    "memory>=40Gi": f'device.driver == "{DRIVER}" && '
                    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0',
    "pure CEL": f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].index < 4',
    "semver+string": f'device.attributes["{DRIVER}"].cudaComputeCapability.isGreaterThan(semver("7.5.0")) && '
                     f'device.attributes["{DRIVER}"].productName.lowerAscii().contains("a100")',
    "optional": f'device.attributes["{DRIVER}"].?addressingMode.orValue("") == "HMM"',
}


def inventory(n: int) -> list[dict]:
    devices = []
    for i in range(n):
        product, memory, cc, sms = MODELS[i % len(MODELS)]
        devices.append({
            "name": f"gpu-{i}",
            "attributes": {
                "productName": {"string": product},
                "type": {"string": "gpu"},
                "index": {"int": i % 8},
                "uuid": {"string": f"GPU-{i:08x}"},
                "driverVersion": {"version": "550.54.15"},
                "cudaComputeCapability": {"version": cc},
                "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i % 4:02x}"},
            },
            "capacity": {"memory": {"value": memory}, "multiprocessors": {"value": str(sms)}},
        })
    return devices


def bench(engine: str, name: str, expr: str, devices: list, repeat: int) -> dict:
    t0 = time.perf_counter()
    try:
        program = compile_selector(expr, engine=engine)
    except Exception as exc:  # noqa: BLE001 - report, keep benchmarking the rest
        return {"engine": engine, "expr": name, "error": str(exc).split(" (")[0][:60]}
    compile_ms = (time.perf_counter() - t0) * 1000
    runs, cpu = [], []
    matches = 0
    for _ in range(repeat):
        matches = 0
        t0, c0 = time.perf_counter(), time.process_time()
        for dev in devices:
            try:
                matches += program.evaluate(dev)
            except CelRuntimeError:
                continue
        runs.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    best = min(cpu)
    return {"engine": engine, "expr": name, "compile_ms": compile_ms, "eval_s": best,
            "per_s": len(devices) / best, "us": best / len(devices) * 1e6, "matches": matches,
            "median_wall_s": statistics.median(runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", type=int, default=10_000)
    parser.add_argument("--engines", default="cel-expr-python,cel-python")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    raw = inventory(args.devices)
    t0 = time.process_time()
    devices = [device_input(DRIVER, d) for d in raw]
    convert = time.process_time() - t0
    print(f"{args.devices} devices; device_input for all: {convert * 1000:.0f} ms "
          f"({convert / args.devices * 1e6:.1f} us/device)\n")
    header = (f"{'engine':16} {'expression':14} {'compile ms':>10} {'eval s':>8} {'evals/s':>10} "
              f"{'us/eval':>8} {'matches':>8} {'wall s':>8}")
    print(header)
    print("-" * len(header))
    for engine in args.engines.split(","):
        for name, expr in EXPRESSIONS.items():
            r = bench(engine, name, expr, devices, 1 if engine == "cel-python" else args.repeat)
            if "error" in r:
                print(f"{engine:16} {name:14} {'-':>10} {'-':>8} {'-':>10} {'-':>8} {r['error']}")
                continue
            print(f"{engine:16} {name:14} {r['compile_ms']:10.2f} {r['eval_s']:8.3f} {r['per_s']:10,.0f} "
                  f"{r['us']:8.1f} {r['matches']:8} {r['median_wall_s']:8.3f}")
    print("\neval s / evals/s: CPU time (process_time) of the best run, so a busy machine does not "
          "distort them; wall s: median wall time.\nThe first run of each engine also converts every "
          "device to the engine's form (cached on the DeviceInput); compile ms includes the first "
          "engine set-up.")


if __name__ == "__main__":
    main()
