"""The exercise checkers: right answers pass, wrong answers and placeholders fail with ❌ and a hint,
and no checker raises."""

from __future__ import annotations

import numpy as np
import pytest

from labkit.cluster import connect
from labkit.course import checks
from labkit.course.show import device_table, placement_lines, pod_lines, show_env, table
from labkit.experiments.inflation import MAX_CPU, MAX_GPU, MAX_SCORE, run_all
from labkit.experiments.policies import ScoringPolicy


@pytest.fixture(scope="module")
def workshop():
    with connect("sim", "workshop", progress=False) as c:
        yield c


def verdict(capsys, passed: bool, mark: str) -> str:
    out = capsys.readouterr().out
    assert out.startswith(mark), out
    assert bool(passed) is (mark == "✅")
    return out


POD = """
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  {node}
  resourceClaims: [{{name: c, {ref}}}]
  containers: [{{name: m, image: x, resources: {{claims: [{{name: c}}]}}}}]
"""


def pod(name: str, ref: str, node: str = "") -> str:
    return POD.format(name=name, ref=ref, node=f"nodeSelector: {{kubernetes.io/hostname: {node}}}" if node else "")


def claim(name: str, devices: str, kind: str = "ResourceClaim") -> str:
    body = f"spec:\n  devices:\n{devices}"
    if kind == "ResourceClaimTemplate":
        body = "spec:\n  spec:\n    devices:\n" + "\n".join("  " + line for line in devices.splitlines())
    return f"apiVersion: resource.k8s.io/v1\nkind: {kind}\nmetadata: {{name: {name}}}\n{body}\n"


# --- the never-raise contract -----------------------------------------------------------------

PLACEHOLDER_CALLS = [
    (checks.check_two_gpu_template, ()), (checks.check_nics_near_gpu, ()), (checks.check_shared_claim, ()),
    (checks.check_mig_pair, ()), (checks.check_gpu_nic_aligned, ()), (checks.check_fallback_claim, ()),
    (checks.check_fixed_debug_pod, ()), (checks.check_v1_migration, ()),
]


@pytest.mark.parametrize("placeholder", [..., None, "???", "   ", "kind: ???"])
@pytest.mark.parametrize("fn,args", PLACEHOLDER_CALLS, ids=lambda x: getattr(x, "__name__", ""))
def test_placeholders_fail_without_raising(fn, args, placeholder, capsys):
    out = verdict(capsys, fn(placeholder, *args), "❌")
    assert "not answered yet" in out and "hint:" in out


@pytest.mark.parametrize("garbage", ["{not yaml: [", "just words", "- 1\n- 2", 42])
@pytest.mark.parametrize("fn", [checks.check_two_gpu_template, checks.check_shared_claim, checks.check_v1_migration])
def test_garbage_fails_with_a_hint(fn, garbage, capsys):
    out = verdict(capsys, fn(garbage), "❌")
    assert "hint:" in out and "Traceback" not in out


def test_unexpected_exceptions_become_a_cross(capsys):
    @checks.checker("demo")
    def boom(answer):
        raise RuntimeError("kaputt\nsecond line")

    out = verdict(capsys, boom("x"), "❌")
    assert "demo: kaputt" in out and "second line" not in out


# --- 00 ---------------------------------------------------------------------------------------

def test_gpu_count(workshop, capsys):
    verdict(capsys, checks.check_gpu_count(16, workshop), "✅")
    verdict(capsys, checks.check_gpu_count(8, workshop), "❌")
    verdict(capsys, checks.check_gpu_count(24, workshop), "❌")  # NICs are not GPUs
    verdict(capsys, checks.check_gpu_count("16", workshop), "❌")
    verdict(capsys, checks.check_gpu_count(True, workshop), "❌")


# --- 01 ---------------------------------------------------------------------------------------

TWO = "    requests:\n    - name: gpus\n      exactly: {deviceClassName: gpu.nvidia.com, count: 2}"


def test_two_gpu_template(capsys):
    verdict(capsys, checks.check_two_gpu_template(claim("two", TWO, "ResourceClaimTemplate")), "✅")
    out = verdict(capsys, checks.check_two_gpu_template(claim("two", TWO)), "❌")  # a claim, not a template
    assert "ResourceClaimTemplate" in out
    one = TWO.replace("count: 2", "count: 1")
    verdict(capsys, checks.check_two_gpu_template(claim("two", one, "ResourceClaimTemplate")), "❌")
    mig = TWO.replace("gpu.nvidia.com", "mig.nvidia.com")
    verdict(capsys, checks.check_two_gpu_template(claim("two", mig, "ResourceClaimTemplate")), "❌")
    bad = TWO.replace("count: 2", "count: -1")  # rejected by validation
    out = verdict(capsys, checks.check_two_gpu_template(claim("two", bad, "ResourceClaimTemplate")), "❌")
    assert "reject" in out
    defaulted = TWO.replace("count: 2", "count: 0")  # the API server defaults 0 to 1
    out = verdict(capsys, checks.check_two_gpu_template(claim("two", defaulted, "ResourceClaimTemplate")), "❌")
    assert "asks for 1 device" in out


# --- 02 ---------------------------------------------------------------------------------------

def test_nics_near_gpu(capsys):
    verdict(capsys, checks.check_nics_near_gpu(["nic-5", "nic-4"]), "✅")
    verdict(capsys, checks.check_nics_near_gpu(["nic-4"]), "❌")
    verdict(capsys, checks.check_nics_near_gpu(["nic-0", "nic-1"]), "❌")
    verdict(capsys, checks.check_nics_near_gpu(["nic-0", "nic-1"], gpu="gpu-0"), "✅")
    verdict(capsys, checks.check_nics_near_gpu("nic-0", profile="l4-edge", gpu="gpu-1"), "✅")
    verdict(capsys, checks.check_nics_near_gpu("nic-0", profile="l4-edge", gpu="gpu-0"), "❌")
    verdict(capsys, checks.check_nics_near_gpu([], profile="l4-edge", gpu="gpu-0"), "✅")  # no NIC on its root


# --- 03 ---------------------------------------------------------------------------------------

GOOD_SEL = ("device.driver == 'gpu.nvidia.com' && "
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0")


def test_big_gpu_selector(workshop, capsys):
    verdict(capsys, checks.check_big_gpu_selector(GOOD_SEL, workshop), "✅")
    out = verdict(capsys, checks.check_big_gpu_selector(
        "device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')", workshop), "❌")
    assert "does not compile" in out
    out = verdict(capsys, checks.check_big_gpu_selector(
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", workshop), "❌")
    assert "nic" in out  # errors on the NIC driver's devices
    out = verdict(capsys, checks.check_big_gpu_selector("device.driver == 'gpu.nvidia.com'", workshop), "❌")
    assert "should not match" in out
    verdict(capsys, checks.check_big_gpu_selector(GOOD_SEL.replace("40Gi", "90Gi"), workshop), "❌")
    verdict(capsys, checks.check_big_gpu_selector("device.attributes['gpu.nvidia.com'].productName", workshop), "❌")


# --- 04 ---------------------------------------------------------------------------------------

def t4(expr: str, extra: str = "") -> str:
    return claim("my-t4", "    requests:\n    - name: gpu\n      exactly:\n        deviceClassName: gpu.nvidia.com\n"
                 f"        selectors: [{{cel: {{expression: '{expr}'}}}}]{extra}", "ResourceClaimTemplate")


def test_t4_template(workshop, capsys):
    verdict(capsys, checks.check_t4_template(t4('device.attributes["gpu.nvidia.com"].productName == "Tesla T4"'),
                                             workshop), "✅")
    verdict(capsys, checks.check_t4_template(t4('device.attributes["gpu.nvidia.com"].productName.contains("T4")'),
                                             workshop), "✅")
    verdict(capsys, checks.check_t4_template(t4('device.attributes["gpu.nvidia.com"].productName == "T4"'),
                                             workshop), "❌")
    out = verdict(capsys, checks.check_t4_template(t4('device.attributes["gpu.nvidia.com"].product == "Tesla T4"'),
                                                   workshop), "❌")
    assert "no such key" in out
    verdict(capsys, checks.check_t4_template(
        t4('device.attributes["gpu.nvidia.com"].productName == "Tesla T4"', "\n        count: 2"), workshop), "❌")
    out = verdict(capsys, checks.check_t4_template(  # picks exactly the T4s, but not by product name as asked
        t4('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("16Gi")) < 0'), workshop), "❌")
    assert "productName" in out
    missing_class = t4("true").replace("deviceClassName: gpu.nvidia.com", "deviceClassName: gpu.example.com")
    out = verdict(capsys, checks.check_t4_template(missing_class, workshop), "❌")
    assert "gpu.example.com" in out


# --- 05 ---------------------------------------------------------------------------------------

ONE_GPU = "    requests:\n    - name: gpu\n      exactly: {deviceClassName: gpu.nvidia.com}"


def test_shared_claim(capsys):
    shared = claim("g", ONE_GPU) + pod("a", "resourceClaimName: g") + pod("b", "resourceClaimName: g")
    out = verdict(capsys, checks.check_shared_claim(shared), "✅")
    assert "reserved for 2 pods" in out
    two = claim("g", ONE_GPU) + claim("h", ONE_GPU).replace("apiVersion", "---\napiVersion", 1)
    verdict(capsys, checks.check_shared_claim(two + pod("a", "resourceClaimName: g") + pod("b", "resourceClaimName: h")),
            "❌")
    tmpl = claim("g", ONE_GPU, "ResourceClaimTemplate")
    out = verdict(capsys, checks.check_shared_claim(
        tmpl + pod("a", "resourceClaimTemplateName: g") + pod("b", "resourceClaimTemplateName: g")), "❌")
    assert "template" in out
    verdict(capsys, checks.check_shared_claim(claim("g", ONE_GPU) + pod("a", "resourceClaimName: g")), "❌")
    # both pods name a claim that does not exist: they never run
    out = verdict(capsys, checks.check_shared_claim(pod("a", "resourceClaimName: g") + pod("b", "resourceClaimName: g")),
                  "❌")
    assert "does not run" in out


# --- 06 ---------------------------------------------------------------------------------------

def mig(profiles: tuple[str, str], constraint: bool = True, node: str = "a100-dynamic-0") -> str:
    reqs = "".join(f"\n    - name: r{i}\n      exactly:\n        deviceClassName: mig.nvidia.com\n"
                   f"        selectors: [{{cel: {{expression: 'device.attributes[\"gpu.nvidia.com\"].profile == \"{p}\"'}}}}]"
                   for i, p in enumerate(profiles))
    cons = "\n    constraints:\n    - matchAttribute: gpu.nvidia.com/parentUUID" if constraint else ""
    return claim("m", "    requests:" + reqs + cons) + pod("w", "resourceClaimName: m", node)


def test_mig_pair(capsys):
    verdict(capsys, checks.check_mig_pair(mig(("3g.40gb", "1g.10gb"))), "✅")
    out = verdict(capsys, checks.check_mig_pair(mig(("3g.40gb", "1g.10gb"), constraint=False)), "❌")
    assert "parentUUID" in out
    verdict(capsys, checks.check_mig_pair(mig(("3g.40gb", "2g.20gb"))), "❌")
    out = verdict(capsys, checks.check_mig_pair(mig(("3g.40gb", "1g.10gb"), node="a100-static-0")), "❌")
    assert "does not run" in out  # the static A100-40GB layout has no 3g.40gb


# --- 07 ---------------------------------------------------------------------------------------

GPU_NIC = ("    requests:\n    - name: gpu\n      exactly: {deviceClassName: gpu.nvidia.com}\n"
           "    - name: nic\n      exactly: {deviceClassName: nic.fake-gpus.dev}")


def test_gpu_nic_aligned(capsys):
    aligned = GPU_NIC + "\n    constraints:\n    - matchAttribute: resource.kubernetes.io/pcieRoot"
    verdict(capsys, checks.check_gpu_nic_aligned(claim("a", aligned) + pod("a", "resourceClaimName: a", "dgx-a100-0")),
            "✅")
    verdict(capsys, checks.check_gpu_nic_aligned(claim("a", aligned) + pod("a", "resourceClaimName: a", "dgx-h100-0")),
            "✅")
    out = verdict(capsys, checks.check_gpu_nic_aligned(claim("a", GPU_NIC) + pod("a", "resourceClaimName: a")), "❌")
    assert "pcieRoot" in out
    two_gpus = aligned.replace("nic.fake-gpus.dev", "gpu.nvidia.com")
    verdict(capsys, checks.check_gpu_nic_aligned(claim("a", two_gpus) + pod("a", "resourceClaimName: a")), "❌")


# --- 08 ---------------------------------------------------------------------------------------

def fallback(second: str, first: str = "H100") -> str:
    return claim("f", "    requests:\n    - name: accel\n      firstAvailable:\n"
                 f"      - {{name: a, deviceClassName: gpu.nvidia.com, selectors: [{{cel: {{expression: "
                 f"'device.attributes[\"gpu.nvidia.com\"].productName.contains(\"{first}\")'}}}}]}}\n"
                 f"      - {{name: b, deviceClassName: gpu.nvidia.com, selectors: [{{cel: {{expression: "
                 f"'device.attributes[\"gpu.nvidia.com\"].productName.contains(\"{second}\")'}}}}]}}") \
        + pod("p", "resourceClaimName: f")


def test_fallback_claim(capsys):
    out = verdict(capsys, checks.check_fallback_claim(fallback("T4")), "✅")
    assert "accel/b" in out
    out = verdict(capsys, checks.check_fallback_claim(fallback("A100")), "❌")
    assert "A100" in out
    verdict(capsys, checks.check_fallback_claim(fallback("T4", first="A100")), "❌")
    verdict(capsys, checks.check_fallback_claim(claim("f", ONE_GPU) + pod("p", "resourceClaimName: f")), "❌")


# --- 09 ---------------------------------------------------------------------------------------

def debug(cls: str, expr: str) -> str:
    return claim("debug-me", "    requests:\n    - name: gpu\n      exactly:\n"
                 f"        deviceClassName: {cls}\n        selectors: [{{cel: {{expression: '{expr}'}}}}]") \
        + pod("debug-me", "resourceClaimName: debug-me")


GOOD_MEM = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'


def test_fixed_debug_pod(capsys):
    verdict(capsys, checks.check_fixed_debug_pod(debug("gpu.nvidia.com", GOOD_MEM)), "✅")
    out = verdict(capsys, checks.check_fixed_debug_pod(debug("nvidia.com/gpu", GOOD_MEM)), "❌")
    assert "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters" in out
    out = verdict(capsys, checks.check_fixed_debug_pod(
        debug("gpu.nvidia.com", 'device.capacity["gpu.nvidia.com"].memory >= quantity("40Gi")')), "❌")
    assert "reject" in out
    verdict(capsys, checks.check_fixed_debug_pod(debug("gpu.nvidia.co", GOOD_MEM)), "❌")
    t4_only = 'device.attributes["gpu.nvidia.com"].productName == "Tesla T4"'
    out = verdict(capsys, checks.check_fixed_debug_pod(debug("gpu.nvidia.com", t4_only)), "❌")
    assert "40Gi" in out
    renamed = debug("gpu.nvidia.com", GOOD_MEM).replace("name: debug-me}\nspec:\n  \n", "name: other}\nspec:\n  \n")
    verdict(capsys, checks.check_fixed_debug_pod(renamed), "❌")


# --- 10 ---------------------------------------------------------------------------------------

def test_largest_gang(workshop, capsys):
    verdict(capsys, checks.check_largest_gang(8, workshop), "✅")
    verdict(capsys, checks.check_largest_gang(9, workshop), "❌")
    verdict(capsys, checks.check_largest_gang(16, workshop), "❌")
    verdict(capsys, checks.check_largest_gang(8.0, workshop), "❌")


# --- 11 ---------------------------------------------------------------------------------------

V1 = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: a100-pair}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: gpu.nvidia.com
          count: 2
          selectors: [{cel: {expression: 'device.attributes["gpu.nvidia.com"].productName.contains("A100")'}}]
"""


def test_v1_migration(capsys):
    verdict(capsys, checks.check_v1_migration(V1), "✅")
    out = verdict(capsys, checks.check_v1_migration(V1.replace("resource.k8s.io/v1", "resource.k8s.io/v1beta1")), "❌")
    assert "v1beta1" in out
    flat = V1.replace("        exactly:\n", "").replace("\n          ", "\n        ")
    verdict(capsys, checks.check_v1_migration(flat), "❌")
    verdict(capsys, checks.check_v1_migration(V1.replace("count: 2", "count: 1")), "❌")
    verdict(capsys, checks.check_v1_migration(V1.replace("A100", "H100")), "❌")


# --- 12 ---------------------------------------------------------------------------------------

class _Run:
    def __init__(self, policy: str, wait: float) -> None:
        self.summary = {"policy": policy, "wait_p95_s": wait, "never_placed": 0}


class _Results:
    runs = [_Run("whole-gpu", 500.0), _Run("shared", 9.7), _Run("dynamic-mig", 36.0)]


def test_best_policy(capsys):
    verdict(capsys, checks.check_best_policy("shared", _Results()), "✅")
    verdict(capsys, checks.check_best_policy("dynamic-mig", _Results()), "❌")
    out = verdict(capsys, checks.check_best_policy("mig", _Results()), "❌")
    assert "whole-gpu, shared, dynamic-mig" in out
    verdict(capsys, checks.check_best_policy("whole-gpu", _Results(), "never_placed"), "✅")  # ties: any minimum
    out = verdict(capsys, checks.check_best_policy("shared", _Results(), "never_placed"), "✅")
    assert "tied with" in out


def test_fewer_unallocated_on_lesson_12s_sample(capsys):
    """Lesson 12's policy exercise as the learner runs it: the unchanged copy of the worked example
    (the placeholder) leaves as many GPUs unallocated as the example, so ❌; the answer (CPU-only tasks
    to the node with the least GPU left) leaves fewer, so ✅; a name not run is named in the ❌."""
    class SharedFirst(ScoringPolicy):  # the lesson's worked example
        name = "shared-first"

        def score(self, task, state, nodes):
            g = state.g[nodes]
            cpu_left = (state.cpu[nodes] - task.cpu_milli) / MAX_CPU
            gpu_left = (g.sum(axis=1) - task.milli_total) / MAX_GPU
            score = ((1 - (cpu_left + gpu_left) / 2) * MAX_SCORE).astype(np.int64)
            if task.share:
                score += MAX_SCORE * ((g >= task.gpu_milli) & (g < 1000)).any(axis=1)
            return score

    class Unchanged(SharedFirst):
        name = "my-policy"

    class Answer(SharedFirst):
        name = "answer"

        def score(self, task, state, nodes):
            return -state.g[nodes].sum(axis=1) if task.gpus == 0 else super().score(task, state, nodes)

    res = run_all("default", [SharedFirst(), Unchanged(), Answer()], every=10, sim=False)
    out = verdict(capsys, checks.check_fewer_unallocated("my-policy", res, than="shared-first"), "❌")
    assert out.startswith("❌ my-policy leaves 43.0 GPUs unallocated, shared-first 43.0: not fewer\n   hint: change score()")
    out = verdict(capsys, checks.check_fewer_unallocated("answer", res, than="shared-first"), "✅")
    assert out == "✅ answer leaves 35.8 GPUs unallocated at saturation, 7.2 fewer than shared-first\n"
    out = verdict(capsys, checks.check_fewer_unallocated("mine", res, than="shared-first"), "❌")
    assert "'mine' is not one of the policies run: shared-first, my-policy, answer" in out
    verdict(capsys, checks.check_fewer_unallocated("???", res, than="shared-first"), "❌")


# --- display helpers ----------------------------------------------------------------------------

def test_show_helpers(capsys):
    with connect("sim", "workshop", progress=False) as c:
        c.apply(claim("g", ONE_GPU) + pod("a", "resourceClaimName: g", "t4-1") + pod("z", "resourceClaimName: nope"))
        c.wait()
        assert placement_lines(c) == ("POD  REQUEST  NODE  DEVICE  PROFILE\n"
                                      "a    gpu      t4-1  gpu-0")
        assert placement_lines(c, ["z"]) == "(no placements)"
        assert pod_lines(c).splitlines() == ["POD  PHASE    NODE", "a    Running  t4-1", "z    Pending  -"]
        env = show_env(c.pod_env("a"))
        assert "FAKE_GPU_0_NAME=gpu-0" in env and "FAKE_DRA_CLAIM" not in env
        assert env.splitlines() == sorted(env.splitlines())
        rows = device_table(c.list("ResourceSlice"), "t4-0").splitlines()
        assert rows[0].split() == ["DEVICE", "TYPE", "PRODUCT/PROFILE", "MEMORY", "PCIEROOT"]
        assert rows[1].split() == ["gpu-0", "gpu", "Tesla", "T4", "15Gi", "pci0000:00"] and len(rows) == 5
    assert show_env({}) == "(no device variables)"
    assert table([("a", "bb")], ("x", "y")) == "X  Y\na  bb"


def test_checks_still_work_after_the_notebook_stopped_its_cluster(capsys):
    """Run All used to end with cluster.down(): a right answer must still get ✅ afterwards."""
    stopped = connect("sim", "workshop", progress=False)
    stopped.down()
    verdict(capsys, checks.check_gpu_count(16, stopped), "✅")
    verdict(capsys, checks.check_gpu_count(8, stopped), "❌")
    verdict(capsys, checks.check_big_gpu_selector(
        'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu" && '
        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0', stopped), "✅")


def test_a_cluster_without_a_profile_that_is_down_says_what_to_do(capsys):
    from labkit.cluster.backends.sim import SimCluster

    never_up = SimCluster(progress=False)
    out = verdict(capsys, checks.check_gpu_count(16, never_up), "❌")
    assert "the cluster is down" in out and "first cell" in out


def test_a_check_in_a_notebook_shows_its_line_and_no_out_prompt():
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from labkit.course import checks\nchecks.check_v1_migration(None)")])
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outputs = nb.cells[0].outputs
    assert [o.output_type for o in outputs] == ["stream"], outputs
    assert outputs[0].text.startswith("❌")


def test_whatif_pending_accepts_only_the_pending_pods():
    sim = connect("sim", "workshop", progress=False)
    tmpl = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t4x3"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "count": 3, "selectors": [{"cel": {
                    "expression": "device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'"}}]}}]}}}}
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": n},
             "spec": {"nodeSelector": {"kubernetes.io/hostname": "t4-0"},
                      "containers": [{"name": "main", "image": "busybox", "resources": {"claims": [{"name": "g"}]}}],
                      "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t4x3"}]}} for n in ("a", "b")]
    new = [tmpl, *pods]
    for obj in new:
        sim.apply(obj)
        sim.wait()
    assert checks.check_whatif_pending(["b"], sim, new)
    assert not checks.check_whatif_pending([], sim, new)
    assert not checks.check_whatif_pending(["a"], sim, new)
    assert not checks.check_whatif_pending(["a", "b"], sim, new)
    assert not checks.check_whatif_pending(["nope"], sim, new)
    assert not checks.check_whatif_pending("b", sim, new)
