"""03: whole GPUs with at least 40Gi; testing the driver first keeps the NICs from erroring."""

from labkit.course import checks

NOTEBOOK = "03_deviceclasses_and_cel"
PROFILE = "workshop"
ANSWER = ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu' && "
          "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0")


def check(cluster) -> bool:
    return checks.check_big_gpu_selector(ANSWER, cluster)
