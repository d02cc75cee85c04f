"""labkit.allocator"""
