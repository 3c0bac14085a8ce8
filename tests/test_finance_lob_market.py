"""`LimitOrderBookMarketEnv` (LimitOrderBookMarket-v0) against sekai 0.2.0's `LimitOrderBookMarket`.

sekai's market is driven by the env tests' shim generator (the `n`-th draw of each kind of
the flow is our `n`-th draw of its slot at the step's index; a trader's jitter factor is our
`JITTER` draw at `(step, trader index)`), with x64 on, and random legal actions. After reset
and after every step the acting traders, every trader's observation, reward, flags, info and
action masks, and every resting order of the two books must be equal, over whole sessions:
three traders on different jittered clocks under sekai's default flow, a thin book
(`cancel_rate=1.0`) and a deep one (`cancel_rate=0.1`), and two traders on unjittered
clocks whose decision times coincide only within sekai's `1e-9`. Then: constructor errors
as sekai's, float32, vmap against single envs, `check_marl_env`, the battery, invariants.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import _lob_cases as cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_finance_lob_env import EnvShim
from test_finance_lob_flow import resting, sekai_resting

from parallax.finance._lob import (
    FLOW_SLOTS,
    MARKET_SLOTS,
    FlowParams,
    LimitOrderBookMarketEnv,
    LimitOrderBookParams,
    default_max_events,
)
from parallax.rng import reference
from parallax.testing import BATTERY_CHECKS, run_battery

lob_env = pytest.importorskip("sekai.envs.finance.lob_env")
lob = pytest.importorskip("sekai.finance.lob")

# one worker runs the whole file, so each module fixture (the tiny rollout, the battery run)
# is built once per `make test`, not once per xdist worker
pytestmark = pytest.mark.xdist_group("lob_market")

FLOWS = {"default": {}, "thin": {"cancel_rate": 1.0}, "deep": {"cancel_rate": 0.1}}
# shared with sekai: small limits and two-lot orders hit the masks and partial fills often
SHARED = {"session_length": 40.5, "order_size": 2, "max_inventory": 5, "max_trades": 8}
JITTERED = {"n_agents": 3, "decision_intervals": [1.0, 0.7, 1.6], "jitter": 0.25, **SHARED}
# 3 * 0.3 != 0.9 in exact arithmetic, but within sekai's 1e-9: the two act together
COINCIDENT = {"n_agents": 2, "decision_intervals": [0.3, 0.9], "jitter": 0.0, **SHARED}
CAPACITY = 160  # one compiled env serves the three flows (the deep book needs the room)


def _max_events() -> int:
    return max(default_max_events(FlowParams(**f), 1.6 * 1.25, CAPACITY) for f in FLOWS.values())


class MarketShim(EnvShim):
    """`EnvShim` that also serves sekai's jitter draws: the `n`-th `uniform` call of a step
    is the wait factor of the `n`-th acting trader (sekai draws them in slot order)."""

    acting: tuple[int, ...] = ()

    def set_step(self, step: int, *, init: bool = False) -> None:
        super().set_step(step, init=init)
        self.counts["jitter"] = 0

    def uniform(self, low: float, high: float) -> float:
        trader = self.acting[self._take("jitter")]
        u = reference.uniform(self.key, self.step, MARKET_SLOTS.JITTER, trader, dtype=np.float64)
        return low + (high - low) * float(u)


_GLOBAL_INFO = ("timestamp", "dt", "mid_price", "spread")
_AGENT_INFO = ("inventory", "cash", "wealth", "fills")


def _assert_same(state: Any, ref: Any, observations: dict, info: dict, where: str) -> None:
    names = ref.possible_agents
    active = np.asarray(state.agents.active)
    assert [names[i] for i in np.flatnonzero(active)] == ref.acting, where
    obs = jax.tree.map(np.asarray, state.agents.observation)
    for i, name in enumerate(names):
        if name in observations:
            theirs = observations[name]
            np.testing.assert_array_equal(obs["book"][i], theirs["book"], err_msg=where)
            np.testing.assert_array_equal(obs["agent"][i], theirs["agent"], err_msg=where)
            for k in ("values", "mask"):
                np.testing.assert_array_equal(
                    obs["trades"][k][i], theirs["trades"][k], err_msg=where
                )
        else:  # the MARL rule: an inactive slot observes zeros
            assert all(not np.any(x[i]) for x in jax.tree.leaves(obs)), where
        mask = ref.action_mask(name)
        ours = [np.asarray(m)[i].tolist() for m in state.agents.action_mask]
        assert ours == [m.astype(bool).tolist() for m in mask], where
        got = {k: np.asarray(state.info[k]).item() for k in _GLOBAL_INFO}
        got |= {k: np.asarray(state.info[k])[i].item() for k in _AGENT_INFO}
        expected = dict(info[name])
        expected["spread"] = 0 if expected["spread"] is None else expected["spread"]
        if "acting" in expected:  # sekai's reset info has no "acting"
            assert bool(state.info["acting"][i]) == expected.pop("acting"), where
        assert got == expected, where
    assert not bool(state.info["overflow"]), where
    assert resting(state.env_state.book) == sekai_resting(ref.book), where
    assert int(state.env_state.book.next_id) == ref.book._next_id, where
    assert int(state.env_state.book.last_price) == ref.book.last_price, where


@pytest.fixture
def x64_on():
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="module")
def compiled() -> dict[str, Any]:
    """One jitted reset/step per configuration, traced on first use under x64 (the flows
    are params: the cases share the compiled code)."""
    out = {}
    for name, kwargs in (("jittered", JITTERED), ("coincident", COINCIDENT)):
        env = LimitOrderBookMarketEnv(**kwargs, capacity=CAPACITY, max_events=_max_events())
        out[name] = (env, jax.jit(env.reset), jax.jit(env.step))
    return out


CASES = [("jittered", f) for f in FLOWS] + [("coincident", "default")]


@pytest.mark.parametrize(("config", "flow"), CASES, ids=[f"{c}-{f}" for c, f in CASES])
def test_market_equals_sekai_step_by_step(
    config: str, flow: str, compiled: dict, x64_on: None
) -> None:
    env, reset, step = compiled[config]
    kwargs = JITTERED if config == "jittered" else COINCIDENT
    params = LimitOrderBookParams(flow=FlowParams(**FLOWS[flow]))
    n = env.num_agents
    totals = {"steps": 0, "partial": 0, "fills": 0, "market": 0, "limit_hit": 0, "kept": 0}
    totals |= {"between_traders": 0, "paid": 0.0, "earned": 0.0, "unpaid": 0.0, "coincident": 0}
    for seed in (0, 1):
        where0 = f"{config}/{flow} seed {seed}"
        ref = lob_env.LimitOrderBookMarket(flow=lob.ZeroIntelligenceFlow(**FLOWS[flow]), **kwargs)
        state = reset(key=jax.random.key(seed), params=params)
        shim = MarketShim(state.env_state.episode_key, ref.core.flow.mean_size)
        ref.rng = shim
        first = ref.reset()
        apply = ref.core.apply

        def apply_and_count(trader: Any, decision: Any, apply: Any = apply) -> Any:
            fills = apply(trader, decision)
            others = [
                f for f in fills if f.maker_owner in range(n) and f.maker_owner != trader.owner
            ]
            totals["between_traders"] += len(others)
            return fills

        ref.core.apply = apply_and_count
        _assert_same(state, ref, first.observations, first.info, f"{where0} reset")
        gen = np.random.default_rng(100 + seed)
        previous: dict[str, Any] = {}
        pending = np.zeros(n)
        while ref.agents:
            k = int(state.step_count) + 1
            where = f"{where0} step {k}"
            acting = list(ref.acting)
            actions = {}
            for name in acting:
                mask = ref.action_mask(name)
                actions[name] = cases.random_legal_action(gen, mask, previous.get(name))
                totals["kept"] += int(np.array_equal(actions[name], previous.get(name)))
                totals["market"] += int(actions[name][2] != 1)
                totals["limit_hit"] += int(not all(np.all(m) for m in mask))
            previous.update(actions)
            # inactive slots get values far outside the space: they must be ignored
            ours = np.full((n, 3), 99, np.int64)
            for i, name in enumerate(ref.possible_agents):
                if name in actions:
                    ours[i] = actions[name]
            prev_active = np.asarray(state.agents.active)
            shim.set_step(k)
            shim.acting = tuple(ref.possible_agents.index(a) for a in acting)
            result = ref.step(actions)
            state = step(state, jnp.asarray(ours), params)
            _assert_same(state, ref, result.observations, result.info, where)
            rewards = np.array([result.rewards[a] for a in ref.possible_agents])
            np.testing.assert_array_equal(
                np.asarray(state.info["step_reward"]), rewards, err_msg=where
            )
            paid = np.where(prev_active, pending + rewards, 0.0)
            pending = np.where(prev_active, 0.0, pending + rewards)
            np.testing.assert_array_equal(np.asarray(state.agents.reward), paid, err_msg=where)
            for a in ref.possible_agents:
                assert bool(state.termination) == result.terminated[a], where
                assert bool(state.truncation) == result.truncated[a], where
            totals["steps"] += 1
            totals["partial"] += int(0 < len(acting) < n)
            totals["fills"] += sum(result.info[a]["fills"] for a in ref.possible_agents)
            totals["paid"] += float(paid.sum())
            totals["earned"] += float(rewards.sum())
            gaps = np.diff(sorted(float(t) for t in ref._next))
            totals["coincident"] += int(np.any((gaps > 0) & (gaps < 1e-9)))
        totals["unpaid"] += float(pending.sum())
        assert bool(state.termination) and np.all(np.asarray(state.agents.active)), where0
    # the sessions exercised what they claim to
    assert totals["partial"] > totals["steps"] // 3, totals
    assert totals["fills"] > totals["steps"] // 5, totals
    assert totals["market"] > totals["steps"] // 10, totals
    assert totals["kept"] > totals["steps"] // 5, totals
    assert totals["limit_hit"] > 0, totals
    assert totals["between_traders"] > 0, totals  # a trader's order filled another's quote
    # no reward is lost: delivered + still pending == earned
    assert totals["paid"] + totals["unpaid"] == pytest.approx(totals["earned"], abs=1e-6)
    if config == "coincident":
        assert totals["coincident"] > 0, totals  # 3 * 0.3 vs 0.9 happened


# -- construction ---------------------------------------------------------------------------

BAD = [
    {"n_agents": 0},
    {"decision_intervals": 0.0},
    {"decision_intervals": [1.0, -1.0]},
    {"decision_intervals": float("nan")},
    {"decision_intervals": [1.0, 2.0, 3.0]},
    {"jitter": 1.0},
    {"jitter": -0.1},
    {"jitter": float("nan")},
    *cases.BAD_CORE_SETTINGS,
    {"inventory_penalty": -0.1},
    {"warmup": -1.0},
]


@pytest.mark.parametrize("kwargs", BAD, ids=cases.setting_ids(BAD))
def test_constructor_rejects_what_sekai_rejects(kwargs: dict[str, Any]) -> None:
    name, ours, theirs = cases.rejections(
        lob_env.LimitOrderBookMarket, LimitOrderBookMarketEnv, kwargs
    )
    assert name in ours, ours
    if name != "decision_intervals":  # sekai's wrong-length error is numpy's broadcast error
        assert name in theirs, theirs


def test_constructor_checks_our_own_arguments() -> None:
    with pytest.raises(TypeError, match=r"n_agents must be an int, got 2\.5"):
        LimitOrderBookMarketEnv(2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"capacity must be >= 2 \+ 2 \* n_agents = 8, got 4"):
        LimitOrderBookMarketEnv(3, capacity=4)
    cases.assert_rejects_our_core_arguments(LimitOrderBookMarketEnv)


def test_defaults_and_spaces_are_sekais() -> None:
    ours, theirs = LimitOrderBookMarketEnv(), lob_env.LimitOrderBookMarket()
    assert ours.num_agents == len(theirs.possible_agents) == 2
    assert list(ours.decision_intervals) == theirs.intervals.tolist()
    assert ours.jitter == theirs.jitter
    cases.assert_core_defaults_are_sekais(ours, theirs.core)
    space = theirs.action_spaces["trader_0"]
    assert ours.action_space.shape == (2, 3)
    assert ours.action_space.nvec.tolist() == [space.nvec.tolist()] * 2
    obs = ours.observation_space.spaces
    theirs_obs = theirs.observation_spaces["trader_0"]
    assert obs["book"].shape == (2, *theirs_obs["book"].shape)
    assert obs["agent"].shape == (2, *theirs_obs["agent"].shape)
    assert obs["trades"]["values"].shape == (2, *theirs_obs["trades"]["values"].shape)


def test_jitter_slot_does_not_collide_with_the_flow() -> None:
    assert MARKET_SLOTS.JITTER not in FLOW_SLOTS.numbers
    assert set(FLOW_SLOTS.numbers) < set(MARKET_SLOTS.numbers)


# -- float32, batches, the MARL rules, invariants ----------------------------------------------

TINY = {
    "n_agents": 2,
    "decision_intervals": [1.0, 1.5],
    "jitter": 0.3,
    "session_length": 6.0,
    "warmup": 2.0,
    "max_inventory": 2,
    "max_trades": 4,
    "levels": 3,
}
STEPS = 14  # at least ceil(6.0 / 0.7) steps: every session ends


@pytest.fixture(scope="module")
def tiny_rollout() -> tuple[LimitOrderBookMarketEnv, Any, Any]:
    """Three float32 markets, vmapped, over a session of random actions (and past its end)."""
    env = LimitOrderBookMarketEnv(**TINY)
    keys = jax.random.split(jax.random.key(7), 3)
    actions = cases.sample_actions(env, keys, STEPS)
    return env, (keys, actions), cases.scan_rollout(env)(keys, actions)


def test_float32_states_are_finite_and_in_space(tiny_rollout: Any) -> None:
    env, _, states = tiny_rollout
    assert states.agents.reward.dtype == jnp.float32
    assert states.info["wealth"].dtype == jnp.float32
    for leaf in jax.tree.leaves((states.agents.observation, states.agents.reward, states.info)):
        assert np.all(np.isfinite(np.asarray(leaf, np.float64)))
    inside = jax.vmap(jax.vmap(env.observation_space.contains))(states.agents.observation)
    assert np.all(np.asarray(inside))
    ended = np.asarray(states.termination)
    assert np.all(ended[:, -1]) and np.all(ended[:, :-1] <= ended[:, 1:])  # ends, and stays
    assert not np.any(np.asarray(states.info["overflow"]))
    assert np.any(np.asarray(states.info["fills"]) > 0)
    active = np.asarray(states.agents.active)
    assert np.any(~active)  # the clocks differ: someone waits
    stamps = np.asarray(states.info["timestamp"])
    assert np.all(np.diff(stamps, axis=1) >= 0) and np.all(stamps <= env.session_length)


def test_vmap_equals_single_envs(tiny_rollout: Any) -> None:
    env, (keys, actions), states = tiny_rollout
    cases.assert_single_envs_equal_batch(env, keys, actions, states, (0, 2))
    # different keys, different books and different jittered clocks
    nd = np.asarray(states.info["next_decision"])
    assert not np.array_equal(nd[0, 0], nd[1, 0])


def test_invariants_hold_and_catch_a_broken_state(tiny_rollout: Any) -> None:
    env, _, states = tiny_rollout
    checks = env.invariants
    flat = cases.assert_invariants_hold(checks, states)
    one = jax.tree.map(lambda x: x[0, -1], states)
    cases.assert_catch_broken_wealth_and_book(checks, one)
    es = one.env_state
    accounts = es.accounts
    bad_accounts = dataclasses.replace(accounts, inventory=accounts.inventory.at[1].add(1))
    bad_volume = dataclasses.replace(one, env_state=dataclasses.replace(es, accounts=bad_accounts))
    assert not bool(checks["volume_conserved"](bad_volume))
    waiting = np.argwhere(~np.asarray(flat.agents.active))[0]  # (state, slot) of a waiter
    state = jax.tree.map(lambda x: x[waiting[0]], flat)
    agent_obs = state.agents.observation["agent"].at[waiting[1], 0].set(1.0)
    bad_obs = dataclasses.replace(
        state,
        agents=dataclasses.replace(
            state.agents, observation={**state.agents.observation, "agent": agent_obs}
        ),
    )
    assert bool(checks["inactive_slots_zero"](state))
    assert not bool(checks["inactive_slots_zero"](bad_obs))


F32_CHECKS = [
    "contract",
    "jit_vmap_scan_agree",
    "determinism",
    "batch_independence",
    "marl_rules",
    "invariant_sweep",
]


@pytest.fixture(scope="module")
def battery() -> dict[str, Any]:
    """The battery's float32 checks on the tiny market, run once: the contract, the three
    checks of batched rollouts (jit/vmap/scan agreement, determinism, batch independence),
    the MARL rules and the invariant sweep.

    Its `marl_rules` check runs `check_marl_env` on the env for 8 steps with
    `require_inactive=True`; `test_check_marl_env_passes` reads that report (one run of the
    check, not two: its resets are the flow's whole warm-up loop each). The sweep has the
    rollouts' sizes (2 envs, 8 steps), so the battery may run the vmapped rollout and the
    sweep as one program; batch independence steps its single envs with the session's
    compiled step. The three batched checks add about 17 s (23 CPU-s) to this fixture on a
    cold cache.
    """
    outcomes = run_battery(
        lambda: LimitOrderBookMarketEnv(**TINY),
        num_steps=8,
        batch_size=2,
        checks=F32_CHECKS,
        options={
            "invariant_envs": 2,
            "invariant_steps": 8,
            "require_inactive": True,
            "disable_jit": False,
        },
    )
    return {o.check: o for o in outcomes}


@pytest.mark.slow  # the whole validation battery on the book (`make test-slow`)
def test_check_marl_env_passes(battery: dict[str, Any]) -> None:
    outcome = battery["marl_rules"]
    assert outcome.status == "pass", outcome.message
    report = outcome.report
    assert report is not None and report.check == "check_marl_env"
    assert report.stats["steps"] == 8
    assert report.stats["steps_with_inactive_agents"] > 0
    assert "rule3_inactive_reward_zero" in report.passed


@pytest.mark.slow  # the whole validation battery on the book (`make test-slow`)
def test_battery_in_float32_passes(battery: dict[str, Any]) -> None:
    """Every float32 check passes, in the battery's order."""
    cases.assert_battery_passed(list(battery.values()), F32_CHECKS)


# -- the rest of the battery, in x64; the scripted policies ------------------------------------

# the checks the `battery` fixture does not run, each with its status on this MARL env (the
# differential test is above; the Gymnasium export of `structured_spaces` is single-agent);
# `marl_rules` runs in float32
X64_STATUSES = cases.x64_statuses(marl_rules=None)
# a 3-unit session: at least 3 steps (trader 0 waits at most 1.3), so the auto-reset's
# TimeLimit of 3 ends every episode at step 3 of the 4-step rollouts
X64_ENV = {**TINY, "session_length": 3.0}


@pytest.fixture(scope="module")
def battery_x64() -> dict[str, Any]:
    """The checks the `battery` fixture leaves out, run once, under x64."""
    options = {"disable_jit": False, "scripted_keys": 2}
    return cases.battery_in_x64(lambda: LimitOrderBookMarketEnv(**X64_ENV), X64_STATUSES, options)


def test_invariants_trace_under_x64(tiny_rollout: Any) -> None:
    """The invariants hold on the float32 states with x64 on (traced under x64 and strict
    promotion, as the battery's x64 run would sweep them)."""
    cases.assert_invariants_hold_in_x64(tiny_rollout)


@pytest.mark.slow  # the battery's x64 run on the book (`make test-slow`)
def test_battery_x64(battery_x64: dict[str, Any]) -> None:
    # in float32 only (the `battery` fixture): the batched rollouts' checks, the MARL rules
    # and the sweep; the contract runs in both; not run: training parity (five compiled
    # programs, 82 CPU-s in x64)
    f32_only = set(F32_CHECKS) - {"contract"}
    assert set(X64_STATUSES) == set(BATTERY_CHECKS) - f32_only - {"training_parity"}
    reports = cases.x64_battery_reports(battery_x64, X64_STATUSES)
    assert "gymnasium_export" not in reports["structured_spaces"].passed


class PhantomFill(LimitOrderBookMarketEnv):
    """Broken: every step books trader 0 one lot bought that no order of its made."""

    def step(self, state: Any, action: Any, params: Any = None) -> Any:
        state = super().step(state, action, params)
        es = state.env_state
        accounts = dataclasses.replace(
            es.accounts,
            inventory=es.accounts.inventory.at[0].add(1),
            bought=es.accounts.bought.at[0].add(1),
        )
        return dataclasses.replace(state, env_state=dataclasses.replace(es, accounts=accounts))


@pytest.mark.slow  # a battery check on each broken book (`make test-slow`)
@pytest.mark.parametrize(
    ("broken", "policy"), cases.broken_env_cases(PhantomFill, LimitOrderBookMarketEnv)
)
def test_scripted_policies_catch_a_broken_env(broken: type, policy: str) -> None:
    """Each policy's outcome fails on a market that breaks the rule it states (float32, the
    TINY market: trader 0 decides about 6 times, and 2 lots are allowed)."""
    env = broken(**TINY)
    # 9 + 6 decisions at the shortest waits, + 1
    cases.assert_scripted_policy_catches(env, policy, num_steps=16)
