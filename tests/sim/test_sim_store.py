"""labkit.sim.store and labkit.sim.names: API-server-like storage semantics and Kubernetes naming."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labkit.sim import names
from labkit.sim.store import Store, StoreError, copy_of, evolve

SUFFIX = re.compile(r"^[bcdfghjklmnpqrstvwxz2456789]{5}$")


def _pod(name="p", **meta):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta}, "spec": {"containers": []}}


def test_resource_version_bumps_on_every_write():
    s = Store()
    a = s.create(_pod("a"))
    assert a["metadata"]["resourceVersion"] == "1"
    b = s.create(_pod("b"))
    assert b["metadata"]["resourceVersion"] == "2"
    new = evolve(a, "spec")
    new["spec"]["nodeName"] = "n"
    a2 = s.update(new)
    assert a2["metadata"]["resourceVersion"] == "3"
    assert a2["metadata"]["uid"] == a["metadata"]["uid"]
    assert a2["metadata"]["generation"] == 2
    assert s.get("Pod", "a")["spec"]["nodeName"] == "n"


def test_namespace_defaults_and_cluster_scope():
    s = Store()
    p = s.create(_pod())
    assert p["metadata"]["namespace"] == "default"
    n = s.create({"kind": "Node", "metadata": {"name": "n1", "namespace": "x"}})
    assert "namespace" not in n["metadata"]
    assert n["apiVersion"] == "v1"
    assert s.get("Node", "n1", None) is n


def test_uids_and_generated_names_are_seeded():
    def run(seed):
        s = Store(seed=seed)
        return [(o["metadata"]["name"], o["metadata"]["uid"])
                for o in (s.create({"kind": "Pod", "metadata": {"generateName": "web-"}}) for _ in range(3))]

    assert run(1) == run(1)
    assert run(1) != run(2)
    for name, uid in run(1):
        assert name.startswith("web-") and SUFFIX.match(name[4:])
        assert re.match(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", uid)


def test_create_twice_is_refused():
    s = Store()
    s.create(_pod())
    with pytest.raises(StoreError, match='Pod "p" already exists in namespace default'):
        s.create(_pod())


def test_finalizers_delay_deletion():
    s = Store()
    s.create({"kind": "ResourceClaim", "metadata": {"name": "c", "finalizers": ["x/y"]}})
    s.delete("ResourceClaim", "c")
    c = s.get("ResourceClaim", "c")
    assert c is not None and c["metadata"]["deletionTimestamp"]
    new = evolve(c)
    new["metadata"]["finalizers"] = []
    s.update(new)
    assert s.get("ResourceClaim", "c") is None


def test_owner_deletion_garbage_collects_dependents():
    s = Store()
    pod = s.create(_pod())
    ref = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": pod["metadata"]["uid"], "controller": True}
    s.create({"kind": "ResourceClaim", "metadata": {"name": "c1", "ownerReferences": [ref]}})
    s.create({"kind": "ResourceClaim", "metadata": {"name": "c2"}})
    assert [d["metadata"]["name"] for d in s.dependents(pod["metadata"]["uid"])] == ["c1"]
    s.delete("Pod", "p")
    assert s.get("ResourceClaim", "c1") is None
    assert s.get("ResourceClaim", "c2") is not None


def test_watch_and_log():
    s = Store()
    seen = []
    s.watch(lambda ev: seen.append((ev.type, ev.kind, ev.object["metadata"]["name"])), kinds=["Pod"])
    s.create({"kind": "Node", "metadata": {"name": "n"}})
    p = s.create(_pod())
    s.update(evolve(p, "spec"))
    s.delete("Pod", "p")
    assert seen == [("ADDED", "Pod", "p"), ("MODIFIED", "Pod", "p"), ("DELETED", "Pod", "p")]
    assert [e.type for e in s.events_since(1)] == ["ADDED", "MODIFIED", "DELETED"]
    assert [e.resource_version for e in s.log] == [1, 2, 3, 4]


def test_list_is_sorted_and_filtered():
    s = Store()
    for ns, name in [("b", "x"), ("a", "z"), ("a", "y")]:
        s.create(_pod(name, namespace=ns))
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in s.list("Pod")] == [
        ("a", "y"), ("a", "z"), ("b", "x")]
    assert [p["metadata"]["name"] for p in s.list("Pod", "b")] == ["x"]


def test_copy_of_is_deep():
    a = {"x": [{"y": 1}]}
    b = copy_of(a)
    b["x"][0]["y"] = 2
    assert a["x"][0]["y"] == 1


def test_claim_generate_name_examples():
    assert names.claim_generate_name("pod-mem-ok", "gpu") == "pod-mem-ok-gpu-"
    long_pod, long_claim = "p" * 50, "c" * 30
    base = names.claim_generate_name(long_pod, long_claim)
    # both parts cut in proportion, no trailing hyphen
    assert base == "p" * (50 * 57 // 82) + "-" + "c" * (30 * 57 // 82)


@given(st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=63),
       st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=63))
def test_generated_claim_names_fit_in_a_dns_label(pod, claim):
    name = names.generated_name(random.Random(0), names.claim_generate_name(pod, claim))
    assert len(name) <= 63
    assert SUFFIX.match(name[-5:])


def test_pod_template_hash_is_stable_and_safe():
    h = names.pod_template_hash({"spec": {"containers": [{"name": "a"}]}})
    assert h == names.pod_template_hash({"spec": {"containers": [{"name": "a"}]}})
    assert h != names.pod_template_hash({"spec": {"containers": [{"name": "b"}]}})
    assert all(c in names.ALPHANUMS for c in h)
