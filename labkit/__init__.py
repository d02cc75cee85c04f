"""DRA LabKit: learn, teach and experiment with Kubernetes Dynamic Resource Allocation for GPUs."""

import sys

__version__ = "0.1.0"

if sys.platform == "emscripten":  # Pyodide (the course's browser site): the drawing library loads on import
    from labkit import browser

    browser.install()
