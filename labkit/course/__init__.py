"""The course's helpers: exercise checkers (`labkit.course.checks`) and small display helpers
(`labkit.course.show`, `labkit.course.env`) the notebooks in notebooks/ call."""

from labkit.course import checks
from labkit.course.env import backend_table, environment_table
from labkit.course.show import device_table, placement_lines, pod_lines, show_env

__all__ = ["backend_table", "checks", "device_table", "environment_table", "placement_lines", "pod_lines",
           "show_env"]
