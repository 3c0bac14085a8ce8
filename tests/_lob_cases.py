"""Test helpers both limit order book env families share (LimitOrderBook-v0, -Market-v0).

- `random_legal_action`: the differential tests' random legal decision.
- `BAD_CORE_SETTINGS`, `setting_ids`, `rejections`, `assert_rejects_our_core_arguments`,
  `assert_core_defaults_are_sekais`: what both envs' constructors reject and default to.
- `scan_rollout`, `sample_actions`, `assert_single_envs_equal_batch`: the float32 rollout
  fixtures' jitted program and actions, and the vmap-against-single-envs comparison.
- `assert_invariants_hold`, `assert_catch_broken_wealth_and_book`: the invariants on a
  rollout, and the two broken states both invariant tests must catch.
- `F32_CHECKS`, `assert_battery_passed`: the single-agent envs' float32 battery checks,
  and the assertion on any battery run's outcomes.
- `x64_statuses`, `battery_in_x64`, `assert_invariants_hold_in_x64`, `x64_battery_reports`:
  the x64 run of the battery and what both envs' reports share.
- `without_inventory_limit`, `broken_env_cases`, `assert_scripted_policy_catches`: a broken
  env class, the cases of both broken envs, and the check that a scripted policy catches it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parallax.finance._invariants import scripted_policies_for
from parallax.testing import BATTERY_CHECKS, CheckError, run_battery, run_scripted_policies

SCRIPTED_POLICIES = ["never_quote_stays_flat", "market_buy_stops_at_the_limit"]
"""The scripted policies of both LOB envs, in their order."""


def random_legal_action(gen: np.random.Generator, mask: tuple[Any, ...], previous: Any) -> Any:
    """A legal action; half the time the previous one again (so quotes are kept)."""
    if previous is not None and gen.random() < 0.5:
        bid, ask, market = previous
        if mask[0][bid] and mask[1][ask] and mask[2][market]:
            return previous
    choices = [np.flatnonzero(np.asarray(m)) for m in mask]
    bid = int(gen.choice(choices[0]))
    ask = int(gen.choice(choices[1]))
    market = int(gen.choice(choices[2], p=None if len(choices[2]) < 3 else [0.15, 0.7, 0.15]))
    return np.array([bid, ask, market])


BAD_CORE_SETTINGS = [
    {"mid_price": 10},
    {"levels": 0, "mid_price": 100},
    {"max_quote_offset": 0},
    {"order_size": 0},
    {"max_inventory": 0},
    {"max_trades": 0},
    {"session_length": -1.0},
]
"""Shared settings that both envs reject as sekai's do (a `ValueError` naming the first key)."""


def setting_ids(settings: list[dict[str, Any]]) -> list[str]:
    """`key=value` of each dict's first item: the test ids of bad constructor settings."""
    return [f"{k}={v}" for d in settings for k, v in [next(iter(d.items()))]]


def rejections(theirs_class: Any, ours_class: Any, kwargs: dict[str, Any]) -> tuple[str, ...]:
    """Both constructors raise a `ValueError` on `kwargs`: its first key, and our message and
    sekai's."""
    with pytest.raises(ValueError) as theirs:
        theirs_class(**kwargs)
    with pytest.raises(ValueError) as ours:
        ours_class(**kwargs)
    return next(iter(kwargs)), str(ours.value), str(theirs.value)


def assert_rejects_our_core_arguments(env_class: Any) -> None:
    """`env_class` rejects our own checks of the shared settings: a `flow` that is not a
    `FlowParams` and `max_events < 1`."""
    with pytest.raises(TypeError, match="flow must be a FlowParams"):
        env_class(flow={"cancel_rate": 1.0})
    with pytest.raises(ValueError, match="max_events must be >= 1, got 0"):
        env_class(max_events=0)


def assert_core_defaults_are_sekais(ours: Any, core: Any) -> None:
    """The shared settings of our default env equal those of sekai's default env's `core`."""
    assert ours.inventory_penalty == core.inventory_penalty
    for name in ("mid_price", "levels", "max_quote_offset", "order_size", "max_inventory"):
        assert getattr(ours, name) == getattr(core, name), name
    assert ours.session_length == core.session_length
    assert ours.warmup == core.warmup and ours.max_trades == core.max_trades


def scan_rollout(env: Any) -> Any:
    """A jitted `rollout(keys, actions)`: each key's reset, then its actions `(envs, steps,
    ...)`, stepped; the states `(envs, steps)`."""

    @jax.jit
    def rollout(keys: Any, actions: Any) -> Any:
        def one(key: Any, acts: Any) -> Any:
            state = env.reset(key=key)

            def body(s: Any, a: Any) -> Any:
                s = env.step(s, a)
                return s, s

            return jax.lax.scan(body, state, acts)[1]

        return jax.vmap(one)(keys, actions)

    return rollout


def sample_actions(env: Any, keys: Any, steps: int) -> Any:
    """`steps` draws of `env.action_space` per key, `(envs, steps, ...)`."""
    return jax.vmap(
        lambda k: jax.vmap(lambda kk: env.action_space.sample(key=kk))(jax.random.split(k, steps))
    )(keys)


def assert_single_envs_equal_batch(
    env: Any, keys: Any, actions: Any, states: Any, envs: tuple[int, ...]
) -> None:
    """Each env `i` of `envs`, reset from `keys[i]` and stepped alone (jitted) with its
    actions, equals the batched rollout's `states[i, t]` leaf for leaf at every step."""
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    for i in envs:
        state = reset(key=keys[i])
        for t in range(actions.shape[1]):
            state = step(state, actions[i, t])
            batched = jax.tree.map(lambda x, i=i, t=t: x[i, t], states)
            for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(batched), strict=True):
                if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
                    a, b = jax.random.key_data(a), jax.random.key_data(b)
                np.testing.assert_array_equal(a, b)


def assert_invariants_hold(checks: dict[str, Any], states: Any) -> Any:
    """Each of `checks` holds on every state of `states` `(batch, time)`; the states
    flattened to `(batch * time,)`."""
    flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), states)
    for name, fn in checks.items():
        assert np.all(np.asarray(jax.vmap(fn)(flat))), name
    return flat


def assert_catch_broken_wealth_and_book(checks: dict[str, Any], one: Any) -> None:
    """`wealth_identity` fails on the state `one` with its `info["wealth"]` one tick off, and
    `no_crossed_book` on `one` with every bid repriced to 20,000 (above every ask)."""
    es = one.env_state
    bad_wealth = dataclasses.replace(one, info={**one.info, "wealth": one.info["wealth"] + 1.0})
    crossed_price = es.book.price.at[0].set(jnp.where(es.book.valid[0], 20_000, 0))
    bad_book = dataclasses.replace(
        one,
        env_state=dataclasses.replace(es, book=dataclasses.replace(es.book, price=crossed_price)),
    )
    assert not bool(checks["wealth_identity"](bad_wealth))
    assert not bool(checks["no_crossed_book"](bad_book))


F32_CHECKS = [
    "contract",
    "structure_stable",
    "jit_vmap_scan_agree",
    "determinism",
    "batch_independence",
    "invariant_sweep",
]
"""The single-agent envs' float32 battery checks (each compiles the env anew)."""


def assert_battery_passed(outcomes: list[Any], checks: list[str]) -> None:
    """The battery ran `checks` in its order, and each passed (the failures' messages)."""
    assert [o.check for o in outcomes] == [c for c in BATTERY_CHECKS if c in checks]
    failed = [f"{o.check}: {o.message}" for o in outcomes if o.status != "pass"]
    assert not failed, "\n\n".join(failed)


def x64_statuses(marl_rules: str | None) -> dict[str, str]:
    """The checks both LOB envs run in x64 and the status of each, in the order they run:
    the ones their float32 batteries leave out, and the contract and structure checks again
    (they read the eager rollout the boundary-action and structured-space checks need
    anyway); `marl_rules` with the status given, or left out (None)."""
    statuses = {
        "contract": "pass",
        "structure_stable": "pass",
        "no_recompilation": "pass",
        "matches_reference": "skip",  # no reference factory: each env's differential test
        "marl_rules": marl_rules,
        "boundary_actions": "pass",
        "auto_reset": "pass",
        "scripted_policies": "pass",  # the scripted check runs MARL envs too (MARLState.done)
        "structured_spaces": "pass",  # a Dict observation
    }
    return {name: status for name, status in statuses.items() if status is not None}


def battery_in_x64(
    make_env: Any, statuses: dict[str, str], options: dict[str, Any]
) -> dict[str, Any]:
    """`run_battery` of the checks of `statuses`, in its order, over 4-step rollouts of 2 envs
    under x64, by check name. Strict promotion is set here: a module fixture runs outside the
    suite's per-test `_strict_jax`."""
    checks = list(statuses)
    with (
        jax.enable_x64(True),
        jax.numpy_dtype_promotion("strict"),
        jax.numpy_rank_promotion("raise"),
    ):
        outcomes = run_battery(make_env, num_steps=4, batch_size=2, checks=checks, options=options)
    return {o.check: o for o in outcomes}


def assert_invariants_hold_in_x64(rollout: tuple[Any, Any, Any]) -> None:
    """Each of the env's invariants, traced under x64, holds on the first 2 envs'
    `(batch, time)` float32 states of `rollout` (`(env, inputs, states)`)."""
    env, _, states = rollout
    flat = jax.tree.map(lambda x: x[:2].reshape(-1, *x.shape[2:]), states)
    with jax.enable_x64(True):
        for name, fn in env.invariants.items():
            assert np.all(np.asarray(jax.jit(jax.vmap(fn))(flat))), name


def x64_battery_reports(battery: dict[str, Any], statuses: dict[str, str]) -> dict[str, Any]:
    """Assert what both LOB envs' x64 batteries share (the exact statuses, the reference's
    skip, both episodes ended by the auto-reset, both scripted policies, both boundary
    cases) and return the passing checks' reports."""
    got = {name: o.status for name, o in battery.items()}
    messages = "\n\n".join(f"{n}: {o.message}" for n, o in battery.items() if o.message)
    assert got == statuses, messages
    assert "no reference" in battery["matches_reference"].message
    reports = {name: o.report for name, o in battery.items() if o.status == "pass"}
    assert reports["auto_reset"].stats["episodes_ended"] == 2  # both envs, at step 3
    assert reports["scripted_policies"].passed == SCRIPTED_POLICIES
    assert reports["boundary_actions"].passed == ["in_range", "out_of_range"]
    return reports


def without_inventory_limit(env_class: Any) -> Any:
    """A broken subclass of `env_class`: it steps as if the inventory limit were absent (the
    masks and the market orders)."""

    class NoLimit(env_class):  # type: ignore[misc, valid-type]
        """Broken: steps as if the inventory limit were absent."""

        def step(self, state: Any, action: Any, params: Any = None) -> Any:
            limit = self.max_inventory  # a read-only setting of a built env: set it around it
            object.__setattr__(self, "max_inventory", 10**6)
            try:
                return super().step(state, action, params)
            finally:
                object.__setattr__(self, "max_inventory", limit)

    return NoLimit


def broken_env_cases(phantom_fill: Any, env_class: Any) -> list[tuple[Any, str]]:
    """The broken envs and the scripted policy that must catch each: `phantom_fill` (fills
    that no order made) the policy that never quotes, `without_inventory_limit(env_class)`
    the market buys."""
    return [
        (phantom_fill, "never_quote_stays_flat"),
        (without_inventory_limit(env_class), "market_buy_stops_at_the_limit"),
    ]


def assert_scripted_policy_catches(env: Any, policy: str, num_steps: int) -> None:
    """`env` has both scripted policies, `policy` runs `num_steps` steps, and its outcome
    fails on `env` (a broken env: two float32 keys)."""
    scripted = scripted_policies_for(env)
    assert scripted is not None and list(scripted) == SCRIPTED_POLICIES
    assert scripted[policy]["num_steps"] == num_steps
    with pytest.raises(CheckError, match=f"scripted_policies/{policy}"):
        run_scripted_policies(env, {policy: scripted[policy]}, jax.random.key(3), num_keys=2)
