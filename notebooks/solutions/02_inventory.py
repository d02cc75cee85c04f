"""02: gpu-5 of a DGX A100 sits under pci0000:80 with nic-4 and nic-5."""

from labkit.course import checks

NOTEBOOK = "02_inventory"
PROFILE = None
ANSWER = ["nic-4", "nic-5"]


def check(cluster) -> bool:
    return checks.check_nics_near_gpu(ANSWER)
