"""06: 3g.40gb + 1g.10gb on one physical GPU of the dynamic-MIG node."""

from labkit.course import checks

NOTEBOOK = "06_mig"
PROFILE = None
ANSWER = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: mig-pair
spec:
  spec:
    devices:
      requests:
      - name: big
        exactly:
          deviceClassName: mig.nvidia.com
          selectors:
          - cel:
              expression: device.attributes["gpu.nvidia.com"].profile == "3g.40gb"
      - name: small
        exactly:
          deviceClassName: mig.nvidia.com
          selectors:
          - cel:
              expression: device.attributes["gpu.nvidia.com"].profile == "1g.10gb"
      constraints:
      - matchAttribute: gpu.nvidia.com/parentUUID
---
apiVersion: v1
kind: Pod
metadata:
  name: mig-worker
spec:
  nodeSelector:
    kubernetes.io/hostname: a100-dynamic-0
  resourceClaims:
  - name: mig
    resourceClaimTemplateName: mig-pair
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: mig
"""


def check(cluster) -> bool:
    return checks.check_mig_pair(ANSWER)
