"""Issue 41, point 9: the fake driver's Helm chart (fake_gpus/deploy/helm/fake-gpus) checks its values before
it renders anything, through a real `helm` (tests/fake_gpus/test_fake_gpus_helm.py builds it): values.schema.json types
every value (a string "true" for a gate, an unknown gate or value, a bad image, quantity, label or host path are
refused by Helm with the value's path), and templates/_helpers.tpl checks what a schema cannot say (names that
stay valid and distinct after Helm's 63-character cut, sharing without its gate, the profiles' size). The values
the repository ships (the chart's defaults, the kind backend's `helm_values` for every cluster profile, the docs'
example) still render."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from fake_gpus import featuregates
from fake_gpus.cli import build_parser
from fake_gpus.plugin.cli import load_slices
from labkit.cluster.backends.kind.driver import helm_values
from labkit.model.profiles import load_profile, profile_names
from tests.fake_gpus import test_fake_gpus_helm
from tests.fake_gpus.test_fake_gpus_deploy import _kubelet_expand
from tests.fake_gpus.test_fake_gpus_helm import CHART, ROOT, by_identity, render, run_helm

helm = test_fake_gpus_helm.helm  # the session fixture: the cached helm binary (tools/build-helm.sh)
SCHEMA = CHART / "values.schema.json"
# k8s.io/apimachinery/pkg/util/validation/validation.go: IsDNS1123Label / IsDNS1123Subdomain (63 / 253)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: what helm prints before the schema's findings (helm/helm pkg/chart/common/util/jsonschema.go and the
#: install/template action that wraps its error)
SCHEMA_ERROR = "values don't meet the specifications of the schema(s) in the following chart(s)"


def helm_fails(helm: str, tmp_path: Path, args: list[str], values: dict[str, Any] | None = None) -> str:
    """`helm template` with these values refused: helm's stderr."""
    extra = list(args)
    if values is not None:
        f = tmp_path / "values.yaml"
        f.write_text(yaml.safe_dump(values))
        extra += ["-f", str(f)]
    out = run_helm(helm, "template", "fake-gpus", str(CHART), "--namespace", "fake-gpus", *extra, check=False)
    assert out.returncode == 1, f"helm template {' '.join(extra)} was not refused:\n{out.stdout[:2000]}"
    return out.stderr


def _hw(name: str, profile: str = "t4-inference") -> dict[str, str]:
    return {"name": name, "nodeProfile": profile}


# -- the schema: each wrong value refused, its path and value named ------------------------------------------
@pytest.mark.parametrize(("args", "values", "path", "said"), [
    # a gate is a boolean: --set-string (or "true" quoted in a values file) is a string, refused
    (["--set-string", "featureGates.ConsumableShares=true"], None, "/featureGates/ConsumableShares",
     "got string, want boolean"),
    # the chart knows the driver's gates (fake_gpus/featuregates.py; NVIDIA's pkg/featuregates/featuregates.go)
    (["--set", "featureGates.ConsumableShare=true"], None, "/featureGates", "'ConsumableShare' not allowed"),
    # an unknown value is a typo, never silently ignored
    (["--set", "nodeprofile=t4-inference"], None, "", "'nodeprofile' not allowed"),
    (["--set", "topologyAttributes=yes"], None, "/topologyAttributes", "got string, want boolean"),
    # a node profile is a name, never a path the privileged plugin would read
    (["--set", "nodeProfile=../../etc/shadow"], None, "/nodeProfile", "'../../etc/shadow' does not match"),
    (["--set", "hardware[0].name=t4", "--set", "hardware[0].nodeProfile=/etc/shadow"], None,
     "/hardware/0/nodeProfile", "'/etc/shadow' does not match"),
    # images: github.com/distribution/reference regexp.go (lower-case path components; tag [\w][\w.-]{0,127});
    # pull policies: k8s.io/api/core/v1 types.go PullPolicy
    (["--set", "image.repository=Dra-Labkit/Fake-GPUs"], None, "/image/repository", "'Dra-Labkit/Fake-GPUs'"),
    (["--set", "image.tag=0.1.0@sha256"], None, "/image/tag", "'0.1.0@sha256' does not match"),
    (["--set", "image.tag=1"], None, "/image/tag", "got number, want string"),
    (["--set", "image.pullPolicy=Sometimes"], None, "/image/pullPolicy", "'Always', 'IfNotPresent', 'Never'"),
    # quantities: k8s.io/apimachinery/pkg/api/resource/quantity.go's grammar, not negative
    (["--set", "kubeletPlugin.containers.plugin.resources.limits.memory=lots"], None,
     "/kubeletPlugin/containers/plugin/resources/limits/memory", "'lots' does not match"),
    (["--set", "kubeletPlugin.containers.plugin.resources.requests.cpu=-1"], None,
     "/kubeletPlugin/containers/plugin/resources/requests/cpu", "minimum"),
    # labels: validation.go IsQualifiedName / IsValidLabelValue; a nodeSelector value is a string
    (["--set", "kubeletPlugin.nodeSelector.pool=a/b"], None, "/kubeletPlugin/nodeSelector/pool",
     "'a/b' does not match"),
    (["--set", "hardware[0].name=t4", "--set", "hardware[0].nodeProfile=t4-inference",
      "--set", "hardware[0].nodeSelector.gpu=true"], None, "/hardware/0/nodeSelector/gpu", "got boolean, want string"),
    (["--set", "kubeletPlugin.tolerations[0].operator=Maybe"], None, "/kubeletPlugin/tolerations/0/operator",
     "'Exists', 'Equal'"),
    (["--set", "kubeletPlugin.updateStrategy.type=Recreate"], None, "/kubeletPlugin/updateStrategy/type",
     "'RollingUpdate', 'OnDelete'"),
    (["--set", "consumableShares=0"], None, "/consumableShares", "minimum"),
    # host paths: absolute, no '..' (k8s.io/kubernetes pkg/apis/core/validation/validation.go validateHostPathVolumeSource,
    # validatePathNoBacksteps), and no line break that would write YAML of its own into the DaemonSet
    (["--set", "kubeletPlugin.cdiRoot=/var/run/../../etc"], None, "/kubeletPlugin/cdiRoot", "does not match"),
    ([], {"kubeletPlugin": {"cdiRoot": "/var/run/cdi\n  - name: host\n    hostPath: {path: /}"}},
     "/kubeletPlugin/cdiRoot", "does not match"),
    ([], {"extraProfiles": {"My_Profile.yaml": "name: x\n"}}, "/extraProfiles", "'My_Profile.yaml'"),
])
def test_the_schema_refuses_a_wrong_value_naming_it(helm, tmp_path, args, values, path, said):
    err = helm_fails(helm, tmp_path, args, values)
    assert SCHEMA_ERROR in err, err
    # santhosh-tekuri/jsonschema's findings, one per value: "- at '/json/pointer': what is wrong"
    (line,) = [ln for ln in err.splitlines() if ln.startswith(f"- at '{path}': ")]
    assert said in line, err


def test_the_schemas_gates_are_the_drivers(helm):
    """Every gate the plugin knows is a boolean of the schema and no other: all of them on render, and the
    plugin's own parser takes the rendered --feature-gates."""
    schema = json.loads(SCHEMA.read_text())
    gates = schema["properties"]["featureGates"]
    assert gates["additionalProperties"] is False
    assert sorted(gates["properties"]) == sorted(featuregates.DEFAULTS)
    assert {g["type"] for g in gates["properties"].values()} == {"boolean"}
    args = [a for g in sorted(featuregates.DEFAULTS) for a in ("--set", f"featureGates.{g}=true")]
    ds = by_identity(render(helm, "--set", "nodeProfile=dgx-h100", *args))["DaemonSet", "fake-gpus-kubelet-plugin"]
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    env = {"NODE_NAME": "n1", "NODE_PROFILE": "dgx-h100", "MIG_MODE": ""}
    parsed = build_parser().parse_args(["plugin", *(_kubelet_expand(a, env) for a in c["args"])])
    assert featuregates.parse(parsed.feature_gates) == dict.fromkeys(featuregates.DEFAULTS, True)
    assert load_slices(parsed)


# -- the template checks: what the schema cannot say -----------------------------------------------------------
PREFIX = "fake-gpus-kubelet-plugin-"  # 25 characters: a hardware name keeps its first 38 in the DaemonSet's name


@pytest.mark.parametrize(("values", "message"), [
    # the name is also the value of label fake-gpus.dev/hardware: at most 63 (validation.go IsValidLabelValue)
    ({"hardware": [_hw("a" * 64)]}, f'hardware[0].name "{"a" * 64}": must be a DNS label (at most 63'),
    # an empty entry was the default DaemonSet before, silently
    ({"hardware": [_hw("t4"), {}]}, "hardware[1]: every hardware entry needs a name"),
    ({"hardware": [{"name": "t4"}]}, "hardware[0]: every hardware entry needs a nodeProfile"),
    # two entries, one DaemonSet: the second would replace the first
    ({"hardware": [_hw("t4"), _hw("t4", "dgx-a100")]},
     'hardware[0].name "t4" and hardware[1].name "t4" both give DaemonSet "fake-gpus-kubelet-plugin-t4"'),
    ({"hardware": [_hw("x" * 38 + "-inference"), _hw("a100"), _hw("x" * 38 + "-training")]},
     f'hardware[0].name "{"x" * 38}-inference" and hardware[2].name "{"x" * 38}-training" both give DaemonSet '
     f'"{PREFIX}{"x" * 38}" (names are cut to 63 characters): give each entry a name of its own within its '
     "first 38 characters"),
    # NVIDIA's driver refuses --consumable-shares without the gate (at start, on every node): refused here first
    ({"consumableShares": "memory"}, 'consumableShares "memory" needs featureGates.ConsumableShares=true'),
    ({"consumableShares": 4, "featureGates": {"ConsumableShares": False}},
     'consumableShares "4" needs featureGates.ConsumableShares=true'),
    # the API server's ConfigMap limit (pkg/apis/core/validation/validation.go ValidateConfigMap: 1 MiB of data)
    # (null drops the chart's own lab-small.yaml, as Helm merges values)
    ({"extraProfiles": {"lab-small.yaml": None, "big.yaml": "#" * (1024 * 1024 + 1)}},
     "extraProfiles: 1048577 bytes of profiles in all; ConfigMap fake-gpus-profiles holds at most 1048576"),
])
def test_the_templates_refuse_what_a_schema_cannot_say(helm, tmp_path, values, message):
    err = helm_fails(helm, tmp_path, [], values)
    first = err.splitlines()[0]
    assert first.startswith("Error: execution error at (fake-gpus/templates/") and message in first, err


def test_a_cut_name_ends_with_a_letter_or_digit(helm, tmp_path):
    """Helm's cut (`helm create`'s fullname: trunc 63 | trimSuffix "-", helm/helm pkg/chart/v2/util/create.go):
    a hardware name whose 38th character is '-' gives a DaemonSet name without the trailing '-' (an object
    name ending in '-' is refused by the API server)."""
    name = "a" * 37 + "-b"
    values = tmp_path / "v.yaml"
    values.write_text(yaml.safe_dump({"hardware": [_hw(name)]}))
    objs = by_identity(render(helm, "-f", str(values)))
    (ds,) = [k[1] for k in objs if k[0] == "DaemonSet"]
    assert ds == PREFIX + "a" * 37
    assert len(ds) <= 63 and DNS_LABEL.match(ds)
    labels = objs["DaemonSet", ds]["spec"]["selector"]["matchLabels"]
    assert labels["fake-gpus.dev/hardware"] == name


# -- what the repository ships still renders ---------------------------------------------------------------------
def _platform_tools_example() -> dict[str, Any]:
    """The values of docs/platform-tools.md's `helm install ... -f - <<'EOF'` example."""
    text = (ROOT / "docs" / "platform-tools.md").read_text()
    m = re.search(r"-f - <<'EOF'\n(.*?)\n\s*EOF\n", text, re.S)
    assert m, "docs/platform-tools.md: the two-kinds-of-nodes example is gone"
    return yaml.safe_load(m.group(1))


SHIPPED: list[tuple[str, Any]] = [
    ("the chart's defaults", lambda: {}),
    ("docs/platform-tools.md", _platform_tools_example),
    *((f"helm_values({name})", (lambda n=name: helm_values(load_profile(n), "dra-labkit/fake-gpus:0.1.0")))
      for name in profile_names()),
]


@pytest.mark.parametrize(("what", "values"), SHIPPED, ids=[s[0] for s in SHIPPED])
def test_the_values_the_repository_ships_meet_the_schema_and_render(helm, tmp_path, what, values):
    assert SCHEMA.is_file(), "the chart has no values.schema.json"
    f = tmp_path / "values.yaml"
    f.write_text(yaml.safe_dump(values()))
    objs = render(helm, "-f", str(f))
    daemonsets = [o for o in objs if o["kind"] == "DaemonSet"]
    assert daemonsets, what
    for o in objs:
        name = o["metadata"]["name"]
        assert len(name) <= 253 and not name.endswith("-"), (what, name)
    for ds in daemonsets:
        assert len(ds["metadata"]["name"]) <= 63 and DNS_LABEL.match(ds["metadata"]["name"]), what
    out = run_helm(helm, "lint", "--strict", str(CHART), "--namespace", "fake-gpus", "-f", str(f))
    assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout, out.stdout
