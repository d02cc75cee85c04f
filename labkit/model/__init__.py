"""The cluster model every backend shares: cluster profiles (`profiles`, the shipped YAMLs in the
repository's top-level `clusters/`), object kinds (`kinds`), pod helpers (`podutil`) and saved state (`state`).

It sits below `labkit.sim` (the simulator builds on it, as the local and kind backends do) and
beside `labkit.allocator`; it imports only `labkit.cel`, `labkit.api` and `labkit.errors`.
"""
