"""Performance metrics: differential tests against `sekai.finance.metrics`, batching, masks,
jit/vmap, both float widths, and hypothesis properties."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import parallax
from parallax import finance as pf
from parallax.finance import EpisodeReport, evaluate

sm = pytest.importorskip("sekai.finance.metrics")

# one worker runs this file, so its module fixtures are built once per `make test`
pytestmark = pytest.mark.xdist_group("finance_metrics")

PPY, RF, LEVEL = 12.0, 0.03, 0.9

# metric name -> (parallax call, sekai call) on one series
METRICS = {
    "total_return": (lambda r: pf.total_return(r), lambda r: sm.total_return(r)),
    "annualized_return": (
        lambda r: pf.annualized_return(r, PPY),
        lambda r: sm.annualized_return(r, PPY),
    ),
    "annualized_volatility": (
        lambda r: pf.annualized_volatility(r, PPY),
        lambda r: sm.annualized_volatility(r, PPY),
    ),
    "sharpe_ratio": (
        lambda r: pf.sharpe_ratio(r, PPY, RF),
        lambda r: sm.sharpe_ratio(r, PPY, RF),
    ),
    "sortino_ratio": (
        lambda r: pf.sortino_ratio(r, PPY, RF),
        lambda r: sm.sortino_ratio(r, PPY, RF),
    ),
    "max_drawdown": (lambda r: pf.max_drawdown(r), lambda r: sm.max_drawdown(r)),
    "calmar_ratio": (lambda r: pf.calmar_ratio(r, PPY), lambda r: sm.calmar_ratio(r, PPY)),
    "value_at_risk": (
        lambda r: pf.value_at_risk(r, LEVEL),
        lambda r: sm.value_at_risk(r, LEVEL),
    ),
    "conditional_value_at_risk": (
        lambda r: pf.conditional_value_at_risk(r, LEVEL),
        lambda r: sm.conditional_value_at_risk(r, LEVEL),
    ),
    "hit_rate": (lambda r: pf.hit_rate(r), lambda r: sm.hit_rate(r)),
}

EDGE_CASES = {
    "flat": [0.0] * 8,
    "one_step_gain": [0.02],
    "one_step_loss": [-0.03],
    "all_losses": [-0.01, -0.02, -0.015, -0.03],
    "all_gains": [0.01, 0.02, 0.005],
    "constant_gain": [0.01] * 6,
    "constant_loss": [-0.01] * 6,
    "risk_free_cash": [RF / PPY] * 5,
    "wipe_out": [0.1, -1.0, 0.5, 0.2],
    "below_minus_one": [0.05, -1.5, 0.0],
    "mixed_zeros": [0.0, 0.01, 0.0, -0.01, 0.0],
}


def _random_series(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(0.001, 0.02, n)


def _close(ours: float, theirs: float, x64: bool) -> None:
    if math.isinf(theirs) or math.isinf(ours):
        assert ours == theirs
        return
    rtol, atol = (1e-9, 1e-12) if x64 else (2e-3, 2e-5)
    assert ours == pytest.approx(theirs, rel=rtol, abs=atol)


def _summary(series) -> dict:
    return sm.performance_summary(np.asarray(series), PPY, risk_free=RF, level=LEVEL).as_dict()


def _compare_table(ours: dict, theirs: dict, x64: bool, index=()) -> None:
    for name, value in ours.items():
        value = np.asarray(value)[index]
        if name == "n_periods":
            assert int(value) == theirs[name]
        else:
            _close(float(value), theirs[name], x64)


def test_edge_cases_match_sekai(x64):
    # every case in one padded batch (one compile); `where` marks each case's periods
    cases = list(EDGE_CASES.values())
    width = max(len(c) for c in cases)
    padded = np.array([c + [7.0] * (width - len(c)) for c in cases])
    mask = np.array([[i < len(c) for i in range(width)] for c in cases])
    table = pf.performance_metrics(
        jnp.asarray(padded), PPY, risk_free=RF, level=LEVEL, where=jnp.asarray(mask)
    )
    for row, case in enumerate(cases):
        _compare_table(table, _summary(case), x64, (row,))


@pytest.mark.parametrize("case", ["flat", "one_step_loss", "wipe_out", "risk_free_cash"])
def test_edge_cases_without_mask_match_sekai(case, x64):
    series = EDGE_CASES[case]
    table = pf.performance_metrics(jnp.asarray(series), PPY, risk_free=RF, level=LEVEL)
    _compare_table(table, _summary(series), x64)


def test_each_public_metric_matches_sekai(x64):
    for seed, n in [(1, 7), (4, 40)]:
        series = _random_series(seed, n)
        for ours_fn, theirs_fn in METRICS.values():
            ours = float(ours_fn(jnp.asarray(series)))
            theirs = theirs_fn(series)
            _close(ours, theirs, x64)


def test_random_series_match_sekai(x64):
    for seed, n in [(0, 2), (2, 40), (3, 253)]:
        series = _random_series(seed, n)
        table = pf.performance_metrics(jnp.asarray(series), PPY, risk_free=RF, level=LEVEL)
        _compare_table(table, _summary(series), x64)


def test_performance_metrics_match_sekai_summary(x64):
    series = _random_series(5, 30)
    ours = pf.performance_metrics(jnp.asarray(series), PPY, risk_free=RF, level=LEVEL)
    theirs = sm.performance_summary(series, PPY, risk_free=RF, level=LEVEL).as_dict()
    assert int(ours["n_periods"]) == theirs["n_periods"] == 30
    for name, value in ours.items():
        if name != "n_periods":
            _close(float(value), theirs[name], x64)


def test_pnl_metrics_match_sekai(x64):
    rng = np.random.default_rng(7)
    for pnl, scale in [(rng.normal(0.5, 3.0, 25), 0.0), (np.array([1.0]), 0.0), ([2.0] * 4, 9.0)]:
        ours = pf.pnl_metrics(jnp.asarray(pnl), PPY, scale=scale)
        theirs = sm.pnl_summary(np.asarray(pnl), PPY, scale=scale).as_dict()
        for name, value in ours.items():
            _close(float(value), theirs[name], x64)


def test_returns_from_equity_and_equity_curve_match_sekai(x64):
    equity = np.array([100.0, 103.0, 99.0, 0.0, 0.0])
    ours = np.asarray(pf.returns_from_equity(jnp.asarray(equity)))
    np.testing.assert_allclose(ours, sm.returns_from_equity(equity), rtol=1e-6)
    returns = _random_series(3, 9)
    np.testing.assert_allclose(
        np.asarray(pf.equity_curve(jnp.asarray(returns), 50.0)),
        sm.equity_curve(returns, 50.0),
        rtol=1e-5 if not x64 else 1e-12,
    )
    np.testing.assert_allclose(
        np.asarray(pf.drawdown_series(jnp.asarray(returns))),
        sm.drawdown_series(returns),
        atol=1e-5 if not x64 else 1e-12,
    )


def test_batched_over_leading_axes_equals_row_by_row(x64):
    batch = np.stack([_random_series(s, 16) for s in range(6)]).reshape(2, 3, 16)
    table = pf.performance_metrics(jnp.asarray(batch), PPY, risk_free=RF, level=LEVEL)
    for name, value in table.items():
        assert value.shape == (2, 3), name
    for i in range(2):
        for j in range(3):
            row = pf.performance_metrics(jnp.asarray(batch[i, j]), PPY, risk_free=RF, level=LEVEL)
            for name in table:
                np.testing.assert_allclose(np.asarray(table[name][i, j]), np.asarray(row[name]))


def test_output_dtype_follows_input(x64):
    expected = jnp.float64 if x64 else jnp.float32
    value = pf.sharpe_ratio(jnp.asarray(_random_series(0, 5)))
    assert value.dtype == expected
    assert pf.total_return(jnp.zeros(3, jnp.float32)).dtype == jnp.float32


def test_jit_and_vmap_agree_with_eager():
    batch = jnp.asarray(np.stack([_random_series(s, 12) for s in range(4)]), jnp.float32)
    eager = pf.performance_metrics(batch, PPY, risk_free=RF)
    jitted = jax.jit(lambda r: pf.performance_metrics(r, PPY, risk_free=RF))(batch)
    mapped = jax.vmap(lambda r: pf.performance_metrics(r, PPY, risk_free=RF))(batch)
    for name in eager:
        np.testing.assert_allclose(np.asarray(jitted[name]), np.asarray(eager[name]), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(mapped[name]), np.asarray(eager[name]), rtol=1e-6)


def test_traced_keyword_parameters_are_accepted():
    r = jnp.asarray(_random_series(1, 10), jnp.float32)
    by_ppy = jax.vmap(lambda p: pf.sharpe_ratio(r, p))(jnp.array([12.0, 252.0]))
    assert float(by_ppy[1] / by_ppy[0]) == pytest.approx(math.sqrt(252 / 12), rel=1e-4)


def test_where_mask_equals_the_shorter_series(x64):
    full = _random_series(9, 20)
    mask = np.arange(20) < 13
    padded = np.where(mask, full, 123.0)  # garbage after the end must not matter
    ours = pf.performance_metrics(jnp.asarray(padded), PPY, risk_free=RF, where=jnp.asarray(mask))
    theirs = sm.performance_summary(full[:13], PPY, risk_free=RF).as_dict()
    for name, value in ours.items():
        if name == "n_periods":
            assert int(value) == 13
        else:
            _close(float(value), theirs[name], x64)


def test_empty_mask_gives_zeros():
    table = pf.performance_metrics(jnp.ones(4), where=jnp.zeros(4, bool))
    for name, value in table.items():
        assert float(value) == 0.0, name


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: pf.sharpe_ratio(jnp.ones(3), periods_per_year=0), "periods_per_year"),
        (lambda: pf.sharpe_ratio(jnp.ones(3), risk_free=math.inf), "risk_free"),
        (lambda: pf.sortino_ratio(jnp.ones(3), target=math.nan), "target"),
        (lambda: pf.value_at_risk(jnp.ones(3), level=1.0), "level"),
        (lambda: pf.pnl_metrics(jnp.ones(3), scale=-1.0), "scale"),
        (lambda: pf.total_return(jnp.ones(0)), "returns"),
        (lambda: pf.total_return(jnp.float32(1.0)), "returns"),
        (lambda: pf.returns_from_equity(jnp.ones(1)), "equity"),
        (lambda: pf.hit_rate(jnp.ones(3), where=jnp.ones(2, bool)), "where"),
    ],
)
def test_bad_arguments_name_the_parameter(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_sekai_and_parallax_reject_the_same_parameters():
    for kwargs in ({"periods_per_year": -1}, {"risk_free": math.inf}):
        with pytest.raises(ValueError) as theirs:
            sm.sharpe_ratio([0.01, 0.02], **kwargs)
        with pytest.raises(ValueError) as ours:
            pf.sharpe_ratio(jnp.array([0.01, 0.02]), **kwargs)
        assert str(ours.value) == str(theirs.value)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(0.05, 1e4, allow_nan=False, allow_infinity=False), min_size=2, max_size=24)
)
def test_metrics_are_finite_on_positive_equity_in_float32(equity):
    # padded to one length (one compile); the padding repeats the last value, masked out
    padded = jnp.asarray(equity + [equity[-1]] * (24 - len(equity)), jnp.float32)
    returns = pf.returns_from_equity(padded)
    mask = jnp.arange(23) < len(equity) - 1
    table = pf.performance_metrics(returns, 252, where=mask)
    assert int(table["n_periods"]) == len(equity) - 1
    for name, value in table.items():
        value = np.asarray(value)
        if name in ("sortino_ratio", "calmar_ratio", "annualized_return"):
            assert not np.isnan(value), name  # inf is sekai's convention for these
        else:
            assert np.isfinite(value), name
    assert 0.0 <= float(table["max_drawdown"]) <= 1.0
    assert 0.0 <= float(table["hit_rate"]) <= 1.0
    assert float(table["conditional_value_at_risk"]) >= float(table["value_at_risk"]) - 1e-6


# -- evaluate: the per-episode table -------------------------------------------------------------


def _random_policy(env):
    space = env.action_space

    def policy(key, state):
        keys = jax.random.split(key, state.reward.shape[0])
        return jax.vmap(lambda k: space.sample(key=k))(keys)

    return policy


FINANCE = {
    "Trading-v0": {"episode_length": 6, "lookback": 2},
    "Portfolio-v0": {"episode_length": 6, "lookback": 2, "n_assets": 2},
    "MarketMaking-v0": {"n_steps": 6},
    "OptimalExecution-v0": {"n_steps": 6},
}


@pytest.fixture(scope="module", params=list(FINANCE))
def finance_report(request):
    env = parallax.make(request.param, **FINANCE[request.param])
    return request.param, env, evaluate(env, _random_policy(env), jax.random.key(3), 3)


def test_evaluate_reports_one_row_per_episode(finance_report):
    env_id, _, report = finance_report
    assert isinstance(report, EpisodeReport) and report.num_episodes == 3
    assert report["length"].tolist() == [6, 6, 6]
    expected = {
        "Trading-v0": "sharpe_ratio",
        "Portfolio-v0": "max_drawdown",
        "MarketMaking-v0": "total_pnl",
        "OptimalExecution-v0": "implementation_shortfall",
    }[env_id]
    assert expected in report
    for name, column in report.items():
        assert column.shape == (3,), name
        assert not np.any(np.isnan(column)), name
    text = str(report)
    assert text.splitlines()[0].split()[0] == "episode"
    assert len(text.splitlines()) == 2 + 3 + 1  # header, rule, 3 episodes, mean


def _same_episodes(env):
    vec = parallax.VmapWrapper(env, 3)
    reset_key, run_key = jax.random.split(jax.random.key(3))
    first = vec.reset(key=reset_key)
    _, traj = parallax.rollout(vec, _random_policy(env), run_key, 6, state=first)
    return first, traj


@pytest.fixture(scope="module")
def same_episodes(finance_report):
    """The episodes evaluate ran, rerun by hand (one compiled program per env, shared by the
    tests that compare the report with them)."""
    _, env, _ = finance_report
    return jax.jit(lambda: _same_episodes(env))()


def test_evaluate_metrics_match_sekai_on_the_same_episodes(finance_report, same_episodes):
    env_id, _, report = finance_report
    first, traj = same_episodes  # the episodes evaluate ran, rerun by hand
    if env_id in ("Trading-v0", "Portfolio-v0"):
        equity = np.concatenate([np.asarray(first.info["equity"])[None], traj.info["equity"]]).T
        for row in range(3):
            returns = sm.returns_from_equity(equity[row].astype(np.float64))
            theirs = sm.performance_summary(returns)
            assert report["sharpe_ratio"][row] == pytest.approx(
                theirs.sharpe_ratio, rel=1e-3, abs=1e-4
            )
            assert report["total_return"][row] == pytest.approx(theirs.total_return, abs=1e-5)
            assert report["final_equity"][row] == pytest.approx(equity[row, -1], rel=1e-6)
    elif env_id == "MarketMaking-v0":
        wealth = np.concatenate([np.asarray(first.info["wealth"])[None], traj.info["wealth"]]).T
        for row in range(3):
            w = wealth[row].astype(np.float64)
            theirs = sm.pnl_summary(np.diff(w), scale=float(np.max(np.abs(w))))
            assert report["total_pnl"][row] == pytest.approx(theirs.total_pnl, rel=1e-5)
            assert report["max_drawdown"][row] == pytest.approx(theirs.max_drawdown, abs=1e-4)
            assert report["hit_rate"][row] == pytest.approx(theirs.hit_rate)
    else:
        shortfall = np.asarray(traj.info["implementation_shortfall"])[-1]
        np.testing.assert_allclose(report["implementation_shortfall"], shortfall, rtol=1e-6)
        inventory = np.asarray(traj.info["inventory"])[-1]
        np.testing.assert_allclose(report["final_inventory"], inventory)


def test_evaluate_total_reward_is_the_sum_of_rewards(finance_report, same_episodes):
    _, _, report = finance_report
    _, traj = same_episodes
    np.testing.assert_allclose(report["total_reward"], np.asarray(traj.reward).sum(0), rtol=1e-5)


def test_evaluate_masks_the_steps_after_an_episode_ends():
    env = parallax.TimeLimit(parallax.make("Trading-v0", episode_length=6, lookback=2), 4)
    report = evaluate(env, _random_policy(env), jax.random.key(0), 2, num_steps=6)
    assert report["length"].tolist() == [4, 4]
    full = evaluate(env, _random_policy(env), jax.random.key(0), 2)  # length from TimeLimit
    np.testing.assert_allclose(full["total_return"], report["total_return"], rtol=1e-6)


@pytest.mark.parametrize(
    ("env_id", "baseline"),
    [
        ("OptimalExecution-v0", pf.almgren_chriss_policy),
        ("MarketMaking-v0", pf.avellaneda_stoikov_policy),
    ],
)
def test_evaluate_takes_the_baselines_as_they_are(env_id, baseline):
    env = parallax.make(env_id, **FINANCE[env_id])
    policy = baseline(env)  # policy(state)
    direct = evaluate(env, policy, jax.random.key(0), 3)
    keyed = evaluate(env, lambda key, state: policy(state), jax.random.key(0), 3)
    for name in keyed:
        np.testing.assert_array_equal(direct[name], keyed[name])
    # a key-and-state policy with a default for its state is still called with the key
    seen = []

    def with_default(key, state=None):
        seen.append(key)
        return policy(state)

    evaluate(env, with_default, jax.random.key(0), 2)
    assert seen and seen[0] is not None


def test_evaluate_validates_its_arguments():
    env = parallax.make("Trading-v0", episode_length=4, lookback=2)
    policy = _random_policy(env)
    with pytest.raises(ValueError, match="num_episodes"):
        evaluate(env, policy, jax.random.key(0), 0)
    with pytest.raises(TypeError, match="single"):
        evaluate(parallax.VmapWrapper(env, 2), policy, jax.random.key(0), 2)
    with pytest.raises(ValueError, match="AutoResetWrapper"):
        evaluate(parallax.AutoResetWrapper(env), policy, jax.random.key(0), 2)
    with pytest.raises(ValueError, match="level"):
        evaluate(env, policy, jax.random.key(0), 2, level=2.0)
    with pytest.raises(TypeError, match="policy"):
        evaluate(env, None, jax.random.key(0), 2)


def test_episode_report_table_and_mean():
    report = EpisodeReport({"length": np.array([3, 5]), "sharpe_ratio": np.array([1.0, np.inf])})
    assert report.mean()["length"] == 4.0
    lines = str(report).splitlines()
    assert lines[2].split() == ["0", "3", "1.000"]
    assert lines[3].split() == ["1", "5", "inf"]
    with pytest.raises(ValueError, match="same length"):
        EpisodeReport({"a": np.zeros(2), "b": np.zeros(3)})


@pytest.mark.parametrize(
    "name",
    [
        "parallax.finance._metrics",
        "parallax.finance._metrics_summary",
        "parallax.finance._evaluate",
    ],
)
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
