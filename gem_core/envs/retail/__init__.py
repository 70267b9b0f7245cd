"""Customer service on a shipped store database with a scripted customer, id ``agent:Retail-v0``
(TAU-bench-retail style; see :mod:`gem_core.envs.retail.env`)."""

from gem_core.registry import register

register("agent:Retail-v0", "gem_core.envs.retail.env:RetailService", max_turns=20)
