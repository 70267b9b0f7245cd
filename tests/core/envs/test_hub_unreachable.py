"""A hub dataset that is not cached, on a machine that cannot reach the hub, is refused at once with a message
naming the env ids that read it and the fixes, instead of after ``datasets``' ~25 s of retries. The hub here is a
closed loopback port; ``datasets.load_dataset`` is replaced by a recorder, so the test shows it was never asked."""

from __future__ import annotations

import socket

import pytest

datasets = pytest.importorskip("datasets")
from huggingface_hub import constants  # noqa: E402

import gem_core  # noqa: E402
from gem_core.cli import main  # noqa: E402
from gem_core.envs.dataset import DatasetUnavailableError, clear_cache  # noqa: E402


@pytest.fixture
def closed_hub(monkeypatch, tmp_path):
    """The hub endpoint is a loopback port nobody listens on; empty caches; load_dataset records its calls."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again before use: connecting is refused
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    calls = []

    def load_dataset(*args, **kwargs):
        calls.append(args)
        raise ConnectionError("Couldn't reach the Hub")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    clear_cache()
    yield calls, tmp_path, port
    clear_cache()


def test_an_uncached_hub_dataset_is_refused_without_a_download_attempt(closed_hub):
    calls, _, port = closed_hub
    with pytest.raises(DatasetUnavailableError) as caught:
        gem_core.make("math:GSM8K")
    message = str(caught.value)
    assert calls == []  # refused before datasets' retries
    assert "math:GSM8K" in message and "'openai/gsm8k'" in message and f"127.0.0.1:{port}" in message
    assert "math:Sample" in message and "data_files=" in message and "HF_HUB_OFFLINE=1" in message


def test_a_cached_dataset_is_still_loaded_through_datasets(closed_hub):
    """datasets falls back to its cache when the hub is down, so a cached dataset is not refused early."""
    calls, tmp_path, _ = closed_hub
    (tmp_path / "datasets" / "openai___gsm8k" / "main").mkdir(parents=True)
    with pytest.raises(DatasetUnavailableError, match="math:GSM8K.*HF_HUB_OFFLINE=1"):
        gem_core.make("math:GSM8K")
    assert calls == [("openai/gsm8k", "main")]


def test_offline_mode_is_left_to_datasets_which_fails_at_once(closed_hub, monkeypatch):
    calls, _, _ = closed_hub
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    with pytest.raises(DatasetUnavailableError, match="math:GSM8K"):
        gem_core.make("math:GSM8K")
    assert len(calls) == 1


def test_gem_play_of_an_unreachable_hub_env_is_one_line(closed_hub, capsys):
    assert main(["play", "math:GSM8K"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("gem play: cannot start math:GSM8K: ") and "HF_HUB_OFFLINE=1" in line
