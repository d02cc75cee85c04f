"""04: one Tesla T4 by product name."""

from labkit.course import checks

NOTEBOOK = "04_claiming_by_attributes"
PROFILE = "workshop"
ANSWER = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: my-t4
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel:
              expression: device.attributes["gpu.nvidia.com"].productName == "Tesla T4"
"""


def check(cluster) -> bool:
    return checks.check_t4_template(ANSWER, cluster)
