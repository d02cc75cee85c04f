"""07: one GPU and one NIC under one PCIe root on dgx-a100-0."""

from labkit.course import checks

NOTEBOOK = "07_topology"
PROFILE = None
ANSWER = """
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
    - requests: [gpu, nic]
      matchAttribute: resource.kubernetes.io/pcieRoot
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
"""


def check(cluster) -> bool:
    return checks.check_gpu_nic_aligned(ANSWER)
