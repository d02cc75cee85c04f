"""labkit.widgets"""
