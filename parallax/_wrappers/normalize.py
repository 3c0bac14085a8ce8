"""Running normalisation of observations and rewards, with the statistics in the state.

- `RunningMeanStd`: running mean and variance of one array (Chan's parallel merge, or an
  exponentially weighted version with a half-life).
- `NormalizeObservation` / `ObservationStatistics`: normalise observations with running
  statistics kept in `state.info["observation_statistics"]`.
- `NormalizeReward` / `RewardStatistics`: divide rewards by the running std of the
  discounted return, kept in `state.info["reward_statistics"]`.

These are the pure counterparts of sekai's `VecNormalizeObservation` and
`VecNormalizeReward` and follow their update rules number for number (the tests feed the
same streams through both). Over a vector env the statistics are *shared by the batch*:
each step merges the moments of all `num_envs` rows. To keep the rule that every leaf of a
vector state leads with the batch axis (so states can be vmapped, sliced and sharded
uniformly), every env holds a copy of the shared statistics; all copies are equal. Put the
wrappers *outside* `VmapWrapper` for shared statistics (inside, each env gets its own) and
outside `AutoResetWrapper` (below it they would restart with every episode).

Statistics are computed in the default float dtype (float64 under `jax_enable_x64`, else
float32); observations and rewards keep their own dtypes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from .. import _spaces as spaces
from .._core import Env, KeyArray, StateT
from .autoreset import FINAL_OBSERVATION
from .base import Wrapper, step_env
from .transform import (
    batch_depth,
    check_single_agent,
    selective_reset,
    strip_info,
    where_batch,
)

__all__ = [
    "OBSERVATION_STATISTICS",
    "REWARD_STATISTICS",
    "NormalizeObservation",
    "NormalizeReward",
    "ObservationStatistics",
    "RewardStatistics",
    "RunningMeanStd",
]

OBSERVATION_STATISTICS = "observation_statistics"
"""The `info` key of `NormalizeObservation`'s `ObservationStatistics`."""

REWARD_STATISTICS = "reward_statistics"
"""The `info` key of `NormalizeReward`'s `RewardStatistics`."""

_PRIOR_COUNT = 1e-4  # sekai's RunningMeanStd pseudo-count


def _stat_dtype() -> Any:
    return jax.dtypes.canonicalize_dtype(jnp.float64)


# Fields are typed `Any`: JAX rebuilds pytrees with non-array leaves (`jax.eval_shape`,
# tree maps), which a run-time checked `__init__` would refuse; docstrings give the types.
@jax.tree_util.register_dataclass
@dataclass
class RunningMeanStd:
    """Running mean and (population) variance of a stream of arrays.

    With equal weights (`halflife=None`) it starts at mean 0, variance 1 and a
    pseudo-count of 1e-4; the first batch sets the mean outright and keeps only the
    pseudo-count's share of the prior variance (sekai's `RunningMeanStd`), later batches
    are merged with Chan's parallel update. With a half-life, each update (one step, all
    rows of a vector env together) counts as one sample whose weight halves every
    `halflife` updates, bias-corrected like pandas' `ewm(adjust=True)` (sekai's
    `ExponentialMovingStats`).

    Leaves lead with the batch shape of the state they belong to.
    """

    mean: Any
    """Running mean, shape `batch + shape`."""

    var: Any
    """Running variance, shape `batch + shape`."""

    count: Any
    """Samples (equal weights) or updates (half-life) seen, shape `batch`."""

    weight: Any
    """Half-life only: the decayed total weight, shape `batch` (0 with equal weights)."""

    @staticmethod
    def create(shape: tuple[int, ...], batch: tuple[int, ...] = (), *, ewm: bool = False) -> Any:
        """Fresh statistics for arrays of `shape`, replicated over `batch`."""
        dtype = _stat_dtype()
        return RunningMeanStd(
            mean=jnp.zeros(batch + shape, dtype),
            var=jnp.ones(batch + shape, dtype),
            count=jnp.full(batch, 0.0 if ewm else _PRIOR_COUNT, dtype),
            weight=jnp.zeros(batch, dtype),
        )

    def normalize(self, x: Array, epsilon: float) -> Array:
        """`(x - mean) / sqrt(var + epsilon)` in the statistics' dtype."""
        x = jnp.asarray(x).astype(jnp.result_type(self.mean))
        return (x - self.mean) / jnp.sqrt(self.var + epsilon)


def _expand(x: Array, ndim: int) -> Array:
    return jnp.reshape(x, jnp.shape(x) + (1,) * (ndim - jnp.ndim(x)))


def _merge(
    stats: RunningMeanStd,
    batch_mean: Array,
    batch_var: Array,
    batch_count: Array,
    decay: float | None,
) -> RunningMeanStd:
    """Merge batch moments (shape `shape`, broadcast over the copies) into `stats`."""
    dtype = jnp.result_type(stats.mean)
    nd = jnp.ndim(stats.mean)
    bmean = jnp.broadcast_to(batch_mean.astype(dtype), jnp.shape(stats.mean))
    bvar = jnp.broadcast_to(batch_var.astype(dtype), jnp.shape(stats.mean))
    n = jnp.broadcast_to(jnp.asarray(batch_count).astype(dtype), jnp.shape(stats.count))
    has_data = n > 0
    if decay is None:
        first = stats.count <= _PRIOR_COUNT
        total = stats.count + n
        count, total_x = _expand(stats.count, nd), _expand(total, nd)
        n_x = _expand(n, nd)
        delta = bmean - stats.mean
        m2 = stats.var * count + bvar * n_x + jnp.square(delta) * count * n_x / total_x
        mean = jnp.where(_expand(first, nd), bmean, stats.mean + delta * n_x / total_x)
        var = jnp.where(
            _expand(first, nd), (stats.var * count + bvar * n_x) / total_x, m2 / total_x
        )
        new = RunningMeanStd(mean=mean, var=var, count=total, weight=stats.weight)
    else:
        weight = stats.weight * decay + 1.0
        w = _expand(1.0 / weight, nd)
        first = _expand(stats.count == 0, nd)
        delta = bmean - stats.mean
        mean = jnp.where(first, bmean, stats.mean + w * delta)
        var = jnp.where(
            first, bvar, (1.0 - w) * stats.var + w * bvar + w * (1.0 - w) * jnp.square(delta)
        )
        new = RunningMeanStd(mean=mean, var=var, count=stats.count + 1.0, weight=weight)
    return where_batch(has_data, new, stats)


def _moments(x: Array, depth: int, mask: Array | None) -> tuple[Array, Array, Array]:
    """Mean, population variance and count of the rows of `x` (its first `depth` axes)."""
    dtype = _stat_dtype()
    x = jnp.asarray(x).astype(dtype)
    shape = jnp.shape(x)[depth:]
    rows = jnp.reshape(x, (-1, *shape))
    if mask is None:
        return jnp.mean(rows, axis=0), jnp.var(rows, axis=0), jnp.asarray(rows.shape[0], dtype)
    m = jnp.reshape(jnp.asarray(mask), (-1,) + (1,) * len(shape)).astype(dtype)
    n = jnp.sum(m[(slice(None),) + (0,) * len(shape)])
    safe = jnp.maximum(n, 1.0)
    mean = jnp.sum(rows * m, axis=0) / safe
    var = jnp.sum(m * jnp.square(rows - mean[None]), axis=0) / safe
    return mean, var, n


# -- observations --------------------------------------------------------------------------------
# Fields are typed `Any`: JAX rebuilds pytrees with non-array leaves (`jax.eval_shape`,
# tree maps), which a run-time checked `__init__` would refuse; docstrings give the types.
@jax.tree_util.register_dataclass
@dataclass
class ObservationStatistics:
    """What `NormalizeObservation` keeps in `state.info["observation_statistics"]`."""

    statistics: Any
    """A `RunningMeanStd` per normalised observation leaf (None for leaves passed through),
    in the observation's tree structure."""

    frozen: Any
    """While True the statistics are used but not updated (bool, batch shape)."""


def _is_stats(x: Any) -> bool:
    return isinstance(x, RunningMeanStd)


def _first_copy(stats: Any) -> Any:
    """Statistics `stats` unbatched: the first env's copy (all copies are equal)."""
    depth = jnp.ndim(stats.frozen)
    return jax.tree.map(lambda x: x[(0,) * depth], stats)


def _with_frozen(state: StateT, info_key: str, frozen: bool | Array) -> StateT:
    """`state` with the statistics at `state.info[info_key]` frozen (or unfrozen)."""
    stats = state.info[info_key]
    flag = jnp.broadcast_to(jnp.asarray(frozen, jnp.bool_), jnp.shape(stats.frozen))
    stats = replace(stats, frozen=flag)
    return replace(state, info={**state.info, info_key: stats})


def _check_float(value: Any, name: str, owner: str, *, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{owner}: {name} must be a positive float, got {value!r}")
    value = float(value)
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{owner}: {name} must be a positive finite float (> 0), got {value}")
    return value


class NormalizeObservation(Wrapper[StateT]):
    """Normalise observations to zero mean and unit variance with running statistics.

    Every `Box` part of the observation space is normalised with its own statistics
    (other parts, `Discrete` etc., pass through); the statistics are updated with each
    step's observations, *then* used, as sekai's `VecNormalizeObservation` does (reset
    observations count too). Over a vector env they are shared by the batch (see the
    module docstring); `info["final_observation"]` is normalised with the current
    statistics without updating them. Normalised leaves keep a float observation dtype
    (float32 for float32 or integer observations).

    Args:
        env: a single or vector environment, usually
            `VmapAutoResetWrapper(TimeLimit(env, T), num_envs)`.
        epsilon: added to the variance before dividing (positive float).
        halflife: None for equal weights (all samples ever seen); a positive float for
            exponential weighting whose half-life counts updates (one per step of the
            whole batch), which follows non-stationary data.
        clip: if given (positive float), normalised values are clipped to `[-clip, clip]`.
        update: False starts every `reset` frozen (evaluation); see `freeze`.

    Evaluation: freeze the statistics with `NormalizeObservation.freeze(state)`, or start a
    new env from trained statistics with `env.reset(key=k, statistics=stats)` where
    `stats = NormalizeObservation.statistics(train_state)`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import NormalizeObservation, make_vec
        >>> env = NormalizeObservation(make_vec("GridWorld-v0", 64, max_episode_steps=10))
        >>> state = env.reset(key=jax.random.key(0))  # statistics: these 64 observations
        >>> obs = state.observation
        >>> bool(jnp.allclose(obs.mean(0), 0.0, atol=1e-5)), obs.dtype
        (True, dtype('float32'))
        >>> state = env.step(state, jnp.full(64, 2, jnp.int32))  # now 128 observations
        >>> NormalizeObservation.statistics(state).statistics.count.round()
        Array(128., dtype=float32)
    """

    def __init__(
        self,
        env: Env[StateT],
        epsilon: float | int = 1e-8,
        *,
        halflife: float | int | None = None,
        clip: float | int | None = None,
        update: bool = True,
    ) -> None:
        super().__init__(env)
        self.epsilon = _check_float(epsilon, "epsilon", "NormalizeObservation")
        self.halflife = _check_float(halflife, "halflife", "NormalizeObservation", allow_none=True)
        self.clip = _check_float(clip, "clip", "NormalizeObservation", allow_none=True)
        if not isinstance(update, bool):
            raise TypeError(f"NormalizeObservation: update must be a bool, got {update!r}")
        self.update = update
        self._depth = batch_depth(env)
        space = env.observation_space
        if isinstance(space, spaces.PyTreeSpace):
            leaves, self._treedef = list(space._leaves), space._treedef
        else:
            leaves, self._treedef = [space], jax.tree.structure(0)
        self._normalised = tuple(isinstance(s, spaces.Box) for s in leaves)
        if not any(self._normalised):
            raise TypeError(
                "NormalizeObservation: env.observation_space must be a Box or a PyTreeSpace "
                f"with at least one Box, got {space!r}"
            )
        lo, hi = (-np.inf, np.inf) if self.clip is None else (-self.clip, self.clip)
        out = [
            spaces.Box(lo, hi, s.shape, _out_dtype(s.dtype)) if norm else s
            for s, norm in zip(leaves, self._normalised)
        ]
        self._space = (
            out[0]
            if len(out) == 1 and not isinstance(space, spaces.PyTreeSpace)
            else (spaces.PyTreeSpace(jax.tree.unflatten(self._treedef, out)))
        )
        self._decay = None if self.halflife is None else float(0.5 ** (1.0 / self.halflife))

    @property
    def observation_space(self) -> Any:
        """The normalised space: unbounded (or `[-clip, clip]`) float `Box` parts."""
        return self._space

    # -- statistics helpers -------------------------------------------------------------------
    @staticmethod
    def statistics(state: Any) -> ObservationStatistics:
        """The statistics of `state`, unbatched (the first env's copy; all are equal)."""
        return _first_copy(state.info[OBSERVATION_STATISTICS])

    @staticmethod
    def freeze(state: StateT, frozen: bool | Array = True) -> StateT:
        """`state` with its observation statistics frozen (or unfrozen)."""
        return _with_frozen(state, OBSERVATION_STATISTICS, frozen)

    def _fresh(self, observation: PyTree, batch: tuple[int, ...]) -> ObservationStatistics:
        values = self._treedef.flatten_up_to(observation)  # type: ignore[attr-defined]
        stats = [
            RunningMeanStd.create(jnp.shape(v)[self._depth :], batch, ewm=self._decay is not None)
            if norm
            else None
            for v, norm in zip(values, self._normalised)
        ]
        return ObservationStatistics(
            statistics=jax.tree.unflatten(self._treedef, stats),
            frozen=jnp.full(batch, not self.update, jnp.bool_),
        )

    def _update(
        self, stats: ObservationStatistics, observation: PyTree, mask: Array | None
    ) -> ObservationStatistics:
        values = self._treedef.flatten_up_to(observation)  # type: ignore[attr-defined]
        leaves = self._treedef.flatten_up_to(stats.statistics)  # type: ignore[attr-defined]
        new: list[Any] = []
        for value, leaf in zip(values, leaves):
            if leaf is None:
                new.append(None)
                continue
            mean, var, n = _moments(value, self._depth, mask)
            merged = _merge(leaf, mean, var, n, self._decay)
            new.append(where_batch(stats.frozen, leaf, merged))
        return replace(stats, statistics=jax.tree.unflatten(self._treedef, new))

    def _normalize(self, stats: ObservationStatistics, observation: PyTree) -> PyTree:
        values = self._treedef.flatten_up_to(observation)  # type: ignore[attr-defined]
        leaves = self._treedef.flatten_up_to(stats.statistics)  # type: ignore[attr-defined]
        out = []
        for value, leaf in zip(values, leaves):
            if leaf is None:
                out.append(value)
                continue
            z = leaf.normalize(value, self.epsilon)
            if self.clip is not None:
                z = jnp.clip(z, -self.clip, self.clip)
            out.append(z.astype(jax.dtypes.canonicalize_dtype(_out_dtype(jnp.result_type(value)))))
        return jax.tree.unflatten(self._treedef, out)

    def _finish(self, state: Any, stats: ObservationStatistics) -> Any:
        info = dict(state.info)
        if FINAL_OBSERVATION in info:
            info[FINAL_OBSERVATION] = self._normalize(stats, info[FINAL_OBSERVATION])
        info[OBSERVATION_STATISTICS] = stats
        return replace(state, observation=self._normalize(stats, state.observation), info=info)

    # -- protocol ------------------------------------------------------------------------------
    def reset(self, *, key: KeyArray, **kwargs: Any) -> StateT:
        """Reset; the reset observations update the statistics (unless frozen).

        Args:
            key: as the wrapped env's `reset`.
            state, done: selective reset of a vector env: the statistics carry over and
                only the reset rows' observations update them.
            statistics: optional `ObservationStatistics` (unbatched, e.g. from
                `NormalizeObservation.statistics(train_state)`) to start from instead of
                fresh ones; with `update=False` they stay as given.
        """
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        given = kwargs.pop("statistics", None)
        old, done = kwargs.pop("state", None), kwargs.pop("done", None)
        if old is not None and done is not None:
            out: Any = selective_reset(
                self.env, key, old, done, (OBSERVATION_STATISTICS,), **kwargs
            )
            check_single_agent(out, "NormalizeObservation")
            stats = self._update(old.info[OBSERVATION_STATISTICS], out.observation, done)
            out = self._finish(out, stats)
            observation = where_batch(done, out.observation, old.observation)
            info = dict(out.info)
            if FINAL_OBSERVATION in info:
                info[FINAL_OBSERVATION] = observation
            return replace(out, observation=observation, info=info)
        if old is not None:
            raise ValueError("NormalizeObservation.reset: `state` needs `done` (or neither)")
        out = self.env.reset(key=key, **kwargs)
        check_single_agent(out, "NormalizeObservation")
        batch = jnp.shape(out.reward)
        if given is None:
            stats = self._fresh(out.observation, batch)
        else:
            stats = jax.tree.map(lambda x: jnp.broadcast_to(x, batch + jnp.shape(x)), given)
            stats = replace(stats, frozen=jnp.full(batch, not self.update, jnp.bool_))
        stats = self._update(stats, out.observation, None)
        return self._finish(out, stats)

    def step(self, state: StateT, action: PyTree, params: PyTree = None) -> StateT:
        """Step; update the statistics with the new observations, then normalise."""
        stats = state.info[OBSERVATION_STATISTICS]
        inner = strip_info(state, (OBSERVATION_STATISTICS,))
        out: Any = step_env(self.env, inner, action, params)
        check_single_agent(out, "NormalizeObservation")
        stats = self._update(stats, out.observation, None)
        return self._finish(out, stats)

    def _repr_args(self) -> str:
        parts = [f"epsilon={self.epsilon}"]
        if self.halflife is not None:
            parts.append(f"halflife={self.halflife}")
        if self.clip is not None:
            parts.append(f"clip={self.clip}")
        if not self.update:
            parts.append("update=False")
        return ", ".join(parts)


def _out_dtype(dtype: Any) -> Any:
    dtype = np.dtype(dtype)
    return dtype if np.issubdtype(dtype, np.floating) else np.dtype(np.float32)


# -- rewards ----------------------------------------------------------------------------------------
# Fields are typed `Any`: JAX rebuilds pytrees with non-array leaves (`jax.eval_shape`,
# tree maps), which a run-time checked `__init__` would refuse; docstrings give the types.
@jax.tree_util.register_dataclass
@dataclass
class RewardStatistics:
    """What `NormalizeReward` keeps in `state.info["reward_statistics"]`."""

    discounted_return: Any
    """Each env's discounted return so far (reset to 0 when its episode ends)."""

    statistics: Any
    """Running statistics of the discounted returns of all envs (shared, replicated)."""

    frozen: Any
    """While True the statistics are used but not updated (bool, batch shape)."""


class NormalizeReward(Wrapper[StateT]):
    """Divide rewards by the running std of the discounted return (not mean-centred).

    Each step, every env's discounted return `G = gamma * G + reward` is added to the
    shared `RunningMeanStd` (all envs of a vector env together), then the reward is
    divided by `sqrt(var + epsilon)`; `G` restarts at 0 where the episode ended. This is
    OpenAI baselines' `VecNormalize` reward scaling and sekai's `VecNormalizeReward`.
    Rewards keep their dtype; reset rewards are left as they are.

    Args:
        env: a single or vector environment (put `RecordEpisodeStatistics` below it so
            that it records the env's own rewards).
        gamma: discount in `[0, 1]`.
        epsilon: added to the variance before dividing (positive float).
        update: False starts every `reset` frozen; see `freeze`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import NormalizeReward, make_vec
        >>> env = NormalizeReward(make_vec("GridWorld-v0", 16, max_episode_steps=10))
        >>> state = env.reset(key=jax.random.key(0))
        >>> state = env.step(state, jnp.full(16, 2, jnp.int32))
        >>> state.reward.dtype, state.info["reward_statistics"].discounted_return.shape
        (dtype('float32'), (16,))
    """

    def __init__(
        self,
        env: Env[StateT],
        gamma: float | int = 0.99,
        epsilon: float | int = 1e-8,
        *,
        update: bool = True,
    ) -> None:
        super().__init__(env)
        if isinstance(gamma, bool) or not isinstance(gamma, int | float | np.integer | np.floating):
            raise TypeError(f"NormalizeReward: gamma must be a float in [0, 1], got {gamma!r}")
        if not 0.0 <= float(gamma) <= 1.0:
            raise ValueError(f"NormalizeReward: gamma must be in [0, 1], got {gamma}")
        self.gamma = float(gamma)
        self.epsilon = _check_float(epsilon, "epsilon", "NormalizeReward")
        if not isinstance(update, bool):
            raise TypeError(f"NormalizeReward: update must be a bool, got {update!r}")
        self.update = update

    @staticmethod
    def statistics(state: Any) -> RewardStatistics:
        """The reward statistics of `state`, unbatched (the first env's copy)."""
        return _first_copy(state.info[REWARD_STATISTICS])

    @staticmethod
    def freeze(state: StateT, frozen: bool | Array = True) -> StateT:
        """`state` with its reward statistics frozen (or unfrozen)."""
        return _with_frozen(state, REWARD_STATISTICS, frozen)

    def reset(self, *, key: KeyArray, **kwargs: Any) -> StateT:
        """Reset; `state=`/`done=` (selective) keep the statistics and zero `G` where done.

        Args:
            key: as the wrapped env's `reset`.
            state, done: selective reset of a vector env.
            statistics: optional unbatched `RewardStatistics` to start from.
        """
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        given = kwargs.pop("statistics", None)
        old, done = kwargs.pop("state", None), kwargs.pop("done", None)
        env: Any = self.env
        out: Any
        if old is not None and done is not None:
            out = env.reset(
                key=key, state=strip_info(old, (REWARD_STATISTICS,)), done=done, **kwargs
            )
            stats = old.info[REWARD_STATISTICS]
            g = jnp.where(done, jnp.zeros_like(stats.discounted_return), stats.discounted_return)
            stats = replace(stats, discounted_return=g)
        elif old is not None:
            raise ValueError("NormalizeReward.reset: `state` needs `done` (or neither)")
        else:
            out = self.env.reset(key=key, **kwargs)
            check_single_agent(out, "NormalizeReward")
            batch = jnp.shape(out.reward)
            if given is None:
                rms = RunningMeanStd.create((), batch)
            else:
                rms = jax.tree.map(lambda x: jnp.broadcast_to(x, batch), given.statistics)
            stats = RewardStatistics(
                discounted_return=jnp.zeros(batch, _stat_dtype()),
                statistics=rms,
                frozen=jnp.full(batch, not self.update, jnp.bool_),
            )
        return replace(out, info={**out.info, REWARD_STATISTICS: stats})

    def step(self, state: StateT, action: PyTree, params: PyTree = None) -> StateT:
        """Step; update the return statistics, then scale the reward."""
        stats = state.info[REWARD_STATISTICS]
        inner = strip_info(state, (REWARD_STATISTICS,))
        out: Any = step_env(self.env, inner, action, params)
        check_single_agent(out, "NormalizeReward")
        reward = jnp.asarray(out.reward)
        g = stats.discounted_return * self.gamma + reward.astype(_stat_dtype())
        depth = jnp.ndim(g)
        mean, var, n = _moments(g, depth, None)
        merged = _merge(stats.statistics, mean, var, n, None)
        rms = where_batch(stats.frozen, stats.statistics, merged)
        g = jnp.where(out.termination | out.truncation, jnp.zeros_like(g), g)
        scaled = reward.astype(_stat_dtype()) / jnp.sqrt(rms.var + self.epsilon)
        stats = replace(stats, discounted_return=g, statistics=rms)
        return replace(
            out,
            reward=scaled.astype(jnp.result_type(reward)),
            info={**out.info, REWARD_STATISTICS: stats},
        )

    def _repr_args(self) -> str:
        return f"gamma={self.gamma}, epsilon={self.epsilon}"
