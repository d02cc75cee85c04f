"""The one build step pyproject.toml cannot say: ship the cluster profiles inside the package.

The shipped cluster profiles live in the repository's top-level clusters/ folder (clusters/README.md),
where a learner or an instructor opens and copies them. An installed kit reads them from its package, as
labkit/model/clusters/*.yaml (labkit.model.profiles.PACKAGE_CLUSTERS): build_py copies them there into
the built package (the wheel, the JupyterLite site's wheel). An editable install builds nothing there:
it reads the top-level folder of the checkout, as a source checkout does.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

#: the repository's folder of cluster profiles, and where the built package has them
CLUSTERS = "clusters"
PACKAGE_CLUSTERS = ("labkit", "model", "clusters")


class BuildPyWithClusters(build_py):
    """build_py, plus clusters/*.yaml copied into the built package as labkit/model/clusters/."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # the package is the checkout itself: it reads clusters/ where it is
            return
        target = Path(self.build_lib, *PACKAGE_CLUSTERS)
        self.mkpath(str(target))
        for profile in sorted(Path(CLUSTERS).glob("*.yaml")):
            self.copy_file(str(profile), str(target / profile.name))


setup(cmdclass={"build_py": BuildPyWithClusters})
