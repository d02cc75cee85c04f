"""labkit.experiments: workload traces, placement policies, utilisation and fragmentation metrics.

    from labkit.experiments import generate, run_experiment
    res = run_experiment(generate(300, seed=0), "exp-small", ["whole-gpu", "shared", "dynamic-mig"])
    res.summary()      # table per policy
    res.plot()         # matplotlib figure
"""

from labkit.experiments.alibaba import SAMPLE as ALIBABA_SAMPLE
from labkit.experiments.alibaba import TraceError, load_alibaba
from labkit.experiments.policies import POLICIES, BasePolicy, Context, Policy, PolicyError, get_policy
from labkit.experiments.runner import ExperimentError, PolicyRun, Results, run_experiment, run_policy
from labkit.experiments.traces import TraceParams, WorkItem, describe, generate

__all__ = [
    "ALIBABA_SAMPLE", "POLICIES", "BasePolicy", "Context", "ExperimentError", "Policy", "PolicyError",
    "PolicyRun", "Results", "TraceError", "TraceParams", "WorkItem", "describe", "generate", "get_policy",
    "load_alibaba", "run_experiment", "run_policy",
]
