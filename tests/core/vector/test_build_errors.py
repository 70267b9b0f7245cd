"""An env constructor that raises inside ``make_vec`` (issue 28.2): on every backend the constructor's own
exception comes out, with the env that failed named, and the envs already built are closed."""

from __future__ import annotations

import pathlib
import traceback
from typing import Any

import pytest

from gem_core.env import Env
from gem_core.vector import make_vec

BACKENDS = ["sync", "thread", "async", "process"]


def _shown(exc: BaseException) -> str:
    """The exception as a traceback shows it (message and notes)."""
    return "".join(traceback.format_exception_only(type(exc), exc))


class ClosingEnv(Env):
    """Writes one line to ``log`` when closed, so a test in the parent sees closes done in a worker."""

    def __init__(self, log: str):
        self.log = log

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return "start", {}

    def step(self, action: str):
        return "ok", 0.0, True, False, {}

    def close(self) -> None:
        with open(self.log, "a") as f:
            f.write("closed\n")


class UnusualError(Exception):
    """An exception whose constructor takes a keyword only: it pickles but does not unpickle."""

    def __init__(self, *, detail: str):
        super().__init__(f"unusual: {detail}")


def refuses_to_build(log: str) -> Env:
    raise ValueError("bad setting: size must be positive")


def refuses_unusually(log: str) -> Env:
    raise UnusualError(detail="the grid is empty")


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_constructors_own_error_propagates_naming_the_env_id(backend):
    with pytest.raises(ValueError, match="reverse_steps") as caught:
        make_vec(["game:Wordle-v0", "game:Sokoban-v0-easy"], max_turns=3, backend=backend)
    assert "game:Sokoban-v0-easy" in _shown(caught.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_envs_built_before_the_failing_one_are_closed(backend, tmp_path):
    log = tmp_path / "closes.log"
    with pytest.raises(ValueError, match="size must be positive") as caught:
        make_vec([ClosingEnv, ClosingEnv, refuses_to_build], backend=backend, log=str(log))
    assert "refuses_to_build" in _shown(caught.value)
    assert log.read_text().count("closed") == 2


def test_a_grouped_process_worker_closes_the_envs_it_built_before_the_failing_one(tmp_path):
    log = tmp_path / "closes.log"
    with pytest.raises(ValueError, match="size must be positive"):
        make_vec([ClosingEnv, ClosingEnv, refuses_to_build], backend="process", backend_kwargs={"num_workers": 1}, log=str(log))
    assert log.read_text().count("closed") == 2


def test_an_error_that_cannot_cross_processes_is_reported_by_name_and_message(tmp_path):
    with pytest.raises(RuntimeError, match="UnusualError: unusual: the grid is empty") as caught:
        make_vec([refuses_unusually], backend="process", log=str(tmp_path / "log"))
    assert "refuses_unusually" in _shown(caught.value)


def test_the_ray_actor_answers_a_builders_error_as_a_value_and_closes_the_envs_it_built(tmp_path):
    """The actor class runs here as a plain object (no Ray needed); tests/core/vector/test_ray.py runs the
    same case on a Ray cluster where Ray is installed."""
    from gem_core.vector.ray_backend import _EnvGroup

    log = str(tmp_path / "closes.log")
    group = _EnvGroup({0: lambda: ClosingEnv(log), 1: lambda: refuses_to_build(log)})
    error = group.start()
    assert isinstance(error.exception, ValueError) and "size must be positive" in error.summary
    assert pathlib.Path(log).read_text().count("closed") == 1
    assert _EnvGroup({0: lambda: ClosingEnv(log)}).start() is None


def refusing_wrapper(env: Env) -> Env:
    raise TypeError("this wrapper needs a tool env")


@pytest.mark.parametrize("backend", ["sync", "process"])
def test_a_wrapper_that_raises_propagates_naming_itself_and_the_env_is_closed(backend, tmp_path):
    log = tmp_path / "closes.log"
    with pytest.raises(TypeError, match="needs a tool env") as caught:
        make_vec(ClosingEnv, wrappers=[refusing_wrapper], backend=backend, log=str(log))
    assert "refusing_wrapper" in _shown(caught.value) and "ClosingEnv" in _shown(caught.value)
    assert log.read_text().count("closed") == 1
