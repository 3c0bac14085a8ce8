"""MarketMaking-v0 is sekai 0.2.0's MarketMaking-v0, re-expressed in JAX.

The differential tests drive the installed sekai env with a replaying shim generator
(`finance_support.ReplayGenerator`) that serves it exactly the draws our env took from
`parallax.rng` (`env.step_noise`: `random(2)` then `standard_normal()` per step), and compare
every step under the spec's tolerance rule (sekai-finance-spec.md §9.3): float32
observations equal, float64 rewards and infos within `1e-12 + 1e-9 |expected|`, bools and
ints exact, a fill flip accepted only where the uniform sits within a few ulp of the fill
probability (and then that episode's comparison ends).
"""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace
from typing import Any

import _finance_env_cases as shared
import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sekai
from finance_support import ReplayGenerator
from hypothesis import given
from hypothesis import strategies as st

import parallax
from parallax import rng
from parallax.finance import MarketMakingEnv, MarketMakingParams, avellaneda_stoikov_policy
from parallax.finance._market_making import SLOTS

CONFIGS = {
    "default": {},
    "short": {"n_steps": 7, "max_inventory": 2},  # the battery's reference test
    "custom": {
        "s0": 50.0,
        "sigma": 0.5,
        "total_time": 2.0,
        "n_steps": 60,
        "fill_intensity": 50.0,
        "fill_decay": 0.8,
        "risk_aversion": 0.0,
        "max_inventory": 3,
        "order_size": 2,
        "max_offset": 3.0,
    },
}


SMALL = MarketMakingEnv(n_steps=5, max_inventory=2)
"""The env of the fast tests (one compilation per x64 mode and action shape)."""


def _at(states: parallax.State, i: int) -> SimpleNamespace:
    """Step `i` of a stacked rollout: its observation, reward, flags and info as NumPy."""
    fields = ("observation", "reward", "termination", "truncation", "info")
    return SimpleNamespace(
        **{f: jax.tree.map(lambda x: np.asarray(x)[i], getattr(states, f)) for f in fields}
    )


def _float_ok(got: Any, want: Any, atol: float, rtol: float) -> bool:
    g, w = float(got), float(want)
    if math.isnan(w):
        return math.isnan(g)
    return abs(g - w) <= atol + rtol * abs(w)


Rules = dict[str, tuple[float, float]]
"""Per-field float rule `(atol, rtol)`: `|a - b| <= atol + rtol |b|`; key "*" for the rest."""

X64_RULES: Rules = {"*": (1e-12, 1e-9)}  # spec §9.3
# float32 against sekai's float64 (fed our float32 draws): float32 rounding of prices
# (~1e2) and of sums of prices (cash, wealth ~1e4); the reward avoids that cancellation.
F32_RULES: Rules = {
    "*": (1e-6, 1e-6),
    "reward": (1e-5, 1e-5),
    "mid_price": (1e-3, 1e-6),
    "bid": (1e-3, 1e-6),
    "ask": (1e-3, 1e-6),
    "cash": (1e-2, 1e-6),
    "wealth": (1e-2, 1e-6),
}


def _rule_ok(rules: Rules, name: str, got: Any, want: Any) -> bool:
    atol, rtol = rules.get(name, rules["*"])
    return _float_ok(got, want, atol, rtol)


def _check_info(got: dict[str, Any], want: dict[str, Any], rules: Rules, where: str) -> None:
    assert sorted(got) == sorted(want), (where, sorted(got), sorted(want))
    for name, value in want.items():
        mine = np.asarray(got[name])
        if isinstance(value, bool | int):
            assert mine.dtype.kind in "bi", (where, name, mine.dtype)
            assert mine.item() == value, (where, name, mine.item(), value)
        else:
            assert _rule_ok(rules, name, mine, value), (where, name, mine.item(), value)


def _sekai_draws(noise: tuple[jax.Array, jax.Array]) -> list[tuple[str, tuple[Any, ...], Any]]:
    """Our per-step draws as the calls sekai's single env makes: `random(2)`, `standard_normal()`."""
    u, z = np.asarray(noise[0], np.float64), np.asarray(noise[1], np.float64)
    draws: list[tuple[str, tuple[Any, ...], Any]] = []
    for t in range(len(z)):
        draws += [("random", (2,), u[t]), ("standard_normal", (), z[t])]
    return draws


def _compare_with_sekai(
    kwargs: dict[str, Any], episodes: int, rules: Rules, obs_atol: float, flip_atol: float
) -> dict[str, int]:
    """Run `episodes` episodes of random actions in both envs; return comparison counts.

    A fill that differs is accepted only where the uniform lies within `flip_atol` of
    sekai's fill probability; that episode's comparison then ends.
    """
    env = MarketMakingEnv(**kwargs)
    ref = sekai.make("MarketMaking-v0", **kwargs)
    actions_rng = np.random.default_rng(123)
    counts = {"steps": 0, "fills": 0, "flips": 0}
    for episode in range(episodes):
        # Offsets reach beyond [0, max_offset] on both sides, to exercise the clipping.
        actions = actions_rng.uniform(-0.5, env.max_offset + 0.5, (env.n_steps, 2))
        actions = actions.astype(np.float32)
        first, noise, states = shared.noisy_rollout(
            env, jax.random.key(episode), jnp.asarray(actions)
        )
        ref.rng = shim = ReplayGenerator(_sekai_draws(noise))
        reset = ref.reset()
        assert np.array_equal(np.asarray(first.observation), reset.observation)
        _check_info(first.info, reset.info, rules, f"reset {episode}")
        for t in range(env.n_steps):
            result = ref.step(actions[t])
            assert shim.served == 2 * (t + 1), "sekai did not take this step's two draws"
            got = _at(states, t)
            where = f"episode {episode} step {t + 1}"
            flipped = [
                i
                for i, side in enumerate(("bid_filled", "ask_filled"))
                if bool(got.info[side]) != result.info[side]
            ]
            if flipped:
                offsets = np.clip(actions[t].astype(np.float64), 0.0, env.max_offset)
                u = np.asarray(noise[0][t], np.float64)
                for i in flipped:
                    p = ref.fill_probability(offsets[i])
                    assert abs(u[i] - p) <= flip_atol, (where, "unexplained fill flip", u[i], p)
                counts["flips"] += 1
                break  # a legitimate near-threshold flip: the trajectories part here
            np.testing.assert_allclose(
                np.asarray(got.observation), result.observation, rtol=0, atol=obs_atol
            )
            assert bool(got.termination) == result.terminated, where
            assert not bool(got.truncation) and not result.truncated, where
            assert _rule_ok(rules, "reward", got.reward, result.reward), (
                where,
                float(got.reward),
                result.reward,
            )
            _check_info(got.info, result.info, rules, where)
            counts["steps"] += 1
            counts["fills"] += int(result.info["bid_filled"]) + int(result.info["ask_filled"])
        else:
            assert result.terminated
            shim.assert_exhausted()
    return counts


@pytest.mark.parametrize("name", ["default", "custom"])
def test_trajectories_match_sekai_under_x64(name: str) -> None:
    with jax.enable_x64(True):
        counts = _compare_with_sekai(
            CONFIGS[name], episodes=2, rules=X64_RULES, obs_atol=0.0, flip_atol=1e-15
        )
    n_steps = MarketMakingEnv(**CONFIGS[name]).n_steps
    assert counts["flips"] == 0
    assert counts["steps"] == 2 * n_steps
    assert counts["fills"] > 0


INFO_KEYS = ("mid_price", "inventory", "cash", "wealth", "bid", "ask", "bid_filled", "ask_filled",
             "timestamp", "dt")  # fmt: skip


def test_battery_matches_sekai_reference_under_x64() -> None:
    """`check_matches_reference` with sekai as the reference (`GymReference`), fed our draws.

    After sekai's reset, a replaying generator with every draw of the episode (computed from
    the episode key in our reset state) replaces its `rng`; actions are uniform in the action
    space; the rule is the spec's (`1e-12 + 1e-9 |sekai|`, float32 observations equal).
    """
    with jax.enable_x64(True):
        env = MarketMakingEnv(**CONFIGS["short"])

        def serve_our_draws(sekai_env: Any, initial: dict[str, Any]) -> None:
            ek = jnp.asarray(initial["env_state.episode_key"])
            t = jnp.arange(env.n_steps, dtype=jnp.uint32)
            u = rng.uniform(ek, t[:, None], SLOTS.FILL, jnp.arange(2), dtype=jnp.float64)
            z = rng.normal(ek, t, SLOTS.MID, 0, dtype=jnp.float64)
            sekai_env.rng = ReplayGenerator(_sekai_draws((u, z)))

        report = shared.check_against_sekai_gym_reference(
            env, "MarketMaking-v0", CONFIGS["short"], serve_our_draws, INFO_KEYS
        )
    assert report.stats["steps_compared"] == 3 * env.n_steps


def test_trajectories_match_sekai_in_float32() -> None:
    """float32 (the default): sekai gets our float32 draws; values agree to float32 rounding.

    The reward is computed without cancelling two wealths in float32 (see the docs), so it
    stays within 1e-5 of sekai's float64 reward.
    """
    counts = _compare_with_sekai(
        CONFIGS["default"], episodes=1, rules=F32_RULES, obs_atol=1e-7, flip_atol=1e-6
    )
    assert counts["steps"] + counts["flips"] > 0 and counts["fills"] > 0


@pytest.mark.parametrize("name", ["default", "custom"])
def test_spaces_match_sekai(name: str) -> None:
    shared.assert_spaces_match_sekai(MarketMakingEnv, "MarketMaking-v0", CONFIGS[name])


def test_reset_matches_sekai(x64: bool) -> None:
    params = SMALL.params.replace(s0=-3.0)  # sekai allows a negative s0
    state = jax.jit(lambda key: SMALL.reset(key=key, params=params))(jax.random.key(0))
    reset = sekai.make("MarketMaking-v0", n_steps=5, max_inventory=2, s0=-3.0).reset(seed=0)
    np.testing.assert_array_equal(np.asarray(state.observation), reset.observation)
    _check_info(state.info, reset.info, X64_RULES if x64 else F32_RULES, "reset")
    assert float(state.reward) == 0.0 and not bool(state.done) and int(state.step_count) == 0


# -- constructor validation -----------------------------------------------------------------

INVALID = [
    {"n_steps": 0},
    {"n_steps": -3},
    {"max_inventory": 0},
    {"order_size": 0},
    {"n_steps": "10"},
    {"max_inventory": None},
    {"s0": float("nan")},
    {"s0": float("inf")},
    {"s0": "a"},
    {"s0": [1.0, 2.0]},
    {"sigma": -0.1},
    {"sigma": float("inf")},
    {"total_time": 0.0},
    {"total_time": -1.0},
    {"fill_intensity": 0.0},
    {"fill_intensity": float("nan")},
    {"fill_decay": 0.0},
    {"fill_decay": -1.0},
    {"risk_aversion": -1e-9},
    {"max_offset": -0.5},
    {"max_offset": float("inf")},
    {"max_offset": None},
]


@pytest.mark.parametrize("kwargs", INVALID, ids=[str(k) for k in INVALID])
def test_constructor_refuses_what_sekai_refuses(kwargs: dict[str, Any]) -> None:
    shared.assert_constructor_refuses_like_sekai(MarketMakingEnv, "MarketMaking-v0", kwargs)


VALID_EDGES = [
    {"s0": -5.0},
    {"sigma": 0.0},
    {"risk_aversion": 0.0},
    {"max_offset": 0.0},
    {"n_steps": 1, "max_inventory": 1, "order_size": 1},
    {"order_size": 3, "max_inventory": 2},
    {"n_steps": np.int64(5), "fill_intensity": np.float32(2.0)},
]


SEKAI_PARAM_NAMES = {
    "s0": "s0", "sigma": "sigma", "total_time": "total_time", "fill_intensity": "A",
    "fill_decay": "k", "risk_aversion": "risk_aversion",
}  # fmt: skip
"""Our params' names and sekai's attribute names for them."""


@pytest.mark.parametrize("kwargs", VALID_EDGES, ids=[str(k) for k in VALID_EDGES])
def test_constructor_accepts_what_sekai_accepts(kwargs: dict[str, Any]) -> None:
    shape = ("n_steps", "max_inventory", "order_size", "max_offset", "dt")
    shared.assert_constructor_accepts_like_sekai(
        MarketMakingEnv, "MarketMaking-v0", kwargs, SEKAI_PARAM_NAMES, shape
    )


def test_registry_builds_the_env_with_sekai_keywords() -> None:
    env = parallax.make("MarketMaking-v0", n_steps=7, max_inventory=2)
    assert isinstance(env, MarketMakingEnv)
    assert (env.n_steps, env.max_inventory) == (7, 2)


# -- the JAX contract ------------------------------------------------------------------------


def test_float64_under_x64() -> None:
    """Under x64 the rewards and float infos are float64 (observations stay float32), on
    reset and step alike; float32 is `check_env`'s job (the battery test)."""
    with jax.enable_x64(True):
        first, _, states = shared.noisy_rollout(SMALL, jax.random.key(0), jnp.full((7, 2), 0.1))
        nxt = jax.tree.map(lambda x: x[0], states)
        for state in (first, nxt):
            shared.assert_float64_state(SMALL, state, like=first, obs_shape=(2,))
            assert state.info["inventory"].dtype == jnp.int32
            assert state.info["bid_filled"].dtype == jnp.bool_
            for name in ("mid_price", "cash", "wealth", "bid", "ask", "timestamp", "dt"):
                assert state.info[name].dtype == jnp.float64, name
        assert jax.tree.map(lambda a: (a.shape, a.dtype), first.info) == jax.tree.map(
            lambda a: (a.shape, a.dtype), nxt.info
        )


def test_battery_contract_with_default_parameters() -> None:
    """`check_env`: spaces, dtypes, flags, stable structure, eager = jit = vmap = scan, one
    compilation, determinism and key dependence, for the env with sekai's defaults."""
    shared.assert_check_env_passes(
        MarketMakingEnv(), num_steps=6, including={"recompilation", "determinism"}
    )


def test_battery_batch_independence_under_x64() -> None:
    """`check_batch_independence`: every instance of `VmapWrapper(env, 3)` is bit-identical
    to the same instance run alone (non-default parameters, float64)."""
    shared.assert_batch_independent_under_x64(SMALL)


def test_draws_come_from_the_slot_table() -> None:
    _, (u, z), _ = shared.noisy_rollout(SMALL, jax.random.key(5), jnp.ones((7, 2)))
    ek = rng.episode_key(jax.random.key(5))
    np.testing.assert_array_equal(u[3], rng.uniform(ek, 3, SLOTS.FILL, jnp.arange(2)))
    np.testing.assert_array_equal(z[3], rng.normal(ek, 3, SLOTS.MID, 0))
    assert SLOTS.names == ("FILL", "MID")


def test_action_is_clipped_and_checked() -> None:
    key = jax.random.key(0)
    wild = jnp.tile(jnp.array([-7.0, 9.0]), (7, 1))
    tame = jnp.tile(jnp.array([0.0, SMALL.max_offset]), (7, 1))
    state, _, wild_states = shared.noisy_rollout(SMALL, key, wild)
    for a, b in zip(
        shared.leaves(wild_states), shared.leaves(shared.noisy_rollout(SMALL, key, tame)[2])
    ):
        np.testing.assert_array_equal(a, b)
    assert SMALL._action(jnp.ones((2, 1))).shape == (2,)  # 2 numbers in any shape, as sekai
    shared.assert_bad_actions_refused(SMALL, state, size=2)


@pytest.mark.parametrize(
    "action", [[np.nan, 1.0], [1.0, np.nan], [np.nan, np.nan], [np.inf, 1.0], [-np.inf, 0.5]]
)
def test_a_nan_offset_is_no_quote_eagerly_and_under_jit(action: list[float]) -> None:
    env = MarketMakingEnv()
    a = jnp.array(action, jnp.float32)
    stepped = jax.jit(env.step)
    for k in range(8):  # key 2's ask fills at offset 1
        state = env.reset(key=jax.random.key(k))
        eager, jitted = env.step(state, a), stepped(state, a)
        for x, y in zip(shared.leaves(eager), shared.leaves(jitted)):
            np.testing.assert_array_equal(x, y)
        quotes = jnp.stack([eager.info["bid"], eager.info["ask"]])
        filled = jnp.stack([eager.info["bid_filled"], eager.info["ask_filled"]])
        np.testing.assert_array_equal(jnp.isnan(quotes), np.isnan(action))
        assert not bool(jnp.any(filled & jnp.isnan(quotes)))
        assert bool(jnp.isfinite(eager.reward))
        # the quoted side does what the same offset does with the other side clipped to 0
        same = jnp.where(jnp.isnan(a), 0.0, a)
        plain = env.step(state, same)
        for side in ("bid", "ask"):
            if not np.isnan(action[0 if side == "bid" else 1]):
                assert eager.info[f"{side}_filled"] == plain.info[f"{side}_filled"]


def test_time_runs_out_after_n_steps_and_never_truncates() -> None:
    _, _, states = shared.noisy_rollout(SMALL, jax.random.key(0), jnp.ones((7, 2)))
    np.testing.assert_array_equal(states.termination, [False] * 4 + [True] * 3)
    assert not bool(states.truncation.any())
    assert bool(jax.vmap(SMALL.observation_space.contains)(states.observation).all())


def test_batch_lanes_are_independent_and_params_do_not_retrace() -> None:
    n = 4
    params = MarketMakingParams(
        s0=np.array([100.0, -5.0, 30.0, 100.0]), sigma=np.array([0.0, 1.0, 4.0, 2.0]),
        total_time=np.ones(n), fill_intensity=np.array([140.0, 10.0, 500.0, 140.0]),
        fill_decay=np.full(n, 1.5), risk_aversion=np.array([0.1, 0.0, 0.5, 0.1]),
    )  # fmt: skip
    keys = jax.random.split(jax.random.key(9), n)
    actions = np.random.default_rng(1).uniform(0.0, 2.0, (n, 7, 2)).astype(np.float32)
    first, states = shared.assert_lanes_independent(SMALL, params, keys, actions)
    mids = np.asarray(states.info["mid_price"])
    # Each lane runs with its own params: sigma = 0 keeps lane 0's mid at s0.
    np.testing.assert_array_equal(mids[0], 100.0)
    assert float(first.info["mid_price"][1]) == -5.0 and np.abs(mids[2] - 30.0).max() > 0


def test_make_vec_matches_sekai_native_autoreset_and_time_limit() -> None:
    """`make_vec` (VmapAutoResetWrapper(TimeLimit)) against sekai's native vector env.

    With `n_steps = max_episode_steps = 3` every episode ends terminated *and* truncated, and
    restarts in the same step; sekai's native env gets our per-lane draws as
    `random((N, 2))` then `standard_normal(N)` on every step.
    """
    n, steps = 3, 8
    kwargs = {"n_steps": 3, "max_inventory": 2}
    with jax.enable_x64(True):
        vec = parallax.make_vec("MarketMaking-v0", n, max_episode_steps=3, **kwargs)
        ref = sekai.make_vec(
            "MarketMaking-v0", n, vectorization_mode="native", max_episode_steps=3, **kwargs
        )
        actions = np.random.default_rng(0).uniform(0, 1.5, (steps, n, 2)).astype(np.float32)
        first, noise, states = shared.vec_noisy_rollout(vec, jax.random.key(0), actions)
        term, trunc = states.termination, states.truncation
        final_obs = states.info["final_observation"]
        final_cash = states.info["final_info"]["cash"]
        draws = []
        for t in range(steps):
            draws += [
                ("random", ((n, 2),), np.asarray(noise[0][t])),
                ("standard_normal", (n,), np.asarray(noise[1][t])),
            ]
        ref._rng = shim = ReplayGenerator(draws)
        result = ref.reset()
        np.testing.assert_array_equal(np.asarray(first.observation), result.observations)
        ended = 0
        for t in range(steps):
            result = ref.step(actions[t])
            np.testing.assert_array_equal(np.asarray(states.observation[t]), result.observations)
            np.testing.assert_allclose(states.reward[t], result.rewards, rtol=1e-9, atol=1e-12)
            np.testing.assert_array_equal(term[t], result.terminated)
            np.testing.assert_array_equal(trunc[t], result.truncated)
            for i in np.flatnonzero(result.dones):
                ended += 1
                info = result.infos[i]
                np.testing.assert_array_equal(final_obs[t][i], info["final_observation"])
                assert abs(float(final_cash[t][i]) - info["final_info"]["cash"]) <= 1e-9
        shim.assert_exhausted()
    assert ended == 2 * n and bool(term[2].all() & trunc[2].all())


# -- properties --------------------------------------------------------------------------------


@shared.PROPERTY_SETTINGS
@given(
    s0=st.floats(-1e3, 1e4, **shared.FINITE),
    sigma=st.floats(0.0, 20.0, **shared.FINITE),
    total_time=st.floats(1e-3, 50.0, **shared.FINITE),
    fill_intensity=st.floats(1e-3, 1e4, **shared.FINITE),
    fill_decay=st.floats(1e-3, 20.0, **shared.FINITE),
    risk_aversion=st.floats(0.0, 10.0, **shared.FINITE),
    actions=hnp.arrays(np.float32, (12, 2), elements=st.floats(-1e6, 1e6, width=32)),
    seed=st.integers(0, 2**31 - 1),
)
def test_properties_hold_for_any_valid_input(
    x64: bool,
    s0: float,
    sigma: float,
    total_time: float,
    fill_intensity: float,
    fill_decay: float,
    risk_aversion: float,
    actions: np.ndarray,
    seed: int,
) -> None:
    """Observations in the space, finite rewards and infos, inventory within its limits."""
    env = _PROPERTY_ENV
    params = MarketMakingParams(s0, sigma, total_time, fill_intensity, fill_decay, risk_aversion)
    first_mid, reward, info, termination, inside = jax.device_get(
        _property_rollout(params, jax.random.key(seed), jnp.asarray(actions))
    )
    assert inside.all()
    assert np.isfinite(reward).all()
    for name, value in info.items():
        if value.dtype.kind == "f":
            assert np.isfinite(value).all(), name
    inventory = info["inventory"]
    assert np.abs(inventory).max() <= env.max_inventory
    assert set(np.unique(np.diff(np.concatenate([[0], inventory])))) <= {-2, 0, 2}
    np.testing.assert_array_equal(termination, np.arange(1, 13) >= env.n_steps)
    # Quotes straddle the mid they were made at (up to XLA flushing subnormals to zero).
    mids = np.concatenate([[first_mid], info["mid_price"][:-1]])
    tiny = np.finfo(mids.dtype).tiny
    assert (info["bid"] <= mids + tiny).all() and (mids - tiny <= info["ask"]).all()


_PROPERTY_ENV = MarketMakingEnv(n_steps=10, max_inventory=3, order_size=2, max_offset=4.0)


@jax.jit
def _property_rollout(params: MarketMakingParams, key: jax.Array, actions: jax.Array) -> Any:
    """12 steps (2 past the end of the session); also whether each observation is in the space."""
    first, states = shared.rollout_with_params(_PROPERTY_ENV, params, key, actions)
    inside = jax.vmap(_PROPERTY_ENV.observation_space.contains)(states.observation)
    return first.info["mid_price"], states.reward, states.info, states.termination, inside


def test_avellaneda_stoikov_method_matches_sekai() -> None:
    env = MarketMakingEnv(**CONFIGS["custom"])
    ref = sekai.make("MarketMaking-v0", **CONFIGS["custom"])
    ref.reset(seed=0)
    state = env.reset(key=jax.random.key(0))
    for inventory, t in ((0, 0), (3, 10), (-2, 59)):
        ref.inventory, ref._t = inventory, t
        es = dataclasses.replace(state.env_state, inventory=jnp.int32(inventory))
        s = dataclasses.replace(state, env_state=es, step_count=jnp.int32(t))
        np.testing.assert_array_equal(
            env.avellaneda_stoikov_action(s), ref.avellaneda_stoikov_action()
        )
    assert avellaneda_stoikov_policy(env)(state).shape == (2,)
