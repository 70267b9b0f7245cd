"""One run at a time in an eval's output folder: a second ``evaluate`` (or ``gem eval``) given a folder that a
run still plays into is refused before it writes anything there."""

from __future__ import annotations

import asyncio
import threading

import pytest
from scripted_backend import OneStepBackend

from gem_core.eval import evaluate

EASY = "game:GuessTheNumber-v0-easy"


class HeldBackend(OneStepBackend):
    """Plays its first episode only once ``release`` is set, saying ``playing`` meanwhile."""

    def __init__(self):
        super().__init__()
        self.playing, self.release = threading.Event(), threading.Event()

    async def run_episode(self, env, env_id, seed, config, record):
        self.playing.set()
        await asyncio.to_thread(self.release.wait, 60)
        await super().run_episode(env, env_id, seed, config, record)


@pytest.mark.parametrize("resume", [False, True], ids=["a-new-run", "a-resume"])
def test_a_second_run_into_an_out_dir_in_use_is_refused_and_writes_nothing(tmp_path, resume):
    """Two ``gem eval --out D`` started together, or a ``--resume D`` while D's run still played, both got past the
    check for an earlier run (nothing finished yet): the second rewrote run.json, and their lines of episodes.jsonl
    interleaved mid-record (measured: 27 lines for 2 x 24 episodes, three of them two records run together, which a
    later --resume or --rescore cannot read), while each run reported success."""
    out = tmp_path / "run"
    held = HeldBackend()
    first = threading.Thread(target=evaluate, args=([EASY],), kwargs=dict(
        backend=held, episodes=2, out_dir=str(out), plots=False, progress=False, stop_signals=()))
    first.start()
    try:
        assert held.playing.wait(60)
        before = {path.name: path.read_bytes() for path in out.iterdir()}
        second = OneStepBackend()
        with pytest.raises(ValueError, match=f"output folder {out} is in use by another owner in this process"):
            evaluate([EASY], backend=second, episodes=2, out_dir=str(out), plots=False, progress=False, resume=resume)
        assert second.episodes == 0
        assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    finally:
        held.release.set()
        first.join(60)
    backend = OneStepBackend()  # the first run gave the folder back when it ended
    report = evaluate([EASY], backend=backend, episodes=2, out_dir=str(out), plots=False, progress=False, resume=True)
    assert backend.episodes == 0 and report.episodes_finished == 2
