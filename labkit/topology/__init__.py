"""labkit.topology"""
