"""fake_gpus/deploy: manifests load, stay in sync with the code, and carry the right RBAC/mounts."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

import fake_gpus
from fake_gpus.catalog import node_profiles, parse_node_profile
from fake_gpus.slices import build_slices, device_classes

DEPLOY = Path(fake_gpus.__file__).resolve().parent / "deploy"


def manifest_files() -> list[Path]:
    return [f for f in sorted(DEPLOY.glob("*.yaml")) if f.name != "kustomization.yaml"]


def load_all() -> list[dict]:
    docs = []
    for f in manifest_files():
        docs += [d for d in yaml.safe_load_all(f.read_text()) if d]
    return docs


def one(kind: str, name: str | None = None) -> dict:
    found = [d for d in load_all() if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


def test_manifests_load_and_cover_the_kinds():
    kinds = sorted({d["kind"] for d in load_all()})
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "DeviceClass", "Namespace",
                     "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    ns = one("Namespace")["metadata"]["name"]
    for d in load_all():
        if d["kind"] in {"ConfigMap", "DaemonSet", "ServiceAccount"}:
            assert d["metadata"]["namespace"] == ns, d["metadata"]["name"]


def test_kustomization_lists_every_manifest():
    k = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert k["kind"] == "Kustomization"
    listed = sorted(k["resources"])
    present = sorted(f.name for f in manifest_files())
    assert listed == present


def test_deviceclasses_file_in_sync_with_code():
    text = (DEPLOY / "04-deviceclasses.yaml").read_text()
    assert text.startswith("# GENERATED")
    assert [d for d in yaml.safe_load_all(text) if d] == device_classes()


def test_rbac_minimal_node_local_driver():
    """Exactly the calls fake_gpus/plugin makes (tests/e2e/test_least_privilege.py checks the live grant)."""
    role = one("ClusterRole")
    rules = {(g, r): rule for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert set(rules) == {("resource.k8s.io", "resourceclaims"), ("resource.k8s.io", "resourceslices"), ("", "nodes")}
    assert rules[("resource.k8s.io", "resourceclaims")]["verbs"] == ["get"]
    assert set(rules[("resource.k8s.io", "resourceslices")]["verbs"]) == {"get", "list", "create", "update", "delete"}
    assert rules[("", "nodes")]["verbs"] == ["get"]
    # nothing cluster-wide beyond that: no wildcards, no secrets, no pods
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
    binding = one("ClusterRoleBinding")
    sa = one("ServiceAccount")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": sa["metadata"]["namespace"]}]


def _plugin_container(ds: dict) -> dict:
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    return c


def test_daemonset_shape():
    ds = one("DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    assert pod["serviceAccountName"] == one("ServiceAccount")["metadata"]["name"]
    c = _plugin_container(ds)
    assert c["securityContext"]["privileged"] is True
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    for path in ["/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins", "/var/run/cdi"]:
        (name,) = [n for n, p in host.items() if p == path]
        assert mounts[name] == path
    env = {e["name"]: e for e in c["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    ref = env["NODE_PROFILE"]["valueFrom"]["configMapKeyRef"]
    cm = one("ConfigMap", ref["name"])
    assert cm["data"][ref["key"]] in node_profiles()
    assert "python -m fake_gpus plugin" in " ".join(c["command"] + c["args"])


def test_profiles_configmap_entries_are_valid_profiles():
    ds = one("DaemonSet")
    (vol,) = [v for v in ds["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    cm = one("ConfigMap", vol["configMap"]["name"])
    assert cm["data"]
    for key, text in cm["data"].items():
        prof = parse_node_profile(yaml.safe_load(text), key)
        assert key == f"{prof.name}.yaml"
        assert build_slices(prof, "node-1")
    env = {e["name"]: e.get("value") for e in _plugin_container(ds)["env"]}
    mount = [m for m in _plugin_container(ds)["volumeMounts"] if m["name"] == vol["name"]][0]
    assert env["FAKE_GPUS_PROFILE_PATH"] == mount["mountPath"]


def _kubelet_expand(arg: str, env: dict[str, str]) -> str:
    """$(VAR) expansion as the kubelet does it for command/args (unknown references stay)."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), arg)


@pytest.mark.parametrize("mig", ["", "dynamic"])
def test_daemonset_command_runs_the_plugin_cli(mig):
    """Expand the container's argv like the kubelet would, parse it with our CLI, and build the
    slices the plugin would publish from it."""
    c = _plugin_container(one("DaemonSet"))
    assert c["command"] == ["python", "-m", "fake_gpus", "plugin"]
    cm = one("ConfigMap", "fake-gpus-config")
    env = {"NODE_NAME": "kind-worker", **cm["data"], "MIG_MODE": mig}
    for e in c["env"]:  # every $(VAR) used must be defined by the container's env
        assert e["name"] in env or "value" in e
    argv = [_kubelet_expand(a, env) for a in c["args"]]
    assert not [a for a in argv if "$(" in a]
    from fake_gpus.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert "plugin" in sub.choices
    args = parser.parse_args(["plugin", *argv])
    assert args.node == "kind-worker" and args.profile == cm["data"]["NODE_PROFILE"]
    assert args.mig_mode == mig
    slices = build_slices(args.profile, args.node, mig_mode=args.mig_mode)
    want = build_slices(args.profile, args.node, mig_mode=mig or None)
    assert slices == want


def test_dockerfile_installs_only_fake_gpus():
    text = (DEPLOY / "Dockerfile").read_text()
    # an ordinary python base by default; BASE_IMAGE only for builds that cannot pull it
    assert re.search(r"^ARG BASE_IMAGE=python:3\.1\d-slim$", text, re.M)
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", text, re.M)
    copies = re.findall(r"^COPY\s+(\S+)", text, re.M)
    assert copies and all(src.startswith("fake_gpus") for src in copies)
    assert "labkit" not in " ".join(copies)
    assert not re.search(r"\b(curl|wget)\b", text)
    reqs = [ln.strip() for ln in (DEPLOY / "requirements.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]
    pyproject = tomllib.loads((Path(fake_gpus.__file__).resolve().parent.parent / "pyproject.toml").read_text())
    # the same specifier, whatever environment marker pyproject adds (native ones are left out in a browser)
    specifiers = {d.split(";")[0].strip() for d in pyproject["project"]["dependencies"]}
    for r in reqs:
        assert r in specifiers, f"{r} not in pyproject dependencies"


def test_manifests_validate_with_labkit_api():
    from labkit.cel.validation import validate

    problems = validate(load_all(), kubernetes_version="1.37")
    assert [str(p) for p in problems] == []


@pytest.mark.parametrize("profile", ["dgx-a100", "dgx-h100", "mig-a100", "hgx-h200", "mixed-a100-t4"])
@pytest.mark.parametrize("mode", ["none", "static", "dynamic"])
def test_slices_validate_with_labkit_api(profile, mode):
    from labkit.cel.validation import validate

    for version in ["1.34", "1.37"]:
        slices = build_slices(profile, "node-1", mig_mode=mode, kubernetes_version=version)
        problems = validate(slices, kubernetes_version=version,
                            feature_gates={"DRAPartitionableDevices": True})
        assert [str(p) for p in problems] == []
