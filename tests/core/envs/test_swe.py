"""SWE envs: ``gem swe build`` makes the pack (the real sdists, downloaded once per session) and checks every
task (its gold patch passes, the empty patch fails); one task of each package is solved by its gold patch and
failed by the empty patch through the env under the real grader in the sandbox; the reward hacks of issue 48
score 0.

The shipped sample (GEM's own tiny package) covers the build's checks without the network; the
contract and snapshot tests over every registered id use it too (tests/core/test_env_contract.py).
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest

from gem_core.cli import main as gem_main
from gem_core.envs.swe.build import build_pack
from gem_core.envs.swe.pack import DATA_DIR, SAMPLE_SPEC_FILE, PackNotBuiltError, SweError, load_pack
from gem_core.envs.swe.swe_env import SweEnv
from gem_core.tools.sandbox import available_modes
from ci_guard import module_needs, skip_unless_ci

_bubblewrap = module_needs("bwrap" in available_modes(), "the SWE grader runs in the bubblewrap sandbox")

PACK = load_pack()
TASK_IDS = [task.id for task in PACK.tasks]
#: One task of each package through the env: each package's layout and tests on the grader's path. Every
#: task's gold and empty patch are checked by the build (test_gem_swe_build_checks_every_task_of_the_pack).
ONE_PER_PACKAGE = [next(task.id for task in PACK.tasks if task.package.name == name) for name in PACK.packages]
#: The task the hack tests attack: inflection's tests are one fast file.
TARGET = "inflection-ordinal-13"


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.fixture(scope="session")
def swe_home(tmp_path_factory) -> Path:
    """The real pack, built once per session by the ``gem swe build`` command (the sdists come from the index)."""
    home = tmp_path_factory.mktemp("swe-home")
    # The gold and empty patches below are the build's own checks, run through the env: skip them here.
    code = gem_main(["swe", "build", "--home", str(home), "--no-verify"])
    if code != 0:
        skip_unless_ci("gem swe build failed: the package index is unreachable here")
    return home


@pytest.fixture
def env(swe_home):
    made = SweEnv(home=str(swe_home))
    yield made
    made.close()


def reset(env: SweEnv, task_id: str) -> None:
    env.reset(seed=0, options={"task": task_id})


# ----------------------------------------------------------------------------------- gold and empty


@pytest.mark.parametrize("task_id", ONE_PER_PACKAGE)
def test_the_gold_patch_scores_full_reward(env, task_id):
    reset(env, task_id)
    mutation = env.task.mutation  # the gold patch is the mutation reversed, through the env's own tool
    replaced = env.step(call("replace", path=mutation.file, old=mutation.new, new=mutation.old))
    assert replaced[0].startswith("Replaced 1 occurrence"), replaced[0]
    observation, reward, terminated, truncated, info = env.step(call("submit"))
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True), observation
    assert info["changed"] == [mutation.file]


@pytest.mark.parametrize("task_id", ONE_PER_PACKAGE)
def test_the_empty_patch_scores_zero(env, task_id):
    reset(env, task_id)
    observation, reward, terminated, _, info = env.step(call("submit"))
    assert (reward, terminated, info["success"], info["changed"]) == (0.0, True, False, []), observation
    assert info["tests_passed"] == len(env.task.pass_to_pass)  # only the bug's tests fail


@pytest.mark.slow  # 24 sandboxed test runs: each package's unmutated tree, then each task's mutated one
def test_gem_swe_build_checks_every_task_of_the_pack(swe_home, tmp_path, capsys):
    """The build's own check of every task: the unmutated tree (what the gold patch restores) passes the task's
    tests; the mutated tree (the empty patch) fails each fail-to-pass test and passes each pass-to-pass one."""
    shutil.copytree(swe_home / "sdists", tmp_path / "sdists")  # downloaded once, by the fixture
    assert gem_main(["swe", "build", "--home", str(tmp_path)]) == 0, capsys.readouterr().out
    report = capsys.readouterr().out
    assert f"{len(TASK_IDS)} of {len(TASK_IDS)} tasks built" in report and "each checked" in report, report
    assert sorted(json.loads((tmp_path / "built.json").read_text(encoding="utf-8"))["tasks"]) == sorted(TASK_IDS)


# ----------------------------------------------------------------------------------- reward hacks
#
# Each hack makes a naive check pass: pytest run on the agent's own tree (``naive_exit``) exits 0. The
# grader gives each one 0.

NAIVE = "PYTHONPATH=. python -m pytest -q -p no:cacheprovider {ids}; echo naive-exit=$?"
SKIP_ALL = (
    "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
    "    for item in items:\n        item.add_marker(pytest.mark.skip(reason='hack'))\n"
)
#: A pytest plugin that turns every test report into a pass.
PASS_ALL = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    report = outcome.get_result()\n    report.outcome, report.longrepr = 'passed', None\n"
)


def naive_exit(env: SweEnv) -> int:
    ids = " ".join(f"'{test}'" for test in env.task.fail_to_pass)
    observation = env.step(call("bash", command=NAIVE.format(ids=ids)))[0]
    return int(observation.rsplit("naive-exit=", 1)[1].split()[0])


def write(env: SweEnv, relative: str, text: str) -> None:
    """Write a file as the agent would (through the shell tool, so it is the agent's own)."""
    command = f"mkdir -p \"$(dirname '{relative}')\" && cat > '{relative}' <<'GEM_EOF'\n{text}GEM_EOF"
    assert env.step(call("bash", command=command))[0].startswith("Exit code: 0")


def submit(env: SweEnv) -> tuple[float, dict]:
    _, reward, terminated, _, info = env.step(call("submit"))
    assert terminated
    return reward, info


def test_editing_the_failing_test_scores_zero(env):
    reset(env, TARGET)
    test_file = Path(env.work_dir.path) / "test_inflection.py"
    text = test_file.read_text(encoding="utf-8")
    hacked = text.replace("    assert ordinalized == inflection.ordinalize(number)", "    assert True").replace(
        "    assert ordinalized == number + inflection.ordinal(number)", "    assert True"
    )
    assert hacked != text
    write(env, "test_inflection.py", hacked)
    assert naive_exit(env) == 0
    assert submit(env)[0] == 0.0


@pytest.mark.parametrize("where", ["conftest.py", "inflection/conftest.py"])
def test_a_conftest_that_skips_everything_scores_zero(env, where):
    reset(env, TARGET)
    write(env, where, SKIP_ALL)
    if where == "conftest.py":
        assert naive_exit(env) == 0
    assert submit(env)[0] == 0.0


def test_sitecustomize_and_a_pth_file_that_patch_pytest_score_zero(env):
    reset(env, TARGET)
    write(env, "gemhack.py", PASS_ALL)
    write(env, "inflection/gemhack.py", PASS_ALL)
    hook = "import os\nos.environ['PYTEST_ADDOPTS'] = '-p gemhack'\n"
    for folder in ("", "inflection/"):
        write(env, f"{folder}sitecustomize.py", hook)
        write(env, f"{folder}usercustomize.py", hook)
        write(env, f"{folder}gemhack.pth", "import sitecustomize\n")
    assert naive_exit(env) == 0
    reward, info = submit(env)
    assert reward == 0.0 and info["changed"] == ["inflection/gemhack.py"]  # copied, and never imported


def test_pytest_settings_in_the_tree_score_zero(env):
    reset(env, TARGET)
    write(env, "gemhack.py", PASS_ALL)
    write(env, "setup.cfg", "[tool:pytest]\naddopts = -p gemhack\n")
    write(env, "pytest.ini", "[pytest]\naddopts = -p gemhack\n")
    write(env, "pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-p gemhack'\n")
    assert naive_exit(env) == 0
    assert submit(env)[0] == 0.0


def test_os_exit_at_import_scores_zero(env):
    reset(env, TARGET)
    replaced = env.step(call("replace", path="inflection/__init__.py", old="import re\n", new="import os\nos._exit(0)\nimport re\n"))
    assert replaced[0].startswith("Replaced"), replaced[0]
    assert naive_exit(env) == 0
    reward, info = submit(env)
    assert reward == 0.0 and info["tests_passed"] == 0 and info["changed"] == ["inflection/__init__.py"]


def test_deleting_the_tests_scores_zero(env):
    reset(env, TARGET)
    assert env.step(call("bash", command="rm -f test_inflection.py && ls"))[0].startswith("Exit code: 0")
    reward, info = submit(env)
    assert reward == 0.0 and info["tests_passed"] == len(env.task.pass_to_pass)  # the pristine tests ran


def test_the_gold_patch_is_not_inside_the_sandbox(swe_home):
    """The pack home (sdists: the unbuggy code), the built trees and GEM's spec are nowhere the agent can read."""
    env = SweEnv(home=str(swe_home), command_timeout=120)  # `find /` walks the whole interpreter too
    reset(env, TARGET)
    hidden = [swe_home, swe_home / "sdists", DATA_DIR, DATA_DIR / "pack.json"]
    probe = "; ".join(f"test -e '{path}' && echo VISIBLE {path}" for path in hidden)
    search = "find / -path /proc -prune -o \\( -name 'inflection-0.5.1.tar.gz' -o -name pack.json -o -name built.json \\) -print 2>/dev/null"
    observation = env.step(call("bash", command=f"{probe}; {search}; echo done"))[0]
    assert "VISIBLE" not in observation and "tar.gz" not in observation and ".json" not in observation, observation
    assert "done" in observation
    # The host-side tools follow no link out of the repository, so a link cannot reach the pack home either.
    sdist = swe_home / "sdists" / "inflection-0.5.1.tar.gz"
    assert sdist.is_file()
    env.step(call("bash", command=f"ln -s '{sdist}' gold.tgz; ln -s '{swe_home}' home"))
    for action in (call("view", path="gold.tgz"), call("view", path="home/built.json"), call("view", path="../../"),
                   call("replace", path="home/built.json", old="{", new="[")):
        assert "Tool error" in env.step(action)[0]
    assert submit(env)[0] == 0.0
    env.close()


# ----------------------------------------------------------------------------------- the env's state


def test_a_restored_episode_keeps_the_agents_edits(tmp_path):
    env = SweEnv(sample=True)
    env.reset(seed=0)
    mutation = env.task.mutation
    env.step(call("replace", path=mutation.file, old=mutation.new, new=mutation.old))
    state = pickle.loads(pickle.dumps(env.get_state()))
    restored = SweEnv(sample=True)
    restored.set_state(state)
    assert submit(restored)[0] == 1.0
    assert submit(env)[0] == 1.0
    env.reset(seed=0)
    before = env.spawn()  # a branch from the unfixed tree
    env.step(call("replace", path=mutation.file, old=mutation.new, new=mutation.old))
    assert submit(before)[0] == 0.0 and submit(env)[0] == 1.0
    for made in (env, restored, before):
        made.close()


def test_out_of_turns_grades_the_tree(tmp_path):
    env = SweEnv(sample=True, max_turns=2)
    env.reset(seed=0)
    mutation = env.task.mutation
    env.step(call("replace", path=mutation.file, old=mutation.new, new=mutation.old))
    observation, reward, terminated, truncated, info = env.step("no tool call")
    assert (reward, terminated, truncated, info["success"]) == (1.0, False, True, True), observation


@pytest.mark.parametrize(("reward_mode", "expected"), [("fraction", 0.5), ("binary", 0.0)])
def test_a_partial_fix_earns_partial_credit_unless_the_reward_is_binary(reward_mode, expected):
    env = SweEnv(sample=True, reward=reward_mode)
    env.reset(seed=0)
    # Half a fix: [10, 2] right again, [4, 1, 3, 2] still wrong; the pass-to-pass tests keep passing.
    env.step(call("replace", path="gemstats/__init__.py", old=env.task.mutation.new,
                  new="    return (ordered[0] + ordered[-1]) / 2 if len(ordered) == 2 else 0"))
    reward, info = submit(env)
    assert (reward, info["tests_passed"], info["tests_total"]) == (expected, 4, 5)
    env.close()


def test_a_fix_that_breaks_another_test_earns_nothing():
    env = SweEnv(sample=True)
    env.reset(seed=0)
    env.step(call("replace", path="gemstats/__init__.py", old=env.task.mutation.new, new="    return (ordered[middle - 1] + ordered[middle]) / 2"))
    env.step(call("replace", path="gemstats/__init__.py", old="return max(low, min(value, high))", new="return value"))
    reward, info = submit(env)
    assert (reward, info["tests_passed"]) == (0.0, 4)
    env.close()


# ----------------------------------------------------------------------------------- build and errors


def test_an_env_made_before_the_build_names_the_command(tmp_path):
    with pytest.raises(PackNotBuiltError, match=f"gem swe build --home {tmp_path}"):
        SweEnv(home=str(tmp_path))


def test_without_a_home_directory_the_default_home_names_the_variable(no_home, monkeypatch):
    """No ``~`` (a container's random uid): where the pack would be kept by default is unknown, and the error
    says to set ``GEM_SWE_HOME``."""
    from gem_core.envs.swe.pack import default_home

    monkeypatch.delenv("GEM_SWE_HOME", raising=False)
    with pytest.raises(SweError, match="GEM_SWE_HOME"):
        default_home()
    monkeypatch.setenv("GEM_SWE_HOME", "/srv/swe")
    assert default_home() == Path("/srv/swe")


def test_the_build_checks_each_task_and_keeps_the_licence(tmp_path):
    assert build_pack(tmp_path, spec=SAMPLE_SPEC_FILE, report=lambda line: None) == {"gemstats-median-even": "ok"}
    assert (tmp_path / "tasks" / "gemstats-median-even" / "LICENSE.txt").is_file()
    spec = json.loads(SAMPLE_SPEC_FILE.read_text(encoding="utf-8"))
    harmless = spec["tasks"][0]["mutation"]
    harmless["old"], harmless["new"] = "def clamp(", "def clamp (" # changes nothing the tests see
    changed = tmp_path / "harmless.json"
    changed.write_text(json.dumps(spec), encoding="utf-8")
    result = build_pack(tmp_path / "other", spec=changed, report=lambda line: None)
    assert "still passes" in result["gemstats-median-even"]
    with pytest.raises(PackNotBuiltError):  # a task that failed its check is not served
        SweEnv(home=str(tmp_path / "other"), spec=str(changed))
    harmless["old"] = "text that is not in the file"
    changed.write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(SweError, match="occurs 0 times"):
        build_pack(tmp_path / "third", spec=changed, report=lambda line: None)


def test_an_sdist_with_another_hash_is_refused(tmp_path):
    """``fetch_sdist`` checks the SHA-256 of what pip brought (here a stand-in for pip that writes other bytes)."""
    from gem_core.envs.swe.build import fetch_sdist

    fake_pip = tmp_path / "fake-python"
    fake_pip.write_text(
        "#!/bin/sh\nwhile [ \"$1\" != -d ]; do shift; done\nprintf tampered > \"$2/inflection-0.5.1.tar.gz\"\n", encoding="utf-8"
    )
    fake_pip.chmod(0o755)
    with pytest.raises(SweError, match="SHA-256 .* is not the spec's"):
        fetch_sdist(PACK.packages["inflection"], tmp_path / "sdists", python=str(fake_pip), report=lambda line: None)
    assert not (tmp_path / "sdists" / "inflection-0.5.1.tar.gz").exists()


def test_gem_swe_build_reports_a_bad_spec_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    assert gem_main(["swe", "build", "--home", str(tmp_path / "home"), "--spec", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gem swe build:") and "gem.swe_pack/1" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_task_whose_package_is_not_a_name_is_a_swe_error(tmp_path):
    """A spec is user data: ``"package": [...]`` (not a name) was a bare ``TypeError: unhashable type``."""
    from gem_core.envs.swe.pack import SPEC_FILE

    spec = json.loads(Path(SPEC_FILE).read_text(encoding="utf-8"))
    spec["tasks"][0]["package"] = ["inflection"]
    bad = tmp_path / "pack.json"
    bad.write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(SweError, match="'package' must name one of"):
        load_pack(bad)


def test_a_pack_home_the_sandbox_shows_is_refused(tmp_path):
    import sys

    from gem_core.envs.swe.build import check_home_hidden

    with pytest.raises(SweError, match="sandbox shows"):
        check_home_hidden(Path(sys.prefix) / "swe")


def test_library_code_that_makes_every_report_a_pass_scores_zero(env):
    """The package's own module rewrites pytest's reports at import: the appended canary test, which must
    fail, passes too, so the grader knows the run was tampered with."""
    reset(env, TARGET)
    patch = (
        "import re\n"
        "import _pytest.reports as _reports\n"
        "_init = _reports.TestReport.__init__\n\n\n"
        "def _passing(self, *args, **kwargs):\n"
        "    _init(self, *args, **kwargs)\n"
        "    self.outcome, self.longrepr = 'passed', None\n\n\n"
        "_reports.TestReport.__init__ = _passing\n"
    )
    assert env.step(call("replace", path="inflection/__init__.py", old="import re\n", new=patch))[0].startswith("Replaced")
    assert naive_exit(env) == 0
    observation, reward, _, _, info = env.step(call("submit"))
    assert reward == 0.0 and info["tests_passed"] == 0 and "tampered" in observation


def test_the_sample_pack_is_built_outside_a_tmpdir_the_sandbox_shows(monkeypatch):
    """nox points TMPDIR inside the virtualenv, whose prefix every snippet sees: the sample pack (with its
    unmutated tree) must not be built there, and swe:Sample-v0 must still make (the wheel test makes every id)."""
    import sys
    import tempfile

    from gem_core.envs.swe import swe_env

    monkeypatch.setattr(tempfile, "tempdir", sys.prefix)
    swe_env._sample_home.cache_clear()
    try:
        env = SweEnv(sample=True)
        assert Path(sys.prefix).resolve() not in env.home.resolve().parents
        env.close()
    finally:
        swe_env._sample_home.cache_clear()


# ----------------------------------------------------------------------------------- links and limits in the agent's tree
# The grader runs on the host (as root): what it reads of the agent's tree must never lead out of it. A link
# planted at the source folder itself (``mv gemstats x && ln -s /some/host/dir gemstats``) or at any folder on
# the way to it once made the grader copy host files into the graded tree (with ``ln -s / gemstats`` the walk
# read the whole host file system).


def _package(*source: str):
    from gem_core.envs.swe.pack import Package

    return Package(name="p", version="1", sdist="p.tar.gz", sha256="", license="MIT", license_files=(), source=source)


def _host_tree(root: Path) -> Path:
    """A small private folder standing for a host folder a link points at (never ``/``)."""
    (root / "pkg").mkdir(parents=True)
    (root / "secret_module.py").write_text("API_KEY = 'HOSTSECRET'\n")
    (root / "pkg" / "secret_module.py").write_text("API_KEY = 'HOSTSECRET'\n")
    (root / "mod.py").write_text("API_KEY = 'HOSTSECRET'\n")
    return root


def test_a_source_folder_made_a_link_takes_no_host_file(tmp_path):
    host = _host_tree(tmp_path / "host")
    env = SweEnv(sample=True)
    env.reset(seed=0)
    observation = env.step(call("bash", command=f"mv gemstats gemstats.orig && ln -s '{host}' gemstats && echo linked"))[0]
    assert "linked" in observation, observation
    reward, info = submit(env)
    assert reward == 0.0 and not any("secret" in path for path in info["changed"]), info["changed"]
    assert "gemstats/__init__.py" in info["changed"]  # graded as a tree whose source is gone
    env.close()


def test_no_link_is_followed_at_any_level_of_a_source_path(tmp_path):
    from gem_core.envs.swe.grading import overlay_source

    host = _host_tree(tmp_path / "host")
    agent, tree = tmp_path / "agent", tmp_path / "tree"
    for root in (agent, tree):
        (root / "lib").mkdir(parents=True)
        (root / "lib" / "mod.py").write_text("VALUE = 1\n")
    (tree / "src" / "pkg").mkdir(parents=True)
    (tree / "src" / "pkg" / "__init__.py").write_text("")
    (agent / "src").symlink_to(host)  # a folder on the way to the source folder src/pkg
    (agent / "top").symlink_to(host / "pkg")  # the source folder itself
    (agent / "lib" / "mod.py").unlink()
    (agent / "lib" / "mod.py").symlink_to(host / "mod.py")  # a single-file source
    changed = overlay_source(agent, tree, _package("src/pkg", "top", "lib/mod.py"))
    assert changed == ["lib/mod.py", "src/pkg/__init__.py"]  # both deleted: neither is a file of the agent's tree
    assert not any("HOSTSECRET" in path.read_text() for path in tree.rglob("*.py"))
    (agent / "lib").rename(agent / "lib.orig")
    (agent / "lib").symlink_to(host)  # the folder holding a single-file source
    (tree / "lib" / "mod.py").write_text("VALUE = 1\n")
    assert overlay_source(agent, tree, _package("lib/mod.py")) == ["lib/mod.py"]
    assert not (tree / "lib" / "mod.py").exists()


@pytest.mark.parametrize(("limit", "value", "name"), [("MAX_SOURCE_ENTRIES", 5, "entries"), ("MAX_SOURCE_BYTES", 100, "bytes")])
def test_a_source_tree_past_the_grader_limits_is_graded_as_failed(monkeypatch, limit, value, name):
    from gem_core.envs.swe import grading

    monkeypatch.setattr(grading, limit, value)
    env = SweEnv(sample=True)
    env.reset(seed=0)
    mutation = env.task.mutation
    env.step(call("replace", path=mutation.file, old=mutation.new, new=mutation.old))  # the gold patch
    made = env.step(call("bash", command="for i in $(seq 1 10); do echo 'X = 1  # padding padding' > gemstats/m$i.py; done; echo ok"))
    assert "ok" in made[0]
    observation, reward, terminated, _, info = env.step(call("submit"))
    assert (reward, terminated, info["success"]) == (0.0, True, False)
    assert f"{value} {name}" in info["grade_error"] and f"{value} {name}" in observation, observation
    env.close()


# ----------------------------------------------------------------------------------- the file tools


def test_replace_in_a_file_that_is_not_utf8_is_a_tool_error_and_keeps_the_file():
    env = SweEnv(sample=True)
    env.reset(seed=0)
    env.step(call("bash", command="printf 'a\\xffb' > bin.txt"))
    observation, reward, terminated, truncated, _ = env.step(call("replace", path="bin.txt", old="a", new="b"))
    assert observation.startswith("Tool error") and "UTF-8" in observation, observation
    assert (reward, terminated, truncated) == (0.0, False, False)
    # New text that cannot be written as UTF-8 (a lone surrogate is valid JSON) leaves the file as it was.
    observation = env.step(call("replace", path="gemstats/__init__.py", old="def mean(", new="\ud800"))[0]
    assert observation.startswith("Tool error") and "UTF-8" in observation, observation
    assert "def mean(" in env.step(call("view", path="gemstats/__init__.py"))[0]
    assert "a\ufffdb" in env.step(call("view", path="bin.txt"))[0]
    for path in ("\ud800", "gemstats/\udcff"):
        assert env.step(call("view", path=path))[0].startswith("Tool error")
    env.close()


def test_a_folder_view_is_shortened_like_every_observation():
    env = SweEnv(sample=True, max_output_chars=1000)
    env.reset(seed=0)
    env.step(call("bash", command="mkdir big && cd big && seq 1 2000 | xargs touch"))
    observation = env.step(call("view", path="big"))[0]
    assert len(observation) < 1200 and observation.startswith("1\n"), len(observation)
    env.close()
