"""Random actions for a batch of envs, and the rollout loop that feeds them one step ahead.

- `random_actions(space, num_envs)`: uniform random actions for a batch, drawn inside jit
  with `parallax.rng` (cheap, counter-based, no key splitting);
- `action_scan(step, state, sample, episode_key, ts)`: a `lax.scan` of `step` that draws
  each step's action one iteration ahead and carries it (what `parallax bench` times).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _spaces

__all__ = ["ActionSampler", "action_scan", "random_actions"]

ActionSampler = Callable[[jax.Array, jax.Array], Any]


def random_actions(space: Any, num_envs: int) -> ActionSampler:
    """A sampler of uniform random actions for a batch of `num_envs` envs.

    The sampler is `sample(episode_key, t) -> actions`, a pure function to call inside jit:
    `episode_key` comes from `parallax.rng.episode_key`, `t` is the step (uint32 scalar),
    and every leaf of the result has a leading `num_envs` axis. Draws are counter-based
    (`parallax.rng`), one slot per leaf of a `PyTreeSpace`.

    - `Discrete(n, shape)`, `MultiDiscrete(nvec)`, `MultiBinary(n)`: uniform integers;
    - `Box`: uniform where both bounds are finite, `low + |z|` / `high - |z|` with `z`
      standard normal where one bound is infinite, `z` where neither is;
    - any other space: `space.sample` vmapped over keys from `jax.random` (slower).

    Args:
        space: the action space of one env (as `VmapWrapper.action_space` describes it).
        num_envs: the batch size, a positive int.

    Returns:
        `sample(episode_key, t)`; actions of shape `(num_envs, *space.shape)` and
        `space.dtype` for array spaces, a matching pytree for `PyTreeSpace`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import rng, spaces
        >>> from parallax import random_actions
        >>> sample = random_actions(spaces.Discrete(3), 8)
        >>> a = sample(rng.episode_key(jax.random.key(0)), jnp.uint32(0))
        >>> a.shape, a.dtype.name, bool(((a >= 0) & (a < 3)).all())
        ((8,), 'int32', True)
    """
    if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
        raise ValueError(f"random_actions: num_envs must be a positive int, got {num_envs!r}")
    return _tree_sampler(space, num_envs, iter(range(1 << 20)))


def _tree_sampler(space: Any, num_envs: int, slots: Iterator[int]) -> ActionSampler:
    """A sampler for `space`; nested `PyTreeSpace`s recurse, each leaf takes the next slot."""
    if not isinstance(space, _spaces.PyTreeSpace):
        return _leaf_sampler(space, num_envs, next(slots))
    leaves, treedef = jax.tree.flatten(space.spaces, is_leaf=lambda s: isinstance(s, _spaces.Space))
    samplers = [_tree_sampler(s, num_envs, slots) for s in leaves]

    def sample_tree(episode_key: jax.Array, t: jax.Array) -> Any:
        return jax.tree.unflatten(treedef, [f(episode_key, t) for f in samplers])

    return sample_tree


def _leaf_sampler(space: Any, num_envs: int, slot: int) -> ActionSampler:
    from . import rng

    shape = tuple(int(d) for d in space.shape)
    size = int(np.prod(shape, dtype=np.int64))
    batch_shape = (num_envs, *shape)
    count = num_envs * size
    if isinstance(space, _spaces.Discrete | _spaces.MultiDiscrete | _spaces.MultiBinary):
        if isinstance(space, _spaces.Discrete):
            n: Any = space.n
        elif isinstance(space, _spaces.MultiBinary):
            n = 2
        else:
            n = jnp.asarray(np.tile(np.asarray(space.nvec).reshape(-1), num_envs), jnp.int32)
        dtype = space.dtype

        def sample_int(episode_key: jax.Array, t: jax.Array) -> jax.Array:
            draws = rng.randint_vector(episode_key, t, slot, count, n, dtype=jnp.int32)
            # canonical: a 64-bit space dtype means 32 bits when x64 is off
            return draws.reshape(batch_shape).astype(jax.dtypes.canonicalize_dtype(dtype))

        return sample_int
    if isinstance(space, _spaces.Box) and np.issubdtype(space.dtype, np.floating):
        low, high = np.broadcast_to(space.low, shape), np.broadcast_to(space.high, shape)
        lo_f, hi_f = np.isfinite(low), np.isfinite(high)
        bounded = bool(np.all(lo_f & hi_f))
        lo = jnp.asarray(np.where(lo_f, low, 0.0), jnp.float32)
        width = jnp.asarray(np.where(lo_f & hi_f, high - low, 0.0), jnp.float32)
        hi = jnp.asarray(np.where(hi_f, high, 0.0), jnp.float32)
        out_dtype = space.dtype

        def sample_box(episode_key: jax.Array, t: jax.Array) -> jax.Array:
            u = rng.uniform_vector(episode_key, t, slot, count).reshape(batch_shape)
            x = jnp.broadcast_to(lo, batch_shape) + jnp.broadcast_to(width, batch_shape) * u
            if not bounded:
                z = rng.normal_vector(episode_key, t, slot + 1_000, count).reshape(batch_shape)
                lo_b, hi_b = jnp.broadcast_to(lo, batch_shape), jnp.broadcast_to(hi, batch_shape)
                x = jnp.where(
                    np.broadcast_to(lo_f & hi_f, batch_shape),
                    x,
                    jnp.where(
                        np.broadcast_to(lo_f, batch_shape),
                        lo_b + jnp.abs(z),
                        jnp.where(np.broadcast_to(hi_f, batch_shape), hi_b - jnp.abs(z), z),
                    ),
                )
            return x.astype(jax.dtypes.canonicalize_dtype(out_dtype))

        return sample_box

    def sample_generic(episode_key: jax.Array, t: jax.Array) -> Any:
        base = jax.random.fold_in(jax.random.key(slot), t)
        words = rng.bits(episode_key, t, slot, jnp.arange(2, dtype=jnp.uint32))
        base = jax.random.fold_in(jax.random.fold_in(base, words[0]), words[1])
        return jax.vmap(lambda k: space.sample(key=k))(jax.random.split(base, num_envs))

    return sample_generic


def action_scan(
    step: Callable[[Any, Any], Any],
    state: Any,
    sample: ActionSampler,
    episode_key: jax.Array,
    ts: jax.Array,
    *,
    count_done: Callable[[Any], jax.Array] | None = None,
) -> tuple[Any, jax.Array]:
    """`lax.scan` of `step(state, action)` over the steps `ts`, with random actions.

    The action of step `ts[i]` is drawn at the end of the previous iteration (the first one
    before the loop) and carried in the scan, so it is one materialised array when the env
    reads it, as a policy's output or sekai's sampled action would be. Drawn inside the
    same iteration instead, XLA may fuse the draw into every kernel that reads the action
    and recompute the counter hash in each (measured: Portfolio-v0's step ran 2x slower
    that way); that cost belongs to the benchmark, not to the env.

    Args:
        step: `step(state, action) -> state`.
        state: the first state.
        sample: `sample(episode_key, t) -> action` (see `random_actions`).
        episode_key: the `parallax.rng` key of the action draws.
        ts: uint32 `(T,)`, the steps' counters.
        count_done: `count_done(state) -> int32 ()`, summed over the steps (default:
            `sum(state.done)`).

    Returns:
        `(last state, total of count_done)`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import action_scan, make_vec, random_actions, rng
        >>> vec = make_vec("GridWorld-v0", 4)
        >>> sample = random_actions(vec.action_space, 4)
        >>> ek = rng.episode_key(jax.random.key(1))
        >>> state, ended = action_scan(
        ...     vec.step, vec.reset(key=jax.random.key(0)), sample, ek,
        ...     jnp.arange(3, dtype=jnp.uint32))
        >>> int(state.step_count.max()) <= 3
        True
    """
    if count_done is None:

        def count_done(s: Any) -> jax.Array:
            return jnp.sum(s.done, dtype=jnp.int32)

    def body(carry: Any, t: jax.Array) -> tuple[Any, None]:
        state, action, ended = carry
        state = step(state, action)
        return (state, sample(episode_key, t + 1), ended + count_done(state)), None

    first = sample(episode_key, ts[0])
    (state, _, ended), _ = jax.lax.scan(body, (state, first, jnp.zeros((), jnp.int32)), ts)
    return state, ended
