"""05: infer-b names the same ResourceClaim as infer-a."""

from labkit.course import checks

NOTEBOOK = "05_sharing"
PROFILE = None
ANSWER = """
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
    resourceClaimName: inference-gpu
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: gpu
"""


def check(cluster) -> bool:
    return checks.check_shared_claim(ANSWER)
