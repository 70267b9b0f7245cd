"""Software-engineering tasks without containers: real packages from the index, one injected bug each,
the package's own tests as the grader, all in the bubblewrap sandbox (see :mod:`.swe_env`).

``gem swe build`` fetches the pinned sdists once (:mod:`.build`). ``swe:Tasks-v0`` draws from every
task of the pack (``make("swe:Tasks-v0", package="toolz")`` or ``tasks=[...]`` narrows it);
``swe:Sample-v0`` is GEM's own one-task sample, which needs no build. The sample kwargs of both use
that sample, so the env tests run offline.
"""

from gem_core.registry import register

_ENTRY = "gem_core.envs.swe.swe_env:SweEnv"

register("swe:Tasks-v0", _ENTRY, sample_kwargs={"sample": True})
register("swe:Sample-v0", _ENTRY, sample=True)
