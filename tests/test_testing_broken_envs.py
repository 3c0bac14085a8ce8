"""Every check of `parallax.testing` can fail: deliberately broken envs, each caught by the
right check with a message that names the check, the step, the field, expected and got.

Each broken env differs from a working one (GridWorld, Race, or the small envs below) by
one bug, the bugs of the seed: a `keepdims` broadcast that only shows in a batch, a
misread RNG slot and a reward sign error (both against a reference), a dtype drift, a
pytree that changes structure, an observation out of its space, a NaN reward, an env that
ignores its key, a step_count that does not increment, Python-side state, a weakly typed
reset that recompiles, and the multi-agent bugs.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parallax import State, TimeLimit, spaces
from parallax import rng as prng
from parallax.envs import GridWorld, Race
from parallax.envs._gridworld import SIZE, GridState
from parallax.rng import reference as rng_ref
from parallax.testing import (
    CheckError,
    NearThreshold,
    ReferenceMismatch,
    Tolerance,
    check_batch_independence,
    check_env,
    check_marl_env,
    check_matches_reference,
)

MOVES = np.array([(0.0, 1.0), (0.0, -1.0), (1.0, 0.0), (-1.0, 0.0)], np.float32)


def always(action: Any):
    """A policy that always plays `action` (same for every key and state)."""
    value = jnp.asarray(action)
    return lambda key, state: value


# -- a NumPy reference of GridWorld (sharing its randomness through the same jax.random call)
class GridReference:
    """Readable one-instance GridWorld; the goal is drawn exactly as GridWorld draws it."""

    def reset(self, key, initial):
        _, goal_key = jax.random.split(key)
        goal = jax.random.randint(goal_key, (2,), minval=1, maxval=5)
        self.pos = np.zeros(2, np.float32)
        self.goal = np.asarray(goal, np.float32)
        return self._record(0.0, False)

    def step(self, action):
        self.pos = np.clip(self.pos + MOVES[int(action)], 0.0, SIZE).astype(np.float32)
        distance = np.sqrt(np.sum(np.square(self.pos - self.goal), dtype=np.float32))
        reward = np.exp(-distance, dtype=np.float32)
        return self._record(reward, bool(np.all(self.pos == self.goal)))

    def _record(self, reward, done):
        return {
            "observation": np.concatenate([self.pos, self.goal]),
            "reward": reward,
            "termination": done,
            "truncation": False,
        }


# -- SlipWalk: a 1-D walk whose randomness comes from a parallax.rng slot table ------------
# | slot | name  | used at        | index | distribution     |
# | 0    | START | reset (step 0) | 0     | randint(5)       |
# | 1    | SLIP  | every step t   | 0     | bernoulli(0.4)   |
START, SLIP = 0, 1


class SlipWalk:
    """Walk on 0..8 from a random start; a slip (slot SLIP) reverses the move."""

    action_space = spaces.Discrete(2)
    observation_space = spaces.Box(0.0, 8.0, (1,))
    slip_slot = SLIP

    def reset(self, *, key):
        ek = prng.episode_key(key)
        pos = prng.randint(ek, 0, START, 0, 5).astype(jnp.float32)
        return self._state(ek, pos, jnp.float32(0.0), jnp.int32(0), key)

    def step(self, state, action):
        ek, pos = state.env_state
        t = state.step_count + 1
        move = jnp.where(action == 1, 1.0, -1.0)
        slip = prng.bernoulli(ek, t, self.slip_slot, 0, 0.4)
        pos = jnp.clip(pos + jnp.where(slip, -move, move), 0.0, 8.0)
        return self._state(ek, pos, (pos == 8.0).astype(jnp.float32), t, state.key)

    def _state(self, ek, pos, reward, t, key):
        return State(
            env_state=(ek, pos),
            observation=pos[None],
            reward=reward,
            termination=pos == 8.0,
            truncation=jnp.bool_(False),
            info={},
            step_count=t,
            key=key,
        )


class SlipWalkReference:
    """The same spec, readable, with `parallax.rng.reference` (slot table read correctly)."""

    def reset(self, key, initial):
        self.ek = rng_ref.episode_key(key)
        self.t = 0
        self.pos = np.float32(rng_ref.randint(self.ek, 0, START, 0, 5))
        return {"observation": np.array([self.pos]), "reward": 0.0, "termination": False}

    def step(self, action):
        self.t += 1
        move = 1.0 if int(action) == 1 else -1.0
        if rng_ref.bernoulli(self.ek, self.t, SLIP, 0, 0.4):
            move = -move
        self.pos = np.float32(min(max(self.pos + move, 0.0), 8.0))
        done = bool(self.pos == 8.0)
        return {"observation": np.array([self.pos]), "reward": float(done), "termination": done}


class MisreadSlotWalk(SlipWalk):
    """Bug: reads the START slot where the spec says SLIP."""

    slip_slot = START


# -- Forager: a natively batched env (holds num_envs instances itself) ----------------------
class VectorForager:
    """`num_envs` foragers in one set of arrays; energy drains, berries get eaten.

    With `keepdims=True` it carries the seed's bug: `alive.sum(-1, keepdims=True)` is
    `(N, 1)`, meets the `(N,)` energy test and broadcasts to `(N, N)`; the reduction over
    the last axis then makes every instance die when any instance runs out of energy.
    """

    action_space = spaces.Discrete(3)
    observation_space = spaces.Box(0.0, 3.0, (4,))

    def __init__(self, num_envs: int, keepdims: bool = False) -> None:
        self.num_envs = num_envs
        self.keepdims = keepdims

    def _fresh(self, keys):
        def one(key):
            k_energy, k_berries = jax.random.split(key)
            energy = jax.random.uniform(k_energy, (), jnp.float32, 0.3, 1.0)
            alive = jax.random.bernoulli(k_berries, 0.7, (3,))
            return energy, alive

        return jax.vmap(one)(keys)

    def _state(self, energy, alive, reward, t, keys):
        n = self.num_envs
        if self.keepdims:
            # this env was written for JAX's default config, where ranks broadcast silently
            with jax.numpy_rank_promotion("allow"):
                alive_count = alive.sum(-1, keepdims=True)
                dead = ((alive_count == 0) | (energy <= 0.0)).any(-1)
        else:
            dead = (alive.sum(-1) == 0) | (energy <= 0.0)
        obs = jnp.concatenate([energy[:, None], alive.astype(jnp.float32)], axis=-1)
        return State(
            env_state=(energy, alive),
            observation=obs,
            reward=reward,
            termination=dead,
            truncation=jnp.zeros(n, bool),
            info={},
            step_count=t,
            key=keys,
        )

    def reset(self, *, key, state=None, done=None):
        keys = key if jnp.ndim(key) == 1 else jax.random.split(key, self.num_envs)
        energy, alive = self._fresh(keys)
        zeros = jnp.zeros(self.num_envs, jnp.float32)
        fresh = self._state(energy, alive, zeros, jnp.zeros(self.num_envs, jnp.int32), keys)
        if state is None:
            return fresh

        def pick(f, s):
            mask = done.reshape(done.shape + (1,) * (f.ndim - 1))
            return jnp.where(mask, f, s)

        return jax.tree.map(pick, fresh, state)

    def step(self, state, action):
        energy, alive = state.env_state
        eat = jax.nn.one_hot(action, 3, dtype=jnp.bool_) & alive
        alive = alive & ~eat
        energy = energy - 0.1 + 0.05 * eat.sum(-1).astype(jnp.float32)
        reward = eat.sum(-1).astype(jnp.float32)
        return self._state(energy, alive, reward, state.step_count + 1, state.key)


# -- single-agent broken envs --------------------------------------------------------------
class SignFlipGridWorld(GridWorld):
    """Bug: the reward has the wrong sign."""

    def step(self, state, action):
        s = super().step(state, action)
        return dataclasses.replace(s, reward=-s.reward)


class DtypeDriftGridWorld(GridWorld):
    """Bug: step returns a float16 observation, reset a float32 one."""

    def step(self, state, action):
        s = super().step(state, action)
        return dataclasses.replace(s, observation=s.observation.astype(jnp.float16))


class GrowingInfoGridWorld(GridWorld):
    """Bug: step adds an `info` entry that reset does not have (the pytree changes)."""

    def step(self, state, action):
        s = super().step(state, action)
        return dataclasses.replace(s, info={"hit_wall": jnp.bool_(False)})


class UnclippedGridWorld(GridWorld):
    """Bug: walks through the wall, out of `observation_space`."""

    def step(self, state, action):
        moves = jnp.array(MOVES)
        pos = state.env_state.pos + moves[action]
        goal = state.env_state.goal
        return dataclasses.replace(
            state,
            env_state=GridState(pos=pos, goal=goal),
            observation=jnp.concatenate([pos, goal]),
            step_count=state.step_count + 1,
        )


class NaNRewardGridWorld(GridWorld):
    """Bug: a square root of a negative number."""

    def step(self, state, action):
        s = super().step(state, action)
        return dataclasses.replace(s, reward=jnp.sqrt(s.env_state.pos[0] - 1.0))


class KeylessGridWorld(GridWorld):
    """Bug: draws its goal from a fixed key, not the one reset receives."""

    def reset(self, *, key):
        s = super().reset(key=jax.random.key(0))
        return dataclasses.replace(s, key=key)


class FrozenClockGridWorld(GridWorld):
    """Bug: step_count never increments (TimeLimit never fires)."""

    def step(self, state, action):
        return dataclasses.replace(super().step(state, action), step_count=state.step_count)


class CountingGridWorld(GridWorld):
    """Bug: Python-side state; the reward grows with the number of Python calls."""

    def __init__(self) -> None:
        self.calls = 0

    def step(self, state, action):
        self.calls += 1
        s = super().step(state, action)
        return dataclasses.replace(s, reward=s.reward + jnp.float32(self.calls))


class EpisodeCounterGridWorld(GridWorld):
    """Bug: reset depends on a Python counter of episodes, not only on its key."""

    def __init__(self) -> None:
        self.episodes = 0

    def reset(self, *, key):
        self.episodes += 1
        s = super().reset(key=key)
        goal = jnp.full(2, float(1 + self.episodes % 4), jnp.float32)
        return dataclasses.replace(
            s,
            env_state=GridState(s.env_state.pos, goal),
            observation=jnp.concatenate([s.env_state.pos, goal]),
        )


class WeakResetGridWorld(GridWorld):
    """Bug: reset returns a Python float reward (weakly typed): jit retraces on step 2."""

    def reset(self, *, key):
        return dataclasses.replace(super().reset(key=key), reward=0.0)


# -- multi-agent broken envs -----------------------------------------------------------------
class GreedyRace(Race):
    """Bug: every agent's action is used, inactive ones included."""

    def step(self, state, action):
        return self._moved(state, state.env_state + jnp.asarray(action).astype(jnp.float32))


class LeakyObservationRace(Race):
    """Bug: finished agents keep seeing their position."""

    def step(self, state, action):
        s = super().step(state, action)
        agents = dataclasses.replace(s.agents, observation=jnp.minimum(s.env_state, 10.0))
        return dataclasses.replace(s, agents=agents)


class ConsolationRace(Race):
    """Bug: finished agents get a reward of 0.5 on every later step."""

    def step(self, state, action):
        s = super().step(state, action)
        consolation = jnp.where(state.agents.active, s.agents.reward, 0.5)
        return dataclasses.replace(s, agents=dataclasses.replace(s.agents, reward=consolation))


class EmptyMaskRace(Race):
    """Bug: finished agents' action masks allow nothing."""

    def reset(self, *, key):
        return self._with_mask(super().reset(key=key))

    def step(self, state, action):
        return self._with_mask(super().step(state, action))

    def _with_mask(self, s):
        mask = jnp.broadcast_to(s.agents.active[:, None], (self.num_agents, 2))
        return dataclasses.replace(s, agents=dataclasses.replace(s.agents, action_mask=mask))


# agents 0 and 1 always advance (finish at step 10), agent 2 never does
STAGGERED = always(jnp.array([1, 1, 0], jnp.int32))


# =============================================================================================
def test_keepdims_broadcast_bug_only_shows_in_a_batch(x64):
    env = VectorForager(8, keepdims=True)
    with pytest.raises(CheckError) as info:
        check_batch_independence(env, num_steps=10)
    err = info.value
    assert err.check == "check_batch_independence"
    assert err.field == "termination"
    assert err.env_index is not None and err.step is not None and err.step >= 1
    assert bool(err.expected) is False and bool(err.got) is True
    assert "leaks" in str(err) and f"step {err.step}" in str(err)
    assert "keepdims" in str(err)
    if not x64:  # the same bug at batch size 1 is invisible
        check_batch_independence(VectorForager(1, keepdims=True), num_steps=10)
    # (vector envs without the bug pass: the VmapWrapper stacks of test_testing_battery.py)


def test_misread_rng_slot_is_caught_by_the_reference(tmp_path, x64):
    check_matches_reference(SlipWalk(), SlipWalkReference(), num_steps=12, num_episodes=2)
    with pytest.raises(ReferenceMismatch) as info:
        check_matches_reference(
            MisreadSlotWalk(), SlipWalkReference(), num_steps=12, num_episodes=2, dump_path=tmp_path
        )
    err = info.value
    assert err.check == "check_matches_reference"
    assert err.field.startswith("observation") and err.step >= 1
    assert err.got != err.expected
    assert f"at step {err.step}" in str(err) and "expected" in str(err)
    assert err.dump_path is not None and err.dump_path in str(err)
    with open(err.dump_path, encoding="utf-8") as fh:
        dump = json.load(fh)
    assert dump["first_divergence"]["step"] == err.step
    last = dump["steps"][-1]
    assert last["jax"]["observation"] != last["reference"]["observation"]
    assert len(dump["steps"]) == err.step + 1


def test_reward_sign_error_is_caught_by_the_reference(tmp_path):
    # XLA's exp and NumPy's differ by up to 1 ulp in float32: the rule says so, once
    tol = Tolerance(ulp=2)
    check_matches_reference(
        GridWorld(), GridReference(), num_steps=8, num_episodes=2, tolerance=tol
    )
    with pytest.raises(ReferenceMismatch) as info:
        check_matches_reference(
            SignFlipGridWorld(),
            GridReference(),
            num_steps=8,
            tolerance=tol,
            dump_path=tmp_path / "d.json",
        )
    err = info.value
    assert (err.step, err.field) == (1, "reward")
    assert float(err.expected) > 0 and float(err.got) == pytest.approx(-float(err.expected))
    assert "rule: within 2 ulp" in str(err) and str(tmp_path / "d.json") in str(err)


class EnergyWalk:
    """Energy drains by 0.1 per step in float32; the episode ends at energy <= 0."""

    action_space = spaces.Discrete(2)
    observation_space = spaces.Box(-2.0, 1.0, (1,))

    def reset(self, *, key):
        return self._state(jnp.float32(1.0), jnp.int32(0), key)

    def step(self, state, action):
        return self._state(state.env_state - jnp.float32(0.1), state.step_count + 1, state.key)

    def _state(self, energy, t, key):
        zero, false = jnp.float32(0.0), jnp.bool_(False)
        return State(energy, energy[None], zero, energy <= 0.0, false, {}, t, key)


class EnergyReference:
    """The same rule in float64: at step 10 the energy is 1.4e-16 here, -7.5e-8 in float32."""

    def reset(self, key, initial):
        self.energy = 1.0
        return {"observation": np.array([self.energy]), "termination": False}

    def step(self, action):
        self.energy -= 0.1
        return {"observation": np.array([self.energy]), "termination": self.energy <= 0.0}


def test_near_threshold_flip_is_explained_not_reported(x64):
    loose = Tolerance(atol=1e-6)
    with pytest.raises(ReferenceMismatch) as info:
        check_matches_reference(EnergyWalk(), EnergyReference(), num_steps=12, tolerance=loose)
    err = info.value
    assert (err.step, err.field) == (10, "termination")
    assert (bool(err.expected), bool(err.got)) == (False, True)
    flip = NearThreshold("termination", "observation", 0.0, atol=1e-6)
    explained = Tolerance(atol=1e-6, near_threshold=[flip])
    report = check_matches_reference(
        EnergyWalk(), EnergyReference(), num_steps=12, tolerance=explained
    )
    assert report.stats["explained_flips"] == [
        {"episode": 0, "step": 10, "fields": ["termination"]}
    ]
    assert report.stats["steps_compared"] == 10
    # the floats themselves needed the stated tolerance: an exact comparison fails early
    with pytest.raises(ReferenceMismatch) as info:
        check_matches_reference(EnergyWalk(), EnergyReference(), num_steps=12)
    assert info.value.field == "observation[0]" and "ulp" in str(info.value)


def test_dtype_drift_between_reset_and_step(x64):
    with pytest.raises(CheckError) as info:
        check_env(DtypeDriftGridWorld(), num_steps=3, checks=["contract"])
    err = info.value
    assert (err.check, err.step, err.field) == ("check_env/structure", 1, "observation")
    assert err.expected == "float32[4] (as after reset)" and err.got == "float16[4]"


def test_pytree_that_changes_structure():
    with pytest.raises(CheckError) as info:
        check_env(GrowingInfoGridWorld(), num_steps=3, checks=["structure"])
    err = info.value
    assert (err.check, err.step, err.field) == ("check_env/structure", 1, "info.hit_wall")
    assert err.expected == "no such field (as after reset)" and err.got == "bool[]"


def test_observation_out_of_its_space():
    with pytest.raises(CheckError) as info:
        check_env(UnclippedGridWorld(), num_steps=6, policy=always(0), checks=["contract"])
    err = info.value
    assert (err.check, err.step, err.field) == (
        "check_env/observation_in_space",
        5,
        "observation[1]",
    )
    assert "[0.0, 4.0]" in err.expected and float(err.got) == 5.0


def test_nan_reward():
    with pytest.raises(CheckError) as info:
        check_env(NaNRewardGridWorld(), num_steps=3, policy=always(0), checks=["contract"])
    err = info.value
    assert (err.check, err.step, err.field) == ("check_env/reward", 1, "reward")
    assert np.isnan(err.got) and "finite" in str(err)


def test_env_that_ignores_its_key():
    with pytest.raises(CheckError) as info:
        check_env(KeylessGridWorld(), num_steps=4, checks=["determinism"])
    err = info.value
    assert err.check == "check_env/key_sensitivity"
    assert "ignores its key" in str(err) and "4 identical trajectories" in str(err)
    # an env declared deterministic (as the battery declares Race) must not depend on its key
    with pytest.raises(CheckError, match="declared deterministic"):
        check_env(GridWorld(), num_steps=4, checks=["determinism"], deterministic=True)


def test_step_count_that_does_not_increment():
    with pytest.raises(CheckError) as info:
        check_env(FrozenClockGridWorld(), num_steps=3, checks=["contract"])
    err = info.value
    assert (err.check, err.step, err.field) == ("check_env/step_count", 1, "step_count")
    assert (int(err.expected), int(err.got)) == (1, 0)
    assert "TimeLimit relies on it" in str(err)


def test_python_side_state_in_step():
    with pytest.raises(CheckError) as info:
        check_env(CountingGridWorld(), num_steps=3, checks=["transforms"])
    err = info.value
    assert err.check == "check_env/jit" and err.field == "reward"
    assert "Python-side state" in str(err)
    with pytest.raises(CheckError) as info:
        check_env(CountingGridWorld(), num_steps=3, checks=["determinism"])
    assert (info.value.check, info.value.field) == ("check_env/determinism", "reward")


def test_python_side_state_in_reset():
    with pytest.raises(CheckError) as info:
        check_env(EpisodeCounterGridWorld(), num_steps=2, checks=["determinism"])
    err = info.value
    assert err.check in ("check_env/determinism", "check_env/reset_purity")
    assert err.step == 0 and err.field.startswith(("env_state.goal", "observation"))


def test_weakly_typed_reset_recompiles(x64):
    with pytest.raises(CheckError) as info:
        check_env(WeakResetGridWorld(), num_steps=4, checks=["recompilation"])
    err = info.value
    assert (err.check, err.field, err.got) == ("check_env/recompilation", "reward", "float32[]")
    # the Python float is a weak float32, or under x64 a weak float64 (also a dtype drift)
    weak = "~float64[]" if x64 else "~float32[]"
    assert err.expected == f"{weak} (the type at the previous step)"
    assert "traced 2 times" in str(err) and "weakly typed" in str(err)
    if x64:
        with pytest.raises(CheckError) as info:
            check_env(WeakResetGridWorld(), num_steps=4, checks=["structure"])
        assert (info.value.check, info.value.field) == ("check_env/structure", "reward")


def test_marl_env_that_uses_inactive_actions():
    with pytest.raises(CheckError) as info:
        check_marl_env(GreedyRace(), num_steps=12, policy=STAGGERED)
    err = info.value
    assert err.check == "check_marl_env/rule1_inactive_actions_ignored"
    assert err.step == 11 and err.field.startswith("env_state")
    assert "inactive agent slot(s) [0, 1]" in str(err)


def test_marl_env_with_nonzero_inactive_observations():
    with pytest.raises(CheckError) as info:
        check_marl_env(LeakyObservationRace(), num_steps=12, policy=STAGGERED)
    err = info.value
    assert err.check == "check_marl_env/rule2_inactive_observation_zero"
    assert (err.step, err.field) == (10, "agents.observation[0]")
    assert float(err.got) == 10.0 and float(err.expected) == 0.0


def test_marl_env_with_nonzero_inactive_rewards():
    with pytest.raises(CheckError) as info:
        check_marl_env(ConsolationRace(), num_steps=12, policy=STAGGERED)
    err = info.value
    assert err.check == "check_marl_env/rule3_inactive_reward_zero"
    assert (err.step, err.field) == (11, "agents.reward[0]") and float(err.got) == 0.5


def test_marl_env_with_an_all_false_mask():
    with pytest.raises(CheckError) as info:
        check_marl_env(EmptyMaskRace(), num_steps=12, policy=STAGGERED)
    err = info.value
    assert err.check == "check_marl_env/rule4_mask_has_legal_action"
    assert (err.step, err.field) == (10, "agents.action_mask[0]")
    assert "(inactive)" in str(err)


def test_working_marl_env_passes_and_exercises_the_rules():
    report = check_marl_env(Race(), num_steps=12, policy=STAGGERED, require_inactive=True)
    assert report.stats["steps_with_inactive_agents"] == 2
    assert report.stats["inactive_action_probes"] == 4


def test_time_limit_of_a_frozen_clock_never_fires():
    """Why the step_count check matters: TimeLimit reads step_count."""
    env = TimeLimit(FrozenClockGridWorld(), 2)
    s = env.reset(key=jax.random.key(0))
    for _ in range(3):
        s = env.step(s, 1)
    assert not bool(s.truncation)
