"""labkit.cluster"""
