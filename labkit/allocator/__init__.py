"""labkit.allocator: kube-scheduler's structured allocator, result for result, with explanations.

    from labkit.allocator import Allocator, features_for
    outcome = Allocator(features_for("1.37"), classes, slices, allocated_claims).allocate(node, claims)
"""

from labkit.allocator.allocator import Allocator, Outcome, prepare_slices
from labkit.allocator.errors import AllocationError
from labkit.allocator.features import Features, features_for, select_variant
from labkit.allocator.state import AllocatedState

__all__ = ["Allocator", "AllocatedState", "AllocationError", "Features", "Outcome", "features_for",
           "prepare_slices", "select_variant"]
