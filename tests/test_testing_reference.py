"""`check_matches_reference` against a real reference: sekai's CartPole-v1 (gymnasium's rules).

`CartPole` below is a JAX CartPole written from the classic-control rules. sekai draws its
initial state with NumPy, so `GymReference(sync=...)` copies the JAX initial state into the
sekai env (the reset itself is then not under test; every step is). Under x64 the JAX env
computes in float64 like sekai and matches it bit for bit (observations are float32 on both
sides); in float32 it needs a stated tolerance.
"""

from __future__ import annotations

import json
import math
import pathlib
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sekai

from parallax import State, spaces
from parallax.testing import (
    EXACT,
    GymReference,
    ReferenceMismatch,
    Tolerance,
    check_matches_reference,
)

X_LIMIT, THETA_LIMIT = 2.4, 12 * 2 * math.pi / 360


class CartPole:
    """Balance a pole on a cart: classic-control constants, Euler integration, no time limit."""

    action_space = spaces.Discrete(2)
    observation_space = spaces.Box(-np.inf, np.inf, (4,))
    gravity = 9.8

    def reset(self, *, key):
        dtype = jnp.zeros(()).dtype  # float64 under x64, else float32
        s = jax.random.uniform(key, (4,), dtype, -0.05, 0.05)
        return self._state(s, jnp.zeros((), dtype), jnp.int32(0), key)

    def step(self, state, action):
        x, x_dot, theta, theta_dot = state.env_state
        force = jnp.where(action == 1, 10.0, -10.0)
        cos, sin = jnp.cos(theta), jnp.sin(theta)
        temp = (force + 0.05 * theta_dot**2 * sin) / 1.1
        theta_acc = (self.gravity * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        s = jnp.stack(
            [
                x + 0.02 * x_dot,
                x_dot + 0.02 * x_acc,
                theta + 0.02 * theta_dot,
                theta_dot + 0.02 * theta_acc,
            ]
        )
        return self._state(s, jnp.ones((), s.dtype), state.step_count + 1, state.key)

    def _state(self, s, reward, t, key):
        out = (jnp.abs(s[0]) > X_LIMIT) | (jnp.abs(s[2]) > THETA_LIMIT)
        reward = reward.astype(jnp.float32)
        return State(s, s.astype(jnp.float32), reward, out, jnp.bool_(False), {}, t, key)


class UpsideDownCartPole(CartPole):
    """Broken on purpose: gravity with the wrong sign."""

    gravity = -9.8


def sync(env, initial):
    """Start sekai's CartPole from the JAX initial state (float64, like sekai's own)."""
    env.unwrapped.state = np.asarray(initial["env_state"], np.float64)
    return env.unwrapped.state.astype(np.float32)


def sekai_cartpole():
    return GymReference(sekai.make("CartPole-v1"), sync=sync)


def test_jax_cartpole_matches_sekai(x64, tmp_path):
    if x64:  # float64 on both sides: bit-identical for whole episodes
        report = check_matches_reference(
            CartPole(), sekai_cartpole(), num_steps=40, num_episodes=2, tolerance=EXACT
        )
    else:  # float32 against float64: one rounding step at the first step already ...
        with pytest.raises(ReferenceMismatch) as info:
            check_matches_reference(CartPole(), sekai_cartpole(), num_steps=40, dump_path=tmp_path)
        err = info.value
        assert err.step == 1 and err.field.startswith("observation[")
        assert "ulp in float32; rule: exact" in str(err)
        # ... so the stated rule: relative 1e-5, absolute 1e-6
        report = check_matches_reference(
            CartPole(),
            sekai_cartpole(),
            num_steps=40,
            num_episodes=2,
            tolerance=Tolerance(rtol=1e-5, atol=1e-6),
        )
    assert report.stats["episodes"] == 2 and report.stats["steps_compared"] >= 20
    assert report.stats["fields"] == ["observation", "reward", "termination", "truncation"]


def test_wrong_gravity_diverges_from_sekai(tmp_path):
    with pytest.raises(ReferenceMismatch) as info:
        check_matches_reference(
            UpsideDownCartPole(),
            sekai_cartpole(),
            num_steps=40,
            tolerance=Tolerance(rtol=1e-5, atol=1e-6),
            dump_path=tmp_path / "cartpole.json",
        )
    err = info.value
    assert err.step == 1 and err.field in ("observation[1]", "observation[3]")
    assert "rule: |got - expected| <= 1e-06 + 1e-05 * |expected|" in str(err)
    with open(err.dump_path, encoding="utf-8") as fh:
        dump = json.load(fh)
    assert [s["step"] for s in dump["steps"]] == [0, 1]
    assert dump["steps"][1]["action"] in (0, 1)
    assert dump["steps"][0]["jax"]["observation"] == dump["steps"][0]["reference"]["observation"]


def test_without_a_dump_path_the_dump_goes_to_the_temporary_folder(tmp_path_factory):
    """No `dump_path`: the dump is a new file in `tempfile.gettempdir()`, which this suite
    points into pytest's own temporary folder (tests/conftest.py), so failing on purpose
    leaves nothing in /tmp."""
    with pytest.raises(ReferenceMismatch) as info:
        check_matches_reference(
            UpsideDownCartPole(),
            sekai_cartpole(),
            num_steps=4,
            tolerance=Tolerance(rtol=1e-5, atol=1e-6),
        )
    path = pathlib.Path(info.value.dump_path)
    assert path.parent == pathlib.Path(tempfile.gettempdir())
    assert path.name.startswith("parallax-mismatch-") and path.suffix == ".json"
    assert tmp_path_factory.getbasetemp() in path.parents
    assert json.loads(path.read_text(encoding="utf-8"))["steps"][0]["step"] == 0


def test_gym_reference_accepts_both_result_styles():
    """sekai's StepResult objects and Gymnasium's tuples give the same records."""

    class TupleStyle:
        def __init__(self):
            self.inner = sekai.make("CartPole-v1")

        def reset(self, seed=None):
            r = self.inner.reset(seed=seed)
            return r.observation, r.info

        def step(self, action):
            r = self.inner.step(action)
            return r.observation, r.reward, r.terminated, r.truncated, r.info

    a = GymReference(sekai.make("CartPole-v1"), seed=lambda key: 3)
    b = GymReference(TupleStyle(), seed=lambda key: 3)
    ra, rb = a.reset(None, {}), b.reset(None, {})
    assert ra.keys() == rb.keys() and np.array_equal(ra["observation"], rb["observation"])
    sa, sb = a.step(np.int32(1)), b.step(np.int32(1))
    assert sa["reward"] == sb["reward"] == 1.0 and np.array_equal(
        sa["observation"], sb["observation"]
    )
    with pytest.raises(TypeError, match="info_keys must be a sequence"):
        GymReference(sekai.make("CartPole-v1"), info_keys="elapsed_steps")
