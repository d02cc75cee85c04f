"""09: a real DeviceClass name, and compareTo instead of >=."""

from labkit.course import checks

NOTEBOOK = "09_why_is_my_pod_pending"
PROFILE = None
ANSWER = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: debug-me
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        selectors:
        - cel:
            expression: device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0
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
"""


def check(cluster) -> bool:
    return checks.check_fixed_debug_pod(ANSWER)
