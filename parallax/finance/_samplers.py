"""Episode samplers: where in a price history each episode starts, and per-reset starts.

- `RandomStart()`: a uniformly random window at every reset (one `parallax.rng.randint`
  draw, slot `START`), sekai's default `sampler="random"`.
- `FixedStart(start)`: the same window every episode (`sampler=int`).
- `SequentialStart(start=0, stride=None)`: consecutive windows, for evaluation; the walk
  survives resets. An env with this sampler declares `reset_uses_previous = True`, and
  `reset(key=..., previous=state)` starts the window after `state`'s (`next_position`):
  `AutoResetWrapper` (same-step and next-step) and `VmapWrapper`'s selective resets pass the
  finished episode's state, so each (sub-)env of `parallax.make_vec(..., sampler=
  "sequential")` walks its own copy of the history from `start` and wraps around at the end,
  as each sub-env of sekai's native vector env does with its `sampler.spawn()` copy. A
  reset without `previous` (a fresh `reset(key=...)`) starts at the first window;
  `positions(...)` lists the windows the walk hands out, on the host.
- `as_sampler(x)`: `"random"`, `"sequential"`, an int, one of ours, or one of sekai's samplers.
- `reset_with_start(env, key=..., start=...)`: reset a single env or a whole `VmapWrapper`
  batch (with its auto-reset and time-limit wrappers) with one first-decision row per
  sub-env, the counterpart of sekai's `reset(options=[{"start": row}, ...])`.

Window positions count from the first allowed start, as in sekai (`first + position`, where
`first = 0` for price arrays).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int, PyTree

__all__ = [
    "FixedStart",
    "RandomStart",
    "Sampler",
    "SequentialStart",
    "as_sampler",
    "reset_with_start",
]


@dataclasses.dataclass(frozen=True)
class RandomStart:
    """Uniformly random windows: the default for training (one draw per reset).

    Example:
        >>> RandomStart()
        RandomStart()
    """


@dataclasses.dataclass(frozen=True)
class FixedStart:
    """Every episode starts at the same window position.

    Args:
        start: the window position, an int >= 0 (it must be a valid window; the env checks
            that at construction).

    Example:
        >>> FixedStart(3).start
        3
    """

    start: int

    def __post_init__(self) -> None:
        if isinstance(self.start, bool) or not isinstance(self.start, int | np.integer):
            raise TypeError(f"FixedStart: start must be an int >= 0, got {self.start!r}")
        if self.start < 0:
            raise ValueError(f"FixedStart: start must be >= 0, got {self.start}")
        object.__setattr__(self, "start", int(self.start))


@dataclasses.dataclass(frozen=True)
class SequentialStart:
    """Consecutive windows through the history, wrapping around, as sekai's sampler walks them.

    The first episode starts at position `start`, each later one `stride` positions on
    (default: the episode length). Handing out the last window that fits ends an epoch and
    wraps to `start`; rows after the last window that fits are not used. The walk is state
    that survives resets: an env with this sampler reads the finished episode's window from
    `reset(key=..., previous=state)` (the auto-reset and selective-reset wrappers pass it)
    and starts the next one (`next_position`); a reset without `previous` starts at
    `start`. Each env of a batch walks its own copy, as each sub-env of sekai's native
    vector env walks its `sampler.spawn()` copy.

    Args:
        start: first position, an int >= 0.
        stride: positions between episodes, an int >= 1, or None for the episode length.

    Example:
        >>> SequentialStart(start=2, stride=5).positions(n_valid=14, episode_length=5, count=4)
        array([ 2,  7, 12,  2])
        >>> int(SequentialStart(start=2, stride=5).next_position(12, n_valid=14, episode_length=5))
        2
    """

    start: int = 0
    stride: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.start, bool) or not isinstance(self.start, int | np.integer):
            raise TypeError(f"SequentialStart: start must be an int >= 0, got {self.start!r}")
        if self.start < 0:
            raise ValueError(f"SequentialStart: start must be >= 0, got {self.start}")
        if self.stride is not None:
            if isinstance(self.stride, bool) or not isinstance(self.stride, int | np.integer):
                raise TypeError(
                    f"SequentialStart: stride must be an int >= 1 or None, got {self.stride!r}"
                )
            if self.stride < 1:
                raise ValueError(f"SequentialStart: stride must be >= 1, got {self.stride}")
            object.__setattr__(self, "stride", int(self.stride))
        object.__setattr__(self, "start", int(self.start))

    def episodes_per_epoch(self, n_valid: int, episode_length: int) -> int:
        """How many episodes the walk hands out before it wraps to `start`.

        Args:
            n_valid: the number of valid windows.
            episode_length: the default stride.

        Raises:
            ValueError: if `start >= n_valid`.
        """
        if self.start >= n_valid:
            raise ValueError(
                f"SequentialStart: start {self.start} is beyond the last window start {n_valid - 1}"
            )
        stride = self.stride or episode_length
        return -(-(n_valid - self.start) // stride)  # ceil

    def positions(self, n_valid: int, episode_length: int, count: int) -> np.ndarray:
        """The first `count` window positions this sampler hands out.

        Args:
            n_valid: the number of valid windows.
            episode_length: the default stride.
            count: how many episodes.

        Returns:
            int64 array `(count,)` of positions in `[0, n_valid)`.

        Raises:
            ValueError: if `start >= n_valid`.
        """
        per_epoch = self.episodes_per_epoch(n_valid, episode_length)
        stride = self.stride or episode_length
        k = np.arange(count)
        return np.asarray(self.start + (k % per_epoch) * stride, dtype=np.int64)

    def next_position(
        self, position: Int[Array, ""] | int, *, n_valid: int, episode_length: int
    ) -> Int[Array, ""]:
        """The window after the one at `position`: `stride` on, or `start` past the last one.

        sekai's rule (`SequentialStart.sample`): after handing out `p`, the next position
        is `p + stride` if that is a valid window, else `start` (a new epoch). A pure
        function of the previous window, so it runs inside `jit` and `vmap`.

        Args:
            position: the previous episode's window position (int, or a traced int32).
            n_valid: the number of valid windows.
            episode_length: the default stride.

        Returns:
            int32 `()`, the next window position.
        """
        stride = self.stride or episode_length
        following = jnp.asarray(position, jnp.int32) + stride
        return jnp.where(following < n_valid, following, jnp.int32(self.start))


Sampler = RandomStart | FixedStart | SequentialStart


def as_sampler(sampler: Any) -> Sampler:
    """Normalise a `sampler=` argument as sekai does.

    Args:
        sampler: `"random"`, `"sequential"`, an int (a fixed position), one of our samplers,
            or a sekai `RandomStart`/`FixedStart`/`SequentialStart` (converted).

    Returns:
        The sampler.

    Raises:
        ValueError: anything else, or a negative int.

    Example:
        >>> as_sampler(4)
        FixedStart(start=4)
    """
    if isinstance(sampler, RandomStart | FixedStart | SequentialStart):
        return sampler
    if type(sampler).__module__.startswith("sekai."):
        name = type(sampler).__name__
        if name == "RandomStart":
            return RandomStart()
        if name == "FixedStart":
            return FixedStart(sampler.start)
        if name == "SequentialStart":
            return SequentialStart(sampler.start, sampler.stride)
        raise ValueError(f"sampler {sampler!r} is not supported (a custom sekai EpisodeSampler)")
    if isinstance(sampler, int | np.integer) and not isinstance(sampler, bool | np.bool_):
        if sampler < 0:
            raise ValueError(f"sampler (a fixed window start) must be >= 0, got {sampler}")
        return FixedStart(int(sampler))
    if isinstance(sampler, str) and sampler == "random":
        return RandomStart()
    if isinstance(sampler, str) and sampler == "sequential":
        return SequentialStart()
    raise ValueError(
        f"sampler must be 'random', 'sequential', an int or an episode sampler, got {sampler!r}"
    )


def reset_with_start(env: Any, *, key: Array, start: Any) -> PyTree:
    """Reset with a chosen first-decision row, per sub-env for a batch.

    The counterpart of sekai's `reset(options={"start": row})` and, for a vector env, of
    `reset(options=[{"start": row_i} ...])`. Works on a finance env, on any stack of
    wrappers over it whose `reset` passes keyword arguments on (`TimeLimit`,
    `AutoResetWrapper`), and on a vector env over such a stack (`VmapWrapper`, or
    `VmapAutoResetWrapper` as `parallax.make_vec` builds), where each sub-env gets its own
    row.

    Args:
        env: a finance env, a wrapper stack over one, or a vector env over such a stack.
        key: a PRNG key (one, or one per sub-env for a batch).
        start: the first decision row: an int (negative counts from the end of the history),
            or for a batch an int array `(num_envs,)` (a scalar is used for every sub-env).
            Concrete rows are range-checked on the host (ValueError, as sekai); traced rows
            stop the program when out of range.

    Returns:
        The reset state (batched for a `VmapWrapper`).

    Example:
        >>> import jax, numpy as np, parallax
        >>> from parallax.finance import reset_with_start
        >>> prices = 100 * np.exp(np.cumsum(np.full(60, 0.001)))
        >>> vec = parallax.make_vec("Trading-v0", 3, prices=prices, lookback=5,
        ...                         episode_length=10)
        >>> state = reset_with_start(vec, key=jax.random.key(0), start=[5, 20, -11])
        >>> state.info["timestamp"].tolist()
        [5, 20, 49]
    """
    import jax.numpy as jnp

    from .._wrappers.base import is_vector_env, unwrap_layers

    base = unwrap_layers(env)[-1]
    check = getattr(base, "resolve_start", None)
    if check is None:
        raise TypeError(f"reset_with_start needs a finance env with a history, got {base!r}")
    if not is_vector_env(env):
        return env.reset(key=key, start=check(start))
    n = env.num_envs
    shape = tuple(start.shape) if isinstance(start, jax.core.Tracer) else np.shape(start)
    if shape not in ((), (n,)):
        raise ValueError(
            f"reset_with_start: start must be one row or one row per env, an int array of "
            f"shape (num_envs,) = ({n},), got shape {shape}: {start!r}"
        )
    if isinstance(start, jax.core.Tracer):
        rows = jnp.broadcast_to(start, (n,))
    else:
        rows_np = np.broadcast_to(np.asarray(start), (n,))
        if rows_np.dtype.kind not in "iu":
            raise TypeError(f"start must hold int rows, got {rows_np.dtype}: {start!r}")
        rows = jnp.asarray(np.array([check(int(r)) for r in rows_np], dtype=np.int32))
    # a VmapWrapper hands per-env reset arguments to its envs row by row
    return env.reset(key=key, start=rows)
