"""labkit.cel"""
