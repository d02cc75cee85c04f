"""08: prefer an H100, else one T4."""

from labkit.course import checks

NOTEBOOK = "08_alternatives_and_policies"
PROFILE = None
ANSWER = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: h100-or-t4
spec:
  devices:
    requests:
    - name: accel
      firstAvailable:
      - name: h100
        deviceClassName: gpu.nvidia.com
        selectors:
        - cel:
            expression: device.attributes["gpu.nvidia.com"].productName.contains("H100")
      - name: t4
        deviceClassName: gpu.nvidia.com
        selectors:
        - cel:
            expression: device.attributes["gpu.nvidia.com"].productName == "Tesla T4"
---
apiVersion: v1
kind: Pod
metadata:
  name: fallback
spec:
  resourceClaims:
  - name: accel
    resourceClaimName: h100-or-t4
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: accel
"""


def check(cluster) -> bool:
    return checks.check_fallback_claim(ANSWER)
