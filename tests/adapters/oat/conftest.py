"""Stand-ins for the modules oat imports that cannot be installed on a CPU machine, so oat's own classes load.

oat-llm 0.2.4 imports vLLM (CUDA), DeepSpeed (CUDA ops), launchpad (its process launcher, no wheel
for this Python) and ``pyarrow.plasma`` (its shared-memory IPC, removed from pyarrow 12, which the
``datasets`` oat also imports requires). Each one that is missing is replaced in ``sys.modules`` by a
module whose every attribute is a placeholder class; oat's own modules (actors, learners, datasets,
types) are the real ones. ``vllm.SamplingParams`` is given the fields oat and the adapter read.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types
from dataclasses import dataclass, field

_UNINSTALLABLE = {
    "vllm": ["vllm.lora", "vllm.lora.request"],
    "deepspeed": ["deepspeed.ops", "deepspeed.ops.adam", "deepspeed.runtime", "deepspeed.runtime.zero",
                  "deepspeed.runtime.zero.partition_parameters", "deepspeed.utils"],
    "launchpad": [],
}


class _Unavailable(types.ModuleType):
    """A module that is not installed here: any attribute is a placeholder class."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        placeholder = type(name, (), {"__init__": lambda self, *args, **kwargs: None, "__module__": self.__name__})
        setattr(self, name, placeholder)
        return placeholder


@dataclass
class VllmSamplingParams:
    """``vllm.SamplingParams``: the fields ``ActorBase.init`` sets and the adapter copies per request."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 64
    n: int = 1
    logprobs: int | None = None
    stop_token_ids: list[int] = field(default_factory=list)


def _stub(name: str) -> types.ModuleType:
    module = _Unavailable(name)
    # A spec, so libraries probing `find_spec` (transformers) read "no distribution installed", not an error.
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    return module


for _package, _submodules in _UNINSTALLABLE.items():
    if importlib.util.find_spec(_package) is None:
        for _name in [_package, *_submodules]:
            _stub(_name)
if "vllm" in sys.modules and isinstance(sys.modules["vllm"], _Unavailable):
    sys.modules["vllm"].__version__ = "0.8.4"
    sys.modules["vllm"].SamplingParams = VllmSamplingParams
try:
    from pyarrow import plasma  # noqa: F401
except ImportError:
    import pyarrow

    pyarrow.plasma = _stub("pyarrow.plasma")
