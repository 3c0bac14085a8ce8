"""The four finance envs have one shape: frozen params, `with_params`, params through every
wrapper (domain randomisation with `make_vec`), parameters as attributes, and the equity key
they declare for `RecordEpisodeStatistics`.

Sizes are small (6-step episodes, 4 envs); each jitted rollout compiles once per id.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sekai
from finance_support import ReplayGenerator, run_against_sekai

import parallax
from parallax import (
    AutoResetWrapper,
    CheckedWrapper,
    ClipAction,
    NormalizeObservation,
    NormalizeReward,
    RecordEpisodeStatistics,
    TimeLimit,
    TransformAction,
    TransformObservation,
    TransformReward,
    VmapAutoResetWrapper,
    VmapWrapper,
)
from parallax.finance import (
    MarketMakingEnv,
    OptimalExecutionEnv,
    PortfolioEnv,
    TradingEnv,
)
from parallax.finance._common import FinanceEnv, ParamsMethods

N = 4
STEPS = 9  # past the 6-step episodes: the auto-reset runs with the given params too
KWARGS: dict[str, dict[str, Any]] = {
    "Trading-v0": {"episode_length": 6, "lookback": 3},
    "Portfolio-v0": {"n_assets": 2, "episode_length": 6, "lookback": 3},
    "MarketMaking-v0": {"n_steps": 6},
    "OptimalExecution-v0": {"n_steps": 6},
}
CLASSES = {
    "Trading-v0": TradingEnv,
    "Portfolio-v0": PortfolioEnv,
    "MarketMaking-v0": MarketMakingEnv,
    "OptimalExecution-v0": OptimalExecutionEnv,
}
IDS = list(KWARGS)


def _action(env_id: str, env: Any) -> Any:
    """One fixed legal action of the env."""
    if env_id == "Trading-v0":
        return jnp.int32(2)
    if env_id == "Portfolio-v0":
        return jnp.full(env.action_space.shape, 0.5, jnp.float32)
    if env_id == "MarketMaking-v0":
        return jnp.array([0.3, 0.6], jnp.float32)
    return jnp.array([0.3], jnp.float32)


def _per_env_params(env: Any) -> Any:
    """`env.params` with `sigma` different in each of the N envs (a leading N axis)."""
    sigma = np.asarray(env.params.sigma, np.float64)
    scale = np.array([0.0, 0.5, 1.0, 2.0]).reshape((N,) + (1,) * sigma.ndim)
    return env.params.replace(sigma=jnp.asarray(scale * sigma, jnp.float32))


def _plain(tree: Any) -> Any:
    """`tree` with typed PRNG keys as their key data (chex compares arrays of numbers)."""

    def leaf(x: Any) -> Any:
        if jax.dtypes.issubdtype(jnp.result_type(x), jax.dtypes.prng_key):
            return jax.random.key_data(x)
        return x

    return jax.tree.map(leaf, tree)


def _row(params: Any, i: int) -> Any:
    return params.replace(sigma=params.sigma[i])


# -- one shape -------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", IDS)
def test_params_are_frozen_pytrees_of_one_shape(env_id: str) -> None:
    env = CLASSES[env_id](**KWARGS[env_id])
    assert isinstance(env, FinanceEnv)
    assert isinstance(env.params, ParamsMethods)
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.params.sigma = 0.0  # type: ignore[misc]
    changed = env.params.replace(sigma=0.0 * np.asarray(env.params.sigma))
    assert np.all(np.asarray(changed.sigma) == 0.0)
    assert np.any(np.asarray(env.params.sigma) != 0.0)  # replace made a copy
    arrays = env.params.as_arrays()
    assert all(isinstance(x, jax.Array) and x.dtype == jnp.float32 for x in jax.tree.leaves(arrays))
    twin = env.with_params(changed)
    assert twin.params is changed and env.params is not changed
    assert type(twin) is type(env)


def test_old_modules_are_merged() -> None:
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("parallax.finance._mm_common")


# -- params through make_vec: domain randomisation -------------------------------------------
def _vec_rollout(vec: Any, action: Any) -> Any:
    @jax.jit
    @chex.assert_max_traces(n=1)
    def run(key: jax.Array, params: Any) -> Any:
        first = vec.reset(key=key, params=params)
        actions = jnp.broadcast_to(action, (N, *jnp.shape(action)))

        def body(state: Any, _: Any) -> tuple[Any, Any]:
            nxt = vec.step(state, actions, params=params)
            return nxt, nxt

        return jax.lax.scan(body, first, None, length=STEPS)[1]

    return run


def _single_rollout(env: Any, action: Any) -> Any:
    @jax.jit
    def run(key: jax.Array, params: Any) -> Any:
        first = env.reset(key=key, params=params)

        def body(state: Any, _: Any) -> tuple[Any, Any]:
            nxt = env.step(state, action, params=params)
            return nxt, nxt

        return jax.lax.scan(body, first, None, length=STEPS)[1]

    return run


@pytest.mark.parametrize("env_id", IDS)
def test_make_vec_with_per_env_params_matches_single_envs(env_id: str) -> None:
    """Env `i` of `make_vec` stepped with per-env params is the single env with row `i`."""
    chex.clear_trace_counter()
    vec = parallax.make_vec(env_id, N, **KWARGS[env_id])
    env = vec.unwrapped
    action = _action(env_id, env)
    params = _per_env_params(env)
    key = jax.random.key(3)
    run = _vec_rollout(vec, action)
    states = run(key, params)
    single = _single_rollout(AutoResetWrapper(parallax.make(env_id, **KWARGS[env_id])), action)
    keys = jax.random.split(key, N)
    for i in range(N):
        want = single(keys[i], _row(params, i))
        got = jax.tree.map(lambda x, i=i: x[:, i], states)
        chex.assert_trees_all_close(_plain(got), _plain(want), rtol=1e-6, atol=1e-6)
    # the params changed the simulation: sigma 0 and sigma 2x part ways
    infos = jax.tree.leaves(states.info)
    assert any(not np.allclose(np.asarray(x[:, 0]), np.asarray(x[:, 3])) for x in infos)
    # other values, same shapes: no retrace (assert_max_traces raises on a second trace)
    other = params.replace(sigma=params.sigma * 0.5)
    again = run(jax.random.key(4), other)
    assert any(
        not np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(again.info), infos, strict=True)
    )


def test_shared_params_are_broadcast_and_leaves_may_mix() -> None:
    vec = parallax.make_vec("MarketMaking-v0", N, n_steps=6)
    env = vec.unwrapped
    key = jax.random.key(0)
    action = jnp.full((N, 2), 0.5, jnp.float32)
    calm = env.params.replace(sigma=0.0)
    state = vec.step(vec.reset(key=key, params=calm), action, params=calm)
    np.testing.assert_array_equal(np.asarray(state.info["mid_price"]), 100.0)
    # the same value given per env (a leading N axis) gives the same states
    batched = calm.replace(sigma=jnp.zeros(N))
    state_b = vec.step(vec.reset(key=key, params=batched), action, params=batched)
    chex.assert_trees_all_equal(_plain(state), _plain(state_b))
    # default params differ (the mid moves)
    moved = vec.step(vec.reset(key=key), action)
    assert not np.allclose(np.asarray(moved.info["mid_price"]), 100.0)


def test_params_of_a_wrong_shape_or_structure_are_refused() -> None:
    vec = VmapWrapper(PortfolioEnv(n_assets=2, episode_length=6, lookback=3), N)
    env = vec.unwrapped
    with pytest.raises(ValueError, match=r"params leaf .*sigma.* shape \(3,\).*\(2,\).*\(4, 2\)"):
        vec.reset(key=jax.random.key(0), params=env.params.replace(sigma=jnp.ones(3)))
    with pytest.raises(TypeError, match=r"structure of env\.params"):
        vec.reset(key=jax.random.key(0), params={"sigma": 1.0})
    grid = parallax.make_vec("GridWorld-v0", N)
    with pytest.raises(TypeError, match="default params"):
        grid.reset(key=jax.random.key(0), params=env.params)


def test_envs_without_params_are_called_without_params() -> None:
    """`params=None` is never passed down: an env whose reset/step take no params works."""
    vec = RecordEpisodeStatistics(parallax.make_vec("GridWorld-v0", N, max_episode_steps=3))
    state = vec.reset(key=jax.random.key(0), params=None)
    state = vec.step(state, jnp.zeros(N, jnp.int32))
    assert state.observation.shape == (N, 4)


def test_params_pass_through_every_wrapper() -> None:
    """A stack of every wrapper hands `params=` down to reset, step and the auto-reset."""
    base = MarketMakingEnv(n_steps=3)
    stack = RecordEpisodeStatistics(
        NormalizeReward(
            NormalizeObservation(
                TransformReward(
                    TransformObservation(
                        TransformAction(
                            ClipAction(CheckedWrapper(VmapAutoResetWrapper(TimeLimit(base, 3), N))),
                            lambda a: a,
                        ),
                        lambda o: o,
                    ),
                    lambda r: r,
                )
            )
        )
    )
    calm = base.params.replace(sigma=0.0, s0=7.0)
    action = jnp.full((N, 2), 0.5, jnp.float32)

    @jax.jit
    def run(key: jax.Array, params: Any) -> Any:
        state = stack.reset(key=key, params=params)
        mids = [state.info["mid_price"]]
        for _ in range(5):  # past the end of the 3-step episodes
            state = stack.step(state, action, params=params)
            mids.append(state.info["mid_price"])
        return jnp.stack(mids)

    mids = run(jax.random.key(0), calm)
    np.testing.assert_array_equal(np.asarray(mids), 7.0)
    default = run(jax.random.key(0), base.params)
    assert not np.allclose(np.asarray(default[1:]), 7.0)


# -- RecordEpisodeStatistics reads what the env declares --------------------------------------
def test_episode_statistics_use_the_declared_equity_key() -> None:
    assert TradingEnv.episode_equity_key == "equity"
    assert PortfolioEnv.episode_equity_key == "portfolio_value"
    assert MarketMakingEnv.episode_equity_key == "wealth"
    assert OptimalExecutionEnv.episode_equity_key is None
    env = RecordEpisodeStatistics(parallax.make_vec("MarketMaking-v0", 2, n_steps=2))
    state = env.reset(key=jax.random.key(0))
    for _ in range(2):
        state = env.step(state, jnp.full((2, 2), 0.2, jnp.float32))
    stats = state.info["episode_statistics"]
    assert bool(stats.ended.all())
    np.testing.assert_array_equal(
        np.asarray(stats.final_equity), np.asarray(state.info["final_info"]["wealth"])
    )
    execution = RecordEpisodeStatistics(parallax.make_vec("OptimalExecution-v0", 2, n_steps=2))
    assert execution.reset(key=jax.random.key(0)).info["episode_statistics"].final_equity is None


def test_episode_statistics_read_a_custom_declaration() -> None:
    class Declared(MarketMakingEnv):
        episode_equity_key = "cash"

    env = RecordEpisodeStatistics(VmapAutoResetWrapper(Declared(n_steps=2), 2))
    state = env.reset(key=jax.random.key(0))
    for _ in range(2):
        state = env.step(state, jnp.full((2, 2), 0.2, jnp.float32))
    np.testing.assert_array_equal(
        np.asarray(state.info["episode_statistics"].final_equity),
        np.asarray(state.info["final_info"]["cash"]),
    )


# -- parameters as attributes ------------------------------------------------------------------
@pytest.mark.parametrize("env_id", IDS)
def test_reading_a_parameter_returns_it(env_id: str) -> None:
    env = CLASSES[env_id](**KWARGS[env_id])
    for name in type(env).attribute_params:
        if name in ("transaction_cost", "corr"):
            continue  # stored as given, not in params
        assert getattr(env, name) is getattr(env.params, name)


@pytest.mark.parametrize("env_id", IDS)
def test_setting_a_parameter_updates_the_next_episode(env_id: str) -> None:
    env = CLASSES[env_id](**KWARGS[env_id])
    action = _action(env_id, env)
    key = jax.random.key(1)
    before = env.step(env.reset(key=key), action)
    env.sigma = 0.0
    assert np.all(np.asarray(env.params.sigma) == 0.0)
    after = env.step(env.reset(key=key), action)
    expected = env.step(
        env.reset(key=key, params=env.params.replace(sigma=0.0 * np.asarray(env.params.sigma))),
        action,
    )
    chex.assert_trees_all_equal(_plain(after), _plain(expected))
    assert any(
        not np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(after.info), jax.tree.leaves(before.info), strict=True)
    )


@pytest.mark.parametrize("env_id", IDS)
def test_setting_a_parameter_is_validated_as_the_constructor(env_id: str) -> None:
    cls = CLASSES[env_id]
    env = cls(**KWARGS[env_id])
    with pytest.raises(ValueError) as by_constructor:
        cls(**KWARGS[env_id], sigma=-1.0)
    with pytest.raises(ValueError) as by_attribute:
        env.sigma = -1.0
    assert str(by_attribute.value) == str(by_constructor.value)
    assert np.all(np.asarray(env.params.sigma) >= 0)  # unchanged


def test_execution_checks_the_impact_condition_on_set() -> None:
    env = OptimalExecutionEnv(n_steps=5)
    with pytest.raises(ValueError, match="temporary_impact must exceed"):
        env.temporary_impact = 1e-12
    assert env.temporary_impact == 2.5e-6


@pytest.mark.parametrize(
    ("env_id", "name"),
    [
        ("Trading-v0", "lookback"),
        ("Trading-v0", "episode_length"),
        ("Trading-v0", "positions"),
        ("Portfolio-v0", "n_assets"),
        ("Portfolio-v0", "allow_short"),
        ("MarketMaking-v0", "n_steps"),
        ("MarketMaking-v0", "max_offset"),
        ("OptimalExecution-v0", "n_steps"),
    ],
)
def test_shape_parameters_are_read_only(env_id: str, name: str) -> None:
    env = CLASSES[env_id](**KWARGS[env_id])
    value = getattr(env, name)
    with pytest.raises(AttributeError, match=rf"{name} is read-only: .*build a new env"):
        setattr(env, name, value)
    vec = parallax.make_vec(env_id, 2, **KWARGS[env_id])
    with pytest.raises(AttributeError, match=rf"{name} is read-only"):
        setattr(vec, name, value)


def test_unknown_names_are_refused_with_a_did_you_mean() -> None:
    env = MarketMakingEnv(n_steps=4)
    with pytest.raises(AttributeError, match=r"'sigmaa'; did you mean 'sigma'"):
        env.sigmaa = 1.0  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"'sigmaa'; did you mean 'sigma'"):
        _ = env.sigmaa  # type: ignore[attr-defined]
    vec = parallax.make_vec("MarketMaking-v0", 2, n_steps=4)
    with pytest.raises(AttributeError, match=r"'sigmaa'; did you mean 'sigma'"):
        vec.sigmaa = 1.0
    assert "sigmaa" not in vec.__dict__
    trading = TradingEnv(episode_length=4, lookback=2)
    with pytest.raises(AttributeError, match=r"with_params\(env.params.replace\(cost=...\)\)"):
        trading.cost = 0.0  # type: ignore[attr-defined]


def test_attributes_through_a_wrapper_stack_and_make_vec() -> None:
    vec = parallax.make_vec("Trading-v0", 2, max_episode_steps=4, episode_length=6, lookback=3)
    env = vec.unwrapped
    assert vec.sigma == env.params.sigma
    vec.sigma = 0.35
    assert "sigma" not in vec.__dict__ and "sigma" not in vec.env.__dict__
    assert float(env.params.sigma) == 0.35 and float(vec.sigma) == 0.35
    stack = NormalizeReward(NormalizeObservation(AutoResetWrapper(TimeLimit(env, 4))))
    stack.mu = 0.0
    assert float(env.params.mu) == 0.0 and "mu" not in stack.__dict__
    with pytest.raises(ValueError, match="sigma must be a finite number >= 0"):
        stack.sigma = float("nan")
    # a wrapper's own attributes stay its own
    assert stack.epsilon == stack.env.epsilon


def test_portfolio_vector_parameters_and_correlation() -> None:
    env = PortfolioEnv(n_assets=2, episode_length=6, lookback=3)
    env.sigma = 0.3
    np.testing.assert_array_equal(env.params.sigma, [0.3, 0.3])
    env.corr = [[1.0, 0.5], [0.5, 1.0]]
    np.testing.assert_allclose(env.params.chol, np.linalg.cholesky([[1.0, 0.5], [0.5, 1.0]]))
    with pytest.raises(ValueError, match="corr must be symmetric"):
        env.corr = [[1.0, 0.5], [0.2, 1.0]]
    env.transaction_cost = 0.01
    assert env.transaction_cost == 0.01
    assert float(jax.tree.leaves(env.params.cost)[0]) == 0.01


# -- against sekai: env.name = value changes the simulation as sekai's set_attr -------------
def _sekai_sync(env_id: str, kwargs: dict[str, Any], **attrs: Any) -> Any:
    vec = sekai.make_vec(env_id, 1, vectorization_mode="sync", **kwargs)
    for name, value in attrs.items():
        vec.set_attr(name, value)
    return vec.envs[0]


@pytest.mark.parametrize(
    ("env_id", "kwargs", "attrs"),
    [
        ("Trading-v0", {"episode_length": 6, "lookback": 3}, {"sigma": 0.0, "mu": 0.4}),
        (
            "Portfolio-v0",
            {"n_assets": 2, "episode_length": 6, "lookback": 3},
            {"sigma": np.array([0.1, 0.4]), "mu": 0.02},
        ),
    ],
)
def test_set_attribute_matches_sekai_set_attr(
    env_id: str, kwargs: dict[str, Any], attrs: dict[str, Any]
) -> None:
    with jax.enable_x64(True):
        env = CLASSES[env_id](**kwargs)
        for name, value in attrs.items():
            setattr(env, name, value)
        theirs = _sekai_sync(env_id, kwargs, **attrs)
        actions = (
            np.array([2, 0, 1, 2, 2, 0])
            if env_id == "Trading-v0"
            else np.tile(np.float32([0.2, 0.5, 0.3]), (6, 1))
        )
        assert run_against_sekai(env, theirs, jax.random.key(0), actions) == 6
        # the attributes changed the simulation (the same key, other returns)
        window = np.asarray(env.reset(key=jax.random.key(0)).env_state.market.window)
        default = CLASSES[env_id](**kwargs).reset(key=jax.random.key(0))
        assert not np.allclose(window, np.asarray(default.env_state.market.window))
        if env_id == "Trading-v0":  # sigma = 0: every log return is the drift alone
            assert np.ptp(window, axis=0).max() < 1e-12


def test_market_making_set_attribute_matches_sekai_set_attr() -> None:
    with jax.enable_x64(True):
        env = MarketMakingEnv(n_steps=5)
        env.sigma = 0.0
        env.risk_aversion = 0.5
        theirs = _sekai_sync("MarketMaking-v0", {"n_steps": 5}, sigma=0.0, risk_aversion=0.5)
        state = env.reset(key=jax.random.key(0))
        draws = []
        states = []
        action = np.array([0.1, 0.2])
        for _ in range(5):
            u, z = env.step_noise(state)
            draws += [("random", (2,), np.asarray(u)), ("standard_normal", (), np.asarray(z))]
            state = env.step(state, jnp.asarray(action))
            states.append(state)
        theirs.rng = ReplayGenerator(draws)
        theirs.reset()
        for t, ours in enumerate(states):
            out = theirs.step(action)
            where = f"step {t + 1}"
            assert out.info["mid_price"] == 100.0 == float(ours.info["mid_price"]), where
            np.testing.assert_allclose(float(ours.reward), out.reward, rtol=1e-9, atol=1e-12)
            assert int(ours.info["inventory"]) == out.info["inventory"], where
