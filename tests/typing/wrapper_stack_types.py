"""Static typing contract, checked by mypy in `make test` (never imported by pytest).

A wrapper stack keeps the state type visible: `state.action_mask` stays typed through
`VmapWrapper(AutoResetWrapper(TimeLimit(MaskedGridWorld())))`, and envs satisfy the generic
protocols (`Env[MaskedState]`; bare `Env` means `Env[State]`).
"""

from typing import assert_type

import jax

from parallax import (
    Env,
    MARLEnv,
    MARLState,
    State,
    TimeLimit,
    VmapAutoResetWrapper,
    VmapWrapper,
)
from parallax.envs import GridWorld, MaskedGridWorld, MaskedState, Race

masked: Env[MaskedState] = MaskedGridWorld()
plain: Env = GridWorld()
multi: MARLEnv = Race()

stack = VmapAutoResetWrapper(TimeLimit(MaskedGridWorld(), 10), num_envs=4)
state = stack.reset(key=jax.random.key(0))
assert_type(state, MaskedState)
assert_type(stack.step(state, jax.numpy.zeros(4, jax.numpy.int32)).action_mask, jax.Array)

grid_state = VmapWrapper(GridWorld(), num_envs=2).reset(key=jax.random.key(0))
assert_type(grid_state, State)

race_state = TimeLimit(Race(), 5).reset(key=jax.random.key(0))
assert_type(race_state, MARLState)
