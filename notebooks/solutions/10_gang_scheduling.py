"""10: eight A100s, so a gang of at most eight one-A100 workers."""

from labkit.course import checks

NOTEBOOK = "10_gang_scheduling"
PROFILE = "workshop"
ANSWER = 8


def check(cluster) -> bool:
    return checks.check_largest_gang(ANSWER, cluster)
