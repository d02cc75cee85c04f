"""labkit.experiments"""
