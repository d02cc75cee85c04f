"""Tests of one area: real kind clusters (markers `kind`, `kind_faults`, `kind_standalone`), the container engine, least privilege and leaks."""
