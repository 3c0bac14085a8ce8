"""`PortfolioEnv` (Portfolio-v0) against sekai 0.2.0: spaces, actions, trajectories, vectors."""

from __future__ import annotations

import dataclasses

import _finance_env_cases as shared
import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sekai
import sekai.finance as sf
from finance_support import assert_values_match, rollout, run_against_sekai
from hypothesis import given, settings
from hypothesis import strategies as st

from parallax import finance as pf

SHORT = {"episode_length": 12, "lookback": 4}


def _history(rows, assets, seed=0):
    steps = np.random.default_rng(seed).normal(0.0, 0.01, (rows, assets))
    return 100 * np.exp(np.cumsum(steps, axis=0))


def _actions(env, count, seed):
    low = -1.5 if env.allow_short else -0.2  # a little outside the box: clipped as sekai does
    shape = (count, *env.action_space.shape)
    actions = np.random.default_rng(seed).uniform(low, 1.5, shape).astype(np.float32)
    actions[1] = 0.0  # all cash (long-only) / flat (short)
    return actions


# ---------------------------------------------------------------------------- spaces
@pytest.mark.parametrize("kwargs", [{}, {"allow_short": True}, {"n_assets": 1}, {"n_assets": 3}])
def test_spaces_match_sekai(kwargs):
    ours = pf.PortfolioEnv(**SHORT, **kwargs)
    theirs = sekai.make("Portfolio-v0", **SHORT, **kwargs)
    assert list(ours.observation_space.spaces) == list(theirs.observation_space.spaces)
    for name, space in theirs.observation_space.spaces.items():
        shared.assert_box_matches(ours.observation_space.spaces[name], space)
    shared.assert_box_matches(ours.action_space, theirs.action_space)
    assert np.array_equal(ours.corr, theirs.corr)


def test_action_to_weights_matches_sekai(x64):
    dtype = np.float64 if x64 else np.float32
    for allow_short in (False, True):
        ours = pf.PortfolioEnv(allow_short=allow_short, **SHORT)
        theirs = sekai.make("Portfolio-v0", allow_short=allow_short, **SHORT)
        n = ours.action_space.shape[0]
        cases = [
            np.zeros(n),
            np.full(n, -1.0),
            np.full(n, 1e-13),
            np.linspace(-2, 3, n),
            np.random.default_rng(0).uniform(-1, 1, n),
            np.full(n, 0.9),
        ]
        convert = jax.jit(ours.action_to_weights)
        for action in cases:
            action = action.astype(np.float32)
            got = convert(action)
            assert got.dtype == dtype
            want = theirs.action_to_weights(action)
            if x64:
                assert_values_match(got, want, f"{action}")
            else:
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    six = np.arange(6, dtype=np.float32).reshape(2, 3)  # any shape with n + 1 elements
    ours = pf.PortfolioEnv(**SHORT)
    theirs = sekai.make("Portfolio-v0", **SHORT)
    np.testing.assert_allclose(
        ours.action_to_weights(six), theirs.action_to_weights(six), rtol=1e-6
    )
    with pytest.raises(ValueError, match="6 elements"):
        ours.action_to_weights(np.zeros(5, np.float32))


# --------------------------------------------------------------- simulated markets
GBM_CONFIGS = {
    "default": {},
    "short": {"allow_short": True},
    "two_assets": {
        "n_assets": 2,
        "mu": [0.3, -0.2],
        "sigma": [0.9, 0.4],
        "corr": [[1.0, -0.7], [-0.7, 1.0]],
        "dt": 1 / 12,
    },
    "costs_rewards": {
        "n_assets": 3,
        "transaction_cost": pf.ProportionalCost([1e-3, 2e-3, 0.0])
        + pf.SpreadCost([1e-4, 5e-4, 2e-4])
        + pf.FixedCost(40.0, threshold=0.05),
        "reward": pf.MeanVariance(2.0)
        - 1e-3 * pf.TurnoverPenalty()
        - pf.DrawdownPenalty()
        + pf.DifferentialSharpe(0.2)
        + pf.ProfitAndLoss(),
        "capital": 5e4,
    },
    "wipe_out": {"allow_short": True, "transaction_cost": 0.7, "sigma": 2.0},
}


def _sekai_kwargs(kwargs):
    out = dict(kwargs)
    if "transaction_cost" in out and not isinstance(out["transaction_cost"], float):
        out["transaction_cost"] = (
            sf.ProportionalCost([1e-3, 2e-3, 0.0])
            + sf.SpreadCost(half_spread=[1e-4, 5e-4, 2e-4])
            + sf.FixedCost(40.0, threshold=0.05)
        )
        out["reward"] = (
            sf.MeanVariance(2.0) - 1e-3 * sf.TurnoverPenalty() - sf.DrawdownPenalty()
            + sf.DifferentialSharpe(0.2) + sf.ProfitAndLoss()
        )  # fmt: skip
        assert repr(out["reward"]) == repr(kwargs["reward"])
        assert repr(out["transaction_cost"]).replace("half_spread=", "") == repr(
            kwargs["transaction_cost"]
        ).replace("half_spread=", "")
    return out


@pytest.mark.parametrize("config", list(GBM_CONFIGS))
def test_gbm_trajectories_match_sekai(config):
    kwargs = {**SHORT, **GBM_CONFIGS[config]}
    lengths = shared.lengths_against_sekai(
        pf.PortfolioEnv,
        "Portfolio-v0",
        kwargs,
        _sekai_kwargs,
        lambda env, seed: _actions(env, 12, seed),
    )
    if config == "wipe_out":
        assert min(lengths) < 12, "expected a wipe-out (cost >= 1 terminates)"
    else:
        assert lengths == [12] * 3


def test_matches_sekai_under_check_matches_reference():
    shared.assert_matches_sekai_reference(
        pf.PortfolioEnv, "Portfolio-v0", {**SHORT, "allow_short": True}
    )


# ------------------------------------------------------------------- the battery
def battery_env(non_default):
    """The default market (5 assets), or a non-default market, costs and reward.

    The battery tests run in tests/test_finance_trading.py, on this env and on `TradingEnv`.
    """
    if not non_default:
        return pf.PortfolioEnv(episode_length=6, lookback=3)
    return pf.PortfolioEnv(
        n_assets=3, episode_length=6, lookback=3, allow_short=True, mu=[0.5, -0.5, 0.0],
        sigma=[1.0, 0.5, 0.1], corr=[[1.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 1.0]],
        transaction_cost=pf.SpreadCost([1e-3, 2e-3, 0.0]) + pf.FixedCost(5.0),
        reward=pf.MeanVariance(3.0) - 1e-2 * pf.TurnoverPenalty(), capital=1e4,
    )  # fmt: skip


# ------------------------------------------------------------------- price history
def test_history_starts_match_sekai():
    prices = _history(60, 3)
    kwargs = {**SHORT, "prices": prices, "sampler": 11, "allow_short": True}
    with jax.enable_x64(True):
        env = pf.PortfolioEnv(**kwargs)
        theirs = sekai.make("Portfolio-v0", **kwargs)
        assert env.n_assets == 3
        actions = _actions(env, 12, 0)
        for start in (4, 47, -13):
            assert run_against_sekai(env, theirs, jax.random.key(1), actions, start=start) == 12
        random_env = pf.PortfolioEnv(**{**kwargs, "sampler": "random"})
        random_ref = sekai.make("Portfolio-v0", **{**kwargs, "sampler": "random"})
        for seed in range(3):
            run_against_sekai(random_env, random_ref, jax.random.key(seed), actions)


def test_sp500_columns_as_assets_match_sekai():
    from arch.data import sp500

    frame = sp500.load()[["Open", "High", "Low", "Adj Close"]].iloc[1000:1300]
    kwargs = {"episode_length": 30, "lookback": 8, "transaction_cost": 5e-4}
    with jax.enable_x64(True):
        env = pf.PortfolioEnv(frame, **kwargs)
        theirs = sekai.make("Portfolio-v0", prices=frame, **kwargs)
        assert float(env.params.dt) == theirs.dt
        for seed in range(2):
            actions = _actions(env, 30, seed)
            steps = run_against_sekai(
                env, theirs, jax.random.key(seed), actions, timestamps=env.timestamps
            )
            assert steps == 30


def test_vector_autoreset_and_time_limit_match_sekai_native():
    prices = _history(40, 2, seed=4)
    kwargs = {"prices": prices, "sampler": 5, "episode_length": 6, "lookback": 3}
    lanes, limit, steps = 3, 4, 13
    actions = np.random.default_rng(2).uniform(0, 1, (steps, lanes, 3)).astype(np.float32)
    finished = shared.vector_episodes_match_sekai_native(
        "Portfolio-v0", kwargs, actions, limit, at_reset=lambda observation: observation["returns"]
    )
    assert finished == lanes * 3


# ------------------------------------------------------------------- dtype contract
def test_dtypes_follow_the_float_mode(x64):
    env = pf.PortfolioEnv(**SHORT)
    first, states = rollout(env, jax.random.key(0), _actions(env, 12, 0))
    want = np.float64 if x64 else np.float32
    for state in (first, jax.tree.map(lambda x: x[-1], states)):
        assert state.observation["returns"].dtype == np.float32
        assert state.observation["weights"].dtype == np.float32
        assert state.reward.dtype == want
        assert state.info["timestamp"].dtype == np.int32
        for name in ("portfolio_value", "equity", "weights", "turnover", "cost", "asset_returns"):
            assert state.info[name].dtype == want, name
        np.testing.assert_allclose(state.info["weights"].sum(), 1.0, rtol=1e-5)


def test_correlation_can_be_randomised_through_params():
    env = pf.PortfolioEnv(n_assets=2, episode_length=120, lookback=2, sigma=0.3)
    chex.clear_trace_counter()

    @chex.assert_max_traces(n=1)
    def returns(key, rho):
        corr = jnp.array([[1.0, 0.0], [0.0, 1.0]]) + rho * jnp.array([[0.0, 1.0], [1.0, 0.0]])
        params = dataclasses.replace(env.params, chol=jnp.linalg.cholesky(corr))
        state = env.reset(key=key, params=params)

        def body(state, _):
            state = env.step(state, jnp.ones(3) / 3, params)
            return state, state.info["asset_returns"]

        return jax.lax.scan(body, state, None, length=120)[1]

    run = jax.jit(jax.vmap(returns))
    keys = jax.random.split(jax.random.key(0), 3)
    paths = run(keys, jnp.array([-0.8, 0.0, 0.8]))
    measured = [np.corrcoef(np.asarray(p).T)[0, 1] for p in paths]
    np.testing.assert_allclose(measured, [-0.8, 0.0, 0.8], atol=0.2)


# ------------------------------------------------------- float32 outside its range
@pytest.mark.parametrize(
    "weights", [[0.0, 0.0, 0.0, 1.0], [0.25, 0.25, 0.25, 0.25]], ids=["cash", "spread"]
)
def test_float32_stays_finite_and_agrees_with_x64_when_prices_underflow(weights):
    # sigma 3: float32 prices underflow after ~4,000 steps; returns are kept in log space.
    env = pf.PortfolioEnv(n_assets=3, sigma=3.0, episode_length=10_000, lookback=2)
    actions = np.tile(np.asarray(weights, np.float32), (env.episode_length, 1))
    f32, x64 = shared.float32_and_x64(env, actions)
    assert np.all(np.isfinite(f32.reward)) and np.all(np.isfinite(f32.observation["returns"]))
    assert np.all(np.isfinite(f32.info["asset_returns"]))
    np.testing.assert_allclose(f32.reward, x64.reward, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        f32.observation["returns"], x64.observation["returns"], rtol=1e-6, atol=1e-6
    )


# ------------------------------------------------------------------ property tests
PROPERTY_ENV = pf.PortfolioEnv(allow_short=True, **SHORT)
LONG_ENV = pf.PortfolioEnv(**SHORT)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    mu=st.lists(st.floats(-3.0, 3.0), min_size=5, max_size=5),
    sigma=st.lists(st.floats(0.0, 3.0), min_size=5, max_size=5),
    rate=st.floats(0.0, 0.8),
    short=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_properties_over_parameters_and_actions(mu, sigma, rate, short, seed):
    env = PROPERTY_ENV if short else LONG_ENV
    params = dataclasses.replace(
        env.params, mu=np.asarray(mu), sigma=np.asarray(sigma), cost=pf.ProportionalCost(rate)
    )
    actions = _actions(env, 12, seed) * 3.0  # far outside the box too
    for x64 in (False, True):
        with jax.enable_x64(x64):
            first, states = rollout(env.with_params(params), jax.random.key(seed), actions)
        assert bool(env.observation_space.contains(jax.tree.map(jnp.asarray, first.observation)))
        weights = np.concatenate(
            [first.observation["weights"][None], states.observation["weights"]]
        )
        returns = states.observation["returns"]
        value = states.info["portfolio_value"]
        assert np.all(np.isfinite(weights)) and np.all(np.isfinite(returns))
        assert np.all(np.isfinite(states.reward))
        assert np.all(value >= 0.0)
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-4)
        if not short:
            assert np.all((weights >= 0.0) & (weights <= 1.0))
