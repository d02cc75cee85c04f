"""00: the workshop cluster publishes 8 A100 + 2 x 4 T4 whole GPUs."""

from labkit.course import checks

NOTEBOOK = "00_setup_and_backends"
PROFILE = "workshop"
ANSWER = 16


def check(cluster) -> bool:
    return checks.check_gpu_count(ANSWER, cluster)
