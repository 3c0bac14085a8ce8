"""`TradingEnv` (Trading-v0) against sekai 0.2.0: spaces, trajectories, vector semantics."""

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
from finance_support import assert_values_match, rollout, run_against_sekai, sp500
from hypothesis import given, settings
from hypothesis import strategies as st
from test_finance_portfolio import battery_env as portfolio_battery_env

import parallax
from parallax import finance as pf
from parallax.testing import TRANSFORM_TOLERANCE

SHORT = {"episode_length": 12, "lookback": 4}
_compare_vector_step = shared.compare_vector_step  # tests/test_finance_sequential.py imports it


def _history(rows, seed=0):
    return 100 * np.exp(np.cumsum(np.random.default_rng(seed).normal(0.0, 0.01, rows)))


def _actions(count, n, seed):
    return np.random.default_rng(seed).integers(0, n, count).astype(np.int32)


# ---------------------------------------------------------------------------- spaces
@pytest.mark.parametrize("positions", [(-1.0, 0.0, 1.0), (0.0, 1.0), (-3.0, 0.0, 3.0), (0.0, 2.0)])
def test_spaces_match_sekai(positions):
    ours = pf.TradingEnv(positions=positions, **SHORT)
    theirs = sekai.make("Trading-v0", positions=positions, **SHORT)
    shared.assert_box_matches(ours.observation_space, theirs.observation_space)
    assert ours.observation_space.dtype == np.float32
    assert ours.action_space.n == theirs.action_space.n == len(positions)


def test_registered_id_takes_sekai_keywords():
    env = parallax.make("Trading-v0", positions=(0.0, 1.0), lookback=7, episode_length=9)
    assert isinstance(env, pf.TradingEnv)
    assert (env.lookback, env.episode_length, env.action_space.n) == (7, 9, 2)
    with pytest.raises(AttributeError):
        env.lookback = 3  # shape parameters are read-only, as in sekai


# --------------------------------------------------------------- simulated markets
GBM_CONFIGS = {
    "default": {},
    "levered": {"positions": [-3.0, 0.0, 3.0], "sigma": 3.0, "mu": -0.5, "s0": 50.0},
    "costs_rewards": {
        "positions": [0.0, 0.5, 1.0],
        "transaction_cost": pf.ProportionalCost(2e-3) + pf.FixedCost(25.0) + pf.SpreadCost(1e-4),
        "reward": pf.LogReturn()
        - 0.5 * pf.DrawdownPenalty()
        - 1e-3 * pf.TurnoverPenalty()
        + pf.DifferentialSharpe(0.1),
        "capital": 1e4,
        "dt": 1 / 52,
    },
    "other_rewards": {
        "transaction_cost": pf.NoCost(),
        "reward": pf.SimpleReturn() + 2.0 * pf.ProfitAndLoss() - pf.MeanVariance(4.0),
        "sigma": 0.8,
    },
}


def _sekai_kwargs(kwargs):
    """Our kwargs with our cost/reward objects swapped for sekai's (same repr, same meaning)."""
    out = dict(kwargs)
    swaps = {
        "ProportionalCost(0.002) + FixedCost(25.0) + SpreadCost(half_spread=0.0001)": (
            sf.ProportionalCost(2e-3) + sf.FixedCost(25.0) + sf.SpreadCost(half_spread=1e-4)
        ),
        "NoCost()": sf.NoCost(),
        "LogReturn() - 0.5 * DrawdownPenalty() - 0.001 * TurnoverPenalty() + "
        "DifferentialSharpe(eta=0.1)": sf.LogReturn()
        - 0.5 * sf.DrawdownPenalty()
        - 1e-3 * sf.TurnoverPenalty()
        + sf.DifferentialSharpe(0.1),
        "SimpleReturn() + 2 * ProfitAndLoss() - MeanVariance(4)": sf.SimpleReturn()
        + 2.0 * sf.ProfitAndLoss()
        - sf.MeanVariance(4.0),
    }
    for name in ("transaction_cost", "reward"):
        if name in out and not isinstance(out[name], float):
            out[name] = swaps[repr(out[name])]
    return out


@pytest.mark.parametrize("config", list(GBM_CONFIGS))
def test_gbm_trajectories_match_sekai(config):
    kwargs = {**SHORT, **GBM_CONFIGS[config]}

    def actions(env, seed):
        return _actions(SHORT["episode_length"], env.action_space.n, seed)

    lengths = shared.lengths_against_sekai(
        pf.TradingEnv, "Trading-v0", kwargs, _sekai_kwargs, actions
    )
    if config == "levered":
        assert min(lengths) < SHORT["episode_length"], "expected a wipe-out (termination)"
    else:
        assert lengths == [SHORT["episode_length"]] * 3


def test_matches_sekai_under_check_matches_reference():
    shared.assert_matches_sekai_reference(pf.TradingEnv, "Trading-v0", SHORT)


# ------------------------------------------------------------------- the battery
def _battery_env(non_default):
    """The default market, or a history with non-default positions, costs and reward."""
    if not non_default:
        return pf.TradingEnv(episode_length=6, lookback=3)
    return pf.TradingEnv(
        _history(40, seed=9), episode_length=6, lookback=3, positions=(0.0, 0.5, 1.0, 2.0),
        transaction_cost=pf.ProportionalCost(1e-3) + pf.FixedCost(10.0),
        reward=pf.SimpleReturn() - pf.DrawdownPenalty() + pf.DifferentialSharpe(0.1),
        capital=1e4,
    )  # fmt: skip


BATTERY_ENVS = {"trading": _battery_env, "portfolio": portfolio_battery_env}
"""The market envs' battery cases (`battery_env(non_default)`; the portfolio's is in its file)."""
battery_cases = pytest.mark.parametrize(
    "battery_env", BATTERY_ENVS.values(), ids=BATTERY_ENVS.keys()
)


@battery_cases
def test_battery_default_market_float32(battery_env):
    shared.assert_check_env_passes(
        battery_env(False),
        num_steps=8,
        including={"recompilation", "key_sensitivity"},
        disable_jit=False,
    )


@battery_cases
def test_batch_independence_non_default_x64(battery_env):
    with jax.enable_x64(True):
        env = battery_env(True)
    # XLA compiles the batched and the single program separately and may contract
    # a * b + c into an FMA in one and not the other: floats may differ in the last ulps.
    shared.assert_batch_independent_under_x64(env, tolerance=TRANSFORM_TOLERANCE)


# ------------------------------------------------------------------- price history
def test_history_fixed_and_explicit_starts_match_sekai():
    prices = _history(60)
    kwargs = {**SHORT, "prices": prices, "sampler": 7, "transaction_cost": 5e-3}
    with jax.enable_x64(True):
        env = pf.TradingEnv(**kwargs)
        theirs = sekai.make("Trading-v0", **kwargs)
        actions = _actions(SHORT["episode_length"], 3, 0)
        assert run_against_sekai(env, theirs, jax.random.key(0), actions) == 12
        for start in (4, 30, -13, np.int64(-20)):
            assert run_against_sekai(env, theirs, jax.random.key(1), actions, start=start) == 12


def test_history_random_start_matches_sekai_through_the_shim():
    prices = _history(80, seed=3)
    kwargs = {**SHORT, "prices": prices, "positions": (0.0, 1.0)}
    with jax.enable_x64(True):
        env = pf.TradingEnv(**kwargs)
        theirs = sekai.make("Trading-v0", **kwargs)
        starts = set()
        for seed in range(4):
            key = jax.random.key(seed)
            actions = _actions(SHORT["episode_length"], 2, seed)
            run_against_sekai(env, theirs, key, actions)
            starts.add(env.sekai_draws(key)[0][2])
        assert len(starts) > 1


def test_sp500_windows_match_sekai():
    closes = sp500(400)
    kwargs = {"episode_length": 40, "lookback": 10, "transaction_cost": 2e-4}
    with jax.enable_x64(True):
        env = pf.TradingEnv(np.asarray(closes), **kwargs)
        theirs = sekai.make("Trading-v0", prices=np.asarray(closes), **kwargs)
        for seed, start in ((0, 10), (1, 200), (2, -41)):
            actions = _actions(40, 3, seed)
            assert run_against_sekai(env, theirs, jax.random.key(seed), actions, start=start) == 40


def test_dated_prices_give_sekais_step_length_and_dates():
    closes = sp500(400)  # a pandas Series indexed by dates, as sekai users pass it
    kwargs = {"episode_length": 40, "lookback": 10, "sampler": 100}
    with jax.enable_x64(True):
        env = pf.TradingEnv(closes, **kwargs)
        theirs = sekai.make("Trading-v0", prices=closes, **kwargs)
        assert float(env.params.dt) == theirs.dt != 1 / 252
        actions = _actions(40, 3, 3)
        run_against_sekai(env, theirs, jax.random.key(3), actions, timestamps=env.timestamps)
        start = np.datetime64("2000-03-01")
        row = env.resolve_start(start)
        assert env.timestamps[row] == theirs.reset(options={"start": start}).info["timestamp"]


# ------------------------------------------------------------------------- starts
def test_start_argument_is_checked_as_sekai_checks_it():
    prices = _history(40)
    env = pf.TradingEnv(prices, **SHORT)
    theirs = sekai.make("Trading-v0", prices=prices, **SHORT)
    for bad in (3, 40, -1, 24 + 4 + 1, True, "2020-01-01", np.nan):
        with pytest.raises((ValueError, TypeError)) as want:
            theirs.reset(options={"start": bad})
        with pytest.raises(want.type):
            env.reset(key=jax.random.key(0), start=bad)
    assert int(env.reset(key=jax.random.key(0), start=20.5).info["timestamp"]) == 21
    assert (
        env.resolve_start(sf.Time(20))
        == 20
        == theirs.reset(options={"start": sf.Time(20)}).info["timestamp"]
    )
    assert int(env.reset(key=jax.random.key(0), start=-13).info["timestamp"]) == 27
    with pytest.raises(ValueError, match="price history"):
        pf.TradingEnv(**SHORT).reset(key=jax.random.key(0), start=5)
    traced = jax.jit(lambda row: env.reset(key=jax.random.key(0), start=row).info["timestamp"])
    assert int(traced(jnp.int32(-13))) == 27
    with pytest.raises(Exception, match="start outside the valid rows"):
        jax.block_until_ready(traced(jnp.int32(2)))


def test_split_history_between_sub_envs_as_sekai_docs():
    history = _history(179)
    trading = {"prices": history, "episode_length": 21, "lookback": 10}
    lanes = 4
    starts = list(range(10, len(history) - 21, 21))
    ref = sekai.make_vec("Trading-v0", lanes, vector_kwargs={"autoreset": False}, **trading)
    covered = []
    with jax.enable_x64(True):
        vec = parallax.make_vec("Trading-v0", lanes, autoreset=False, **trading)
        step = jax.jit(vec.step)
        action = jnp.ones(lanes, jnp.int32)
        for k in range(0, len(starts), lanes):
            state = pf.reset_with_start(vec, key=jax.random.key(k), start=starts[k : k + lanes])
            out = ref.reset(options=[{"start": t} for t in starts[k : k + lanes]])
            assert_values_match(state.observation, out.observations, "reset")
            covered += state.info["timestamp"].tolist()
            for _ in range(21):
                state = step(state, action)
                out = ref.step(np.ones(lanes, int))
                assert_values_match(state.observation, out.observations, "observation")
                assert_values_match(state.reward, out.rewards, "reward")
            assert bool(state.truncation.all()) and bool(out.truncated.all())
    assert covered == [10, 31, 52, 73, 94, 115, 136, 157]
    ref.close()


def test_sequential_starts_follow_sekais_sampler():
    prices = _history(100)
    env = pf.TradingEnv(prices, sampler=pf.SequentialStart(start=5, stride=30), **SHORT)
    theirs = sekai.make("Trading-v0", prices=prices, sampler=sf.SequentialStart(5, 30), **SHORT)
    rows = env.sequential_starts(6)
    want = [int(theirs.reset(seed=0).info["timestamp"]) for _ in range(6)]
    assert rows.tolist() == want
    stamps = [int(env.reset(key=jax.random.key(0), start=int(r)).info["timestamp"]) for r in rows]
    assert stamps == want
    # a plain reset has no memory of earlier episodes: it uses the first window
    assert int(env.reset(key=jax.random.key(0)).info["timestamp"]) == want[0]


# ------------------------------------------------------------- vector semantics
def test_vector_autoreset_and_time_limit_match_sekai_native():
    prices = _history(50, seed=5)
    kwargs = {"prices": prices, "sampler": 3, "episode_length": 10, "lookback": 3}
    lanes, limit, steps = 3, 7, 25
    actions = np.random.default_rng(0).integers(0, 3, (steps, lanes)).astype(np.int32)
    finished = shared.vector_episodes_match_sekai_native("Trading-v0", kwargs, actions, limit)
    assert finished == lanes * 3  # every lane truncated by the time limit, three times


# ------------------------------------------------------------------- dtype contract
def test_dtypes_follow_the_float_mode(x64):
    env = pf.TradingEnv(**SHORT)
    first, states = rollout(env, jax.random.key(0), _actions(12, 3, 0))
    want = np.float64 if x64 else np.float32
    for state in (first, jax.tree.map(lambda x: x[0], states)):
        assert state.observation.dtype == np.float32
        assert state.reward.dtype == want
        assert state.termination.dtype == np.bool_ and state.step_count.dtype == np.int32
        assert state.info["timestamp"].dtype == np.int32
        for name in ("equity", "position", "price", "asset_return", "cost", "turnover", "dt"):
            assert state.info[name].dtype == want, name
    assert jax.tree.structure(first) == jax.tree.structure(jax.tree.map(lambda x: x[0], states))


# ------------------------------------------------------- float32 outside its range
EXTREME_MARKETS = {
    "sigma 3 for 10,000 steps": {"episode_length": 10_000, "sigma": 3.0},
    "s0 1e-30 falling": {"episode_length": 200, "s0": 1e-30, "mu": -50.0, "dt": 1.0},
    "s0 1e30 rising": {"episode_length": 1_000, "s0": 1e30, "mu": 50.0},
}


@pytest.mark.parametrize("kwargs", EXTREME_MARKETS.values(), ids=EXTREME_MARKETS.keys())
@pytest.mark.parametrize("action", [1, 2], ids=["flat", "long"])
def test_float32_stays_finite_and_agrees_with_x64_when_prices_leave_its_range(kwargs, action):
    # float32 prices underflow (or overflow) here; the returns are computed in log space.
    env = pf.TradingEnv(lookback=2, **kwargs)
    f32, x64 = shared.float32_and_x64(env, np.full(env.episode_length, action, np.int32))
    assert np.all(np.isfinite(f32.reward)) and np.all(np.isfinite(f32.observation))
    assert np.all(np.isfinite(f32.info["asset_return"]))
    np.testing.assert_allclose(f32.reward, x64.reward, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f32.observation, x64.observation, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(f32.termination, x64.termination)


# ------------------------------------------------------------- params / randomisation
def test_params_can_be_vmapped_without_retracing():
    env = pf.TradingEnv(episode_length=30, lookback=2, transaction_cost=0.0)
    chex.clear_trace_counter()

    @chex.assert_max_traces(n=1)  # new sigmas reuse the compiled program
    def episode(key, sigma):
        params = dataclasses.replace(env.params, sigma=sigma)
        state = env.reset(key=key, params=params)

        def body(state, _):
            state = env.step(state, jnp.int32(2), params)
            return state, state.info["asset_return"]

        return jax.lax.scan(body, state, None, length=30)[1]

    run = jax.jit(jax.vmap(episode))
    keys = jax.random.split(jax.random.key(0), 32)
    low = run(keys, jnp.full(32, 0.05))
    high = run(keys, jnp.full(32, 0.8))
    ratio = float(jnp.std(high) / jnp.std(low))
    assert 12.0 < ratio < 20.0  # returns scale with sigma (0.8 / 0.05 = 16)


def test_with_params_reaches_through_wrappers():
    env = pf.TradingEnv(episode_length=3, lookback=2)
    calm = env.with_params(dataclasses.replace(env.params, sigma=0.0, mu=0.0))
    stack = parallax.AutoResetWrapper(calm)
    state = jax.jit(lambda k: stack.step(stack.reset(key=k), jnp.int32(2)))(jax.random.key(1))
    assert float(state.info["asset_return"]) == 0.0
    assert float(env.params.sigma) == 0.2  # the original is untouched


# ------------------------------------------------------------------ property tests
PROPERTY_ENV = pf.TradingEnv(**SHORT)  # the structure of the default runs (shared compilation)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(
    mu=st.floats(-2.0, 2.0),
    sigma=st.floats(0.0, 4.0),
    s0=st.floats(1e-2, 1e4),
    positions=st.lists(st.floats(-3.0, 3.0), min_size=3, max_size=3),
    rate=st.floats(0.0, 1.5),
    seed=st.integers(0, 2**16),
)
def test_properties_over_parameters_and_actions(mu, sigma, s0, positions, rate, seed):
    env = PROPERTY_ENV
    params = dataclasses.replace(
        env.params,
        mu=np.float64(mu),
        sigma=np.float64(sigma),
        s0=np.float64(s0),
        positions=np.asarray(positions),
        cost=pf.ProportionalCost(rate),
    )
    pos = np.asarray(positions)
    space = pf.TradingEnv(positions=tuple(pos.tolist()), **SHORT).observation_space
    low, high = space.low.astype(np.float32), space.high.astype(np.float32)
    for x64 in (False, True):
        with jax.enable_x64(x64):
            first, states = rollout(
                env.with_params(params), jax.random.key(seed), _actions(12, 3, seed)
            )
        assert bool(space.contains(jnp.asarray(first.observation)))
        obs = np.concatenate([first.observation[None], states.observation])
        rewards = np.concatenate([first.reward[None], states.reward])
        equity = np.concatenate([first.info["equity"][None], states.info["equity"]])
        assert np.all(np.isfinite(obs)) and np.all(np.isfinite(rewards))
        assert np.all((obs >= low) & (obs <= high))
        assert np.all(equity >= 0.0)


def test_out_of_range_actions_clamp_to_the_nearest_position():
    """Action -1 trades to the first position and action k to the last (never a wrap)."""
    env = parallax.make("Trading-v0", **SHORT)
    first = env.reset(key=jax.random.key(0))
    step = jax.jit(env.step)
    for outside, inside in ((-1, 0), (-7, 0), (3, 2), (100, 2)):
        got = step(first, jnp.int32(outside))
        want = step(first, jnp.int32(inside))
        chex.assert_trees_all_equal(got, want)
