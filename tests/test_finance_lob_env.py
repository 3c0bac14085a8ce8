"""`LimitOrderBookEnv` (LimitOrderBook-v0) against sekai 0.2.0's `LimitOrderBookEnv`.

sekai's env is driven by the flow tests' shim generator (`FlowShim`: the `n`-th draw of each
kind is our `n`-th draw of its slot at the step's index), with x64 on, and random legal
actions; after reset and after every step the observations, rewards, flags, info, action
masks and every resting order of the two books must be equal, over whole sessions, for
sekai's default flow, a thin book (`cancel_rate=1.0`) and a deep one (`cancel_rate=0.1`).
Then: constructor errors as sekai's, float32, vmap against single envs, the battery.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import _lob_cases as cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_finance_lob_flow import FlowShim, resting, sekai_resting

import parallax
from parallax import VmapWrapper, random_actions, rng
from parallax.finance._lob import FlowParams, LimitOrderBookEnv
from parallax.testing import BATTERY_CHECKS, run_battery

lob_env = pytest.importorskip("sekai.envs.finance.lob_env")
lob = pytest.importorskip("sekai.finance.lob")

# one worker runs this file, so its module fixtures are built once per `make test`
pytestmark = pytest.mark.xdist_group("finance_lob_env")

# A small limit and two-lot orders exercise the masks, partial fills and the limits often;
# the last step is half an interval (session_length 120.5).
SMALL = {
    "session_length": 120.5,
    "order_size": 2,
    "max_inventory": 5,
    "max_trades": 8,
    "warmup": 10.0,
}
SETTINGS: dict[str, tuple[dict[str, Any], dict[str, Any], int]] = {
    # name: (env keywords shared with sekai, flow keywords, our capacity)
    "default": ({}, {}, 64),  # sekai's defaults: a 300-step session
    "thin": (SMALL, {"cancel_rate": 1.0}, 192),
    "deep": (SMALL, {"cancel_rate": 0.1}, 192),
}
# thin and deep share one env (capacity 192: the deep book needs the room) and its compiled
# reset/step; the flow is a param, and the env's own flow (thin's, the more active) sets the
# loop bounds


class EnvShim(FlowShim):
    """`FlowShim` that leaves the seed book's draws by itself after the 60 orders of
    `initialise` (sekai's env runs the warm-up right after, with no hook between)."""

    def poisson(self, lam: float) -> int:
        out = super().poisson(lam)
        if self.init and self.counts["init"] == 60:
            self.init = False
        return out


def _assert_same(state: Any, obs: dict[str, Any], info: dict[str, Any], where: str) -> None:
    ours = jax.tree.map(np.asarray, state.observation)
    np.testing.assert_array_equal(ours["book"], obs["book"], err_msg=where)
    np.testing.assert_array_equal(ours["agent"], obs["agent"], err_msg=where)
    np.testing.assert_array_equal(ours["trades"]["values"], obs["trades"]["values"], err_msg=where)
    np.testing.assert_array_equal(ours["trades"]["mask"], obs["trades"]["mask"], err_msg=where)
    got = {k: np.asarray(v).item() for k, v in state.info.items()}
    assert not got.pop("overflow"), where
    expected = dict(info)
    expected["spread"] = 0 if expected["spread"] is None else expected["spread"]
    assert got == expected, where


@pytest.fixture
def x64_on():
    with jax.enable_x64(True):
        yield


@functools.cache
def _compiled(setting: str) -> tuple[LimitOrderBookEnv, Any, Any]:
    """The env of `setting` with its jitted reset/step, which take the flow as a param; deep
    gets thin's (same keywords and capacity), so the two cases share the compiled code."""
    if setting == "deep":
        return _compiled("thin")
    kwargs, flow_kwargs, capacity = SETTINGS[setting]
    env = LimitOrderBookEnv(flow=FlowParams(**flow_kwargs), capacity=capacity, **kwargs)
    return env, jax.jit(env.reset), jax.jit(env.step)


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_env_equals_sekai_step_by_step(setting: str, x64_on: None) -> None:
    kwargs, flow_kwargs, _ = SETTINGS[setting]
    env, reset_j, step_j = _compiled(setting)
    params = dataclasses.replace(env.params, flow=FlowParams(**flow_kwargs))

    def reset(key: Any) -> Any:
        return reset_j(key=key, params=params)

    def step(state: Any, action: Any) -> Any:
        return step_j(state, action, params)

    seeds = (0,) if setting == "default" else (0, 1)
    totals = {"fills": 0, "kept": 0, "market": 0, "limit_hit": 0, "steps": 0, "short": 0}
    for seed in seeds:
        key = jax.random.key(seed)
        ref = lob_env.LimitOrderBookEnv(flow=lob.ZeroIntelligenceFlow(**flow_kwargs), **kwargs)
        state = reset(key=key)
        shim = EnvShim(state.env_state.episode_key, ref.core.flow.mean_size)
        ref.rng = shim
        first = ref.reset()
        obs, info = first.observation, first.info
        _assert_same(state, obs, info, f"{setting} seed {seed} reset")
        assert resting(state.env_state.book) == sekai_resting(ref.book)
        gen = np.random.default_rng(100 + seed)
        previous = None
        for k in range(1, env.n_steps + 1):
            where = f"{setting} seed {seed} step {k}"
            mask = ref.action_mask()
            ours_mask = [np.asarray(m) for m in state.action_mask]
            assert [m.tolist() for m in ours_mask] == [m.astype(bool).tolist() for m in mask]
            action = cases.random_legal_action(gen, mask, previous)
            totals["kept"] += int(previous is not None and np.array_equal(action, previous))
            totals["market"] += int(action[2] != 1)
            totals["limit_hit"] += int(not all(np.all(m) for m in mask))
            previous = action
            shim.set_step(k)
            result = ref.step(action)
            state = step(state, jnp.asarray(action))
            _assert_same(state, result.observation, result.info, where)
            assert float(state.reward) == result.reward, where
            assert bool(state.termination) == result.terminated, where
            assert bool(state.truncation) == result.truncated, where
            assert resting(state.env_state.book) == sekai_resting(ref.book), where
            book = state.env_state.book
            assert int(book.next_id) == ref.book._next_id, where
            assert int(book.last_price) == ref.book.last_price, where
            totals["fills"] += result.info["fills"]
            totals["short"] += int(result.info["dt"] < env.decision_interval)
            totals["steps"] += 1
        assert bool(state.termination)
    # the sessions exercised what they claim to
    assert totals["steps"] == len(seeds) * env.n_steps
    assert totals["fills"] > totals["steps"] // 10, totals
    assert totals["kept"] > totals["steps"] // 4, totals
    assert totals["market"] > totals["steps"] // 10, totals
    if setting != "default":
        assert totals["limit_hit"] > 0, totals
        assert totals["short"] == len(seeds), totals  # the half-interval last step


# -- construction ---------------------------------------------------------------------------

BAD = [
    {"decision_interval": 0.0},
    {"decision_interval": float("nan")},
    *cases.BAD_CORE_SETTINGS,
    {"session_length": float("inf")},
    {"inventory_penalty": -0.1},
    {"warmup": -1.0},
]


@pytest.mark.parametrize("kwargs", BAD, ids=cases.setting_ids(BAD))
def test_constructor_rejects_what_sekai_rejects(kwargs: dict[str, Any]) -> None:
    name, ours, theirs = cases.rejections(lob_env.LimitOrderBookEnv, LimitOrderBookEnv, kwargs)
    assert name in ours and name in theirs


def test_constructor_checks_our_own_arguments() -> None:
    with pytest.raises(TypeError, match=r"levels must be an int, got 2\.5"):
        LimitOrderBookEnv(levels=2.5)
    with pytest.raises(ValueError, match="capacity must be >= 2, got 1"):
        LimitOrderBookEnv(capacity=1)
    cases.assert_rejects_our_core_arguments(LimitOrderBookEnv)


def test_defaults_and_spaces_are_sekais() -> None:
    ours, theirs = LimitOrderBookEnv(), lob_env.LimitOrderBookEnv()
    assert ours.n_steps == theirs.n_steps == 300
    cases.assert_core_defaults_are_sekais(ours, theirs.core)
    assert ours.action_space.nvec.tolist() == theirs.action_space.nvec.tolist()
    space = ours.observation_space.spaces
    assert space["book"].shape == theirs.observation_space["book"].shape
    assert space["agent"].shape == theirs.observation_space["agent"].shape
    assert space["trades"]["values"].shape == theirs.observation_space["trades"]["values"].shape
    assert space["trades"]["mask"].shape == theirs.observation_space["trades"]["mask"].shape


# -- float32, batches, the battery ------------------------------------------------------------

TINY = {"session_length": 6.0, "warmup": 2.0, "max_inventory": 2, "max_trades": 4, "levels": 3}


@pytest.fixture(scope="module")
def tiny_program() -> tuple[LimitOrderBookEnv, Any]:
    """The float32 env and a jitted `rollout(keys, actions)`: each key's reset, then its
    actions `(envs, steps, 3)`, stepped; the states `(envs, steps)`."""
    env = LimitOrderBookEnv(**TINY)
    return env, cases.scan_rollout(env)


@pytest.fixture(scope="module")
def tiny_rollout(tiny_program: Any) -> tuple[LimitOrderBookEnv, Any, Any]:
    """Four float32 envs, vmapped, for a whole session of random actions."""
    env, rollout = tiny_program
    keys = jax.random.split(jax.random.key(7), 4)
    actions = cases.sample_actions(env, keys, 6)
    return env, (keys, actions), rollout(keys, actions)


def test_float32_states_are_finite_and_in_space(tiny_rollout: Any) -> None:
    env, _, states = tiny_rollout
    assert states.reward.dtype == jnp.float32 and states.info["wealth"].dtype == jnp.float32
    for leaf in jax.tree.leaves((states.observation, states.reward, states.info)):
        assert np.all(np.isfinite(np.asarray(leaf, np.float64)))
    inside = jax.vmap(jax.vmap(env.observation_space.contains))(states.observation)
    assert np.all(np.asarray(inside))
    assert np.all(np.asarray(states.termination[:, -1]))
    assert not np.any(np.asarray(states.termination[:, :-1]))
    assert not np.any(np.asarray(states.info["overflow"]))
    assert np.any(np.asarray(states.info["fills"]) > 0)


def test_vmap_equals_single_envs(tiny_rollout: Any) -> None:
    env, (keys, actions), states = tiny_rollout
    cases.assert_single_envs_equal_batch(env, keys, actions, states, (0, 3))
    # different keys, different books
    assert not np.array_equal(
        states.env_state.book.price[0, -1], states.env_state.book.price[1, -1]
    )


def test_random_policy_rollout_equals_the_env_stepped_with_its_actions(
    tiny_program: Any, tiny_rollout: Any
) -> None:
    """`parallax.rollout` with `parallax.random_actions` in one jitted program: the
    trajectory is the env stepped with the actions it records. The policy's counter-based
    draws once reached the book's update kernels, whose CPU compile then ran for minutes
    (the `training_parity` check's program); this program compiles in seconds."""
    env, fixture_rollout = tiny_program
    keys = tiny_rollout[1][0]
    venv = VmapWrapper(env, 4)
    sample = random_actions(venv.action_space, 4)

    def policy(key: Any, state: Any) -> Any:
        return sample(rng.episode_key(key), jnp.uint32(0))

    @jax.jit
    def run(key: Any) -> Any:
        return parallax.rollout(
            venv, policy, key, 6, state=jax.vmap(lambda k: env.reset(key=k))(keys)
        )

    _, traj = run(jax.random.key(3))
    actions = jnp.swapaxes(traj.action, 0, 1)
    assert not np.array_equal(actions[0], actions[1])  # the policy's draws differ per env
    # the fixture's compiled program (same shapes), stepped with those actions
    stepped = fixture_rollout(keys, actions)
    np.testing.assert_array_equal(traj.reward, jnp.swapaxes(stepped.reward, 0, 1))
    np.testing.assert_array_equal(traj.termination, jnp.swapaxes(stepped.termination, 0, 1))
    for a, b in zip(
        jax.tree.leaves(traj.next_observation),
        jax.tree.leaves(jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), stepped.observation)),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)


def test_invariants_hold_and_catch_a_broken_state(tiny_rollout: Any) -> None:
    env, _, states = tiny_rollout
    checks = env.invariants
    assert sorted(checks) == [
        "no_crossed_book",
        "trade_log_consistent",
        "volume_conserved",
        "wealth_identity",
    ]
    cases.assert_invariants_hold(checks, states)
    one = jax.tree.map(lambda x: x[0, -1], states)
    cases.assert_catch_broken_wealth_and_book(checks, one)
    es = one.env_state
    bad_account = dataclasses.replace(
        one,
        env_state=dataclasses.replace(
            es, account=dataclasses.replace(es.account, inventory=es.account.inventory + 1)
        ),
    )
    assert not bool(checks["volume_conserved"](bad_account))


@pytest.mark.slow  # the whole validation battery on the book (`make test-slow`)
def test_battery() -> None:
    """float32 (x64 runs in the differential test); small sizes: each check compiles.

    A 3-step session and 4-step rollouts (the session ends inside them and the driver resets
    it): the eager rollouts retrace and recompile the flow's loop at every step. The sweep
    has the rollouts' sizes (2 envs, 4 steps), so the battery may run both as one program.
    """
    checks = cases.F32_CHECKS  # the list; about 12 s a program on CPU
    outcomes = run_battery(
        lambda: LimitOrderBookEnv(**{**TINY, "session_length": 3.0}),
        num_steps=4,
        batch_size=2,
        checks=checks,
        # eager rollouts op by op, not under jax.disable_jit(): there the flow's
        # lax.while_loop would run as a Python loop of ~400 iterations per step
        options={"invariant_envs": 2, "invariant_steps": 4, "disable_jit": False},
    )
    cases.assert_battery_passed(outcomes, checks)


# -- the rest of the battery, in x64; the scripted policies ------------------------------------

# the checks `test_battery` does not run, each with its status on this single-agent env (the
# differential test is above; `marl_rules` skips a single-agent env)
X64_STATUSES = cases.x64_statuses(marl_rules="skip")
# a 3-step session inside 4-step rollouts: the session's own termination ends each episode
# under the auto-reset (its TimeLimit, 8, is longer than the rollouts)
X64_ENV = {**TINY, "session_length": 3.0}


@pytest.fixture(scope="module")
def battery_x64() -> dict[str, Any]:
    """The checks `test_battery` leaves out, run once, under x64."""
    options = {"disable_jit": False, "autoreset_max_steps": 8, "scripted_keys": 2}
    return cases.battery_in_x64(lambda: LimitOrderBookEnv(**X64_ENV), X64_STATUSES, options)


def test_invariants_trace_under_x64(tiny_rollout: Any) -> None:
    """The invariants hold on the float32 states with x64 on (the battery's x64 run has no
    sweep: each is traced under x64 and strict promotion, where an int64 index once broke
    `trade_log_consistent`)."""
    cases.assert_invariants_hold_in_x64(tiny_rollout)


@pytest.mark.slow  # the battery's x64 run on the book (`make test-slow`)
def test_battery_x64(battery_x64: dict[str, Any]) -> None:
    # float32 only (test_battery): the compiled batched rollouts, 15-30 CPU-s each here
    f32_only = {"jit_vmap_scan_agree", "determinism", "batch_independence", "invariant_sweep"}
    # not run: XLA's compile of its jitted `parallax.rollout` of this env took over 300 CPU-s
    not_run = {"training_parity"}
    assert set(X64_STATUSES) == set(BATTERY_CHECKS) - f32_only - not_run
    reports = cases.x64_battery_reports(battery_x64, X64_STATUSES)
    assert "single-agent" in battery_x64["marl_rules"].message
    assert "gymnasium_export" in reports["structured_spaces"].passed


class PhantomFill(LimitOrderBookEnv):
    """Broken: every step books one lot bought at the mid that no order of the agent made."""

    def step(self, state: Any, action: Any, params: Any = None) -> Any:
        state = super().step(state, action, params)
        es = state.env_state
        account = dataclasses.replace(
            es.account, inventory=es.account.inventory + 1, bought=es.account.bought + 1
        )
        return dataclasses.replace(state, env_state=dataclasses.replace(es, account=account))


@pytest.mark.slow  # a battery check on each broken book (`make test-slow`)
@pytest.mark.parametrize(
    ("broken", "policy"), cases.broken_env_cases(PhantomFill, LimitOrderBookEnv)
)
def test_scripted_policies_catch_a_broken_env(broken: type, policy: str) -> None:
    """Each policy's outcome fails on an env that breaks the rule it states (float32, the
    whole 6-step TINY session: with 2 lots allowed, 6 buys pass the limit)."""
    env = broken(**TINY)
    assert env.n_steps == 6
    cases.assert_scripted_policy_catches(env, policy, num_steps=6)


def test_docstring_examples() -> None:
    import doctest

    from parallax.finance._lob import _env

    result = doctest.testmod(_env, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
