"""What a caller hands to the sim cluster's apply() is copied before it is stored (as the API
server stores what it decoded, not the client's object): changing the dict or list afterwards,
at any depth, changes nothing stored; and YAML that names one mapping twice (an anchor and its
alias) is stored as two separate parts, so a writer replacing one never sees the other change."""

from __future__ import annotations

from labkit.cluster.backends import connect

PROFILE = {"name": "t", "kubernetesVersion": "1.37",
           "nodes": [{"namePrefix": "gpu-", "count": 1, "nodeProfile": "dgx-a100"}]}


def _pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "busybox", "env": [{"name": "X", "value": "1"}]}]}}


def test_the_callers_dict_and_list_are_not_what_is_stored():
    c = connect("sim", PROFILE, progress=False)
    one, two = _pod("one"), _pod("two")
    c.apply(one)
    c.apply([two])
    c.wait()
    for obj in (one, two):
        obj["metadata"]["labels"]["app"] = "changed"
        obj["spec"]["containers"][0]["env"][0]["value"] = "changed"
        obj["spec"]["containers"].append({"name": "extra", "image": "busybox"})
    for name in ("one", "two"):
        stored = c.get("Pod", name)
        assert stored["metadata"]["labels"] == {"app": "a"}
        assert [ctr["name"] for ctr in stored["spec"]["containers"]] == ["c"]
        assert stored["spec"]["containers"][0]["env"] == [{"name": "X", "value": "1"}]
        assert stored["status"]["phase"] == "Running"


def test_yaml_anchors_are_stored_as_separate_parts():
    c = connect("sim", PROFILE, progress=False)
    c.apply("""
apiVersion: v1
kind: Pod
metadata:
  name: aliased
  labels: &labels {app: a}
  annotations: *labels
spec:
  containers: [{name: c, image: busybox}]
""")
    c.wait()
    stored = c.get("Pod", "aliased")
    assert stored["metadata"]["labels"] == stored["metadata"]["annotations"] == {"app": "a"}
    assert stored["metadata"]["labels"] is not stored["metadata"]["annotations"]
