"""Package discovery, the one part of the build that pyproject.toml cannot say (everything else is there).

The folder ``adapters/`` installs as ``gem_adapters`` (the PyPI name ``adapters`` is another project's),
and setuptools' ``packages.find`` cannot rename what it finds. So the packages are found here, by the
same rule as ``find_namespace``: every folder under ``gem_core/``, ``adapters/`` and ``gem/`` (upstream GEM's
import name, a thin layer over the core) is a package, data folders included, and a new subpackage ships
without anyone listing it. tests/packaging checks the installed
wheel against the source tree.
"""

from setuptools import find_namespace_packages, setup

#: Source folder -> the import name it installs as.
PACKAGE_ROOTS = {"gem_core": "gem_core", "adapters": "gem_adapters", "gem": "gem"}


def _packages() -> list[str]:
    found = []
    for folder, name in PACKAGE_ROOTS.items():
        # Namespace discovery also lists the data folders (no __init__.py) as packages, so their files are
        # not "packages absent from the configuration" that setuptools warns it will stop shipping.
        for package in find_namespace_packages(include=[folder, f"{folder}.*"], exclude=["*.__pycache__"]):
            found.append(name + package[len(folder):])
    return found


setup(packages=_packages(), package_dir={name: folder for folder, name in PACKAGE_ROOTS.items()})
