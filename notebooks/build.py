"""Generate the course notebooks (stored without outputs): `python notebooks/build.py`.

Each notebook is a list of cells: md(...) for text, code(...) for code, fact(...) for code whose
output teaches a fact and is deterministic on every backend (nbval compares it: the cell starts
with `# NBVAL_CHECK_OUTPUT`). tests/test_course_build.py checks that the committed notebooks are
exactly what this script writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
CHECK = "# NBVAL_CHECK_OUTPUT"


def md(text: str) -> tuple[str, str]:
    return ("markdown", text.strip())


def code(text: str) -> tuple[str, str]:
    return ("code", text.strip())


def fact(text: str) -> tuple[str, str]:
    return ("code", CHECK + "\n" + text.strip())


def connect_cell(profile: str, extra: str = "") -> tuple[str, str]:
    """The first code cell: imports (sorted as ruff wants), BACKEND, a fresh cluster of `profile`."""
    lines = ["from labkit.cluster import connect"] + [x for x in extra.splitlines() if x.strip()]
    std = sorted({"import os"} | {x for x in lines if x.split()[1].split(".")[0] in ("shutil", "subprocess")})
    third = sorted(x for x in lines if x.split()[1].split(".")[0] == "yaml")
    first = sorted((x for x in lines if x.split()[1].startswith("labkit")), key=lambda x: x.split()[1])
    block = "\n\n".join("\n".join(g) for g in (std, third, first) if g)
    return code(f'''
{block}

BACKEND = os.environ.get("LABKIT_BACKEND", "sim")  # "sim", "local" or "kind": the only line to change
previous = globals().get("cluster")
if previous is not None:  # running the notebook again: stop the cluster of the previous run
    previous.down()
cluster = connect(BACKEND, "{profile}", progress=False)
print(f"{{BACKEND}} cluster up")
''')


def down_cell() -> tuple[str, str]:
    return code('cluster.down()  # stop this notebook\'s cluster (local/kind: processes and containers)')


# ---------------------------------------------------------------------------------------------
NB00 = [
    md("""
# 00 · Setup and backends

**Learning goals**
- know the three cluster backends of the lab kit — `sim`, `local` and `kind` — and what each one runs;
- check this machine: Python, packages, and which backends can run here (and why not);
- run a first command against a cluster and read its inventory.
"""),
    md("""
Every notebook starts with the same cell: it reads `LABKIT_BACKEND` (default `sim`) and connects to a
cluster *profile* (a list of nodes and their hardware, in `clusters/`). Change the one line, or set the
environment variable before starting Jupyter, and the same cells run against real Kubernetes.

| backend | what runs | needs |
|---|---|---|
| `sim` | an embedded cluster in this Python process: object store, scheduler with the real structured-allocator logic, claim controller, a node agent that "starts" containers | nothing |
| `local` | the real `kube-apiserver`, `etcd`, `kube-scheduler`, `kube-controller-manager` 1.37 as local processes; fake nodes; the fake GPU driver's real kubelet gRPC plugin | control-plane binaries (built once with Go) |
| `kind` | a real kind cluster: kubelet, containerd with CDI, the fake driver as a DaemonSet | Docker or Podman, `kind`, `kubectl` |
"""),
    connect_cell("workshop", "\nfrom labkit.course import backend_table, environment_table\nfrom labkit.course.show import table"),
    md("Versions of what the course uses (yours may be newer):"),
    code('print(table(environment_table(), ("component", "version")))'),
    md("Which backends can run on this machine, and why not — nothing here needs a GPU:"),
    code('print(table(backend_table(), ("backend", "runs here", "why")))'),
    md("""
The `workshop` profile is one DGX A100 training box and two inference servers with four T4 each. `status()`
summarises what the cluster holds. Drivers publish their devices in **ResourceSlices**; a DeviceClass
describes a family of devices (you will meet both in notebooks 02 and 03).
"""),
    fact("""
print(cluster.status() if BACKEND == "sim" else "status() shows backend details on " + BACKEND)
"""),
    md("The same facts as Kubernetes objects: one ResourceSlice per node and driver, sorted by name."),
    fact("""
for s in cluster.list("ResourceSlice"):
    spec = s["spec"]
    print(f'{spec["nodeName"]:12} {spec["driver"]:18} {len(spec.get("devices", []))} devices')
"""),
    md("""
## Exercise
How many **whole GPUs** does this cluster publish? Replace `...` with a number and run the cell: the check prints
✅ or ❌ with a hint.
"""),
    code("""
from labkit.course import checks

GPUS = ...  # your answer, e.g. 4
checks.check_gpu_count(GPUS, cluster)
"""),
    md("""
## Recap
- `sim` runs everywhere and instantly; `local` runs the real control plane without Docker; `kind` runs everything
  for real, including kubelet and CDI.
- One line (`BACKEND`) switches every notebook between them.
- Drivers publish devices in ResourceSlices; the rest of the course is about asking for them.
"""),
    down_cell(),
]

# ---------------------------------------------------------------------------------------------
NB01 = [
    md("""
# 01 · Why DRA: from integer GPUs to claims

**Learning goals**
- see what the device-plugin model (`nvidia.com/gpu: 1`) can and cannot say;
- see the same workloads as ResourceClaims that ask for *which* GPU, by attributes;
- measure the difference: memory asked for vs memory of the GPU each pod got.
"""),
    connect_cell("workshop", "\nimport yaml\n\nfrom labkit.course.show import pod_lines, table"),
    md("""
With a device plugin a GPU is an integer in `resources.limits`. The scheduler only counts: any GPU is as good as any
other. Four small inference pods (each needs ~8 GiB) written the old way:
"""),
    code("""
def integer_pod(name: str) -> str:
    return f'''
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{labkit.dev/needs-memory: 8Gi}}
spec:
  containers:
  - name: server
    image: registry.example/inference:1.0
    resources:
      limits:
        nvidia.com/gpu: 1
'''

cluster.apply("---".join(integer_pod(f"int-{i}") for i in range(4)))
cluster.wait()
print(pod_lines(cluster))
"""),
    md("""
On Kubernetes 1.37 the DeviceClass `gpu.nvidia.com` carries `extendedResourceName: nvidia.com/gpu`, so these old pods are
served by DRA too. But nothing told the scheduler that an 80 GiB A100 is wasted on an 8 GiB model: every node that fits
scores the same, and the sim breaks the tie by name (kube-scheduler picks one at random) — here the training box.
Let's measure memory asked vs memory of the GPU each pod got.
"""),
    code("""
def usage(cluster, pods: list[str]) -> list[tuple[str, str, str, str, str]]:
    devices = {(s["spec"]["pool"]["name"], d["name"]): d for s in cluster.list("ResourceSlice")
               for d in s["spec"].get("devices", [])}
    rows = []
    for r in cluster.placements().rows:
        if r["pod"] in pods:
            d = devices[(r["pool"], r["device"])]
            gib = int(d["capacity"]["memory"]["value"].removesuffix("Gi"))
            product = d["attributes"]["productName"]["string"]
            rows.append((r["pod"], r["node"], product, f"{gib} GiB", f"{8 / gib:.0%}"))
    return sorted(rows)

HEADER = ("pod", "node", "gpu", "gpu memory", "memory used")
"""),
    fact("""
print(table(usage(cluster, [f"int-{i}" for i in range(4)]), HEADER))
"""),
    md("""
Now the DRA way. A **ResourceClaimTemplate** describes what each pod needs; every pod gets its own
**ResourceClaim** made from it. The request selects devices with a CEL expression on their attributes — here the
product name — so the inference pods go to the T4s:
"""),
    code("""
T4_TEMPLATE = '''
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: one-t4
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel:
              expression: device.attributes["gpu.nvidia.com"].productName == "Tesla T4"
'''

def claim_pod(name: str) -> str:
    return f'''
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: one-t4
  containers:
  - name: server
    image: registry.example/inference:1.0
    resources:
      claims:
      - name: gpu
'''

cluster.apply(T4_TEMPLATE)
cluster.apply("---".join(claim_pod(f"dra-{i}") for i in range(4)))
cluster.wait()
"""),
    fact("""
print(table(usage(cluster, [f"dra-{i}" for i in range(4)]), HEADER))
"""),
    md("""
Same four pods, same number of GPUs, but each T4 is half used instead of a tenth of an A100, and the A100s stay
free for training. The claim the controller made for one of the pods (`status.allocation` says which device):
"""),
    code("""
claim = next(c for c in cluster.list("ResourceClaim") if c["metadata"]["name"].startswith("dra-0-gpu"))
print(yaml.safe_dump({"spec": claim["spec"], "status": {"allocation": claim["status"]["allocation"]}}, sort_keys=False))
"""),
    md("""
| integer model (`nvidia.com/gpu: 1`) | DRA claims |
|---|---|
| a count per node | devices with attributes (product, memory, MIG profile, PCIe root, …) |
| any GPU is as good as any other | CEL selectors pick which devices qualify |
| one pod, one whole GPU | a claim can be shared by pods, or ask for a MIG slice |
| no relation between devices | constraints: same PCIe root, same physical GPU, … |
| the device plugin decides at admission | the scheduler allocates; the claim records the decision |

## Exercise
Write the DRA equivalent of `nvidia.com/gpu: 2` — a ResourceClaimTemplate named `two-gpus` with one request for two
devices of class `gpu.nvidia.com`. Replace every `???`.
"""),
    code("""
from labkit.course import checks

MY_TEMPLATE = '''
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: two-gpus
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: ???
          count: ???
'''
checks.check_two_gpu_template(MY_TEMPLATE)
"""),
    md("""
## Recap
- The integer model counts GPUs; it cannot say *which* GPU, so small jobs land on big GPUs.
- DRA: a **ResourceClaim** (or a template making one per pod) requests devices of a **DeviceClass**, narrowed by CEL
  selectors on attributes; the scheduler writes the allocation into the claim.
- Old `nvidia.com/gpu` pods still work on 1.37 through the class's `extendedResourceName`.
"""),
    down_cell(),
]

# ---------------------------------------------------------------------------------------------
NB02 = [
    md("""
# 02 · Inventory: ResourceSlices, attributes, capacity, topology

**Learning goals**
- read the ResourceSlices a DGX A100 and a T4 server publish;
- tell attributes (facts to select on) from capacity (amounts);
- see the node's topology: NVLink, PCIe roots and switches, NUMA, NICs.
"""),
    connect_cell("workshop", "\nimport yaml\n\nfrom labkit.course.show import device_table"),
    md("The GPU driver `gpu.nvidia.com` publishes one pool per node. The DGX A100's GPUs:"),
    fact("""
slices = cluster.list("ResourceSlice")
print(device_table(slices, "dgx-a100-0", "gpu.nvidia.com"))
"""),
    md("And one T4 server: same schema, different values (a T4 has 15 GiB usable memory, no NVLink, one PCIe root):"),
    fact("""
print(device_table(slices, "t4-0"))
"""),
    md("""
One device in full. **Attributes** are typed facts (`string`, `int`, `bool`, `version`); bare names belong to the driver's
domain (`gpu.nvidia.com`), qualified names such as `resource.kubernetes.io/pcieRoot` are shared standards.
**Capacity** holds quantities (`memory: 80Gi`).
"""),
    fact("""
dgx_gpus = next(s for s in slices if s["spec"]["nodeName"] == "dgx-a100-0" and s["spec"]["driver"] == "gpu.nvidia.com")
gpu0 = dgx_gpus["spec"]["devices"][0]
print(yaml.safe_dump(gpu0, sort_keys=True))
"""),
    md("""
The DGX also publishes its ConnectX NICs, through a second driver (`nic.fake-gpus.dev`). The pool, its slices and the
node they belong to:
"""),
    fact("""
for s in slices:
    spec = s["spec"]
    print(s["metadata"]["name"], "| pool", spec["pool"]["name"], "| generation", spec["pool"]["generation"],
          "| slices in pool", spec["pool"]["resourceSliceCount"], "| node", spec["nodeName"])
"""),
    md("""
## Topology
Attributes say where a device sits, but a picture is quicker. `labkit.topology` builds a networkx graph of a node
profile: sockets, PCIe roots and switches, GPUs, NICs, and NVLink.
"""),
    code("""
from labkit.topology import devices_under, distance, draw_node, node_graph, nvlink_islands

dgx = node_graph("dgx-a100")
draw_node(dgx, title="DGX A100: 8 GPUs on NVSwitch, 4 PCIe roots with 2 GPUs + 2 NICs each");
"""),
    md("`nvidia-smi topo -m`-style answers: NVLink islands, and the path between two devices."),
    fact("""
print("NVLink islands:", nvlink_islands(dgx))
print("gpu-0 <-> gpu-1:", distance(dgx, "gpu-0", "gpu-1"))
print("gpu-0 <-> nic-0:", distance(dgx, "gpu-0", "nic-0"))
print("gpu-0 <-> nic-7:", distance(dgx, "gpu-0", "nic-7"))
print("under pci0000:00:", devices_under(dgx, "pci0000:00"))
"""),
    md("The T4 server has no NVLink: every GPU is its own island, and GPUs talk over the PCIe host bridge (`PHB`)."),
    code("""
t4 = node_graph("t4-inference")
draw_node(t4, title="T4 inference server");
"""),
    fact("""
print("NVLink islands:", nvlink_islands(t4))
print("gpu-0 <-> gpu-1:", distance(t4, "gpu-0", "gpu-1"))
"""),
    md("The inventory explorer lists every device of the cluster, free or held by which claim:"),
    code("""
from labkit.widgets import InventoryExplorer

InventoryExplorer(cluster)
"""),
    md("""
## Exercise
Which NICs of a DGX A100 sit under the **same PCIe root** as `gpu-5`? (That is where GPUDirect RDMA is fastest.)
Give a list of device names.
"""),
    code("""
from labkit.course import checks

NICS_NEAR_GPU5 = ...  # e.g. ["nic-0"]
checks.check_nics_near_gpu(NICS_NEAR_GPU5)
"""),
    md("""
## Recap
- A driver publishes a **pool** per node, in one or more ResourceSlices; each device has attributes and capacity.
- Standard attributes (`resource.kubernetes.io/pcieRoot`, `pciBusID`) let devices of *different* drivers be
  matched; driver attributes (`productName`, `profile`, `uuid`) describe the GPU.
- Topology pictures and `distance()` show what the attributes encode.
"""),
    down_cell(),
]

# ---------------------------------------------------------------------------------------------
NB03 = [
    md("""
# 03 · DeviceClasses and CEL

**Learning goals**
- read a DeviceClass and its CEL selector;
- write selectors with the Kubernetes CEL library (`quantity`, `semver`, strings, optionals);
- recognise the common mistakes — `>=` on quantities, missing attributes, wrong domains — and read the errors.
"""),
    connect_cell("workshop", "\nfrom labkit.course.show import placement_lines\nfrom labkit.widgets import evaluate"),
    md("The classes the fake NVIDIA driver installs, with their selectors:"),
    fact("""
for c in cluster.list("DeviceClass"):
    spec = c["spec"]
    print(c["metadata"]["name"], "->", spec.get("extendedResourceName", "-"))
    for s in spec.get("selectors", []):
        print("    ", s["cel"]["expression"])
"""),
    md("""
A selector is a CEL expression over one `device`: `device.driver`, `device.attributes[domain].name`,
`device.capacity[domain].name`. `evaluate()` runs one expression on every device of the cluster and counts
matches — the same evaluation the scheduler does:
"""),
    code("""
slices = cluster.list("ResourceSlice")

def show(expr: str) -> None:
    summary, rows = evaluate(expr, slices)
    print(f"{summary:40} {expr}")
    errors = [r for r in rows if r.result == "error"]
    if errors:
        print("    first error:", errors[0].pool, errors[0].device, "-", errors[0].message)
"""),
    fact("""
show("device.driver == 'gpu.nvidia.com'")
show("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'")
show("device.driver == 'gpu.nvidia.com' && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0")
show("device.driver == 'gpu.nvidia.com' && "
     "device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('8.0.0')) >= 0")
show("device.attributes['gpu.nvidia.com'].?productName.orValue('').lowerAscii().contains('a100')")
show("cel.bind(a, device.attributes['gpu.nvidia.com'], has(a.architecture) && a.architecture == 'Turing')")
"""),
    md("""
## Mistake 1: comparing quantities with `>=`
`memory` is a `Quantity`, not a number. CEL has no `>=` for it, so the API server rejects the expression when the
object is created. The error, as Kubernetes words it, and the hint:
"""),
    fact("""
from labkit.cel import CelError, compile_selector

try:
    compile_selector("device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')")
except CelError as err:
    print(err.message)
    print("hint:", err.hint)
"""),
    md("""
## Mistake 2: an attribute the device does not have
An unknown **key** is a runtime error (`no such key`), and a runtime error makes the allocation *fail*, not just
skip the device. `index` was published by old NVIDIA driver versions and is gone now:
"""),
    fact("""
show("device.attributes['gpu.nvidia.com'].index == 0")
show("device.attributes['gpu.nvidia.com'].?index.orValue(-1) == 0")
"""),
    md("""
## Mistake 3: domains
Attributes live under a **domain**. An unknown domain is an empty map — no error — so the typo only shows as
`no such key` one level down, and selectors that forget to test the driver fail on the *other* drivers' devices
(the NICs here). `false && error` is `false`, so testing `device.driver` first is safe:
"""),
    fact("""
show("device.attributes['nvidia.com'].productName == 'Tesla T4'")
show("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0")
"""),
    md("""
## Your own DeviceClass
Admins turn selectors into classes users reference by name. A class for GPUs with at least 40 GiB, and a claim that
uses it. The pod is pinned to the DGX node so the placement is the same on every backend.
"""),
    code("""
cluster.apply('''
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: big-gpu.labkit.dev
spec:
  selectors:
  - cel:
      expression: device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"
  - cel:
      expression: device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: big-one
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: big-gpu.labkit.dev
---
apiVersion: v1
kind: Pod
metadata:
  name: uses-big-class
spec:
  nodeSelector:
    kubernetes.io/hostname: dgx-a100-0
  resourceClaims:
  - name: gpu
    resourceClaimName: big-one
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: gpu
''')
cluster.wait()
"""),
    fact("print(placement_lines(cluster))"),
    md("The CEL playground: type an expression, see every device match, not match, or fail (with the hint)."),
    code("""
from labkit.widgets import CelPlayground

CelPlayground(cluster)
"""),
    md("""
## Exercise
Write a selector that matches exactly the **whole GPUs with at least 40Gi** of memory — and does not fail on any
device of the cluster, NICs included.
"""),
    code("""
from labkit.course import checks

MY_SELECTOR = "???"
checks.check_big_gpu_selector(MY_SELECTOR, cluster)
"""),
    md("""
## Recap
- DeviceClass selectors and request selectors are ANDed; all are CEL over `device`.
- Quantities and versions compare with `.compareTo(...)`, `isGreaterThan`, … — never `>=`.
- Missing keys are errors, unknown domains are empty maps: guard with `device.driver == ...`, `has()` or `.?x.orValue()`.
"""),
    down_cell(),
]

# ---------------------------------------------------------------------------------------------
NB04 = [
    md("""
# 04 · Claiming by attributes

**Learning goals**
- write ResourceClaimTemplates that ask for "≥ 40Gi" or a product name;
- run them in Jobs, one claim per pod;
- build the same claim with the ClaimBuilder widget and see where it would go.
"""),
    connect_cell("workshop", "\nfrom labkit.course.show import placement_lines, pod_lines"),
    md("""
A template for one GPU with at least 40 GiB. Templates are recipes: nothing is allocated until a pod uses one, then
the claim controller makes a claim named `<pod>-<claim>-<random>` for that pod.
"""),
    code("""
cluster.apply('''
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: gpu-40gi
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel:
              expression: device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0
''')
print(cluster.list("ResourceClaim"))  # a template alone creates no claim
"""),
    md("""
A Job with two pods running in parallel, each with its own claim from the template. (The Job is pinned to the
DGX node; without the selector only the A100s qualify anyway.)
"""),
    code("""
cluster.apply('''
apiVersion: batch/v1
kind: Job
metadata:
  name: finetune
spec:
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      nodeSelector:
        kubernetes.io/hostname: dgx-a100-0
      resourceClaims:
      - name: gpu
        resourceClaimTemplateName: gpu-40gi
      containers:
      - name: train
        image: registry.example/train:1.0
        resources:
          claims:
          - name: gpu
''')
cluster.wait()
"""),
    md("Two pods, two claims, two different A100s (pod names are random, so we show the devices and claim count):"),
    fact("""
job_pods = [p for p in cluster.list("Pod") if p["metadata"].get("labels", {}).get("job-name") == "finetune"]
rows = [r for r in cluster.placements().rows if r["pod"] in {p["metadata"]["name"] for p in job_pods}]
print(len(job_pods), "pods,", len({r["claim"] for r in rows}), "claims")
print("devices:", sorted(f'{r["node"]}/{r["device"]}' for r in rows))
"""),
    md("""
A template that asks for a product by name: one Tesla T4 for an inference pod, pinned to `t4-1`.
"""),
    code("""
cluster.apply('''
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: tesla-t4
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel:
              expression: device.attributes["gpu.nvidia.com"].productName.contains("T4")
---
apiVersion: v1
kind: Pod
metadata:
  name: inference
spec:
  nodeSelector:
    kubernetes.io/hostname: t4-1
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: tesla-t4
  containers:
  - name: server
    image: registry.example/inference:1.0
    resources:
      claims:
      - name: gpu
''')
cluster.wait()
"""),
    fact("""
print(pod_lines(cluster, ["inference"]))
print(placement_lines(cluster, ["inference"]))
"""),
    md("""
## The ClaimBuilder
Point and click a claim: pick a class, add filters (`memory >= 40Gi`, `productName matches T4`), a count, a
constraint. The widget shows the YAML, how many devices match, and where the allocator would place it.
"""),
    code("""
from labkit.widgets import ClaimBuilder

builder = ClaimBuilder(cluster, name="my-claim")
builder
"""),
    md("The same thing as plain functions (what the widget calls):"),
    fact("""
import yaml

from labkit.widgets import ClaimSpec, Filter, RequestSpec, build_claim, preview

spec = ClaimSpec(name="two-big", requests=[RequestSpec(count=2, filters=[Filter("memory", ">=", "40Gi")])])
claim = build_claim(spec)
print(yaml.safe_dump(claim, sort_keys=False))
print("matching / of class:", preview(claim, cluster.list("DeviceClass"), cluster.list("ResourceSlice")))
"""),
    md("""
## Exercise
Write a ResourceClaimTemplate named `my-t4` for **one Tesla T4**, selected by its `productName`.
"""),
    code("""
from labkit.course import checks

MY_T4_TEMPLATE = '''
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: my-t4
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel:
              expression: ???
'''
checks.check_t4_template(MY_T4_TEMPLATE, cluster)
"""),
    md("""
## Recap
- `resourceClaimTemplateName` in a pod → one claim per pod, deleted with the pod.
- Selectors on capacity (`quantity`) and attributes (`productName`) say *which* devices qualify.
- Jobs, Deployments and bare pods all use the same `resourceClaims` stanza.
"""),
    down_cell(),
]

# ---------------------------------------------------------------------------------------------
NB05 = [
    md("""
# 05 · Sharing: one claim, many pods

**Learning goals**
- share one GPU between two pods with a named ResourceClaim;
- contrast it with a template (one claim, one GPU per pod);
- see what the containers get: the environment injected through CDI.
"""),
    connect_cell("workshop", "\nfrom labkit.course.show import placement_lines, pod_lines, show_env"),
    md("""
A **named ResourceClaim** exists on its own; every pod that names it (`resourceClaimName`) uses the *same*
allocated device. Kubernetes does not isolate the pods: time-slicing or MPS is the driver's business (below).
"""),
    code("""
def pod(name: str, claim_ref: str, node: str = "dgx-a100-0") -> str:
    return f'''
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  nodeSelector:
    kubernetes.io/hostname: {node}
  resourceClaims:
  - name: gpu
    {claim_ref}
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: gpu
'''

cluster.apply('''
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: shared-gpu
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
''')
cluster.apply(pod("shared-a", "resourceClaimName: shared-gpu") + "---" + pod("shared-b", "resourceClaimName: shared-gpu"))
cluster.wait()
"""),
    fact("""
print(placement_lines(cluster, ["shared-a", "shared-b"]))
claim = cluster.get("ResourceClaim", "shared-gpu")
print("reserved for:", sorted(r["name"] for r in claim["status"]["reservedFor"]))
"""),
    md("Both containers see the same GPU. The fake driver's CDI spec injects the same environment a real container gets:"),
    fact("""
env_a, env_b = cluster.pod_env("shared-a"), cluster.pod_env("shared-b")
print(show_env(env_a, ("NVIDIA_VISIBLE_DEVICES", "FAKE_GPU_0_NAME", "FAKE_GPU_0_PRODUCT", "FAKE_GPU_COUNT")))
print("same GPU in both pods:", env_a["NVIDIA_VISIBLE_DEVICES"] == env_b["NVIDIA_VISIBLE_DEVICES"])
"""),
    md("""
*How* the pods share the GPU is the driver's business. NVIDIA's driver takes an opaque config in the claim:
time-slicing (here with a long slice) or MPS. The real driver accepts these only with its `TimeSlicingSettings` /
`MPSSupport` feature gates on; the fake driver passes the choice to the container:
"""),
    code("""
cluster.apply('''
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: time-sliced
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
    config:
    - requests: [gpu]
      opaque:
        driver: gpu.nvidia.com
        parameters:
          apiVersion: resource.nvidia.com/v1beta1
          kind: GpuConfig
          sharing:
            strategy: TimeSlicing
            timeSlicingConfig:
              interval: Long
''')
cluster.apply(pod("sliced-a", "resourceClaimName: time-sliced", "t4-1") + "---" + pod("sliced-b", "resourceClaimName: time-sliced", "t4-1"))
cluster.wait()
"""),
    fact("""
for name in ("sliced-a", "sliced-b"):
    print(name, show_env(cluster.pod_env(name), ("FAKE_GPU_0_NAME", "FAKE_GPU_0_SHARING", "FAKE_GPU_0_TIMESLICE")).split("\\n"))
"""),
    md("""
A **template** instead: each pod gets a claim of its own, so two different GPUs. (Which pod gets which GPU depends on
the order the scheduler takes them, so we print the set.)
"""),
    code("""
cluster.apply('''
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: own-gpu
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
''')
cluster.apply(pod("own-a", "resourceClaimTemplateName: own-gpu") + "---" + pod("own-b", "resourceClaimTemplateName: own-gpu"))
cluster.wait()
"""),
    fact("""
rows = [r for r in cluster.placements().rows if r["pod"] in ("own-a", "own-b")]
print("devices:", sorted(r["device"] for r in rows), "- claims:", len({r["claim"] for r in rows}))
print("different GPUs:", cluster.pod_env("own-a")["NVIDIA_VISIBLE_DEVICES"] != cluster.pod_env("own-b")["NVIDIA_VISIBLE_DEVICES"])
"""),
    md("On the DGX: one colour per claim — the shared claim on one GPU, one claim per templated pod:"),
    code("""
from labkit.topology import draw_node, node_graph

overlay = {r["device"]: r["claim"] for r in cluster.placements().rows if r["node"] == "dgx-a100-0"}
draw_node(node_graph("dgx-a100"), overlay, title="dgx-a100-0: shared-gpu (2 pods) and two templated claims");
"""),
    md("Two containers of *one* pod can share its claim too — both list the claim under `resources.claims`:"),
    code("""
cluster.apply('''
apiVersion: v1
kind: Pod
metadata:
  name: two-containers
spec:
  nodeSelector:
    kubernetes.io/hostname: t4-0
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: own-gpu
  containers:
  - name: server
    image: busybox
    resources:
      claims:
      - name: gpu
  - name: sidecar
    image: busybox
    resources:
      claims:
      - name: gpu
''')
cluster.wait()
"""),
    fact("""
print(pod_lines(cluster, ["two-containers"]))
print(placement_lines(cluster, ["two-containers"]))
"""),
    md("""
## Exercise
Make `infer-b` share the GPU of `infer-a`: fill in the `???`. The check runs your YAML on a fresh cluster.
"""),
    code("""
from labkit.course import checks

MY_SHARING = '''
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: inference-gpu
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
---
apiVersion: v1
kind: Pod
metadata:
  name: infer-a
spec:
  resourceClaims:
  - name: gpu
    resourceClaimName: inference-gpu
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: gpu
---
apiVersion: v1
kind: Pod
metadata:
  name: infer-b
spec:
  resourceClaims:
  - name: gpu
    ???
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: gpu
'''
checks.check_shared_claim(MY_SHARING)
"""),
    md("""
## Recap
- `resourceClaimName`: one claim, one allocation, many consumers (`status.reservedFor` lists them).
- `resourceClaimTemplateName`: one claim per pod.
- The driver prepares the devices and hands the container its environment through CDI
  (`NVIDIA_VISIBLE_DEVICES`, device nodes, mounts).
"""),
    down_cell(),
]

# ---------------------------------------------------------------------------------------------
NB06 = [
    md("""
# 06 · MIG: static and dynamic partitioning

**Learning goals**
- see statically partitioned GPUs (MIG devices made by an admin) and dynamically partitioned ones
  (partitionable devices with shared counters);
- ask for MIG profiles; get two slices of the *same* physical GPU (`matchAttribute: gpu.nvidia.com/parentUUID`);
- understand why a profile does not fit.
"""),
    connect_cell("mig-lab", "\nfrom labkit.course.show import device_table, placement_lines, pod_lines"),
    md("""
Three A100 nodes: `a100-static-0` (4× A100-40GB with a fixed MIG layout, like nvidia-mig-parted makes),
`a100-dynamic-0` (8× A100-80GB, MIG made on demand) and `a100-whole-0` (no MIG).
With **static MIG** the GPU is not published whole; each existing MIG instance is a `type: mig` device:
"""),
    fact("""
slices = cluster.list("ResourceSlice")
print(device_table(slices, "a100-static-0", "gpu.nvidia.com"))
"""),
    md("""
With **dynamic MIG** the driver publishes every (profile, placement) a GPU could host, plus the whole GPU, and a
**counter set** per GPU. Each device *consumes* counters (memory slices, SMs, engines); the allocator only picks
devices whose counters are still free. So a whole GPU and any MIG slice of it exclude each other.
"""),
    fact("""
dyn = [s for s in slices if s["spec"]["nodeName"] == "a100-dynamic-0" and s["spec"]["driver"] == "gpu.nvidia.com"]
counters = next(cs for s in dyn for cs in s["spec"].get("sharedCounters", []) if cs["name"] == "gpu-0-counter-set")
print("counter set", counters["name"], {k: v["value"] for k, v in sorted(counters["counters"].items())})
gpu0 = [d for s in dyn for d in s["spec"].get("devices", []) if d["name"] == "gpu-0" or d["name"].startswith("gpu-0-")]
print(len(gpu0), "devices for gpu-0:", sorted({d["attributes"].get("profile", {}).get("string", "whole") for d in gpu0}))
mig = next(d for d in gpu0 if d["name"] == "gpu-0-mig-3g40gb-9-0")
print(mig["name"], "consumes", sorted(mig["consumesCounters"][0]["counters"]))
"""),
    md("A pod asking for one `3g.40gb` on the dynamic node. The MIG class `mig.nvidia.com` selects `type == 'mig'`:"),
    code("""
def mig_pod(name: str, node: str, *profiles: str, same_gpu: bool = False) -> str:
    requests = "".join(f'''
      - name: r{i}
        exactly:
          deviceClassName: mig.nvidia.com
          selectors:
          - cel:
              expression: device.attributes["gpu.nvidia.com"].profile == "{p}"''' for i, p in enumerate(profiles))
    constraint = '''
      constraints:
      - matchAttribute: gpu.nvidia.com/parentUUID''' if same_gpu else ""
    return f'''
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: {name}
spec:
  spec:
    devices:
      requests:{requests}{constraint}
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  nodeSelector:
    kubernetes.io/hostname: {node}
  resourceClaims:
  - name: mig
    resourceClaimTemplateName: {name}
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: mig
'''

cluster.apply(mig_pod("one-3g", "a100-dynamic-0", "3g.40gb"))
cluster.wait()
"""),
    fact("print(placement_lines(cluster, ['one-3g']))"),
    md("""
The slice `gpu-0-mig-3g40gb-9-0` uses memory slices 0–3 of gpu-0. A `4g.40gb` can only start at slice 0, so it no
longer fits on gpu-0 and goes to gpu-1 — the counters at work:
"""),
    code("""
cluster.apply(mig_pod("one-4g", "a100-dynamic-0", "4g.40gb"))
cluster.wait()
"""),
    fact("print(placement_lines(cluster, ['one-4g']))"),
    md("""
Two slices of the **same** GPU — for example a 3g.20gb and a 2g.10gb next to each other for a pipeline. On the static
node only gpu-1 has both, and `matchAttribute: gpu.nvidia.com/parentUUID` makes the allocator find it:
"""),
    code("""
cluster.apply(mig_pod("pair", "a100-static-0", "3g.20gb", "2g.10gb", same_gpu=True))
cluster.wait()
"""),
    fact("print(placement_lines(cluster, ['pair']))"),
    md("""
## Why a profile does not fit
The static layout has exactly one `2g.10gb` (on gpu-1, now taken) and no `7g.40gb` at all: those pods stay Pending.
`explain()` says why, request by request (the wording differs a little between backends).
"""),
    code("""
cluster.apply(mig_pod("no-2g-left", "a100-static-0", "2g.10gb") + "---" + mig_pod("no-7g", "a100-static-0", "7g.40gb"))
cluster.wait()
print(pod_lines(cluster, ["no-2g-left", "no-7g"]))
print(cluster.explain("no-7g"))
"""),
    md("""
The MIG instances drawn on the nodes: `draw_node` shows each GPU's memory slices and who holds them. (Pass
`node_graph` only the slices of the node you draw.)
"""),
    code("""
from labkit.topology import draw_node, node_graph


def picture(node: str, node_profile: str, title: str):
    own = [s for s in cluster.list("ResourceSlice") if s["spec"].get("nodeName") == node]
    overlay = {r["device"]: r["pod"] for r in cluster.placements().rows if r["node"] == node}
    return draw_node(node_graph(node_profile, own, node), overlay, title=title)

picture("a100-dynamic-0", "dgx-a100", "a100-dynamic-0: MIG slices made on demand");
"""),
    code("""picture("a100-static-0", "mig-a100", "a100-static-0: the fixed layout; 'pair' holds two slices of gpu-1");"""),
    md("""
## Exercise
On the dynamic node, ask for a `3g.40gb` **and** a `1g.10gb` from the same physical GPU, in one claim. Fill in the
`???` (the check runs it on a fresh `mig-lab` cluster).
"""),
    code("""
from labkit.course import checks

MY_MIG_PAIR = '''
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: mig-pair
spec:
  spec:
    devices:
      requests:
      - name: big
        exactly:
          deviceClassName: mig.nvidia.com
          selectors:
          - cel:
              expression: device.attributes["gpu.nvidia.com"].profile == "3g.40gb"
      - name: small
        exactly:
          deviceClassName: mig.nvidia.com
          selectors:
          - cel:
              expression: device.attributes["gpu.nvidia.com"].profile == "1g.10gb"
      constraints:
      - ???
---
apiVersion: v1
kind: Pod
metadata:
  name: mig-worker
spec:
  nodeSelector:
    kubernetes.io/hostname: a100-dynamic-0
  resourceClaims:
  - name: mig
    resourceClaimTemplateName: mig-pair
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: mig
'''
checks.check_mig_pair(MY_MIG_PAIR)
"""),
    md("""
## Recap
- Static MIG: fixed `type: mig` devices; a profile that is not in the layout never fits.
- Dynamic MIG: partitionable devices + shared counters; placements (memory slices) decide what still fits.
- `matchAttribute: gpu.nvidia.com/parentUUID` keeps several slices on one physical GPU.
"""),
    down_cell(),
]

# ---------------------------------------------------------------------------------------------
NB07 = [
    md("""
# 07 · Topology: NVLink islands, PCIe roots, alignment

**Learning goals**
- read NVLink islands, PCIe roots and NUMA nodes of a DGX H100;
- put a GPU and a NIC under one PCIe root (`matchAttribute: resource.kubernetes.io/pcieRoot`);
- spread GPUs across roots (`distinctAttribute`), and draw placements on the node.
"""),
    connect_cell("topology-lab", "\nfrom labkit.course.show import placement_lines\nfrom labkit.topology import distance, draw_node, node_graph, nvlink_islands"),
    md("A DGX H100: 8 GPUs on NVSwitch, two CPU sockets, PCIe roots `pci0000:00` and `pci0000:80`, ConnectX NICs."),
    code("""
h100 = node_graph("dgx-h100")
draw_node(h100, title="DGX H100");
"""),
    fact("""
print("NVLink islands:", nvlink_islands(h100))
for a, b in [("gpu-0", "gpu-7"), ("gpu-0", "nic-0"), ("gpu-0", "nic-4")]:
    print(f"{a} <-> {b}: {distance(h100, a, b)}")
"""),
    md("""
There is no NVLink attribute in the NVIDIA schema; what DRA can match on is `resource.kubernetes.io/pcieRoot`, a
standard attribute that **both** drivers publish. One claim, a GPU request and a NIC request, one constraint:
"""),
    code("""
def claim_pod(name: str, node: str, devices: str) -> str:
    return f'''
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: {name}
spec:
  devices:{devices}
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  nodeSelector:
    kubernetes.io/hostname: {node}
  resourceClaims:
  - name: devs
    resourceClaimName: {name}
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: devs
'''

ALIGNED = '''
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
    - name: nic
      exactly:
        deviceClassName: nic.fake-gpus.dev
    constraints:
    - requests: [gpu, nic]
      matchAttribute: resource.kubernetes.io/pcieRoot'''
cluster.apply(claim_pod("rdma-worker", "dgx-h100-0", ALIGNED))
cluster.wait()
"""),
    fact("print(placement_lines(cluster, ['rdma-worker'], columns=('pod', 'request', 'node', 'device')))"),
    md("""
`distinctAttribute` does the opposite: every device must have a *different* value. Two GPUs on different PCIe roots
(so their host traffic uses both sockets):
"""),
    code("""
SPREAD = '''
    requests:
    - name: gpus
      exactly:
        deviceClassName: gpu.nvidia.com
        count: 2
    constraints:
    - distinctAttribute: resource.kubernetes.io/pcieRoot'''
cluster.apply(claim_pod("spread", "dgx-h100-0", SPREAD))
cluster.wait()
"""),
    fact("""
print(placement_lines(cluster, ['spread'], columns=('pod', 'request', 'node', 'device')))
devs = {(s["spec"]["pool"]["name"], d["name"]): d for s in cluster.list("ResourceSlice") for d in s["spec"].get("devices", [])}
print("roots:", sorted(devs[(r["pool"], r["device"])]["attributes"]["resource.kubernetes.io/pcieRoot"]["string"]
                       for r in cluster.placements().rows if r["pod"] == "spread"))
"""),
    md("""
Three GPUs on one NUMA node (the fake driver publishes `topology.fake-gpus.dev/numaNode`). NUMA node 0 has only two
free GPUs left (gpu-2, gpu-3), so the allocator backtracks and takes three on NUMA node 1:
"""),
    code("""
NUMA = '''
    requests:
    - name: gpus
      exactly:
        deviceClassName: gpu.nvidia.com
        count: 3
    constraints:
    - matchAttribute: topology.fake-gpus.dev/numaNode'''
cluster.apply(claim_pod("numa-three", "dgx-h100-0", NUMA))
cluster.wait()
"""),
    fact("print(placement_lines(cluster, ['numa-three'], columns=('pod', 'request', 'node', 'device')))"),
    md("The placements drawn on the node — each claim gets a colour:"),
    code("""
overlay = {r["device"]: r["pod"] for r in cluster.placements().rows if r["node"] == "dgx-h100-0"}
draw_node(h100, overlay, title="dgx-h100-0: rdma-worker, spread, numa-three");
"""),
    md("The same, interactive (click a device to see its attributes):"),
    code("""
from labkit.widgets import TopologyView

TopologyView(h100, overlay)
"""),
    md("""
## Exercise
Write a claim + pod for **one GPU and one NIC under the same PCIe root** on the DGX A100 node (`dgx-a100-0`) of
this cluster. Replace the `???` (the check runs it on a fresh `topology-lab` cluster).
"""),
    code("""
from labkit.course import checks

MY_ALIGNED = '''
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: aligned
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
    - name: nic
      exactly:
        deviceClassName: nic.fake-gpus.dev
    constraints:
    - ???
---
apiVersion: v1
kind: Pod
metadata:
  name: aligned
spec:
  nodeSelector:
    kubernetes.io/hostname: dgx-a100-0
  resourceClaims:
  - name: devs
    resourceClaimName: aligned
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: devs
'''
checks.check_gpu_nic_aligned(MY_ALIGNED)
"""),
    md("""
## Recap
- Topology reaches DRA through attributes: `resource.kubernetes.io/pcieRoot` (standard), NUMA and NVLink domain
  attributes (driver-specific).
- `matchAttribute` aligns devices, across drivers too; `distinctAttribute` spreads them.
- Whole-node NVLink on DGX is all-to-all; multi-node NVLink (GB200) goes through NVIDIA ComputeDomains.
"""),
    down_cell(),
]

# ---------------------------------------------------------------------------------------------
NB08 = [
    md("""
# 08 · Alternatives and policies

**Learning goals**
- prefer one device and fall back to others (`firstAvailable`);
- give a monitoring agent access to devices that are in use (`adminAccess`);
- keep workloads off a broken GPU with a `DeviceTaintRule`, and let a test pod tolerate it;
- share one device by capacity (consumable capacity, `allowMultipleAllocations`).
"""),
    connect_cell("workshop", "\nfrom labkit.course.show import placement_lines, pod_lines"),
    code("""
def pod(name: str, claim: str, node: str | None = None, namespace: str = "default") -> str:
    selector = f"nodeSelector: {{kubernetes.io/hostname: {node}}}" if node else ""
    return f'''
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  {selector}
  resourceClaims: [{{name: dev, resourceClaimName: {claim}}}]
  containers: [{{name: main, image: busybox, resources: {{claims: [{{name: dev}}]}}}}]
'''
"""),
    md("""
## firstAvailable
Subrequests in order of preference; the first one that can be satisfied wins. This cluster has no H100, so the
claim falls back to two A100s — the result names the subrequest (`accel/two-a100`):
"""),
    code("""
cluster.apply('''
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: h100-or-two-a100
spec:
  devices:
    requests:
    - name: accel
      firstAvailable:
      - name: one-h100
        deviceClassName: gpu.nvidia.com
        selectors:
        - cel:
            expression: device.attributes["gpu.nvidia.com"].productName.contains("H100")
      - name: two-a100
        deviceClassName: gpu.nvidia.com
        count: 2
        selectors:
        - cel:
            expression: device.attributes["gpu.nvidia.com"].productName.contains("A100")
''' + "---" + pod("flexible", "h100-or-two-a100"))
cluster.wait()
"""),
    fact("print(placement_lines(cluster, ['flexible']))"),
    md("""
## adminAccess
A monitoring agent must see GPUs that other pods already use. `adminAccess: true` ignores "in use" (and does not
block others), but only in namespaces labelled `resource.kubernetes.io/admin-access: "true"`.
"""),
    code("""
cluster.apply('''
apiVersion: v1
kind: Namespace
metadata:
  name: monitoring
  labels:
    resource.kubernetes.io/admin-access: "true"
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: all-dgx-gpus
  namespace: monitoring
spec:
  devices:
    requests:
    - name: gpus
      exactly:
        deviceClassName: gpu.nvidia.com
        allocationMode: All
        adminAccess: true
''' + "---" + pod("dcgm-exporter", "all-dgx-gpus", "dgx-a100-0", "monitoring"))
cluster.wait()
"""),
    fact("""
rows = [r for r in cluster.placements().rows if r["pod"] == "dcgm-exporter"]
print("dcgm-exporter sees", len(rows), "GPUs on", sorted({r["node"] for r in rows}), "- including the 2 flexible uses")
claim = cluster.get("ResourceClaim", "all-dgx-gpus", "monitoring")
print("adminAccess in the result:", all(r.get("adminAccess") for r in claim["status"]["allocation"]["devices"]["results"]))
"""),
    md("""
The same claim in a namespace without the label is refused when it is created. The API server checks the label of
the claim's namespace; `labkit.api.validate` does the same when it is given the namespace:
"""),
    fact("""
from labkit.api import load, validate

SNEAKY = '''
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: sneaky, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: gpu.nvidia.com, adminAccess: true}
'''
for problem in validate(load(SNEAKY)):
    print(problem)
"""),
    md("""
## Device taints
An admin marks `t4-0/gpu-0` as broken with a **DeviceTaintRule** (`NoSchedule`: no new allocations; `NoExecute` would
also evict). A normal claim skips it; a claim whose request **tolerates** the taint may still get it.
"""),
    code("""
cluster.apply('''
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata:
  name: t4-0-gpu-0-broken
spec:
  deviceSelector:
    driver: gpu.nvidia.com
    pool: t4-0
    device: gpu-0
  taint:
    key: labkit.dev/broken
    value: "true"
    effect: NoSchedule
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: normal
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: burn-in-test
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        tolerations:
        - key: labkit.dev/broken
          operator: Exists
          effect: NoSchedule
''' + "---" + pod("normal", "normal", "t4-0"))
cluster.wait()
cluster.apply(pod("burn-in-test", "burn-in-test", "t4-0"))
cluster.wait()
"""),
    fact("print(placement_lines(cluster, ['normal', 'burn-in-test']))"),
    md("""
## Consumable capacity
A device with `allowMultipleAllocations: true` can be allocated to many claims, each taking part of its capacity.
The fake GPU driver does not publish such devices, so here is a hand-written slice: a "virtual GPU" pool on `t4-1`
whose memory is shared by requests. (`DRAConsumableCapacity` is beta and on in 1.37.)
"""),
    code("""
cluster.apply('''
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: t4-1-vgpu
spec:
  driver: vgpu.labkit.dev
  nodeName: t4-1
  pool: {name: t4-1-vgpu, generation: 1, resourceSliceCount: 1}
  devices:
  - name: vgpu-0
    allowMultipleAllocations: true
    attributes:
      type: {string: vgpu}
    capacity:
      memory:
        value: 16Gi
        requestPolicy:
          default: 4Gi
          validRange: {min: 1Gi, step: 1Gi}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: vgpu.labkit.dev
spec:
  selectors:
  - cel: {expression: device.driver == "vgpu.labkit.dev"}
''')
for name, mem in [("small", "4Gi"), ("medium", "8Gi"), ("too-much", "8Gi")]:
    cluster.apply(f'''
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: vgpu-{name}}}
spec:
  devices:
    requests:
    - name: mem
      exactly:
        deviceClassName: vgpu.labkit.dev
        capacity:
          requests: {{memory: {mem}}}
''' + "---" + pod(f"vgpu-{name}", f"vgpu-{name}"))
    cluster.wait()
"""),
    fact("""
print(pod_lines(cluster, ["vgpu-small", "vgpu-medium", "vgpu-too-much"]))
for name in ("small", "medium"):
    result = cluster.get("ResourceClaim", f"vgpu-{name}")["status"]["allocation"]["devices"]["results"][0]
    print(name, "->", result["device"], "consumed", result["consumedCapacity"], "shareID set:", bool(result.get("shareID")))
"""),
    md("""
## Exercise
Write a claim that prefers **one H100** and otherwise takes **one Tesla T4**, plus a pod that uses it. On this cluster the
fallback must win. (The check runs it on a fresh `workshop` cluster.)
"""),
    code("""
from labkit.course import checks

MY_FALLBACK = '''
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: h100-or-t4
spec:
  devices:
    requests:
    - name: accel
      firstAvailable:
      - name: h100
        deviceClassName: gpu.nvidia.com
        selectors:
        - cel:
            expression: device.attributes["gpu.nvidia.com"].productName.contains("H100")
      ???
---
apiVersion: v1
kind: Pod
metadata:
  name: fallback
spec:
  resourceClaims:
  - name: accel
    resourceClaimName: h100-or-t4
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: accel
'''
checks.check_fallback_claim(MY_FALLBACK)
"""),
    md("""
## Recap
- `firstAvailable`: ordered alternatives; results name `request/subrequest`.
- `adminAccess`: observe devices in use, only in labelled namespaces.
- `DeviceTaintRule` + request `tolerations`: take devices out of service, with opt-in exceptions.
- Consumable capacity: one device, many claims, each a share (`consumedCapacity`, `shareID`).
"""),
    down_cell(),
]

# ---------------------------------------------------------------------------------------------
NB09 = [
    md("""
# 09 · Why is my pod Pending? A debugging lab

**Learning goals**
- read what the API server, the scheduler and `explain()` say about broken claims;
- map each message to its cause: missing class, no such key, impossible count, missing template, bad CEL;
- fix a broken manifest.
"""),
    connect_cell("workshop", "\nfrom labkit.course.show import pod_lines"),
    md("""
Five broken workloads. Apply them all; the API server rejects one straight away, the others are stored and stay
Pending. Each has a comment saying what is wrong — try to guess before reading the explanation.
"""),
    code("""
def pod(name: str, claim_ref: str) -> str:
    return f'''
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  resourceClaims: [{{name: gpu, {claim_ref}}}]
  containers: [{{name: main, image: busybox, resources: {{claims: [{{name: gpu}}]}}}}]
'''

def claim(name: str, exactly: str) -> str:
    return f'''
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}}}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {exactly}
'''

BROKEN = {
    # 1. a class that does not exist (a typo)
    "wrong-class": claim("wrong-class", "{deviceClassName: gpu.nvidia.co}"),
    # 2. an attribute old drivers published, gone now
    "old-attribute": claim("old-attribute", "{deviceClassName: gpu.nvidia.com, selectors: "
                           "[{cel: {expression: 'device.attributes[\\"gpu.nvidia.com\\"].index == 0'}}]}"),
    # 3. more devices than any node has
    "too-many": claim("too-many", "{deviceClassName: gpu.nvidia.com, count: 9}"),
}
for name, manifest in BROKEN.items():
    cluster.apply(manifest + "---" + pod(name, f"resourceClaimName: {name}"))
# 4. a template that was never created
cluster.apply(pod("no-template", "resourceClaimTemplateName: does-not-exist"))
cluster.wait()
print(pod_lines(cluster))
"""),
    md("Why, pod by pod. `explain()` combines the pod's conditions, events and the allocator's verdict for each node:"),
    code("""
for name in ["wrong-class", "old-attribute", "too-many", "no-template"]:
    print(cluster.explain(name))
    print()
"""),
    md("""
5. The quantity comparison with `>=`: the API server refuses the object at create time, with the CEL error and the
position of the problem.
"""),
    fact("""
try:
    cluster.apply(claim("bad-cel", "{deviceClassName: gpu.nvidia.com, selectors: "
                        "[{cel: {expression: 'device.capacity[\\"gpu.nvidia.com\\"].memory >= quantity(\\"40Gi\\")'}}]}"))
except Exception as err:
    print(str(err).splitlines()[0])
"""),
    md("""
| symptom | cause | fix |
|---|---|---|
| `device class ... does not exist` | a typo in `deviceClassName` | `kubectl get deviceclasses`, use one of them |
| `no such key: index` (allocation error) | selector reads an attribute the device lacks | check the slice; guard with `has()` / `.?x.orValue()` |
| `cannot allocate all claims` | no node has enough matching free devices | lower `count`, relax selectors, free devices |
| waiting for the claim to be created | template missing (or still being created) | create the ResourceClaimTemplate |
| rejected at create time | CEL compile error, e.g. `>=` on a Quantity | `.compareTo(quantity(...)) >= 0` |
| rejected: `must be a DNS subdomain` | `deviceClassName: nvidia.com/gpu` (a device-plugin resource name) | use a DeviceClass name |

## Exercise
`debug-me` has **two** bugs. Fix the manifest so the pod runs on a GPU with at least 40Gi.
"""),
    code("""
from labkit.course import checks

MY_FIX = '''
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: debug-me
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: nvidia.com/gpu
        selectors:
        - cel:
            expression: device.capacity["gpu.nvidia.com"].memory >= quantity("40Gi")
---
apiVersion: v1
kind: Pod
metadata:
  name: debug-me
spec:
  resourceClaims:
  - name: gpu
    resourceClaimName: debug-me
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: gpu
'''
checks.check_fixed_debug_pod(MY_FIX)
"""),
    md("""
## Recap
- Rejected at apply time → the object is invalid (read the field path and the CEL caret).
- Stored but Pending → the scheduler could not allocate: `explain()` / `kubectl describe pod` /
  the claim's events say which request failed on which node, and why.
- Runtime CEL errors are allocation *errors*, not "no match": fix the selector.
"""),
    down_cell(),
]

# ---------------------------------------------------------------------------------------------
NB10 = [
    md("""
# 10 · Gang scheduling: all or nothing

**Learning goals**
- run a PodGroup of 8 workers, each with its own GPU claim, that starts only when all 8 fit;
- see a gang that does not fit bind *nobody* (and hold no GPUs);
- know the upstream pieces: PodGroup (`scheduling.k8s.io`, gate `GenericWorkload`) and workload claims.

**Backends:** on a real API server the PodGroup API is served only with the `GenericWorkload` feature gate on and its
`scheduling.k8s.io` version enabled (`--runtime-config`). The `workshop` profile does not turn them on, so on `local`
the API server answers "kind 'PodGroup' is not served": run this notebook on `sim`.
"""),
    connect_cell("workshop", "\nfrom labkit.course.show import pod_lines"),
    md("""
Distributed training needs all its workers at once: 7 of 8 running is worse than none, because they hold GPUs and
wait forever. A **PodGroup** with a gang policy tells the scheduler to bind the pods only when `minCount` of them fit.
"""),
    code("""
cluster.apply('''
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: one-a100
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel:
              expression: device.attributes["gpu.nvidia.com"].productName.contains("A100")
''')

def gang(group: str, size: int) -> str:
    docs = [f'''
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: {group}
spec:
  schedulingPolicy:
    gang:
      minCount: {size}
''']
    for i in range(size):
        docs.append(f'''
apiVersion: v1
kind: Pod
metadata:
  name: {group}-{i}
spec:
  schedulingGroup:
    podGroupName: {group}
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: one-a100
  containers:
  - name: worker
    image: registry.example/trainer:1.0
    resources:
      claims:
      - name: gpu
''')
    return "---".join(docs)

cluster.apply(gang("train", 8))
cluster.wait()
"""),
    fact("print(pod_lines(cluster))"),
    md("The gang on the DGX — every GPU held by one worker's claim:"),
    code("""
from labkit.topology import draw_node, node_graph

overlay = {r["device"]: r["pod"] for r in cluster.placements().rows if r["node"] == "dgx-a100-0"}
draw_node(node_graph("dgx-a100"), overlay, title="gang 'train': 8 workers, 8 A100s");
"""),
    md("All eight A100s are taken. A second gang of two cannot fit — so neither of its pods binds:"),
    code("""
cluster.apply(gang("late", 2))
cluster.wait()
"""),
    fact("""
print(pod_lines(cluster, ["late-0", "late-1"]))
print(cluster.get("Pod", "late-0")["status"]["conditions"][0]["message"])
"""),
    md("""
On a fresh cluster, a gang of 10 A100 workers (there are only 8 A100s) binds nobody — no pod holds a GPU
waiting for the rest:
"""),
    code("""
cluster.down()
cluster = connect(BACKEND, "workshop", progress=False)
cluster.apply('''
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-a100}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel: {expression: 'device.attributes["gpu.nvidia.com"].productName.contains("A100")'}
''')
cluster.apply(gang("big", 10))
cluster.wait()
"""),
    fact("""
bound = [p["metadata"]["name"] for p in cluster.list("Pod") if p["spec"].get("nodeName")]
held = [c for c in cluster.list("ResourceClaim") if c.get("status", {}).get("allocation")]
print(f"{len(bound)} of 10 pods bound, {len(held)} claims allocated")
"""),
    md("""
## Exercise
What is the **largest gang** of one-A100 workers that still starts on a fresh workshop cluster? Try sizes with the
cells above if you are unsure.
"""),
    code("""
from labkit.course import checks

LARGEST_GANG = ...
checks.check_largest_gang(LARGEST_GANG, cluster)
"""),
    md("""
## Recap
- Gangs are all-or-nothing: the scheduler binds `minCount` pods together, or none.
- Each worker's claim is allocated only when the gang is placed, so a gang that cannot fit holds no devices.
- Upstream: PodGroup + `spec.schedulingGroup.podGroupName` (1.37, `GenericWorkload`); KAI has its own PodGroup CRD and
  runs the upstream DRA allocator inside its scheduler.
"""),
    down_cell(),
]

# ---------------------------------------------------------------------------------------------
NB11 = [
    md("""
# 11 · The real thing: kind and local

**Learning goals**
- know the commands that build a kind cluster with the fake GPU driver, and what each does;
- look at a real cluster: `kubectl get resourceslices`, the driver's logs, the CDI environment in a container;
- migrate old manifests (`v1alpha2` classic DRA, `v1beta1` claims, device-plugin requests) to `resource.k8s.io/v1`.

Cells that need Docker and kind only *run* when `BACKEND == "kind"`; on `sim` they print the commands.
"""),
    connect_cell("workshop", "\nimport shutil\nimport subprocess\n\nfrom labkit.api import load, validate\nfrom labkit.cluster.kind import KindCluster\nfrom labkit.cluster.kind.config import kind_config_yaml\nfrom labkit.course.show import show_env"),
    md("The kind cluster config for the workshop profile: one kind node per profile node, labelled with its hardware:"),
    code('print(kind_config_yaml("workshop"))'),
    md("The exact commands `connect('kind', 'workshop')` runs (paths are temporary):"),
    code('print(KindCluster().describe_plan("workshop"))'),
    md("""
On a real cluster, look at the inventory and the driver with `kubectl`. This cell runs the commands only on `kind`
and `local` (with `kubectl` installed); the driver's DaemonSet exists only on kind — on `local` the plugin processes
write log files, listed by `cluster.status()`.
"""),
    code("""
COMMANDS = [
    "kubectl get resourceslices -o wide",
    "kubectl get deviceclasses",
    "kubectl -n fake-gpus logs daemonset/fake-gpus-kubelet-plugin --tail=20",
]
real = BACKEND in ("kind", "local") and shutil.which("kubectl") is not None
for cmd in COMMANDS:
    print("$", cmd)
    if real and (BACKEND == "kind" or "daemonset" not in cmd):
        out = subprocess.run([*cmd.split(), "--kubeconfig", str(cluster.kubeconfig)], capture_output=True, text=True)
        print(out.stdout or out.stderr)
if not real:
    print("(not run: BACKEND is", BACKEND + ")")
"""),
    md("""
A pod that prints its environment. On kind, containerd applies the CDI spec the driver wrote, so `env` in the
container shows `NVIDIA_VISIBLE_DEVICES` and the fake driver's variables; on every backend `pod_env()` reads them.
"""),
    code("""
cluster.apply('''
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: print-env}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: v1
kind: Pod
metadata: {name: print-env}
spec:
  nodeSelector: {kubernetes.io/hostname: t4-0}
  restartPolicy: Never
  resourceClaims: [{name: gpu, resourceClaimName: print-env}]
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "env | grep -E 'NVIDIA|FAKE_GPU' | sort; sleep 3600"]
    resources: {claims: [{name: gpu}]}
''')
cluster.wait()
print("$ kubectl logs print-env")
"""),
    fact("""
print(show_env(cluster.pod_env("print-env"), ("NVIDIA_VISIBLE_DEVICES", "FAKE_GPU_0_NAME", "FAKE_GPU_0_PRODUCT",
                                                "FAKE_GPU_0_MEMORY", "FAKE_GPU_COUNT")))
"""),
    md("""
## Migrating old manifests
Classic DRA (`resource.k8s.io/v1alpha2`, ResourceClass, parameters objects) was removed in 1.32; `v1beta1` claims have
request fields flat on the request; 1.34+ serves `v1`. `labkit.api.validate` says what to change:
"""),
    fact("""
OLD = '''
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClass
metadata: {name: gpu.example.com}
driverName: gpu.example.com
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: a100-pair}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        deviceClassName: gpu.nvidia.com
        count: 2
        selectors:
        - cel:
            expression: device.attributes["gpu.nvidia.com"].productName.contains("A100")
'''
for problem in validate(load(OLD)):
    print(problem)
"""),
    md("""
Device-plugin pods (`nvidia.com/gpu: 1`) need no change on 1.37: the DeviceClass `gpu.nvidia.com` declares
`extendedResourceName: nvidia.com/gpu`, and the scheduler turns the request into a claim named
`<pod>-extended-resources-…`:
"""),
    code("""
cluster.apply('''
apiVersion: v1
kind: Pod
metadata: {name: device-plugin-style}
spec:
  nodeSelector: {kubernetes.io/hostname: t4-1}
  containers:
  - name: main
    image: busybox
    resources:
      limits: {nvidia.com/gpu: 1}
''')
cluster.wait()
"""),
    fact("""
rows = [r for r in cluster.placements().rows if r["pod"] == "device-plugin-style"]
print([(r["request"], r["node"], r["device"], r["claim"].startswith("device-plugin-style-extended-resources-")) for r in rows])
"""),
    md("""
## Exercise
Rewrite the `v1beta1` template `a100-pair` above for `resource.k8s.io/v1`: same request, new shape.
"""),
    code("""
from labkit.course import checks

MY_V1 = '''
apiVersion: ???
kind: ResourceClaimTemplate
metadata: {name: a100-pair}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        ???
'''
checks.check_v1_migration(MY_V1)
"""),
    md("""
## Recap
- `kind`: real kubelet, containerd + CDI; `local`: real control plane without containers; same notebook cells.
- On a real cluster: `kubectl get resourceslices`, `kubectl describe resourceclaim`, the driver DaemonSet's logs.
- `v1` moves request fields under `exactly:`; classic DRA objects have no v1 form — rewrite as DeviceClasses.
"""),
    down_cell(),
]

# ---------------------------------------------------------------------------------------------
NB12 = [
    md("""
# 12 · Experiments: policies on a fleet

**Learning goals**
- run one workload trace on one fleet under several placement policies: whole GPUs, shared claims, MIG and
  topology-aware;
- compare GPU memory utilisation, waiting pods and fragmentation, in a table and plots;
- judge which policy suits which workload mix.
"""),
    connect_cell("exp-small", "\nfrom labkit.experiments import describe, generate, run_experiment"),
    md("The fleet: 4 nodes with 4× A100-40GB (MIG-capable) and 2 DGX A100 with 8× A100-80GB:"),
    fact('print(cluster.status() if BACKEND == "sim" else "")'),
    md("""
A synthetic trace: inference pods (a few GiB of one GPU), MIG-sized jobs, and fine-tuning jobs (1–8 whole GPUs).
Arrivals are Poisson, durations log-normal; the seed makes it reproducible.
"""),
    code("""
trace = generate(60, seed=1)
print(describe(trace))
"""),
    md("""
The policies turn each item of the trace into Kubernetes objects:

| policy | what a pod asks for |
|---|---|
| `whole-gpu` | whole GPUs, like `nvidia.com/gpu: N` |
| `shared` | small pods share a GPU through a named claim (time-slicing) |
| `dynamic-mig` | small pods get a MIG slice made on demand (partitionable devices) |
| `topology` | whole GPUs, multi-GPU jobs kept on one NVLink domain / PCIe root |

Every policy runs on its own `sim` cluster of the fleet, with simulated time (this takes a few seconds).
"""),
    code("""
results = run_experiment(trace, "exp-small", ["whole-gpu", "shared", "dynamic-mig", "topology"])
results.summary()
"""),
    md("""
Memory utilisation is GPU memory in use by pods over memory of the GPUs they hold; `wait_p95_s` is how long the
slowest 5 % of pods waited; fragmentation is free memory stranded on GPUs too full to take a typical pod.
"""),
    code("results.plot();"),
    md("Per policy, the rows behind the plot:"),
    code("""
for run in results.runs:
    s = run.summary
    print(f'{s["policy"]:12} memory used {s["mem_util_pct"]:5.1f}%  p95 wait {s["wait_p95_s"]:7.1f}s  '
          f'fragmented {s["frag_gib_mean"]:6.1f} GiB  never placed {s["never_placed"]}')
"""),
    md("""
## Exercise
Which policy gives the **lowest p95 wait** (`wait_p95_s`) on this trace? Answer with its name.
"""),
    code("""
from labkit.course import checks

BEST_FOR_WAITING = "???"
checks.check_best_policy(BEST_FOR_WAITING, results, "wait_p95_s")
"""),
    md("""
## Recap
- Whole-GPU placement wastes memory on small pods and makes them queue.
- Sharing and MIG raise utilisation; dynamic MIG adapts the partitioning to the mix, at the cost of isolation
  choices and repartitioning.
- Topology-aware placement matters for multi-GPU jobs; measure it on your own traces (`load_alibaba` reads the
  Alibaba GPU trace format).
"""),
    down_cell(),
]

NOTEBOOKS = {
    "00_setup_and_backends": NB00,
    "01_why_dra": NB01,
    "02_inventory": NB02,
    "03_deviceclasses_and_cel": NB03,
    "04_claiming_by_attributes": NB04,
    "05_sharing": NB05,
    "06_mig": NB06,
    "07_topology": NB07,
    "08_alternatives_and_policies": NB08,
    "09_why_is_my_pod_pending": NB09,
    "10_gang_scheduling": NB10,
    "11_the_real_thing": NB11,
    "12_experiments": NB12,
}


def build(name: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    for i, (kind, text) in enumerate(NOTEBOOKS[name]):
        cell = nbformat.v4.new_markdown_cell(text) if kind == "markdown" else nbformat.v4.new_code_cell(text)
        cell["id"] = f"{name[:2]}-{i:02d}"
        nb.cells.append(cell)
    return nb


def render(name: str) -> str:
    return nbformat.writes(build(name)) + "\n"


def main(argv: list[str]) -> int:
    names = [n for n in NOTEBOOKS if not argv or any(n.startswith(a) for a in argv)]
    for name in names:
        (HERE / f"{name}.ipynb").write_text(render(name), encoding="utf-8")
        print(f"wrote notebooks/{name}.ipynb")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
