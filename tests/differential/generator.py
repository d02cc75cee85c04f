"""Random, API-valid DRA allocation scenarios for the differential test.

``generate(draw)`` builds one scenario (Nodes, Namespaces, DeviceClasses, ResourceSlices,
DeviceTaintRules, in-use and pending ResourceClaims) from a ``Draw``; ``scenarios()`` is the
hypothesis strategy. Every decision goes through the draw, so a scenario is a pure function of
its choice list, and small choices give small scenarios (that is what shrinking relies on).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.differential.draw import Draw, HypothesisDraw, chance, choice, subset

GPU = "gpu.example.com"
NIC = "nic.example.com"
NODES = [("node-0", {"zone": "a", "rack": "r1"}), ("node-1", {"zone": "b", "rack": "r1"})]
ADMIN_NS = "ops"
MODELS = ["a100", "h100", "t4"]
FW = ["1.2.3", "1.10.0", "2.0.0"]
MEMS = ["16Gi", "40Gi", "80Gi"]
# Gates the allocator reads; flipped one at a time in some scenarios.
FLIPPABLE = ["DRAPrioritizedList", "DRAPartitionableDevices", "DRAConsumableCapacity", "DRADeviceTaints",
             "DRADeviceTaintRules", "DRAAdminAccess", "DRADeviceBindingConditions"]

# CEL over the GPU driver's attributes; every GPU device carries all of them.
GPU_EXPRS = [
    f'device.attributes["{GPU}"].model == "a100"',
    f'device.attributes["{GPU}"].model != "t4"',
    f'device.attributes["{GPU}"].index >= 1',
    f'device.attributes["{GPU}"].index % 2 == 0',
    f'device.attributes["{GPU}"].healthy',
    f'device.attributes["{GPU}"].fw.isGreaterThan(semver("1.5.0"))',
    f'device.attributes["{GPU}"].fw.compareTo(semver("2.0.0")) < 0',
    f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0',
    f'device.capacity["{GPU}"].memory.isLessThan(quantity("80Gi"))',
    f'device.attributes["{GPU}"].model in ["a100", "h100"] && device.attributes["{GPU}"].numa == 0',
    'true',
]
NIC_EXPRS = [
    f'device.attributes["{NIC}"].speed >= 200',
    f'device.attributes["{NIC}"].rdma',
    'true',
]
# Expressions that can fail at runtime on a device missing the key (exercise error paths).
RISKY_EXPRS = [
    f'device.attributes["{GPU}"].model == "h100"',
    f'device.attributes["{NIC}"].speed > 100',
]


#: libyaml's emitter where PyYAML has it: the same YAML as yaml.safe_dump, at a fraction of the CPU
#: (writing thousands of scenarios per run was most of the differential tests' own time)
DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass
class Scenario:
    objects: list[dict[str, Any]]
    node: str
    gates: dict[str, bool]
    version: str = "1.37"
    tags: set[str] = field(default_factory=set)

    def gate_string(self) -> str:
        return ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(self.gates.items()))

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "input.yaml").write_text(yaml.dump_all(self.objects, Dumper=DUMPER, sort_keys=False))
        case: dict[str, Any] = {"node": self.node, "kubernetesVersion": self.version}
        if self.gates:
            case["featureGates"] = dict(sorted(self.gates.items()))
        (directory / "case.yaml").write_text(yaml.dump(case, Dumper=DUMPER, sort_keys=False))
        return directory


def _meta(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, **extra}


# Defaults of the gates the generator itself consults (the rest only matter to the allocators).
_VERSION_OFF = {"1.34": {"DRAConsumableCapacity", "DRAPartitionableDevices", "DRADeviceTaints", "DRADeviceTaintRules"},
                "1.35": {"DRAConsumableCapacity", "DRAPartitionableDevices", "DRADeviceTaints", "DRADeviceTaintRules"},
                "1.36": {"DRADeviceTaintRules"}, "1.37": set(), "1.38": set()}


class _Builder:
    def __init__(self, d: Draw, version: str = "1.37") -> None:
        self.d = d
        self.version = version
        self.tags: set[str] = set()
        self.gates: dict[str, bool] = {}
        # (driver, pool, device name, device dict, node visibility: node name | "*" | zone)
        self.devices: list[tuple[str, str, str, dict[str, Any], str]] = []
        self.slices: list[dict[str, Any]] = []
        self.classes: list[dict[str, Any]] = []
        self.rules: list[dict[str, Any]] = []

    # ---- gates ---------------------------------------------------------------
    def on(self, gate: str) -> bool:
        return self.gates.get(gate, gate not in _VERSION_OFF[self.version])

    def pick_gates(self) -> None:
        if chance(self.d, 15):
            gate = choice(self.d, FLIPPABLE)
            if self.version == "1.34" and gate == "DRADeviceTaintRules":
                gate = "DRADeviceTaints"  # the gate was split out of DRADeviceTaints in 1.35
            self.gates[gate] = not self.on(gate)
            self.tags.add("gate-off" if not self.gates[gate] else "gate-on")

    # ---- slices ----------------------------------------------------------------
    def gpu_device(self, name: str, idx: int, counters: str | None, multi: bool) -> dict[str, Any]:
        d = self.d
        dev: dict[str, Any] = {
            "name": name,
            "attributes": {
                "model": {"string": choice(d, MODELS)},
                "index": {"int": idx},
                "numa": {"int": d.int(0, 1)},
                "healthy": {"bool": not chance(d, 20)},
                "fw": {"version": choice(d, FW)},
            },
            "capacity": {"memory": {"value": choice(d, MEMS)}},
        }
        if chance(d, 30):
            dev["attributes"]["resource.kubernetes.io/pcieRoot"] = {"string": choice(d, ["pci0", "pci1"])}
        if chance(d, 2):
            dev["bindingConditions"] = ["ready"]
            dev["bindingFailureConditions"] = ["failed"]
            if chance(d, 50):
                dev["bindsToNode"] = True
            self.tags.add("binding-conditions")
        if counters:
            dev["consumesCounters"] = [{"counterSet": counters, "counters": {
                "memory": {"value": choice(d, ["10Gi", "20Gi", "40Gi"])},
                "slots": {"value": str(d.int(1, 4))}}}]
        if multi:
            dev["allowMultipleAllocations"] = True
            policy = choice(d, ["none", "range", "values"])
            mem = dev["capacity"]["memory"]
            if policy == "range":
                mem["requestPolicy"] = {"default": "10Gi", "validRange": {"min": "5Gi", "step": "5Gi"}}
            elif policy == "values":
                mem["requestPolicy"] = {"default": "10Gi", "validValues": ["5Gi", "10Gi", "20Gi"]}
            if chance(d, 40):
                dev["capacity"]["compute"] = {"value": "2", "requestPolicy": {
                    "default": "500m", "validRange": {"min": "250m", "step": choice(d, ["250m", "1"]), "max": "2"}}}
                self.tags.add("fractional")
            self.tags.add("multi-allocatable")
        if chance(self.d, 8):
            dev["taints"] = [{"key": choice(d, ["maint", "ecc"]), "value": "yes",
                              "effect": choice(d, ["NoSchedule", "NoExecute", "NoSchedule", "None"])}]
            self.tags.add("taints")
        return dev

    def nic_device(self, name: str) -> dict[str, Any]:
        d = self.d
        dev = {"name": name, "attributes": {"speed": {"int": choice(d, [100, 200, 400])},
                                             "rdma": {"bool": chance(d, 50)},
                                             "numa": {"int": d.int(0, 1)}}}
        if chance(d, 40):
            dev["attributes"]["resource.kubernetes.io/pcieRoot"] = {"string": choice(d, ["pci0", "pci1"])}
        return dev

    def add_pool(self, p: int) -> None:
        d = self.d
        driver = GPU if p == 0 or chance(d, 60) else NIC
        first = ["node-0", "node-0", "all", "zone-a"]
        where = choice(d, first if p == 0 else ["node-0", "node-0", "node-1", "all", "zone-a", "zone-b"])
        pool = f"pool-{p}"
        sel: dict[str, Any]
        if where == "all":
            sel = {"allNodes": True}
            self.tags.add("allNodes")
        elif where.startswith("zone-"):
            sel = {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": [where[-1]]}]}]}}
            self.tags.add("nodeSelector")
        else:
            sel = {"nodeName": where}
        per_device = chance(d, 8)
        if per_device:
            sel = {"perDeviceNodeSelection": True}
            self.tags.add("per-device-node")
        partitionable = driver == GPU and not per_device and chance(d, 30)
        multi_ok = driver == GPU and chance(d, 40)
        n_slices = d.int(1, 2)
        generation = d.int(1, 2)
        specs: list[dict[str, Any]] = []
        if partitionable:
            self.tags.add("counters")
            specs.append({"sharedCounters": [{"name": "gpu-0-counters", "counters": {
                "memory": {"value": choice(d, ["40Gi", "80Gi"])}, "slots": {"value": str(d.int(2, 7))}}}]})
        idx = 0
        for s in range(n_slices):
            devices = []
            for _ in range(d.int(1, 6)):
                name = f"dev-{idx}" if driver == GPU else f"nic-{idx}"
                if driver == GPU:
                    counters = "gpu-0-counters" if partitionable and chance(d, 80) else None
                    dev = self.gpu_device(name, idx, counters, multi_ok and chance(d, 50))
                else:
                    dev = self.nic_device(name)
                if per_device:
                    dev.update(choice(d, [{"nodeName": "node-0"}, {"nodeName": "node-1"}, {"allNodes": True},
                                          {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                                              {"key": "zone", "operator": "In", "values": ["a"]}]}]}}]))
                devices.append(dev)
                self.devices.append((driver, pool, name, dev, where))
                idx += 1
            specs.append({"devices": devices, "_slice": s})
        if n_slices == 2 and chance(d, 10):
            # the same device name in two slices of one pool: the pool is invalid
            specs[-1]["devices"][0] = {**specs[-1]["devices"][0], "name": specs[-2]["devices"][0]["name"]}
            self.tags.add("invalid-pool")
        count = len(specs)
        if chance(d, 8):
            count += 1  # a slice is still missing: the pool is incomplete
            self.tags.add("incomplete-pool")
        for i, spec in enumerate(specs):
            spec.pop("_slice", None)
            body = {"driver": driver, "pool": {"name": pool, "generation": generation,
                                               "resourceSliceCount": count}, **sel, **spec}
            self.slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                "metadata": _meta(f"{pool}-s{i}"), "spec": body})
        if generation == 2 and chance(d, 50):
            # an obsolete slice of the previous generation, still listed
            old = {"driver": driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                   **sel, "devices": [self.nic_device("old-0") if driver == NIC else
                                      self.gpu_device("old-0", 99, None, False)]}
            self.slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                "metadata": _meta(f"{pool}-old"), "spec": old})
            self.tags.add("obsolete-slice")

    # ---- classes -----------------------------------------------------------------
    def add_classes(self) -> None:
        d = self.d
        def cls(name: str, exprs: list[str], config: bool = False) -> None:
            spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in exprs]}
            if config:
                spec["config"] = [{"opaque": {"driver": GPU, "parameters": {"class": name}}}]
            self.classes.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                 "metadata": _meta(name), "spec": spec})
        drv = f'device.driver == "{GPU}"'
        cls("gpu", [drv], config=chance(d, 30))
        cls("gpu-big", [drv, choice(d, GPU_EXPRS)], config=chance(d, 30))
        cls("nic", [f'device.driver == "{NIC}"'])
        if self.on("DRAConsumableCapacity"):
            cls("gpu-shared", [drv, "device.allowMultipleAllocations"])
        if chance(d, 10):
            cls("loose", [choice(d, RISKY_EXPRS)])  # no driver check: may hit a missing key
            self.tags.add("risky-cel")

    def class_names(self) -> list[str]:
        """Class names weighted towards the plain GPU class (others often find nothing)."""
        weights = {"gpu": 5, "gpu-big": 2, "nic": 1, "gpu-shared": 1, "loose": 1}
        return [n for c in self.classes for n in [c["metadata"]["name"]] * weights[c["metadata"]["name"]]]

    # ---- claims ------------------------------------------------------------------
    def selector_for(self, cls: str) -> list[dict[str, Any]]:
        if not chance(self.d, 25):
            return []
        pool = NIC_EXPRS if cls == "nic" else GPU_EXPRS
        if cls == "loose":
            pool = RISKY_EXPRS
        return [{"cel": {"expression": choice(self.d, pool)}}]

    def exact(self, cls: str, admin_ok: bool) -> dict[str, Any]:
        d = self.d
        req: dict[str, Any] = {"deviceClassName": cls}
        if chance(d, 8):
            req["allocationMode"] = "All"
            self.tags.add("all")
        elif chance(d, 30):
            req["count"] = choice(d, [1, 2, 2, 3])
        elif chance(d, 3):
            req["count"] = choice(d, [16, 17, 33])
            self.tags.add("many-devices")
            if chance(d, 30):
                req["allocationMode"] = "ExactCount"
        sel = self.selector_for(cls)
        if sel:
            req["selectors"] = sel
        if chance(d, 15):
            tol: dict[str, Any] = {"key": choice(d, ["maint", "ecc"])}
            if chance(d, 50):
                tol["operator"] = "Exists"
            else:
                tol["value"] = "yes"
                if chance(d, 50):
                    tol["operator"] = "Equal"
            if chance(d, 50):
                tol["effect"] = choice(d, ["NoSchedule", "NoExecute"])
            req["tolerations"] = [tol]
            self.tags.add("tolerations")
        if admin_ok and chance(d, 10):
            req["adminAccess"] = True
            self.tags.add("adminAccess")
        if cls in ("gpu", "gpu-shared") and self.on("DRAConsumableCapacity") and chance(d, 25):
            req["capacity"] = {"requests": {"memory": choice(d, ["5Gi", "7Gi", "10Gi", "20Gi"])}}
            if chance(d, 30):
                req["capacity"]["requests"]["compute"] = choice(d, ["100m", "300m", "1", "1500m"])
            self.tags.add("capacity")
        return req

    def claim(self, name: str, namespace: str) -> dict[str, Any]:
        d = self.d
        admin_ok = namespace == ADMIN_NS
        names = self.class_names()
        requests = []
        for r in range(choice(d, [1, 1, 1, 2, 2, 3])):
            rname = f"r{r}"
            if chance(d, 20):
                subs = []
                for s in range(d.int(2, 3)):
                    sub = {"name": f"s{s}", **self.exact(choice(d, names), admin_ok=False)}
                    subs.append(sub)
                requests.append({"name": rname, "firstAvailable": subs})
                self.tags.add("firstAvailable")
            else:
                requests.append({"name": rname, "exactly": self.exact(choice(d, names), admin_ok)})
        devices: dict[str, Any] = {"requests": requests}
        constraints = []
        for _ in range(d.int(1, 2) if chance(d, 25) else 0):
            c: dict[str, Any] = {}
            if chance(d, 50):
                c["matchAttribute"] = choice(d, [f"{GPU}/model", f"{GPU}/numa", f"{NIC}/numa", f"{GPU}/fw",
                                                 "resource.kubernetes.io/pcieRoot"])
            else:
                c["distinctAttribute"] = choice(d, [f"{GPU}/index", f"{GPU}/model", f"{NIC}/speed"])
            if chance(d, 40):
                c["requests"] = [choice(d, requests)["name"]]
            constraints.append(c)
            self.tags.add("constraints")
        if constraints:
            devices["constraints"] = constraints
        if chance(d, 15):
            cfg: dict[str, Any] = {"opaque": {"driver": GPU, "parameters": {"claim": name}}}
            if chance(d, 50):
                cfg["requests"] = [choice(d, requests)["name"]]
            devices["config"] = [cfg]
            self.tags.add("config")
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": _meta(name, namespace=namespace), "spec": {"devices": devices}}

    def in_use_claim(self, i: int, taken: set[tuple[str, str, str]]) -> dict[str, Any] | None:
        d = self.d
        free = [x for x in self.devices if (x[0], x[1], x[2]) not in taken]
        if not free:
            return None
        picked = subset(d, free, 1, 2)
        results, admin = [], chance(d, 10)
        for driver, pool, name, dev, _where in picked:
            res: dict[str, Any] = {"request": "r0", "driver": driver, "pool": pool, "device": name}
            if admin:
                res["adminAccess"] = True
            elif dev.get("allowMultipleAllocations"):
                res["shareID"] = str(uuid.UUID(int=d.int(1, 1 << 30)))
                res["consumedCapacity"] = {"memory": choice(d, ["5Gi", "10Gi", "20Gi"])}
            else:
                taken.add((driver, pool, name))
            results.append(res)
        self.tags.add("in-use")
        cls = "gpu" if picked[0][0] == GPU else "nic"
        ns = ADMIN_NS if admin else "default"
        exactly: dict[str, Any] = {"deviceClassName": cls, "count": len(picked)}
        if admin:
            exactly["adminAccess"] = True
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": _meta(f"used-{i}", namespace=ns),
                "spec": {"devices": {"requests": [{"name": "r0", "exactly": exactly}]}},
                "status": {"allocation": {"devices": {"results": results}}}}

    def taint_rules(self) -> None:
        d = self.d
        if not self.devices or not chance(d, 15):
            return
        driver, pool, name, _dev, _w = choice(d, self.devices)
        sel: dict[str, Any] = {"driver": driver}
        if chance(d, 60):
            sel["pool"] = pool
            if chance(d, 70):
                sel["device"] = name
        self.rules.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                           "metadata": _meta("rule-0"),
                           "spec": {"deviceSelector": sel, "taint": {
                               "key": choice(d, ["maint", "ecc"]), "value": "yes",
                               "effect": choice(d, ["NoSchedule", "NoExecute"])}}})
        self.tags.add("taintRules")


def generate(d: Draw, version: str = "1.37") -> Scenario:
    b = _Builder(d, version)
    b.pick_gates()
    for p in range(d.int(1, 4)):
        b.add_pool(p)
    b.add_classes()
    b.taint_rules()
    objs: list[dict[str, Any]] = []
    for name, labels in NODES:
        objs.append({"apiVersion": "v1", "kind": "Node", "metadata": _meta(name, labels=labels)})
    objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(
        ADMIN_NS, labels={"resource.kubernetes.io/admin-access": "true"})})
    objs += b.classes + b.slices + b.rules
    taken: set[tuple[str, str, str]] = set()
    for i in range(choice(d, [0, 0, 1, 1, 2])):
        c = b.in_use_claim(i, taken)
        if c:
            objs.append(c)
    for i in range(choice(d, [1, 1, 1, 2, 2, 3])):
        ns = ADMIN_NS if chance(d, 15) else "default"
        objs.append(b.claim(f"claim-{i}", ns))
    if len([o for o in objs if o["kind"] == "ResourceClaim" and "status" not in o]) > 1:
        b.tags.add("multi-claim")
    node = "node-0" if chance(d, 85) else "node-1"
    return Scenario(objects=objs, node=node, gates=b.gates, version=version, tags=b.tags)


def scenarios(version: str = "1.37"):
    """Hypothesis strategy producing ``Scenario`` objects (hypothesis shrinks the choices)."""
    from hypothesis import strategies as st

    @st.composite
    def _build(draw_fn: Any) -> Scenario:
        return generate(HypothesisDraw(draw_fn), version)

    return _build()
