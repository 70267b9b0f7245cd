"""Test sessions: the core in one environment, each framework adapter in its own.

The frameworks pin versions that cannot share one environment (verl: transformers<5.11; OpenRLHF:
transformers==5.15.0; oat-llm: Python<3.11), so each adapter suite gets a virtualenv built with pip
(uv would not see this machine's local CPU torch and would download a CUDA build).
Run everything with ``nox``; one session with ``nox -s trl``.
"""

from __future__ import annotations

import os
import shutil

import nox
import nox.virtualenv
import packaging.version

nox.options.default_venv_backend = "venv"
# No session uses uv; telling nox so (its module reads these before probing) drops its "uv binary not
# found" line from every run.
nox.virtualenv.HAS_UV, nox.virtualenv.UV, nox.virtualenv.UV_VERSION = False, "uv", packaging.version.Version("0")
nox.options.error_on_missing_interpreters = True

CONSTRAINTS = ("-c", "constraints-cpu.txt")
#: Everything the core environment runs: tests/test_nox_sessions.py checks that every test file is in some session.
CORE_TESTS = ("tests/core", "tests/rollout", "tests/rows", "tests/curriculum", "tests/gem_compat", "tests/test_ci_guard.py",
              "tests/test_nox_sessions.py", "tests/adapters/test_make_dataset_shape.py")
#: ``--durations=15``: each session's log names its slowest tests, so a CI log says where the suite's time goes.
PYTEST = ("pytest", "-q", "-p", "no:cacheprovider", "--durations=15")


def _upgrade_pip(session: nox.Session) -> None:
    # The stdlib venv's pip (23.x) backtracks for many minutes over verl's dependency tree; a current
    # pip resolves it in seconds.
    session.install("-U", "pip")


def _install(session: nox.Session, *requirements: str) -> None:
    _upgrade_pip(session)
    # torch first, from the pinned CPU build, so no later resolution can swap it for a CUDA wheel.
    session.install(*CONSTRAINTS, "torch==2.13.0")
    session.install(*CONSTRAINTS, *requirements)


@nox.session
def core(session: nox.Session) -> None:
    """gem_core: envs, registry, wrappers, vector env, tools, rollout, eval."""
    _install(session, "-e", ".[rollout,eval,search,serve,openenv,mcp,math,code,qa,rg,vision,dev]")
    session.run(*PYTEST, *CORE_TESTS, *session.posargs)


@nox.session
def package(session: nox.Session) -> None:
    """Build the wheel and test it installed the way users install it (not editable)."""
    _upgrade_pip(session)
    dist = os.path.abspath(session.create_tmp())
    # setuptools builds in ./build and puts whatever build/lib holds into the wheel, modules deleted from
    # the source since an earlier build included: start from none.
    shutil.rmtree("build", ignore_errors=True)
    build_log = session.run("python", "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, ".", silent=True) or ""
    shutil.rmtree("build", ignore_errors=True)
    # setuptools announces what it will stop doing (ship data folders it was not told about, read a license
    # table) as warnings with a date: fail now, not when a user's newer setuptools drops files or refuses to build.
    deprecated = [line for line in build_log.splitlines() if "BuildBackendWarning" in line or "SetuptoolsDeprecationWarning" in line]
    if deprecated:
        session.error("the build warns of deprecated configuration:\n" + "\n".join(deprecated))
    (wheel,) = [f for f in os.listdir(dist) if f.endswith(".whl")]
    # With the task extras, so every registered env is built from the installed files.
    session.install(*CONSTRAINTS, os.path.join(dist, wheel) + "[math,code,qa,rg,search,vision]", "pytest", "pytest-asyncio")  # pytest-asyncio: pyproject sets asyncio_mode
    tests = os.path.abspath("tests/packaging")
    session.chdir(dist)  # away from the checkout, so `import gem_core` cannot find the source tree
    session.run(*PYTEST, "--rootdir", dist, tests, *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """The docs site with warnings as errors (a broken link or anchor, an unresolved cross-reference, a docstring
    griffe cannot parse), then tests/docs: its API reference lists every ``__all__`` name. No torch: mkdocstrings
    reads the source statically and the env catalogue needs only the registry (gymnasium and numpy)."""
    _upgrade_pip(session)
    session.install(*CONSTRAINTS, "-e", ".[docs]", "pytest", "pytest-asyncio")  # pytest-asyncio: pyproject sets asyncio_mode
    site = os.path.abspath(os.path.join(session.create_tmp(), "site"))
    quiet = {"NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}  # Material's and a plugin's MkDocs 2 notices
    session.run("mkdocs", "build", "--strict", "--clean", "-d", site, env=quiet)
    session.run(*PYTEST, "tests/docs", *session.posargs, env={"GEM_DOCS_SITE": site})


@nox.session
def lint(session: nox.Session) -> None:
    """ruff and mypy over gem_core, adapters and gem, their settings in pyproject.toml. Both pinned (a new release
    adds rules and findings); no project install, no torch: mypy reads third-party imports as Any."""
    session.install(*CONSTRAINTS, "ruff==0.17.6", "mypy==2.4.1")
    session.run("ruff", "check", "gem_core", "adapters", "gem", *session.posargs)
    # adapters/ installs as gem_adapters: a link of that name on MYPYPATH lets mypy check it under its import
    # name, so `from gem_adapters.x import y` inside it resolves to the same files.
    tmp = os.path.abspath(session.create_tmp())
    path = os.path.join(tmp, "mypy_path")
    os.makedirs(path, exist_ok=True)
    link = os.path.join(path, "gem_adapters")
    if os.path.lexists(link):  # made fresh each run: a checkout moved since would leave it pointing at the old one
        os.remove(link)
    os.symlink(os.path.abspath("adapters"), link)
    session.run("mypy", "--cache-dir", os.path.join(tmp, "mypy_cache"), env={"MYPYPATH": path})


@nox.session
def trl(session: nox.Session) -> None:
    """The TRL adapter against the real GRPOTrainer (CPU training), learning test included."""
    _install(session, "-e", ".[trl,dev]")
    session.run(*PYTEST, "tests/adapters/trl", *session.posargs)


@nox.session
def verl(session: nox.Session) -> None:
    """GEM's agent loop in verl's real AgentLoopBase/AgentLoopWorker, RLHFDataset and estimator registry (CPU; no trainer)."""
    _install(session, "-e", ".[verl,dev]")
    session.run("python", "-c", "import verl.experimental.agent_loop, transfer_queue")
    session.run(*PYTEST, "tests/adapters/verl", *session.posargs)


def _install_without_gpu_deps(session: nox.Session, framework: str, *light_deps: str, pip_flags: tuple = (), extras: str = "rollout,dev") -> None:
    """Frameworks whose wheels pull flash-attn/vLLM (or pin Python < 3.11) install with --no-deps plus the
    few pure-Python modules their agent/data code imports; the module under test must then import."""
    _install(session, "-e", f".[{extras}]")
    session.install(*CONSTRAINTS, "--no-deps", *pip_flags, framework)
    if light_deps:
        session.install(*CONSTRAINTS, *light_deps)


@nox.session
def ray(session: nox.Session) -> None:
    """Envs, the episode runner and the sandbox on a local three-node Ray cluster (loopback only; no
    torch needed: the runner's tests use the tiny tokenizer, which needs only transformers' tokenizers)."""
    _upgrade_pip(session)
    session.install(*CONSTRAINTS, "-e", ".[ray,code,math,dev]", "transformers>=4.56", "tokenizers>=0.20", "jinja2")
    session.run(*PYTEST, "tests/core/vector/test_ray.py", "tests/core/vector/test_ray_defaults.py", "tests/core/ray", *session.posargs)


@nox.session
def openrlhf(session: nox.Session) -> None:
    """OpenRLHF's own MultiTurnAgentExecutor driving the GEM agent (openrlhf.utils.agent, no GPU deps).

    Installed as docs/frameworks/openrlhf.md says (tests/adapters/openrlhf/test_install_line.py holds the two together): the extra's
    light dependencies, then OpenRLHF without its own (flash-attn's sdist cannot build without CUDA)."""
    _install(session, "-e", ".[openrlhf,dev]")
    session.install(*CONSTRAINTS, "--no-deps", "openrlhf==0.11.2")
    session.run("python", "-c", "import openrlhf.utils.agent")  # a broken install fails here, not as skips
    session.run(*PYTEST, "tests/adapters/openrlhf", *session.posargs)


# rl-square without its GPU dependencies: RL2's CPU path, also the adapter the interop session plays its envs through.
RL2_INSTALL = ("rl-square==0.0.2", "datasets", "torchdata", "omegaconf", "aiohttp")


@nox.session
def rl2(session: nox.Session) -> None:
    """RL2: rl-square 0.0.2's own rollout loop, and RL2 main's generate hook against a fake SGLang router."""
    _install_without_gpu_deps(session, *RL2_INSTALL)
    session.run("python", "-c", "import RL2.datasets, omegaconf, aiohttp")
    session.run(*PYTEST, "tests/adapters/rl2", *session.posargs)


@nox.session
def agents(session: nox.Session) -> None:
    """Agent programs nobody here wrote (mini-swe-agent, unchanged) run against the agent endpoint, a scripted policy behind it."""
    _install(session, "-e", ".[rollout,serve,dev]", "mini-swe-agent==2.4.6")
    session.run("python", "-c", "import minisweagent")
    session.run(*PYTEST, "tests/agents", *session.posargs)


# oat's own modules import these (pure Python, or CPU wheels); its GPU packages are stubbed in tests/adapters/oat.
OAT_LIGHT_DEPS = ("datasets", "pandas", "peft", "einops", "dm-tree", "tyro", "msgspec", "httpx", "openai", "scipy", "rich", "Levenshtein")


@nox.session
def oat(session: nox.Session) -> None:
    """oat's real PPOMultiTurnActor.step, learner data code and MultiTurnTransitionDataset, its GPU modules stubbed.

    oat-llm declares Python < 3.11 but runs here on 3.11: the only CPU torch wheel on this machine is
    cp311 (a Python 3.10 torch would be PyPI's multi-GB CUDA build).
    """
    _install_without_gpu_deps(session, "oat-llm==0.2.4", *OAT_LIGHT_DEPS, pip_flags=("--ignore-requires-python",))
    session.run("python", "-c", "import oat.types")
    session.run(*PYTEST, "tests/adapters/oat", *session.posargs)


@nox.session
def interop(session: nox.Session) -> None:
    """Other env standards both ways, through the episode runner and the RL2 adapter: SkyRL-Gym envs as GEM envs
    (make("skyrl:<id>")) and GEM envs in SkyRL-Gym's own registry; verifiers tasksets as GEM envs
    (make("verifiers:<module>")). One virtualenv for both: they play through the same RL2/rollout stack (two
    sessions installed it twice), and verifiers' many pins leave skyrl-gym's and RL2's versions as they are."""
    _install_without_gpu_deps(session, *RL2_INSTALL, extras="skyrl,verifiers,search,rollout,dev")  # search: gem-retrieval-server plays skyrl:search
    session.run("python", "-c", "import skyrl_gym, verifiers.v1, RL2.datasets")
    session.run(*PYTEST, "tests/interop", *session.posargs)


@nox.session
def gem_upstream(session: nox.Session) -> None:
    """GEM's released package (gem-llm 0.1.0) side by side with `import gem`: the same seeded, scripted game
    episodes must give the same observations, rewards and endings. GEM's package is named `gem` too, so it
    gets a virtualenv of its own, which the tests drive as a subprocess. No torch: neither side imports it."""
    _upgrade_pip(session)
    session.install(*CONSTRAINTS, "-e", ".[dev,rg]", "httpx>=0.27")  # httpx: gem's search tool, parsed side by side
    upstream = os.path.abspath(os.path.join(session.create_tmp(), "gem-llm"))  # the tests run it from another folder
    python = os.path.join(upstream, "bin", "python")
    session.run_install("python", "-m", "venv", "--clear", upstream)
    session.run_install(python, "-m", "pip", "install", "-q", *CONSTRAINTS, "gem-llm==0.1.0", external=True)
    # GEM's own reasoning-gym pin (its rg: envs import it lazily; the constraints pin this project's newer one)
    session.run_install(python, "-m", "pip", "install", "-q", "reasoning-gym==0.1.23", external=True)
    session.run(*PYTEST, "tests/gem_upstream", *session.posargs, env={"GEM_UPSTREAM_PYTHON": python})
