"""Annotations LabKit's own components write on live objects, read by every backend.

The local backend's node agent (labkit.cluster.backends.local.agent) stands in for the kubelet: it records
the CDI environment it gave a pod's containers on the pod, so that ``pod_env`` can answer on the
local backend and on any cluster attached through a kubeconfig that such an agent runs.
"""

from __future__ import annotations

#: the union of the env over the pod's containers (JSON object)
ENV_ANNOTATION = "labkit.dev/cdi-env"
#: the CDI device ids the agent injected (JSON)
DEVICES_ANNOTATION = "labkit.dev/cdi-devices"
#: each container's env: {container: env} (JSON)
CONTAINER_ENV_ANNOTATION = "labkit.dev/cdi-container-env"
