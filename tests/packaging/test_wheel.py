"""Run against the built wheel installed in a fresh venv (nox session ``package``), not the checkout:
a missing package-data file or a wrong package mapping fails here instead of for a user."""

import importlib
import importlib.util
import pathlib
import subprocess
import sysconfig

import gem_core


def test_imports_come_from_the_installed_wheel():
    site = pathlib.Path(sysconfig.get_paths()["purelib"]).resolve()
    assert site in pathlib.Path(gem_core.__file__).resolve().parents


def test_the_wheel_carries_the_apache_license_text():
    """pyproject declares Apache-2.0; the licence text itself must travel with every installed copy."""
    from importlib.metadata import distribution

    dist = distribution("gem")
    assert dist.metadata["License-Expression"] == "Apache-2.0"
    licence_files = [f for f in dist.files or () if f.name == "LICENSE"]
    assert licence_files, "no LICENSE file in the wheel's metadata"
    assert "Apache License" in licence_files[0].read_text() and "Version 2.0" in licence_files[0].read_text()


def test_adapters_folder_installs_as_gem_adapters():
    for framework in ("trl", "verl", "openrlhf", "oat", "rl2"):
        assert importlib.util.find_spec(f"gem_adapters.{framework}") is not None, framework


def test_shipped_data_files_are_installed():
    for env_id in gem_core.list_envs():
        env_spec = gem_core.spec(env_id)
        env = env_spec.make(**env_spec.sample_kwargs)
        obs, _ = env.reset(seed=0)
        assert obs


def test_console_script_is_installed():
    out = subprocess.run(["gem", "list", "game:Wordle*"], capture_output=True, text=True, check=True).stdout
    assert "game:Wordle-v0" in out


# --- the wheel against the source tree (issue 28.1) ------------------------------------------------------
# The checkout these tests live in: the package session runs them from the wheel's install, with this
# file's folder given by absolute path, so the source tree is two folders up.
SOURCE_ROOT = pathlib.Path(__file__).resolve().parents[2]
#: Source folder -> the import name it installs as.
SOURCE_PACKAGES = {"gem_core": "gem_core", "adapters": "gem_adapters", "gem": "gem"}
_NOT_SHIPPED = {"__pycache__"}


def _source_files(folder: pathlib.Path) -> list[pathlib.Path]:
    return sorted(
        p for p in folder.rglob("*")
        if p.is_file() and not _NOT_SHIPPED.intersection(p.relative_to(folder).parts) and p.suffix not in (".pyc", ".pyo")
    )


def _installed_root(import_name: str) -> pathlib.Path:
    return pathlib.Path(importlib.import_module(import_name).__file__).resolve().parent


def test_the_source_tree_is_found():
    for folder in SOURCE_PACKAGES:
        assert (SOURCE_ROOT / folder / "__init__.py").is_file(), f"expected the checkout at {SOURCE_ROOT}"


def test_every_source_package_is_a_package_of_the_installed_wheel():
    """Every folder with an ``__init__.py`` imports as a regular package from site-packages (a folder the
    wheel left out imports as an empty namespace package, or not at all), with all its modules."""
    site = pathlib.Path(sysconfig.get_paths()["purelib"]).resolve()
    for folder, import_name in SOURCE_PACKAGES.items():
        for init in sorted((SOURCE_ROOT / folder).rglob("__init__.py")):
            package_dir = init.parent.relative_to(SOURCE_ROOT / folder)
            dotted = ".".join((import_name, *package_dir.parts))
            package = importlib.import_module(dotted)
            assert package.__file__ is not None, f"{dotted} is a namespace package: the wheel lacks its __init__.py"
            installed = pathlib.Path(package.__file__).resolve().parent
            assert site in installed.parents, (dotted, installed)
            modules = {p.name for p in init.parent.glob("*.py")}
            assert modules <= {p.name for p in installed.glob("*.py")}, (dotted, modules - {p.name for p in installed.glob("*.py")})


def test_every_source_file_ships_in_the_wheel():
    """Modules, data files and the shipped ``.py`` files that are data (adapter files, terminal task
    fixtures): anything under gem_core/ or adapters/ missing from the install is a packaging bug."""
    missing = []
    for folder, import_name in SOURCE_PACKAGES.items():
        installed = _installed_root(import_name)
        for path in _source_files(SOURCE_ROOT / folder):
            relative = path.relative_to(SOURCE_ROOT / folder)
            if not (installed / relative).is_file():
                missing.append(f"{folder}/{relative}")
    assert not missing, f"{len(missing)} source files are not in the installed wheel: {missing[:20]}"


def test_vision_env_is_registered_and_makes_from_the_wheel():
    assert "vision:ChartQA-v0" in gem_core.list_envs()
    env = gem_core.make("vision:ChartQA-v0")
    obs, info = env.reset(seed=0)
    assert obs and info["images"]
