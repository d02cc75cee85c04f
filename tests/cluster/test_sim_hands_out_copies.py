"""What the sim backend hands a caller is the caller's, as an API server's answer is: changing an
object got from get/list/apply/watch changes nothing stored (a learner's notebook edits a pod it
listed, then lists again). The real backends get fresh JSON each time (kubectl, client-go)."""

from __future__ import annotations

import copy

import pytest

from labkit.cluster import connect

CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": "one-gpu", "namespace": "default"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}


@pytest.fixture
def cluster():
    c = connect("sim")
    c.apply(copy.deepcopy(CLAIM))
    return c


def _scribble(obj: dict) -> None:
    obj["metadata"]["labels"] = {"scribbled": "yes"}
    obj["spec"] = {"scribbled": True}


@pytest.mark.parametrize("kind,name,namespace", [("ResourceClaim", "one-gpu", "default"),
                                                 ("DeviceClass", "gpu.nvidia.com", None),
                                                 ("Node", "dgx-a100-0", None),
                                                 ("Namespace", "default", None)])
def test_an_object_from_get_or_list_is_the_callers(cluster, kind: str, name: str, namespace: str | None) -> None:
    before = cluster.get(kind, name, namespace)
    _scribble(cluster.get(kind, name, namespace))
    for listed in cluster.list(kind, namespace):
        _scribble(listed)
    after = cluster.get(kind, name, namespace)
    assert after == before
    assert "scribbled" not in str(after)


def test_what_apply_returns_is_the_callers(cluster) -> None:
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t", "namespace": "default"}, "spec": {"spec": copy.deepcopy(CLAIM["spec"])}}
    [stored] = cluster.apply(template)
    before = cluster.get("ResourceClaimTemplate", "t")
    _scribble(stored)
    assert cluster.get("ResourceClaimTemplate", "t") == before


def test_what_watch_sends_is_the_callers(cluster) -> None:
    before = cluster.get("ResourceClaim", "one-gpu")
    for _, obj in cluster.watch("ResourceClaim", "default", timeout=0):
        _scribble(obj)
    assert cluster.get("ResourceClaim", "one-gpu") == before
