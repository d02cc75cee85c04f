"""Tests of one area: the course: lessons' sources and checks, notebooks run, the real-browser JupyterLab tests (marker `browser`)."""
