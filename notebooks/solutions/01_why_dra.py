"""01: the DRA form of `nvidia.com/gpu: 2`."""

from labkit.course import checks

NOTEBOOK = "01_why_dra"
PROFILE = None
ANSWER = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: two-gpus
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: gpu.nvidia.com
          count: 2
"""


def check(cluster) -> bool:
    return checks.check_two_gpu_template(ANSWER)
