"""OptimalExecution-v0 is sekai 0.2.0's OptimalExecution-v0, re-expressed in JAX.

The differential tests drive the installed sekai env with a replaying shim generator
(`finance_support.ReplayGenerator`) that serves it exactly the draws our env took from
`parallax.rng` (`env.step_noise`: one `standard_normal()` per step), and compare every step
under the spec's tolerance rule (sekai-finance-spec.md §9.3, `finance_support.values_match`):
float32 observations equal up to rtol 1e-6, float64 rewards and infos within
`1e-12 + 1e-9 |expected|`, bools exact. The only threshold in the dynamics is the sell-out
cut `inventory < 1e-9 * X0`; a termination flip is accepted only right at it.
"""

from __future__ import annotations

import math
from typing import Any

import _finance_env_cases as shared
import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sekai
from finance_support import ReplayGenerator, values_match
from hypothesis import given
from hypothesis import strategies as st

import parallax
from parallax import rng
from parallax.finance import OptimalExecutionEnv, OptimalExecutionParams
from parallax.finance._execution import SLOTS, SOLD_OUT
from parallax.testing import Tolerance

CONFIGS = {
    "default": {},
    "short": {"n_steps": 7},  # the battery's reference test
    "custom": {**shared.CUSTOM_EXECUTION_MARKET, "s0": 20.0, "risk_aversion": 0.0},
}


def _host(state: parallax.State) -> dict[str, Any]:
    """Observation, reward, flags and info of a (stacked) state, as NumPy."""
    fields = ("observation", "reward", "termination", "truncation", "info")
    return {f: jax.tree.map(np.asarray, getattr(state, f)) for f in fields}


def _same(ours: Any, ref: Any) -> bool:
    """The spec rule (`values_match`), with NaN matching NaN (`execution_price` at reset)."""
    if isinstance(ref, float) and math.isnan(ref):
        return bool(np.isnan(ours))
    return values_match(ours, ref)


def _check_info(ours: dict[str, Any], ref: dict[str, Any], where: str) -> None:
    assert sorted(ours) == sorted(ref), (where, sorted(ours), sorted(ref))
    for name, value in ref.items():
        assert _same(ours[name], value), (where, name, ours[name], value)


def _actions(rng_np: np.random.Generator, n_steps: int) -> np.ndarray:
    """Fractions in [-0.1, 0.3] (negative ones clip to 0), float32 `(n_steps, 1)`."""
    return rng_np.uniform(-0.1, 0.3, (n_steps, 1)).astype(np.float32)


@pytest.mark.parametrize("name", ["default", "custom"])
def test_trajectories_match_sekai_under_x64(name: str) -> None:
    env = OptimalExecutionEnv(**CONFIGS[name])
    ref = sekai.make("OptimalExecution-v0", **CONFIGS[name])
    actions_rng = np.random.default_rng(11)
    compared = sold_out_early = 0
    with jax.enable_x64(True):
        for episode in range(3):
            actions = _actions(actions_rng, env.n_steps)
            if episode == 2:
                actions[env.n_steps // 2] = 1.7  # clipped to 1: sell everything half way
            first, noise, states = shared.noisy_rollout(
                env, jax.random.key(episode), jnp.asarray(actions)
            )
            ref.rng = shim = ReplayGenerator(
                [("standard_normal", (), float(z)) for z in np.asarray(noise)]
            )
            reset = ref.reset()
            first_h, states_h = _host(first), _host(states)
            assert np.array_equal(first_h["observation"], reset.observation)
            _check_info(first_h["info"], reset.info, "reset")
            for t in range(env.n_steps):
                out = ref.step(actions[t])
                got = jax.tree.map(lambda x, t=t: x[t], states_h)
                where = f"episode {episode} step {t + 1}"
                if bool(got["termination"]) != out.terminated:
                    inventory = out.info["inventory"] + out.info["shares_sold"]  # before the cut
                    cut = SOLD_OUT * env.params.initial_inventory
                    assert abs(inventory - cut) <= 1e-6 * cut, (where, "unexplained flip")
                    break
                assert values_match(got["observation"], out.observation), where
                assert values_match(got["reward"], out.reward), (where, got["reward"], out.reward)
                assert not out.truncated and not bool(got["truncation"]), where
                _check_info(got["info"], out.info, where)
                compared += 1
                if out.terminated:
                    sold_out_early += t + 1 < env.n_steps
                    break
            assert out.terminated
            assert shim.served == t + 1
    assert sold_out_early == 1 and compared == 2 * env.n_steps + env.n_steps // 2 + 1


INFO_KEYS = ("shares_sold", "execution_price", "inventory", "mid_price",
             "implementation_shortfall", "shortfall_bps", "timestamp", "dt")  # fmt: skip


def test_battery_matches_sekai_reference_under_x64() -> None:
    """`check_matches_reference` with sekai as the reference (`GymReference`), fed our draws
    (every draw of the episode, from the episode key of our reset state); actions uniform in
    [0, 1]; the spec's rule."""
    with jax.enable_x64(True):
        env = OptimalExecutionEnv(**CONFIGS["short"])

        def serve_our_draws(sekai_env: Any, initial: dict[str, Any]) -> None:
            ek = jnp.asarray(initial["env_state.episode_key"])
            z = rng.normal(ek, jnp.arange(env.n_steps), SLOTS.MID, 0, dtype=jnp.float64)
            sekai_env.rng = ReplayGenerator([("standard_normal", (), float(v)) for v in z])

        report = shared.check_against_sekai_gym_reference(
            env, "OptimalExecution-v0", CONFIGS["short"], serve_our_draws, INFO_KEYS
        )
    assert report.stats["episodes"] == 3 and report.stats["steps_compared"] >= 3


def test_trajectories_match_sekai_in_float32() -> None:
    """float32 (the default): sekai gets our float32 draws; values agree to float32 rounding."""
    env = OptimalExecutionEnv()
    ref = sekai.make("OptimalExecution-v0")
    actions = _actions(np.random.default_rng(5), env.n_steps)
    _, noise, states = shared.noisy_rollout(env, jax.random.key(4), jnp.asarray(actions))
    assert states.reward.dtype == jnp.float32
    ref.rng = ReplayGenerator([("standard_normal", (), float(z)) for z in np.asarray(noise)])
    ref.reset()
    states_h = _host(states)
    notional = 1e6 * 50.0
    for t in range(env.n_steps):
        out = ref.step(actions[t])
        got = jax.tree.map(lambda x, t=t: x[t], states_h)
        np.testing.assert_allclose(got["observation"], out.observation, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["reward"], out.reward, rtol=1e-4, atol=1e-3)
        assert bool(got["termination"]) == out.terminated
        scale = {"shares_sold": 1e6, "inventory": 1e6, "implementation_shortfall": notional}
        for name, value in out.info.items():
            atol = 1e-6 * scale.get(name, 100.0)
            np.testing.assert_allclose(got["info"][name], value, rtol=1e-5, atol=atol, err_msg=name)
        if out.terminated:
            break


@pytest.mark.parametrize("name", ["default", "custom"])
def test_spaces_match_sekai(name: str) -> None:
    shared.assert_spaces_match_sekai(OptimalExecutionEnv, "OptimalExecution-v0", CONFIGS[name])


def test_reset_matches_sekai(x64: bool) -> None:
    state = OptimalExecutionEnv(sigma=0.0).reset(key=jax.random.key(0))
    reset = sekai.make("OptimalExecution-v0", sigma=0.0).reset(seed=0)
    np.testing.assert_array_equal(np.asarray(state.observation), reset.observation)
    _check_info(_host(state)["info"], reset.info, "reset")
    assert float(state.reward) == 0.0 and not bool(state.done) and int(state.step_count) == 0


# -- constructor validation -----------------------------------------------------------------

INVALID = [
    {"n_steps": 0},
    {"n_steps": -2},
    {"n_steps": "5"},
    {"n_steps": None},
    {"initial_inventory": 0.0},
    {"initial_inventory": -1.0},
    {"initial_inventory": float("nan")},
    {"initial_inventory": "many"},
    {"s0": 0.0},
    {"s0": -50.0},
    {"s0": float("inf")},
    {"sigma": -0.1},
    {"total_time": 0.0},
    {"total_time": float("nan")},
    {"permanent_impact": -1e-7},
    {"temporary_impact": 0.0},
    {"temporary_impact": -2.5e-6},
    {"fixed_cost": -0.01},
    {"risk_aversion": -1e-6},
    {"risk_aversion": [1e-6]},
    # eta - gamma tau / 2 <= 0: 2.5e-6 - 0.5 * 1e-4 * 0.2 < 0
    {"temporary_impact": 2.5e-6, "permanent_impact": 1e-4},
]


@pytest.mark.parametrize("kwargs", INVALID, ids=[str(k) for k in INVALID])
def test_constructor_refuses_what_sekai_refuses(kwargs: dict[str, Any]) -> None:
    shared.assert_constructor_refuses_like_sekai(OptimalExecutionEnv, "OptimalExecution-v0", kwargs)


VALID_EDGES = [
    {"sigma": 0.0},
    {"permanent_impact": 0.0, "fixed_cost": 0.0, "risk_aversion": 0.0},
    {"n_steps": 1},
    {"n_steps": np.int32(3), "s0": np.float32(10.0)},
    {"temporary_impact": 1e-5, "permanent_impact": 9.9e-5},  # eta~ barely positive
]


SEKAI_PARAM_NAMES = {
    "initial_inventory": "X0", "s0": "s0", "sigma": "sigma", "total_time": "total_time",
    "permanent_impact": "gamma", "temporary_impact": "eta", "fixed_cost": "epsilon",
    "risk_aversion": "risk_aversion",
}  # fmt: skip
"""Our params' names and sekai's attribute names for them."""


@pytest.mark.parametrize("kwargs", VALID_EDGES, ids=[str(k) for k in VALID_EDGES])
def test_constructor_accepts_what_sekai_accepts(kwargs: dict[str, Any]) -> None:
    shared.assert_constructor_accepts_like_sekai(
        OptimalExecutionEnv, "OptimalExecution-v0", kwargs, SEKAI_PARAM_NAMES, ("n_steps", "tau")
    )


def test_registry_builds_the_env_with_sekai_keywords() -> None:
    env = parallax.make("OptimalExecution-v0", n_steps=7, risk_aversion=0.0)
    assert isinstance(env, OptimalExecutionEnv)
    assert env.n_steps == 7 and env.params.risk_aversion == 0.0


# -- the JAX contract ------------------------------------------------------------------------

SMALL = OptimalExecutionEnv(n_steps=5)


def test_float64_under_x64() -> None:
    """Under x64 the rewards and float infos are float64 (observations stay float32), on
    reset and step alike; float32 is `check_env`'s job (the battery test)."""
    with jax.enable_x64(True):
        first = SMALL.reset(key=jax.random.key(0))
        nxt = jax.jit(SMALL.step)(first, jnp.array([0.25], jnp.float32))
        for state in (first, nxt):
            shared.assert_float64_state(SMALL, state, like=first, obs_shape=(3,))
            for name, value in state.info.items():
                assert value.dtype == jnp.float64 and value.shape == (), name


def test_battery_contract_with_default_parameters() -> None:
    """`check_env`: spaces, dtypes, flags, stable structure, eager = jit = vmap = scan, one
    compilation, determinism and key dependence, for the env with sekai's defaults."""
    shared.assert_check_env_passes(
        OptimalExecutionEnv(), num_steps=6, including={"recompilation", "determinism"}
    )


SOLO_VS_BATCH = Tolerance(rtol=1e-12)
"""A lane alone and inside a batch: XLA:CPU contracts `inventory - fraction * inventory`
(and other `a + b * c`) into a fused multiply-add in one program and not in the other, a
1-ulp difference; lanes of one program never differ (see the test below)."""


def test_battery_batch_independence_under_x64() -> None:
    """`check_batch_independence`: every instance of `VmapWrapper(env, 3)` matches the same
    instance run alone (non-default parameters, float64) to rounding."""
    shared.assert_batch_independent_under_x64(SMALL, tolerance=SOLO_VS_BATCH)


@pytest.mark.parametrize("initial_inventory", [1e20, 1e30])
def test_float32_rewards_stay_finite_and_agree_with_x64_for_huge_inventories(
    initial_inventory: float,
) -> None:
    # inventory**2 overflows float32 from X0 ~ 1e19; the float32 reward is scaled by X0 s0.
    env = OptimalExecutionEnv(initial_inventory=initial_inventory)
    actions = jnp.full((env.n_steps, 1), 0.1, jnp.float32)
    runs = []
    for x64 in (False, True):
        with jax.enable_x64(x64):
            runs.append(_host(shared.noisy_rollout(env, jax.random.key(0), actions)[2]))
    f32, f64 = runs
    assert np.all(np.isfinite(f32["reward"])) and np.all(np.isfinite(f32["observation"]))
    np.testing.assert_allclose(f32["reward"], f64["reward"], rtol=1e-5)
    np.testing.assert_allclose(f32["observation"], f64["observation"], rtol=1e-5, atol=1e-6)


def test_draws_come_from_the_slot_table() -> None:
    state = SMALL.step(SMALL.reset(key=jax.random.key(5)), jnp.array([0.1]))
    ek = rng.episode_key(jax.random.key(5))
    np.testing.assert_array_equal(SMALL.step_noise(state), rng.normal(ek, 1, SLOTS.MID, 0))
    assert SLOTS.names == ("MID",)


def test_action_is_clipped_and_checked() -> None:
    state = SMALL.reset(key=jax.random.key(0))
    for wild, tame in (([[3.0]], [1.0]), (-1.0, [0.0])):  # any shape with 1 element
        a, b = SMALL.step(state, jnp.asarray(wild)), SMALL.step(state, jnp.asarray(tame))
        for field in ("env_state", "observation", "reward", "termination", "info"):
            for x, y in zip(jax.tree.leaves(getattr(a, field)), jax.tree.leaves(getattr(b, field))):
                np.testing.assert_array_equal(x, y)
    shared.assert_bad_actions_refused(SMALL, state, size=1)


def test_selling_out_terminates_and_the_last_step_sells_the_rest() -> None:
    _, _, early = shared.noisy_rollout(SMALL, jax.random.key(0), jnp.array([[0.5], [1.0], [0.0]]))
    np.testing.assert_array_equal(early.termination, [False, True, True])
    np.testing.assert_array_equal(early.info["inventory"], [5e5, 0.0, 0.0])
    _, _, never = shared.noisy_rollout(SMALL, jax.random.key(0), jnp.zeros((5, 1)))
    np.testing.assert_array_equal(never.termination, [False] * 4 + [True])
    np.testing.assert_array_equal(never.info["shares_sold"], [0.0] * 4 + [1e6])
    assert not bool(never.truncation.any()) and not bool(early.truncation.any())


def test_batch_lanes_are_independent_and_params_do_not_retrace() -> None:
    n = 4
    params = OptimalExecutionParams(
        initial_inventory=np.array([1e6, 1e3, 5e4, 1e6]), s0=np.array([50.0, 10.0, 20.0, 50.0]),
        sigma=np.array([0.95, 0.0, 0.3, 2.0]), total_time=np.array([5.0, 1.0, 2.0, 5.0]),
        permanent_impact=np.full(n, 2.5e-7), temporary_impact=np.full(n, 2.5e-6),
        fixed_cost=np.array([0.0625, 0.0, 0.01, 0.1]), risk_aversion=np.full(n, 1e-6),
    )  # fmt: skip
    keys = jax.random.split(jax.random.key(2), n)
    actions = np.random.default_rng(3).uniform(0.0, 0.5, (n, 5, 1)).astype(np.float32)
    first, states = shared.assert_lanes_independent(SMALL, params, keys, actions)
    # Each lane runs with its own params: lane 1 starts at 10 and sells below it.
    assert float(first.info["mid_price"][1]) == 10.0
    assert float(states.info["execution_price"][1, 0]) < 10.0
    np.testing.assert_array_equal(np.asarray(states.info["inventory"])[:, -1], 0.0)


def test_make_vec_matches_sekai_native_autoreset_and_time_limit() -> None:
    """`make_vec` (VmapAutoResetWrapper(TimeLimit)) against sekai's native vector env.

    Lane 0 sells everything at once (terminates every step), the others sell slowly and are
    cut by the time limit (3 < n_steps = 4); sekai's native env gets our per-lane draws as
    `standard_normal(N)` on every step.
    """
    n, steps = 3, 7
    with jax.enable_x64(True):
        vec = parallax.make_vec("OptimalExecution-v0", n, max_episode_steps=3, n_steps=4)
        ref = sekai.make_vec(
            "OptimalExecution-v0", n, vectorization_mode="native", max_episode_steps=3, n_steps=4
        )
        actions = np.random.default_rng(1).uniform(0, 0.3, (steps, n, 1)).astype(np.float32)
        actions[:, 0] = 1.0
        first, noise, states = shared.vec_noisy_rollout(vec, jax.random.key(0), actions)
        term, trunc = states.termination, states.truncation
        final_obs = states.info["final_observation"]
        final_bps = states.info["final_info"]["shortfall_bps"]
        ref._rng = shim = ReplayGenerator(
            [("standard_normal", (n,), np.asarray(noise[t])) for t in range(steps)]
        )
        result = ref.reset()
        np.testing.assert_array_equal(np.asarray(first.observation), result.observations)
        for t in range(steps):
            result = ref.step(actions[t])
            assert values_match(states.observation[t], result.observations), t
            assert values_match(states.reward[t], result.rewards), t
            np.testing.assert_array_equal(term[t], result.terminated)
            np.testing.assert_array_equal(trunc[t], result.truncated)
            for i in np.flatnonzero(result.dones):
                info = result.infos[i]
                assert values_match(final_obs[t][i], info["final_observation"]), (t, i)
                assert values_match(final_bps[t][i], info["final_info"]["shortfall_bps"]), (t, i)
        shim.assert_exhausted()
    assert bool(term[:, 0].all()) and bool(trunc[2, 1:].all()) and not bool(term[2, 1:].any())


# -- properties --------------------------------------------------------------------------------

_PROPERTY_ENV = OptimalExecutionEnv(n_steps=8)


@jax.jit
def _property_rollout(params: OptimalExecutionParams, key: jax.Array, actions: jax.Array) -> Any:
    return shared.rollout_with_params(_PROPERTY_ENV, params, key, actions)[1]


@shared.PROPERTY_SETTINGS
@given(
    x0=st.floats(1.0, 1e8, **shared.FINITE),
    s0=st.floats(1e-2, 1e4, **shared.FINITE),
    sigma=st.floats(0.0, 10.0, **shared.FINITE),
    total_time=st.floats(1e-2, 100.0, **shared.FINITE),
    gamma=st.floats(0.0, 1e-5, **shared.FINITE),
    eta_excess=st.floats(1e-9, 1e-3, **shared.FINITE),
    epsilon=st.floats(0.0, 1.0, **shared.FINITE),
    lam=st.floats(0.0, 1e-4, **shared.FINITE),
    seed=st.integers(0, 2**31 - 1),
    actions=hnp.arrays(np.float32, (8, 1), elements=st.floats(-10.0, 10.0, width=32)),
)
def test_properties_hold_for_any_valid_input(
    x64: bool,
    x0: float,
    s0: float,
    sigma: float,
    total_time: float,
    gamma: float,
    eta_excess: float,
    epsilon: float,
    lam: float,
    actions: np.ndarray,
    seed: int,
) -> None:
    """Observations in the space, finite rewards and infos, inventory only falls to 0."""
    eta = eta_excess + 0.5 * gamma * total_time / _PROPERTY_ENV.n_steps
    params = OptimalExecutionParams(x0, s0, sigma, total_time, gamma, eta, epsilon, lam)
    states = _property_rollout(params, jax.random.key(seed), jnp.asarray(actions))
    contains = jax.vmap(_PROPERTY_ENV.observation_space.contains)
    done = np.cumsum(np.asarray(states.termination)) > 1  # steps after the episode ended
    assert bool(contains(states.observation)[~done].all())
    assert bool(jnp.isfinite(states.reward).all())
    for name, value in states.info.items():
        assert bool(jnp.isfinite(value).all()), name
    inventory = np.asarray(states.info["inventory"], np.float64)
    shares = np.asarray(states.info["shares_sold"], np.float64)
    assert (shares >= 0).all() and (inventory >= 0).all() and inventory[-1] == 0.0
    assert (np.diff(inventory) <= 0).all()
    np.testing.assert_allclose(shares.sum(), x0, rtol=1e-5)
    assert bool(states.termination[-1]) and not bool(states.truncation.any())
