"""Writes the hand-written allocator scenarios (input.yaml + case.yaml per directory).

Run ``python3 tests/data/allocator/_generate.py`` after editing; ``expected.json`` files are
written by ``python3 tests/data/allocator/_generate.py --expect`` from the Go oracle's output
(the real kube-scheduler allocator), after checking that labkit agrees.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).parent
V1 = "resource.k8s.io/v1"
GPU = "gpu.nvidia.com"
CASES: dict[str, tuple[list[dict], dict]] = {}


def case(name: str, objs: list[dict], node: str = "node-1", gates: dict | None = None, version: str | None = None):
    c: dict = {"node": node}
    if version:
        c["kubernetesVersion"] = version
    if gates:
        c["featureGates"] = gates
    CASES[name] = (objs, c)


def dclass(name: str = GPU, expr: str | None = None, config: list | None = None) -> dict:
    spec: dict = {"selectors": [{"cel": {"expression": expr or f'device.driver == "{GPU}"'}}]}
    if config:
        spec["config"] = config
    return {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def dev(name: str, **kw) -> dict:
    d: dict = {"name": name}
    attrs = kw.pop("attrs", None)
    if attrs:
        d["attributes"] = {k: _attr(v) for k, v in attrs.items()}
    caps = kw.pop("caps", None)
    if caps:
        d["capacity"] = {k: (v if isinstance(v, dict) else {"value": v}) for k, v in caps.items()}
    d.update(kw)
    return d


def _attr(v):
    if isinstance(v, dict):
        return v
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": v}
    return {"string": v}


def rslice(name: str, devices: list[dict], pool: str = "node-1", node: str | None = "node-1",
           gen: int = 1, count: int = 1, driver: str = GPU, **spec_extra) -> dict:
    spec: dict = {"driver": driver, "pool": {"name": pool, "generation": gen, "resourceSliceCount": count}}
    if node is not None and not any(k in spec_extra for k in ("allNodes", "nodeSelector", "perDeviceNodeSelection")):
        spec["nodeName"] = node
    spec.update(spec_extra)
    if devices:
        spec["devices"] = devices
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def req(name: str, cls: str = GPU, count: int | None = None, mode: str | None = None, selectors=(), **kw) -> dict:
    ex: dict = {"deviceClassName": cls}
    if mode:
        ex["allocationMode"] = mode
    if count is not None:
        ex["count"] = count
    if selectors:
        ex["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    ex.update(kw)
    return {"name": name, "exactly": ex}


def sub(name: str, cls: str = GPU, count: int | None = None, selectors=(), **kw) -> dict:
    s: dict = {"name": name, "deviceClassName": cls}
    if count is not None:
        s["count"] = count
    if selectors:
        s["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    s.update(kw)
    return s


def claim(name: str, requests: list[dict], ns: str = "default", constraints=None, config=None,
          allocation: dict | None = None) -> dict:
    devices: dict = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    c: dict = {"apiVersion": V1, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": ns},
               "spec": {"devices": devices}}
    if allocation:
        c["status"] = {"allocation": allocation}
    return c


def allocated(*devices: tuple, node: str = "node-1") -> dict:
    results = []
    for d in devices:
        r = {"request": d[0], "driver": GPU, "pool": node, "device": d[1]}
        if len(d) > 2:
            r.update(d[2])
        results.append(r)
    return {"devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}


def node(name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}}}


def taint_rule(name: str, taint: dict, **selector) -> dict:
    return {"apiVersion": V1, "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": taint}}


def gpus(n: int, **kw) -> list[dict]:
    return [dev(f"gpu-{i}", attrs={"index": i, **kw.get("attrs", {})}) for i in range(n)]


MEM = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("{}")) >= 0'

# ---------------------------------------------------------------------------------------------
# basics
case("basic-selector", [dclass(), rslice("s1", [dev("gpu-0", caps={"memory": "40Gi"}), dev("gpu-1", caps={"memory": "80Gi"})]),
                        claim("c1", [req("gpu", selectors=[MEM.format("50Gi")])])])
case("exact-count", [dclass(), rslice("s1", gpus(4)), claim("c1", [req("gpu", count=3)])])
case("exact-count-too-many", [dclass(), rslice("s1", gpus(2)), claim("c1", [req("gpu", count=3)])])
case("two-claims-backtrack", [
    dclass(), rslice("s1", gpus(2)),
    claim("a", [req("any")]),
    claim("b", [req("first", selectors=['device.attributes["gpu.nvidia.com"].index == 0'])])])
case("two-requests-two-claims", [dclass(), rslice("s1", gpus(4)),
                                 claim("a", [req("x", count=2), req("w")]), claim("b", [req("z")])])
case("in-use", [dclass(), rslice("s1", gpus(2)),
                claim("old", [req("gpu")], allocation=allocated(("gpu", "gpu-0"), ("gpu", "gpu-1"))),
                claim("new", [req("gpu")])])
case("in-use-partly", [dclass(), rslice("s1", gpus(2)),
                       claim("old", [req("gpu")], allocation=allocated(("gpu", "gpu-0"))),
                       claim("new", [req("gpu")])])
case("empty-claim", [dclass(), rslice("s1", gpus(1)), claim("c1", [])])
case("no-slices", [dclass(), claim("c1", [req("gpu")])])
case("other-node", [dclass(), rslice("s1", gpus(2)), claim("c1", [req("gpu")])], node="node-2")
case("pool-order", [dclass(),
                    rslice("b", [dev("gpu-0")], pool="pool-b", node=None, allNodes=True),
                    rslice("a", [dev("gpu-0")], pool="pool-a", node=None, allNodes=True),
                    claim("c1", [req("gpu", count=2)])])
case("slice-order-in-pool", [dclass(),
                             rslice("z-slice", [dev("gpu-z")], count=2),
                             rslice("a-slice", [dev("gpu-a")], count=2),
                             claim("c1", [req("gpu")])])

# allocation mode All
case("all-devices", [dclass(), rslice("s1", gpus(3)), claim("c1", [req("gpu", mode="All")])])
case("all-devices-none", [dclass(), rslice("s1", gpus(2)),
                          claim("c1", [req("gpu", mode="All", selectors=['device.attributes["gpu.nvidia.com"].index > 5'])])])
case("all-devices-one-in-use", [dclass(), rslice("s1", gpus(2)),
                                claim("old", [req("gpu")], allocation=allocated(("gpu", "gpu-1"))),
                                claim("c1", [req("gpu", mode="All")])])
case("all-incomplete-pool", [dclass(), rslice("s1", gpus(2), count=2), claim("c1", [req("gpu", mode="All")])])
case("all-invalid-pool", [dclass(), rslice("s1", gpus(1), count=2), rslice("s2", gpus(1), count=2),
                          claim("c1", [req("gpu", mode="All")])])
case("all-constraint-error", [dclass(), rslice("s1", [dev("gpu-0", attrs={"model": "A100"}), dev("gpu-1", attrs={"model": "H100"})]),
                              claim("c1", [req("gpu", mode="All")], constraints=[{"matchAttribute": "gpu.nvidia.com/model"}])])
case("claim-limit", [dclass(), rslice("s1", gpus(2)), claim("c1", [req("a", count=20), req("b", count=13)])])

# pools
case("incomplete-pool", [dclass(), rslice("s1", gpus(2), count=2), claim("c1", [req("gpu")])])
case("obsolete-generation", [dclass(), rslice("old", [dev("gpu-old")], gen=1),
                             rslice("new", [dev("gpu-new")], gen=2), claim("c1", [req("gpu")])])
case("invalid-pool-duplicate", [dclass(), rslice("s1", [dev("gpu-0")], count=2), rslice("s2", [dev("gpu-0")], count=2),
                                claim("c1", [req("gpu")])])
case("invalid-pool-other-ok", [dclass(), rslice("s1", [dev("gpu-0")], count=2), rslice("s2", [dev("gpu-0")], count=2),
                               rslice("x", [dev("gpu-9")], pool="other", node=None, allNodes=True),
                               claim("c1", [req("gpu")])])
case("node-selector-slice", [dclass(), node("node-1", {"zone": "a", "rack": "r1"}),
                             rslice("net", [dev("nic-0")], pool="zone-a", node=None, nodeSelector={"nodeSelectorTerms": [
                                 {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}),
                             rslice("net2", [dev("nic-1")], pool="rack-1", node=None, nodeSelector={"nodeSelectorTerms": [
                                 {"matchExpressions": [{"key": "rack", "operator": "Exists"},
                                                       {"key": "zone", "operator": "In", "values": ["a"]}]}]}),
                             claim("c1", [req("nic", count=2)])])
case("node-selector-mismatch", [dclass(), node("node-1", {"zone": "b"}),
                                rslice("net", [dev("nic-0")], pool="zone-a", node=None, nodeSelector={"nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}),
                                claim("c1", [req("nic")])])
case("all-nodes", [dclass(), rslice("net", [dev("nic-0")], pool="fabric", node=None, allNodes=True),
                   claim("c1", [req("nic")])])
case("per-device-node-selection", [
    dclass(), node("node-1", {"zone": "a"}),
    rslice("pd", [dev("d-0", nodeName="node-2"), dev("d-1", nodeSelector={"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}), dev("d-2", allNodes=True)],
        pool="shared", node=None, perDeviceNodeSelection=True),
    claim("c1", [req("d", count=2)])])
case("per-device-node-name", [dclass(), rslice("pd", [dev("d-0", nodeName="node-1")], pool="shared", node=None,
                                                perDeviceNodeSelection=True), claim("c1", [req("d")])])

# prioritized list
case("first-available", [dclass(), dclass("small", 'device.attributes["gpu.nvidia.com"].index >= 1'),
                         rslice("s1", gpus(2)),
                         claim("c1", [{"name": "gpu", "firstAvailable": [
                             sub("big", count=3), sub("two", count=2), sub("one", cls="small")]}],
                               config=[{"requests": ["gpu/two"], "opaque": {"driver": GPU, "parameters": {"a": 1}}},
                                       {"requests": ["gpu/big"], "opaque": {"driver": GPU, "parameters": {"b": 2}}}])])
case("first-available-off", [dclass(), rslice("s1", gpus(1)),
                             claim("c1", [{"name": "gpu", "firstAvailable": [sub("one")]}])],
     gates={"DRAPrioritizedList": False}, version="1.35")
case("first-available-max-size", [dclass(), rslice("s1", gpus(4)),
                                  claim("c1", [req("a", count=30),
                                               {"name": "b", "firstAvailable": [sub("many", count=4), sub("few", count=1)]}])])
case("first-available-backtrack", [dclass(), rslice("s1", gpus(2)),
                                   claim("c1", [{"name": "x", "firstAvailable": [sub("pair", count=2), sub("one")]},
                                                req("w")])])

# constraints
case("match-attribute", [dclass(), rslice("s1", [
    dev("gpu-0", attrs={"pcieRoot": "pci0"}), dev("gpu-1", attrs={"pcieRoot": "pci1"}),
    dev("gpu-2", attrs={"pcieRoot": "pci1"})]),
    claim("c1", [req("a"), req("b")], constraints=[{"matchAttribute": "gpu.nvidia.com/pcieRoot"}])])
case("match-attribute-subset", [dclass(), rslice("s1", [
    dev("gpu-0", attrs={"pcieRoot": "pci0"}), dev("gpu-1", attrs={"pcieRoot": "pci1"}),
    dev("gpu-2", attrs={"pcieRoot": "pci1"}), dev("gpu-3")]),
    claim("c1", [req("a"), req("b"), req("c")],
          constraints=[{"requests": ["b", "c"], "matchAttribute": "gpu.nvidia.com/pcieRoot"}])])
case("match-attribute-missing", [dclass(), rslice("s1", gpus(2)),
                                 claim("c1", [req("a", count=2)], constraints=[{"matchAttribute": "gpu.nvidia.com/pcieRoot"}])])
case("distinct-attribute", [dclass(), rslice("s1", [
    dev("gpu-0", attrs={"numa": 0}), dev("gpu-1", attrs={"numa": 0}), dev("gpu-2", attrs={"numa": 1})]),
    claim("c1", [req("a", count=2)], constraints=[{"distinctAttribute": "gpu.nvidia.com/numa"}])])
case("empty-constraint", [dclass(), rslice("s1", gpus(1)), claim("c1", [req("a")], constraints=[{"requests": ["a"]}])])
case("list-type-match", [dclass(), rslice("s1", [
    dev("gpu-0", attrs={"groups": {"strings": ["u", "v"]}}), dev("gpu-1", attrs={"groups": {"strings": ["z"]}}),
    dev("gpu-2", attrs={"groups": {"strings": ["v", "z"]}})]),
    claim("c1", [req("a", count=2)], constraints=[{"matchAttribute": "gpu.nvidia.com/groups"}])],
     gates={"DRAListTypeAttributes": True})

# admin access
case("admin-access", [dclass(), rslice("s1", gpus(1)),
                      claim("old", [req("gpu")], allocation=allocated(("gpu", "gpu-0"))),
                      claim("mon", [req("gpu", adminAccess=True)])])
case("admin-access-off", [dclass(), rslice("s1", gpus(1)), claim("mon", [req("gpu", adminAccess=True)])],
     gates={"DRAAdminAccess": False}, version="1.35")
case("admin-access-same-claim", [dclass(), rslice("s1", gpus(1)),
                                 claim("mon", [req("a", adminAccess=True), req("b", adminAccess=True)])])

# taints
NOSCHED = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}
case("taint-untolerated", [dclass(), rslice("s1", [dev("gpu-0", taints=[NOSCHED]), dev("gpu-1")]),
                           claim("c1", [req("gpu")])])
case("taint-tolerated", [dclass(), rslice("s1", [dev("gpu-0", taints=[NOSCHED])]),
                         claim("c1", [req("gpu", tolerations=[{"key": "maintenance", "operator": "Exists"}])])])
case("taint-none-effect", [dclass(), rslice("s1", [dev("gpu-0", taints=[{"key": "k", "value": "v", "effect": "None"}])]),
                           claim("c1", [req("gpu")])])
case("taint-off", [dclass(), rslice("s1", [dev("gpu-0", taints=[NOSCHED])]), claim("c1", [req("gpu")])],
     gates={"DRADeviceTaints": False, "DRADeviceTaintRules": False})
case("taint-rule", [dclass(), rslice("s1", gpus(2)),
                    taint_rule("drain", {"key": "drain", "effect": "NoExecute"}, driver=GPU, pool="node-1", device="gpu-0"),
                    claim("c1", [req("gpu")])])
case("taint-rule-all", [dclass(), rslice("s1", gpus(2)),
                        taint_rule("drain", {"key": "drain", "effect": "NoSchedule"}, driver=GPU),
                        claim("c1", [req("gpu")])])

# classes, CEL, config
case("missing-class", [rslice("s1", gpus(1)), claim("c1", [req("gpu", cls="nope")])])
case("cel-runtime-error", [dclass(), rslice("s1", gpus(1)),
                           claim("c1", [req("gpu", selectors=['device.attributes["gpu.nvidia.com"].missing == 1'])])])
case("cel-class-false", [dclass(expr='device.driver == "other"'), rslice("s1", gpus(1)), claim("c1", [req("gpu")])])
case("config-copy", [dclass(config=[{"opaque": {"driver": GPU, "parameters": {"cls": 1}}}]),
                     dclass("other", config=[{"opaque": {"driver": GPU, "parameters": {"other": 1}}}]),
                     rslice("s1", gpus(3)),
                     claim("c1", [req("a"), req("b"), req("c", cls="other")],
                           config=[{"opaque": {"driver": GPU, "parameters": {"all": 1}}},
                                   {"requests": ["a"], "opaque": {"driver": GPU, "parameters": {"a": 1}}},
                                   {"requests": ["a", "b", "c"], "opaque": {"driver": GPU, "parameters": {"abc": 1}}}])])

# error shapes
case("error-selector-not-cel", [dclass(), rslice("s1", gpus(1)),
                                claim("c1", [req("gpu", selectors=[])])])
CASES["error-selector-not-cel"][0][-1]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [{}]
case("error-no-class-name", [dclass(), rslice("s1", gpus(1)), claim("c1", [req("gpu", cls="")])])
case("error-bad-mode", [dclass(), rslice("s1", gpus(1)), claim("c1", [req("gpu", mode="Some")])])
case("error-subrequest-capacity-off", [dclass(), rslice("s1", gpus(1)), claim("c1", [{"name": "gpu", "firstAvailable": [
    sub("one", capacity={"requests": {"memory": "1Gi"}})]}])], gates={"DRAConsumableCapacity": False})
# (CEL compile errors: Go appends the source snippet lines; labkit.cel prints one line, see report)
case("error-class-cel-runtime", [dclass(expr='device.attributes["gpu.nvidia.com"].nope'), rslice("s1", gpus(1)),
                                 claim("c1", [req("gpu")])])
case("admin-access-set-false-feature-off", [dclass(), rslice("s1", gpus(1)),
                                            claim("mon", [req("gpu", adminAccess=False)])],
     gates={"DRAAdminAccess": False}, version="1.35")

# partitionable devices (MIG-like)
COUNTERS = {"name": "gpu-0-counters", "counters": {"memory": {"value": "40Gi"}, "slices": {"value": "7"}}}


def part(name, mem, sl):
    return dev(name, consumesCounters=[{"counterSet": "gpu-0-counters",
                                        "counters": {"memory": {"value": mem}, "slices": {"value": str(sl)}}}])


MIG = [part("gpu-0", "40Gi", 7), part("gpu-0-mig-3g", "20Gi", 3), part("gpu-0-mig-3g-b", "20Gi", 3),
       part("gpu-0-mig-1g", "5Gi", 1)]
case("partitionable", [dclass(), rslice("counters", [], count=2, sharedCounters=[COUNTERS]),
                       rslice("devices", MIG, count=2), claim("c1", [req("mig", count=3,
                       selectors=['device.attributes["gpu.nvidia.com"].?x.orValue(0) == 0'])])])
case("partitionable-two", [dclass(), rslice("counters", [], count=2, sharedCounters=[COUNTERS]),
                           rslice("devices", MIG, count=2), claim("c1", [req("mig", count=2)])])
case("partitionable-two-claims", [dclass(), rslice("counters", [], count=2, sharedCounters=[COUNTERS]),
                                  rslice("devices", MIG, count=2), claim("c1", [req("mig")]), claim("c2", [req("mig")]),
                                  claim("c3", [req("mig")])])
case("partitionable-whole-in-use", [dclass(), rslice("counters", [], count=2, sharedCounters=[COUNTERS]),
                                    rslice("devices", MIG, count=2),
                                    claim("old", [req("gpu")], allocation=allocated(("gpu", "gpu-0"))),
                                    claim("c1", [req("mig")])])
case("partitionable-partial-in-use", [dclass(), rslice("counters", [], count=2, sharedCounters=[COUNTERS]),
                                      rslice("devices", MIG, count=2),
                                      claim("old", [req("gpu")], allocation=allocated(("gpu", "gpu-0-mig-3g"))),
                                      claim("c1", [req("mig", count=2)])])
case("partitionable-off", [dclass(), rslice("counters", [], count=2, sharedCounters=[COUNTERS]),
                           rslice("devices", MIG, count=2), claim("c1", [req("mig")])],
     gates={"DRAPartitionableDevices": False})
case("partitionable-unknown-counter", [dclass(), rslice("counters", [], count=2, sharedCounters=[COUNTERS]),
                                       rslice("devices", [dev("bad", consumesCounters=[{"counterSet": "nope", "counters": {"x": {"value": "1"}}}])], count=2),
                                       claim("c1", [req("mig")])])

# consumable capacity
SHARED = dev("gpu-0", allowMultipleAllocations=True, caps={
    "memory": {"value": "40Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}},
    "compute": {"value": "100", "requestPolicy": {"default": "10", "validValues": ["10", "50", "100"]}}})
case("consumable-capacity", [dclass(), rslice("s1", [SHARED]),
                             claim("a", [req("g", capacity={"requests": {"memory": "1500Mi", "compute": "20"}})]),
                             claim("b", [req("g")])])
case("consumable-capacity-full", [dclass(), rslice("s1", [SHARED]),
                                  claim("a", [req("g", capacity={"requests": {"memory": "39Gi"}})]),
                                  claim("b", [req("g", capacity={"requests": {"memory": "2Gi"}})])])
case("consumable-capacity-in-use", [dclass(), rslice("s1", [SHARED]),
                                    claim("old", [req("g")], allocation=allocated(("g", "gpu-0", {
                                        "shareID": "11111111-2222-3333-4444-555555555555",
                                        "consumedCapacity": {"memory": "39Gi", "compute": "10"}}))),
                                    claim("b", [req("g", capacity={"requests": {"memory": "2Gi"}})])])
case("consumable-capacity-missing-name", [dclass(), rslice("s1", [SHARED]),
                                          claim("a", [req("g", capacity={"requests": {"bandwidth": "1"}})])])
case("consumable-capacity-off", [dclass(), rslice("s1", gpus(1)),
                                 claim("a", [req("g", capacity={"requests": {"memory": "1Gi"}})])],
     gates={"DRAConsumableCapacity": False})
case("consumable-dedicated-device", [dclass(), rslice("s1", [dev("gpu-0", caps={"memory": "40Gi"})]),
                                     claim("a", [req("g", capacity={"requests": {"memory": "50Gi"}})])])

# binding conditions
BC = dev("fabric-0", bindingConditions=["attached"], bindingFailureConditions=["failed"], bindsToNode=True)
case("binding-conditions", [dclass(), rslice("s1", [BC], pool="fabric", node=None, allNodes=True),
                            claim("c1", [req("gpu")])])
case("binding-conditions-off", [dclass(), rslice("s1", [BC], pool="fabric", node=None, allNodes=True),
                                claim("c1", [req("gpu")])], gates={"DRADeviceBindingConditions": False})
case("binding-pools-last", [dclass(), rslice("s1", [BC], pool="a-fabric", node=None, allNodes=True),
                            rslice("s2", [dev("plain")], pool="z-pool", node=None, allNodes=True),
                            claim("c1", [req("gpu")])])

# version profiles
case("v134-defaults", [dclass(), rslice("s1", gpus(3)), claim("c1", [req("gpu", count=2)])], version="1.34")
# 1.36: a counter-only slice is relevant for every node, so node-0's incomplete pool blocks `All` on node-1
case("v136-counter-slice-other-node", [dclass(), rslice("n0-counters", [], pool="node-0", node="node-0", count=2,
                                                        sharedCounters=[COUNTERS]),
                                       rslice("s1", gpus(2)), claim("c1", [req("gpu", mode="All")])], version="1.36")
case("v136-defaults", [dclass(), rslice("s1", [SHARED]), claim("a", [req("g")]), claim("b", [req("g")])], version="1.36")


def write() -> None:
    for name, (objs, c) in CASES.items():
        d = HERE / name
        d.mkdir(exist_ok=True)
        (d / "input.yaml").write_text(yaml.safe_dump_all(objs, sort_keys=False))
        (d / "case.yaml").write_text(yaml.safe_dump(c, sort_keys=False))


def expect(oracle: str) -> None:
    out = subprocess.run([oracle, "--batch", str(HERE)], capture_output=True, text=True, check=True,
                         env={"LABKIT_DETERMINISTIC_SHAREID": "1", "PATH": "/usr/bin:/bin"})
    for line in out.stdout.splitlines():
        row = json.loads(line)
        path = HERE / row["name"] / "expected.json"
        path.write_text(json.dumps({"exit": row["exit"], **row["output"]}, indent=2) + "\n")


if __name__ == "__main__":
    write()
    if "--expect" in sys.argv:
        expect(sys.argv[sys.argv.index("--expect") + 1])
