"""The RL2 adapter's test fixtures (tests/adapters/rl2/conftest.py), for playing the bridged envs through
rl-square 0.0.2's own ``Rollout`` loop and ``gem_adapters.rl2.ResetStepEnv``: the adapter whose framework
installs beside skyrl-gym and verifiers without moving a pinned version. Loaded from its file, not copied,
so both suites drive rl-square the same way."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_rl2_adapter_fixtures", Path(__file__).parents[1] / "adapters" / "rl2" / "conftest.py")
_rl2 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_rl2)

tokenizer, fake_router, open_envs = _rl2.tokenizer, _rl2.fake_router, _rl2.open_envs
rl_square_rollout, rl_square = _rl2.rl_square_rollout, _rl2.rl_square

