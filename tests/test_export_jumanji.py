"""JumanjiEnv: a Parallax env as a `jumanji.env.Environment`, checked with Jumanji's own types.

Truncation is a LAST step with discount 1, termination a LAST step with discount 0; the
export runs under Jumanji's `AutoResetWrapper`, `VmapAutoResetWrapper` and
`JumanjiToGymWrapper`.
"""

from __future__ import annotations

import doctest
import importlib
import sys
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jumanji = pytest.importorskip("jumanji")
from jumanji import specs  # noqa: E402
from jumanji.types import TimeStep  # noqa: E402
from jumanji.wrappers import (  # noqa: E402
    AutoResetWrapper,
    JumanjiToGymWrapper,
    VmapAutoResetWrapper,
)

import parallax  # noqa: E402
from parallax import AutoResetWrapper as ParallaxAutoReset  # noqa: E402
from parallax import State, TimeLimit, VmapWrapper, spaces  # noqa: E402
from parallax.adapters import JumanjiEnv, to_jumanji  # noqa: E402
from parallax.envs import GridWorld, Race  # noqa: E402


class Walk:
    """Walk towards +5 (the README's example): action 1 five times terminates."""

    action_space = spaces.Discrete(2)
    observation_space = spaces.Box(-10.0, 10.0, (1,))

    def _state(self, x, step_count, key):
        return State(
            env_state=x,
            observation=x,
            reward=-jnp.abs(5.0 - x[0]),
            termination=x[0] >= 5.0,
            truncation=jnp.bool_(False),
            info={"x": x[0]},
            step_count=step_count,
            key=key,
        )

    def reset(self, *, key):
        return self._state(jnp.zeros(1, jnp.float32), jnp.int32(0), key)

    def step(self, state, action):
        x = jnp.clip(state.env_state + jnp.where(action == 1, 1.0, -1.0), -10.0, 10.0)
        return self._state(x, state.step_count + 1, state.key)


def test_timesteps_follow_jumanjis_step_types_and_discounts():
    env = to_jumanji(TimeLimit(Walk(), 8))
    assert isinstance(env, jumanji.Environment) and isinstance(env, JumanjiEnv)
    state, ts = jax.jit(env.reset)(jax.random.key(0))
    assert isinstance(ts, TimeStep) and bool(ts.first())
    assert float(ts.reward) == 0.0 and float(ts.discount) == 1.0 and set(ts.extras) == {"x"}
    step = jax.jit(env.step)
    kinds = []
    for _ in range(5):
        state, ts = step(state, jnp.int32(1))
        kinds.append((int(ts.step_type), float(ts.discount)))
    assert kinds == [(1, 1.0)] * 4 + [(2, 0.0)]  # terminated at +5: LAST, no bootstrap
    assert float(ts.reward) == 0.0 and float(ts.extras["x"]) == 5.0
    state, ts = env.reset(jax.random.key(1))
    for _ in range(8):
        state, ts = step(state, jnp.int32(0))  # walking away: the time limit truncates
    assert bool(ts.last()) and float(ts.discount) == 1.0  # truncated: LAST, discount 1


def test_specs_are_jumanji_specs_and_describe_the_values():
    env = to_jumanji(TimeLimit(GridWorld(), 5))
    assert env.action_spec == specs.DiscreteArray(4, jnp.int32, "action")
    obs_spec = env.observation_spec
    assert isinstance(obs_spec, specs.BoundedArray) and obs_spec.shape == (4,)
    assert obs_spec.dtype == jnp.float32 and np.asarray(obs_spec.maximum).tolist() == [4.0] * 4
    _, ts = env.reset(jax.random.key(0))
    obs_spec.validate(ts.observation)
    env.reward_spec.validate(ts.reward)
    env.discount_spec.validate(ts.discount)
    env.action_spec.validate(env.action_spec.generate_value())


def test_spaces_convert_to_specs():
    from parallax.adapters._jumanji import to_jumanji_spec

    class Obs(NamedTuple):
        pos: spaces.Box
        cell: spaces.Discrete

    md = to_jumanji_spec(spaces.MultiDiscrete([2, 3]))
    assert isinstance(md, specs.MultiDiscreteArray) and md.num_values.tolist() == [2, 3]
    assert to_jumanji_spec(spaces.Discrete(3, (2,))).num_values.tolist() == [3, 3]
    mb = to_jumanji_spec(spaces.MultiBinary(3))
    assert mb.shape == (3,) and int(mb.maximum) == 1
    nested = to_jumanji_spec(
        spaces.PyTreeSpace(Obs(spaces.Box(0.0, 1.0, (2,)), spaces.Discrete(5)))
    )
    value = nested.generate_value()
    assert isinstance(value, Obs) and value.pos.shape == (2,)
    nested.validate(value)
    with pytest.raises(TypeError, match="PyTreeSpace of a NamedTuple"):
        to_jumanji_spec(spaces.PyTreeSpace({"a": spaces.Discrete(2)}))


def test_jumanji_auto_reset_wrappers_run_over_the_export():
    env = AutoResetWrapper(to_jumanji(TimeLimit(GridWorld(), 3)), next_obs_in_extras=True)
    state, ts = env.reset(jax.random.key(0))
    step = jax.jit(env.step)
    for _ in range(3):
        state, ts = step(state, jnp.int32(1))
    assert bool(ts.last()) and int(state.step_count) == 0  # reset already, as Jumanji does
    assert ts.extras["next_obs"].shape == (4,)

    vec = VmapAutoResetWrapper(to_jumanji(TimeLimit(GridWorld(), 5)))
    state, ts = vec.reset(jax.random.split(jax.random.key(0), 8))

    def body(state, key):
        action = jax.random.randint(key, (8,), 0, 4)
        state, ts = vec.step(state, action)
        return state, (ts.last(), ts.discount)

    _, (last, discount) = jax.jit(lambda s, k: jax.lax.scan(body, s, jax.random.split(k, 20)))(
        state, jax.random.key(1)
    )
    assert last.shape == (20, 8) and int(last.sum()) >= 8 * 3  # every env restarts
    assert bool(jnp.all(jnp.where(last, True, discount == 1.0)))


def test_jumanji_gym_wrapper_runs_over_the_export():
    env = JumanjiToGymWrapper(to_jumanji(TimeLimit(GridWorld(), 3)))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4,)
    out = env.step(1)
    assert out[0].shape == (4,)


def test_refusals_name_the_problem():
    with pytest.raises(TypeError, match="single-agent `State`s, got MARLState"):
        to_jumanji(Race())
    with pytest.raises(TypeError, match="got a vector env"):
        to_jumanji(VmapWrapper(GridWorld(), 2))
    with pytest.raises(TypeError, match=r"use jumanji\.wrappers\.AutoResetWrapper"):
        to_jumanji(ParallaxAutoReset(TimeLimit(GridWorld(), 3)))
    with pytest.raises(NotImplementedError, match="has no render"):
        to_jumanji(Walk()).render(None)
    assert (
        to_jumanji(parallax.make("GridWorld-v0"))
        .render(GridWorld().reset(key=jax.random.key(0)))
        .dtype
        == jnp.uint8
    )


def test_missing_jumanji_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "jumanji", None)
    monkeypatch.delitem(sys.modules, "parallax.adapters._jumanji")
    with pytest.raises(ImportError, match=r"needs jumanji.*parallax-rl\[jumanji\]"):
        importlib.import_module("parallax.adapters._jumanji")


def test_docstring_examples_run():
    from parallax.adapters import _jumanji

    result = doctest.testmod(_jumanji, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
