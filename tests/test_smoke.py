import jax
import jax.numpy as jnp

from parallax import TimeLimit, VmapAutoResetWrapper
from parallax.envs import GridWorld


def test_stack_runs_jitted(x64):
    env = VmapAutoResetWrapper(TimeLimit(GridWorld(), 3), 4)
    state = env.reset(key=jax.random.key(0))
    state = jax.jit(env.step)(state, jnp.zeros(4, jnp.int32))
    assert state.observation.shape == (4, 4)
