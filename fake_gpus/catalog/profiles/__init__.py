"""Packaged node profiles (YAML data; a package so that wheels ship the files)."""
