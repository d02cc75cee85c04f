"""Tests of one area: the course with nothing installed: the JupyterLite site (marker `site`), Pyodide, the pure-Python path."""
