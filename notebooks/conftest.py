"""nbval runs of the notebooks: stop each notebook's kernel the way JupyterLab does (a shutdown
request, then wait for it to exit) instead of nbval's immediate SIGKILL. No notebook ends with
`cluster.down()` (so that the exercises and widgets still work after Run All); on the `local` backend
the kernel's exit hook stops the control plane, and a killed kernel would leave it running."""

from __future__ import annotations


def pytest_configure(config) -> None:  # noqa: ANN001 - pytest hook
    try:
        from nbval.kernel import RunningKernel
    except ImportError:
        return

    def stop(self) -> None:  # noqa: ANN001
        self.kc.stop_channels()
        self.km.shutdown_wait_time = 120  # local: down() stops a control plane and three plugins
        self.km.shutdown_kernel(now=False)
        del self.km

    RunningKernel.stop = stop
