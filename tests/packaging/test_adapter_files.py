"""Config files the adapters' READMEs tell users to use, reached from the installed wheel (nox session ``package``)."""

import pathlib
import subprocess
import sys
import sysconfig


def test_verl_agent_loop_yaml_is_printed_by_the_installed_package(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gem_adapters.verl.config"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "- name: gem_env" in done.stdout
    assert "_target_: gem_adapters.verl.agent_loop.GemAgentLoop" in done.stdout


def test_verl_agent_loop_yaml_is_a_file_inside_site_packages():
    from gem_adapters.verl.config import AGENT_LOOP_YAML

    path = pathlib.Path(str(AGENT_LOOP_YAML)).resolve()
    assert path.is_file()
    assert pathlib.Path(sysconfig.get_paths()["purelib"]).resolve() in path.parents


def test_every_shipped_file_is_listed_and_printed_from_the_installed_package(tmp_path):
    """OpenRLHF's agent file and RL2's env files are opened by path: a wheel must carry them as files."""
    from gem_adapters.files import SHIPPED_FILES, shipped_path

    purelib = pathlib.Path(sysconfig.get_paths()["purelib"]).resolve()
    listing = subprocess.run([sys.executable, "-m", "gem_adapters.files"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert listing.returncode == 0, listing.stderr[-2000:]
    for name in SHIPPED_FILES:
        path = shipped_path(name).resolve()
        assert path.is_file() and purelib in path.parents, path
        assert str(path) in listing.stdout
        printed = subprocess.run([sys.executable, "-m", "gem_adapters.files", name], capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert printed.returncode == 0, printed.stderr[-2000:]
        assert printed.stdout == path.read_text(encoding="utf-8")


def test_openrlhf_agent_file_from_the_wheel_defines_the_executor_openrlhf_loads(tmp_path):
    """OpenRLHF loads ``--train.agent_func_path`` with importlib and builds ``AgentExecutor()``; the
    package session has no OpenRLHF, so only the file's text is checked here (tests/adapters/openrlhf
    loads it for real)."""
    done = subprocess.run([sys.executable, "-m", "gem_adapters.files", "openrlhf-agent", "--path"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    text = pathlib.Path(done.stdout.strip()).read_text(encoding="utf-8")
    assert "class AgentExecutor(GemAgentExecutor)" in text


def test_unknown_shipped_file_is_one_clear_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gem_adapters.files", "nope"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "invalid choice: 'nope'" in done.stderr
