"""Tests of one area: labkit.allocator: the allocator, its explanations and cache, `labkit allocate`, the Go oracle differential."""
