"""gem_core/eval/report.py: summaries computed from episode records, the bootstrap CI, JSON round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gem_core.env import episode_success
from gem_core.eval.report import (
    EpisodeRecord,
    EvalReport,
    bootstrap_mean_ci,
    summarize_env,
)


def _record(seed, rewards, *, success=False, format_errors=0, error=None, tokens=(10, 5)):
    return EpisodeRecord(
        env_id="game:X-v0", seed=seed, rewards=list(rewards), success=success, format_errors=format_errors,
        terminated=success, truncated=not success, prompt_tokens=tokens[0], completion_tokens=tokens[1], error=error,
    )


def test_summary_counts_completed_episodes_and_leaves_failures_out_of_rates():
    records = [
        _record(0, [0.0, 1.0], success=True),
        _record(1, [-0.1, 0.0, 0.0], format_errors=1),
        _record(2, [0.0], error="EndpointError: HTTP 500", tokens=(7, 0)),
    ]
    summary = summarize_env("game:X-v0", records, episodes_requested=4)
    assert (summary.episodes_requested, summary.episodes_completed, summary.episodes_failed) == (4, 2, 1)
    assert summary.success_rate == pytest.approx(0.5)
    assert summary.mean_return == pytest.approx((1.0 + -0.1) / 2)
    assert summary.mean_turns == pytest.approx(2.5)
    assert summary.format_error_rate == pytest.approx(1 / 5)
    assert summary.prompt_tokens == 27 and summary.completion_tokens == 10 and summary.total_tokens == 37
    low, high = summary.return_ci
    assert low <= summary.mean_return <= high


def test_summary_of_no_completed_episode_has_no_rates():
    summary = summarize_env("game:X-v0", [_record(0, [], error="boom")], episodes_requested=1)
    assert summary.episodes_completed == 0
    assert summary.success_rate is None and summary.mean_return is None and summary.return_ci is None
    assert summary.format_error_rate is None


def test_bootstrap_ci_brackets_the_mean_narrows_with_more_data_and_is_deterministic():
    rng = np.random.default_rng(1)
    small = rng.normal(size=20)
    large = rng.normal(size=2000)
    lo_s, hi_s = bootstrap_mean_ci(small)
    lo_l, hi_l = bootstrap_mean_ci(large)
    assert lo_s < small.mean() < hi_s
    assert lo_l < large.mean() < hi_l
    assert hi_l - lo_l < hi_s - lo_s
    assert bootstrap_mean_ci(small) == (lo_s, hi_s)
    assert bootstrap_mean_ci([]) is None
    assert bootstrap_mean_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)


def test_bootstrap_ci_covers_the_true_mean_about_as_often_as_its_level():
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(200):
        lo, hi = bootstrap_mean_ci(rng.binomial(1, 0.3, size=40).astype(float), resamples=500)
        hits += lo <= 0.3 <= hi
    assert 0.85 <= hits / 200 <= 0.99


def test_success_prefers_the_env_verdict_then_a_terminated_positive_return():
    assert episode_success([{}, {"success": True}], 0.0, terminated=False) is True
    assert episode_success([{"success": False}], 0.6, terminated=False) is False
    assert episode_success([{}], 0.6, terminated=True) is True
    assert episode_success([{}], 0.6, terminated=False) is False  # cut, not finished


def test_report_round_trips_through_json(tmp_path):
    report = EvalReport(
        model="m", backend="transformers", config={"episodes": 2}, env_ids=["game:X-v0"],
        episodes={"game:X-v0": [_record(0, [1.0], success=True), _record(1, [0.0, 0.0])]},
    )
    path = report.save(tmp_path / "r" / "report.json")
    data = json.loads(path.read_text())
    env = data["envs"]["game:X-v0"]
    assert env["summary"]["success_rate"] == pytest.approx(0.5)
    assert [e["return"] for e in env["episodes"]] == [1.0, 0.0]
    loaded = EvalReport.load(tmp_path / "r")
    assert loaded.summary("game:X-v0") == report.summary("game:X-v0")
    assert loaded.episodes["game:X-v0"][1].turns == 2


def test_loading_something_else_says_what_was_expected(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError, match="Not a gem eval report"):
        EvalReport.load(path)


def test_pass_at_k_matches_the_binomial_formula_by_hand():
    from gem_core.eval.report import pass_at_k

    # n=5 samples, c=2 correct: pass@k = 1 - C(5-2, k) / C(5, k)
    assert pass_at_k(5, 2, 1) == pytest.approx(2 / 5)  # 1 - C(3,1)/C(5,1) = 1 - 3/5
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 3) == pytest.approx(0.9)  # 1 - C(3,3)/C(5,3) = 1 - 1/10
    assert pass_at_k(5, 2, 4) == 1.0  # C(3,4) = 0: every 4 of the 5 hold a correct one
    assert pass_at_k(5, 0, 5) == 0.0 and pass_at_k(5, 5, 1) == 1.0
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(3, 1, 4)


def test_pass_at_k_stays_exact_where_the_binomials_overflow_a_float():
    import math
    from fractions import Fraction

    from gem_core.eval.report import pass_at_k

    n, c, k = 2000, 7, 500  # C(2000, 500) has ~490 digits: far beyond a float
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12)


def test_pass_at_k_and_mean_at_k_of_an_env_by_hand():
    """Three seeds with 4 samples each (a failed sample is left out: seed 2 has 3 completed).

    seed 0: c=1 of n=4; seed 1: c=2 of n=4; seed 2: c=0 of n=3.
    pass@1 = mean(1/4, 2/4, 0/3) = 0.25
    pass@2 = mean(1 - C(3,2)/C(4,2), 1 - C(2,2)/C(4,2), 1 - C(3,2)/C(3,2)) = mean(1 - 3/6, 1 - 1/6, 0) = 4/9
    pass@4 = mean over the seeds with 4 completed samples = mean(1 - C(3,4)/C(4,4), 1 - C(2,4)/C(4,4)) = 1.0
    mean@4 = mean(1/4, 2/4, 0/3) = 0.25
    """
    wins = {0: [True, False, False, False], 1: [False, True, True, False], 2: [False, False, False]}
    records = [
        EpisodeRecord(env_id="game:X-v0", seed=seed, sample=i, rewards=[float(w)], success=w, terminated=True)
        for seed, results in wins.items() for i, w in enumerate(results)
    ]
    records.append(EpisodeRecord(env_id="game:X-v0", seed=2, sample=3, error="EndpointError: HTTP 500"))
    summary = summarize_env("game:X-v0", records, episodes_requested=12, samples=4)
    assert list(summary.pass_at_k) == ["1", "2", "4"]
    assert summary.pass_at_k["1"] == pytest.approx(0.25)
    assert summary.pass_at_k["2"] == pytest.approx(4 / 9)
    assert summary.pass_at_k["4"] == pytest.approx(1.0)
    assert summary.mean_at_k == pytest.approx(0.25)
    report = EvalReport(model="m", backend="test", config={"episodes": 3, "samples": 4}, env_ids=["game:X-v0"],
                        episodes={"game:X-v0": records})
    saved = json.loads(json.dumps(report.to_dict()))["envs"]["game:X-v0"]["summary"]
    assert saved["pass_at_k"] == {"1": pytest.approx(0.25), "2": pytest.approx(4 / 9), "4": 1.0}
    assert saved["episodes_requested"] == 12 and saved["samples"] == 4
    assert EvalReport.from_dict(report.to_dict()).summary("game:X-v0") == summary
