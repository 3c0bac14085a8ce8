"""The files `parallax new NAME` writes, as text (so they ship inside the wheel as code).

`__NAME__` is replaced by the project name, `__CLASS__` by its CamelCase class name. The
example game is NoisyWalk: a walker on a line of `SIZE` cells heads for a target; with
probability `NOISE_P` its move is replaced by a random one.
"""

from __future__ import annotations

__all__ = ["TEMPLATES"]

SPEC = """\
# __NAME__: the spec

The single source of truth. `reference.py` (readable, one instance, NumPy) and `env.py`
(batched, JAX) are both written from this page, never from each other. `parallax check .`
compares them step by step and writes `validation_report.json`.

The example game below (a noisy walk to a target) is a placeholder: replace it with yours,
rule by rule, in all three files.

## Rules

- A walker lives on the cells `0 .. SIZE - 1` of a line (`SIZE = 10`).
- Reset: the walker starts on cell `start = randint(SIZE)`; the target is the cell
  `(start + 1 + randint(SIZE - 1)) % SIZE`, never the start cell.
- Actions: `0` moves left, `1` stays, `2` moves right (`Discrete(3)`). An action outside
  `0 .. 2` is clipped into it (Parallax's out-of-range rule).
- Noise: with probability `NOISE_P = 0.25` the chosen action is replaced by
  `randint(3)`, a uniformly random action (which may be the same one).
- The position is clamped to the line.
- Reward: `1.0` on the step that reaches the target, else `-0.01`.
- Termination: the walker is on the target. There is no truncation (wrap the env in
  `parallax.TimeLimit` for a time limit).
- Observation: `[position, target] / (SIZE - 1)` as float32, shape `(2,)`, in `[0, 1]`.
- State: `position` (int32), `target` (int32), `episode_key` (uint32 `(2,)`).

## Randomness: the slot table

Every random decision is a pure function of `(episode_key, step, slot, index)`
(`parallax.rng` in JAX, `parallax.rng.reference` in NumPy: the same bits).

| slot | name        | used at          | index | distribution       |
|------|-------------|------------------|-------|--------------------|
| 0    | START       | reset (step 0)   | 0     | randint(SIZE)      |
| 1    | TARGET      | reset (step 0)   | 0     | randint(SIZE - 1)  |
| 2    | NOISE       | every step t     | 0     | bernoulli(NOISE_P) |
| 3    | NOISE_MOVE  | every step t     | 0     | randint(3)         |

`t` is the step count before the step (the first step draws at `t = 0`).
"""

REFERENCE = '''\
"""__NAME__, the readable reference: one instance, plain Python and NumPy, explicit `if`s.

Written from spec.md (not from env.py). It follows `parallax.testing.Reference`:
`reset(key, initial)` and `step(action)` return a record, a dict from the JAX state's field
names to values; every field it returns is compared with the JAX env, step by step.
"""

from __future__ import annotations

import numpy as np

from parallax.rng import reference as rng

# spec: constants
SIZE = 10
NOISE_P = 0.25
GOAL_REWARD = 1.0
STEP_REWARD = -0.01

# spec: the slot table
START, TARGET, NOISE, NOISE_MOVE = 0, 1, 2, 3


class __CLASS__Reference:
    """__NAME__, one instance."""

    def reset(self, key, initial=None):
        self.episode_key = rng.episode_key(key)
        self.t = 0
        # spec: start anywhere; the target is any other cell
        self.position = int(rng.randint(self.episode_key, 0, START, 0, SIZE))
        offset = int(rng.randint(self.episode_key, 0, TARGET, 0, SIZE - 1))
        self.target = (self.position + 1 + offset) % SIZE
        return self.record(reward=0.0, termination=False)

    def step(self, action):
        # spec: an out-of-range action is clipped into 0 .. 2
        action = int(action)
        if action < 0:
            action = 0
        if action > 2:
            action = 2
        # spec: with probability NOISE_P the action is replaced by a random one
        if rng.bernoulli(self.episode_key, self.t, NOISE, 0, NOISE_P):
            action = int(rng.randint(self.episode_key, self.t, NOISE_MOVE, 0, 3))
        # spec: 0 moves left, 1 stays, 2 moves right; clamp to the line
        position = self.position + (action - 1)
        if position < 0:
            position = 0
        if position > SIZE - 1:
            position = SIZE - 1
        self.position = position
        self.t += 1
        # spec: reaching the target ends the episode with GOAL_REWARD
        if self.position == self.target:
            return self.record(reward=GOAL_REWARD, termination=True)
        return self.record(reward=STEP_REWARD, termination=False)

    def record(self, reward, termination):
        observation = np.array([self.position, self.target], np.float32) / np.float32(SIZE - 1)
        return {
            "observation": observation,
            "reward": np.float32(reward),
            "termination": termination,
            "truncation": False,
            "step_count": self.t,
            "env_state.position": self.position,
            "env_state.target": self.target,
        }


def make_reference():
    """The reference factory (`tests/conftest.py` and `parallax check` call it)."""
    return __CLASS__Reference()
'''

ENV = '''\
"""__NAME__, the JAX environment: pure, branch-free, vmappable.

Written from spec.md (not from reference.py). Every `if` of the spec is a `jnp.where`;
every random decision is drawn with `parallax.rng` from the slot table, so the reference
gets the same bits.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from parallax import State, rng, spaces

# spec: constants
SIZE = 10
NOISE_P = 0.25
GOAL_REWARD = 1.0
STEP_REWARD = -0.01

# spec: the slot table
SLOTS = rng.SlotTable(
    rng.Slot(0, "START", "reset (step 0)", "0", "randint(SIZE)"),
    rng.Slot(1, "TARGET", "reset (step 0)", "0", "randint(SIZE - 1)"),
    rng.Slot(2, "NOISE", "every step t", "0", "bernoulli(NOISE_P)"),
    rng.Slot(3, "NOISE_MOVE", "every step t", "0", "randint(3)"),
)


class __CLASS__State(NamedTuple):
    position: jax.Array  # int32 ()
    target: jax.Array  # int32 ()
    episode_key: jax.Array  # uint32 (2,): names the episode for parallax.rng


class __CLASS__:
    """__NAME__ (see spec.md): walk to the target; a NOISE_P share of moves are random."""

    action_space = spaces.Discrete(3)
    observation_space = spaces.Box(0.0, 1.0, (2,))

    def _state(self, env_state, reward, termination, step_count, key) -> State:
        """The one state builder of reset and step (same tree, shapes, dtypes)."""
        position = env_state.position.astype(jnp.float32)
        target = env_state.target.astype(jnp.float32)
        return State(
            env_state=env_state,
            observation=jnp.stack([position, target]) / jnp.float32(SIZE - 1),
            reward=jnp.asarray(reward, jnp.float32),
            termination=jnp.asarray(termination, jnp.bool_),
            truncation=jnp.bool_(False),
            info={},
            step_count=jnp.asarray(step_count, jnp.int32),
            key=key,
        )

    def reset(self, *, key) -> State:
        episode_key = rng.episode_key(key)
        position = rng.randint(episode_key, 0, SLOTS.START, 0, SIZE)
        offset = rng.randint(episode_key, 0, SLOTS.TARGET, 0, SIZE - 1)
        target = (position + 1 + offset) % SIZE
        env_state = __CLASS__State(position, target, episode_key)
        return self._state(env_state, 0.0, False, 0, key)

    def step(self, state: State, action) -> State:
        s, t = state.env_state, state.step_count
        noisy = rng.bernoulli(s.episode_key, t, SLOTS.NOISE, 0, NOISE_P)
        random_move = rng.randint(s.episode_key, t, SLOTS.NOISE_MOVE, 0, 3)
        action = jnp.clip(jnp.asarray(action, jnp.int32), 0, 2)  # out-of-range: clipped
        action = jnp.where(noisy, random_move, action)
        position = jnp.clip(s.position + (action - 1), 0, SIZE - 1)
        at_target = position == s.target
        reward = jnp.where(at_target, GOAL_REWARD, STEP_REWARD)
        env_state = __CLASS__State(position, s.target, s.episode_key)
        return self._state(env_state, reward, at_target, t + 1, state.key)


def make_env():
    """The env factory (`tests/conftest.py` and `parallax check` call it)."""
    return __CLASS__()
'''

CONFTEST = '''\
"""The two factories the parallax battery tests (`test_battery.py`)."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from env import make_env  # noqa: E402
from reference import make_reference  # noqa: E402


@pytest.fixture
def env_factory():
    return make_env


@pytest.fixture
def reference_factory():
    return make_reference
'''

TEST_BATTERY = '''\
"""The whole parallax validation battery, one named test per check."""

from parallax.testing.battery import *  # noqa: F403
'''

README = """\
# __NAME__

Written by `parallax new __NAME__`. Fill in, in this order:

1. `spec.md`: the rules and the slot table (the single source of truth);
2. `reference.py`: the readable one-instance version (NumPy, `parallax.rng.reference`);
3. `env.py`: the JAX version (`parallax.rng`), written from the spec, not from the reference.

Then:

```bash
python -m pytest tests        # the battery, one test per check
parallax check .              # the battery + throughput -> validation_report.json
parallax replay FILE.npz      # re-run a failing check's trajectory, first difference shown
```

and in your training script: `parallax.testing.require_fresh_report("path/to/__NAME__")`.
"""

TEMPLATES: dict[str, str] = {
    "spec.md": SPEC,
    "reference.py": REFERENCE,
    "env.py": ENV,
    "tests/conftest.py": CONFTEST,
    "tests/test_battery.py": TEST_BATTERY,
    "README.md": README,
}
"""Relative path -> template text."""
