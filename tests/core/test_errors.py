"""gem_core/errors.py: every error GEM raises on purpose derives from one base, :class:`GemError`, and
keeps the built-in base callers already catch; every adapter's framework-version error derives from
:class:`FrameworkVersionError` (a :class:`DependencyNotInstalled`)."""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import pytest

from gem_core.errors import DependencyNotInstalled, GemError

ROOT = Path(__file__).resolve().parents[2]
#: Warnings are not errors: they are reported through ``warnings`` and never raised at a user, so they keep
#: the built-in warning class a ``-W``/``filterwarnings`` rule names.
BUILTIN_EXCEPTIONS = {
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException) and not issubclass(value, Warning)
}
#: Exceptions that are not errors: control flow inside one module, and a stop by signal (a
#: KeyboardInterrupt, which ``except Exception`` must not catch, so it cannot derive from GemError).
NOT_ERRORS = {"CallTimedOut", "_MalformedStep", "_LoopStopped", "Interrupted"}


def _exception_classes() -> dict[str, list[str]]:
    """Class name -> base names of every class in gem_core/ and adapters/ that derives from an exception."""
    classes: dict[str, list[str]] = {}
    for folder in ("gem_core", "adapters"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    classes[node.name] = [base.id if isinstance(base, ast.Name) else ast.unparse(base) for base in node.bases]
    derives = {name for name, bases in classes.items() if any(b in BUILTIN_EXCEPTIONS for b in bases)}
    grew = True
    while grew:
        before = len(derives)
        derives |= {name for name, bases in classes.items() if any(b in derives for b in bases)}
        grew = len(derives) > before
    return {name: classes[name] for name in derives}


def test_every_error_class_derives_from_the_package_base():
    classes = _exception_classes()
    assert len(classes) >= 20  # the scan sees the errors (a broken scan would pass vacuously)
    reaches_base = {"GemError", "DependencyNotInstalled"}
    grew = True
    while grew:
        before = len(reaches_base)
        reaches_base |= {name for name, bases in classes.items() if any(b in reaches_base for b in bases)}
        grew = len(reaches_base) > before
    assert sorted(set(classes) - reaches_base - NOT_ERRORS) == []


@pytest.mark.parametrize(
    "module, name, kept",
    [
        ("gem_core.rows.label", "LabelError", ValueError),
        ("gem_core.registry", "UnknownEnvError", KeyError),
        ("gem_core.serve.remote", "RemoteEnvError", ConnectionError),
        ("gem_core.eval.episode_log", "ReportWriteError", OSError),
        ("gem_core.tools.sandbox.config", "SandboxUnavailableError", RuntimeError),
        ("gem_core.transport.http_limits", "ResponseTooLarge", ValueError),
    ],
)
def test_errors_keep_the_builtin_base_callers_catch(module, name, kept):
    error = getattr(importlib.import_module(module), name)
    assert issubclass(error, GemError) and issubclass(error, kept)


def test_a_missing_dependency_is_an_import_error_and_a_gem_error():
    assert issubclass(DependencyNotInstalled, ImportError) and issubclass(DependencyNotInstalled, GemError)


@pytest.mark.parametrize(
    "adapter, error, check",
    [
        ("gem_adapters.trl", "TRLVersionError", "check_trl_version"),
        ("gem_adapters.verl", "VerlVersionError", "check_verl_version"),
        ("gem_adapters.openrlhf", "OpenRLHFVersionError", "check_openrlhf_version"),
        ("gem_adapters.oat", "OatVersionError", "check_oat_version"),
        ("gem_adapters.rl2", "RL2VersionError", "check_rl2_api"),
    ],
)
def test_every_adapter_has_a_version_check_with_the_one_base_error(adapter, error, check):
    from gem_adapters.framework_version import FrameworkVersionError

    package = importlib.import_module(adapter)
    assert error in package.__all__
    if adapter == "gem_adapters.openrlhf":  # its module checks at import, so the check is read from the source
        assert f"def {check}(" in (ROOT / "adapters/openrlhf/agent.py").read_text()
    else:
        assert callable(getattr(package, check))
    if adapter != "gem_adapters.openrlhf":
        assert issubclass(getattr(package, error), FrameworkVersionError)
    else:
        source = (ROOT / "adapters/openrlhf/agent.py").read_text()
        assert "class OpenRLHFVersionError(FrameworkVersionError):" in source


def test_a_missing_framework_is_refused_with_the_install_line():
    from gem_adapters.framework_version import FrameworkVersionError, require_version
    from packaging.specifiers import SpecifierSet

    class NoSuchVersionError(FrameworkVersionError):
        pass

    with pytest.raises(NoSuchVersionError, match=r"gem-no-such-framework is not installed\. pip install it"):
        require_version("gem-no-such-framework", SpecifierSet(">=1"), NoSuchVersionError, adapter="a", feature="f", hint="pip install it")


@pytest.mark.parametrize("module, name, error", [
    ("gem_adapters.trl", "SUPPORTED_TRL", "TRLVersionError"),
    ("gem_adapters.verl", "SUPPORTED_VERL", "VerlVersionError"),
])
def test_an_adapters_supported_versions_refuse_a_missing_framework_with_its_own_error_and_extra(module, name, error, monkeypatch):
    import dataclasses

    from gem_adapters.framework_version import SupportedVersions

    from gem_adapters import framework_version

    versions = getattr(framework_version, name)
    assert isinstance(versions, SupportedVersions)
    missing = dataclasses.replace(versions, distribution="gem-no-such-framework")
    with pytest.raises(getattr(importlib.import_module(module), error), match=rf'not installed\. .*pip install -e "\.\[{versions.extra}\]"'):
        missing.check()
