"""Vision-language envs, ids ``vision:<Name>-v0``: observations carry images in ``info["images"]``
(PIL images shown before that turn's text). Play them with a processor (``AutoProcessor``-like) in
place of the tokenizer; see :mod:`gem_core.rollout.vision`. Needs Pillow (``pip install -e ".[vision]"``)."""

from gem_core.registry import register

register("vision:ChartQA-v0", "gem_core.envs.vision.chart_qa:ChartQA", max_turns=2, extras=("vision",))
