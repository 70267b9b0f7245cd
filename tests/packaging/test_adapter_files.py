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
