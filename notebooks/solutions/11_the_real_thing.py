"""11: the v1beta1 template in v1 shape (request fields under `exactly:`)."""

from labkit.course import checks

NOTEBOOK = "11_the_real_thing"
PROFILE = None
ANSWER = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: a100-pair}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: gpu.nvidia.com
          count: 2
          selectors:
          - cel:
              expression: device.attributes["gpu.nvidia.com"].productName.contains("A100")
"""


def check(cluster) -> bool:
    return checks.check_v1_migration(ANSWER)
