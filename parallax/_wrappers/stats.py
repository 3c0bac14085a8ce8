"""`RecordEpisodeStatistics`: episode returns, lengths and final equity, inside the state.

- `RecordEpisodeStatistics`: the wrapper.
- `EpisodeStatistics`: what it keeps in `state.info["episode_statistics"]` (present from
  `reset` on, so the state's type and pytree structure never change).

Put it *outside* the `AutoResetWrapper` (and outside `VmapWrapper` for one set of counters
per env that a training loop sums), and *inside* the normalisation wrappers so that it sees
the env's own rewards:

    NormalizeReward(NormalizeObservation(RecordEpisodeStatistics(
        VmapAutoResetWrapper(TimeLimit(env, T), num_envs))))

Below an auto-reset the statistics would be reset with every episode.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, PyTree

from .._core import Env, KeyArray, StateT
from .autoreset import FINAL_INFO
from .base import Wrapper, step_env
from .transform import autoreset_mode, batch_depth, check_single_agent, strip_info, where_batch

__all__ = [
    "EPISODE_STATISTICS",
    "EQUITY_KEY_ATTRIBUTE",
    "EpisodeStatistics",
    "RecordEpisodeStatistics",
]

EPISODE_STATISTICS = "episode_statistics"
"""The `info` key under which `RecordEpisodeStatistics` keeps its `EpisodeStatistics`."""

EQUITY_KEY_ATTRIBUTE = "episode_equity_key"
"""The attribute an env declares (a class attribute, read through the wrapper stack) to name
the `info` key whose terminal value `RecordEpisodeStatistics` records as `final_equity`."""


# Fields are typed `Any`: JAX rebuilds pytrees with non-array leaves (`jax.eval_shape`,
# tree maps), which a run-time checked `__init__` would refuse; docstrings give the types.
@jax.tree_util.register_dataclass
@dataclass
class EpisodeStatistics:
    """Per-env episode statistics (every field has the state's batch shape).

    The `episode_*` fields describe the last finished episode and are reported on the
    step it ends (`ended` is True there); the `sum_*` fields and `num_episodes` aggregate
    every episode finished since `reset` or the last `RecordEpisodeStatistics.clear`.
    """

    current_return: Any
    """Sum of the rewards of the episode in progress (reward dtype)."""

    current_length: Any
    """Steps taken in the episode in progress (int32)."""

    ended: Any
    """An episode ended on this step; the `episode_*` fields describe it (bool)."""

    episode_return: Any
    """Return of the last finished episode (0 before the first)."""

    episode_length: Any
    """Length of the last finished episode (int32)."""

    final_equity: Any
    """Equity at the end of the last finished episode: the terminal info's value under the
    key the env declares as `episode_equity_key` (the finance envs declare theirs); None
    for envs that declare none."""

    num_episodes: Any
    """Episodes finished since reset / the last `clear` (int32)."""

    sum_return: Any
    """Sum of their returns."""

    sum_length: Any
    """Sum of their lengths (int32)."""

    sum_final_equity: Any
    """Sum of their final equities; None for envs without equity."""

    awaiting_reset: Any
    """Without auto-reset: the episode has ended and the env was not reset yet, so its
    steps are not counted (bool)."""


def _equity_key(declared: str | None, info: dict[str, Any]) -> str | None:
    """The declared equity key, when the (terminal) info holds it; else None."""
    terminal = info.get(FINAL_INFO, info)
    if declared is None or not isinstance(terminal, dict):
        return None
    return declared if declared in terminal else None


def _fresh(state: Any, equity_key: str | None) -> EpisodeStatistics:
    batch = jnp.shape(state.reward)
    rdt = jnp.result_type(state.reward)
    zero = jnp.zeros(batch, rdt)
    izero = jnp.zeros(batch, jnp.int32)
    no = jnp.zeros(batch, jnp.bool_)
    equity = None
    if equity_key is not None:
        terminal = state.info.get(FINAL_INFO, state.info)
        equity = jnp.zeros(batch, jnp.result_type(terminal[equity_key]))
    return EpisodeStatistics(
        current_return=zero,
        current_length=izero,
        ended=no,
        episode_return=zero,
        episode_length=izero,
        final_equity=equity,
        num_episodes=izero,
        sum_return=zero,
        sum_length=izero,
        sum_final_equity=equity,
        awaiting_reset=no,
    )


class RecordEpisodeStatistics(Wrapper[StateT]):
    """Record each episode's return, length and final equity, plus running aggregates.

    The statistics live in `state.info["episode_statistics"]` (an `EpisodeStatistics`),
    present from `reset` on; the state type is kept (a `MaskedState` stays a
    `MaskedState`). On the step an episode ends, `ended` is True and `episode_return`,
    `episode_length` (and `final_equity` for envs that declare an `episode_equity_key`, the
    `info` key of their equity, as the finance envs do) describe it; they keep their values
    until the next episode ends. `num_episodes` and the `sum_*` fields add up every
    finished episode since `reset`;
    `RecordEpisodeStatistics.summary(state)` turns them into means over the whole batch
    and `RecordEpisodeStatistics.clear(state)` starts a new logging period.

    Works with every auto-reset mode below it: same-step (the finished step's reward and
    flags and `info["final_info"]` are read), next-step (the dummy reset step is not
    counted) and off (a finished env is not counted again until it is reset through this
    wrapper with `reset(key=..., state=..., done=...)`).

    Args:
        env: a single or vector environment, usually
            `VmapAutoResetWrapper(TimeLimit(env, T), num_envs)`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import RecordEpisodeStatistics, make_vec, rollout
        >>> env = RecordEpisodeStatistics(make_vec("GridWorld-v0", 8, max_episode_steps=5))
        >>> policy = lambda key, state: jnp.full(8, 2, jnp.int32)  # always right
        >>> state, _ = rollout(env, policy, jax.random.key(0), 12)
        >>> summary = RecordEpisodeStatistics.summary(state)
        >>> int(summary["num_episodes"]), float(summary["mean_length"])
        (16, 5.0)
    """

    def __init__(self, env: Env[StateT]) -> None:
        super().__init__(env)
        self._depth = batch_depth(env)
        self._mode = autoreset_mode(env)
        declared = getattr(env, EQUITY_KEY_ATTRIBUTE, None)
        if declared is not None and not isinstance(declared, str):
            raise TypeError(
                f"RecordEpisodeStatistics: the env's {EQUITY_KEY_ATTRIBUTE} must be an info "
                f"key (a str) or None, got {declared!r}"
            )
        self._declared_equity: str | None = declared

    # -- reading -------------------------------------------------------------------------------
    @staticmethod
    def statistics(state: Any) -> EpisodeStatistics:
        """The `EpisodeStatistics` held by `state` (from any wrapper above this one)."""
        try:
            return state.info[EPISODE_STATISTICS]
        except (KeyError, TypeError):
            raise KeyError(
                f"state.info has no {EPISODE_STATISTICS!r}: wrap the env in RecordEpisodeStatistics"
            ) from None

    @staticmethod
    def summary(state: Any) -> dict[str, Array]:
        """Aggregates over every env of the batch, since reset or the last `clear`.

        Returns:
            A dict of scalars: `num_episodes` (int32), `mean_return`, `mean_length` and,
            for envs with equity, `mean_final_equity` (NaN while no episode has finished).
        """
        stats = RecordEpisodeStatistics.statistics(state)
        count = jnp.sum(stats.num_episodes)
        denominator = jnp.maximum(count, 1)

        def mean(total: Array) -> Array:
            dtype = jnp.result_type(total)
            if not jnp.issubdtype(dtype, jnp.floating):
                dtype = jnp.result_type(stats.sum_return)
            value = jnp.sum(total).astype(dtype) / denominator.astype(dtype)
            return jnp.where(count > 0, value, jnp.asarray(jnp.nan, dtype))

        out = {
            "num_episodes": count,
            "mean_return": mean(stats.sum_return),
            "mean_length": mean(stats.sum_length),
        }
        if stats.sum_final_equity is not None:
            out["mean_final_equity"] = mean(stats.sum_final_equity)
        return out

    @staticmethod
    def clear(state: StateT) -> StateT:
        """`state` with the aggregates (`num_episodes`, `sum_*`) set to zero."""
        stats = RecordEpisodeStatistics.statistics(state)
        stats = replace(
            stats,
            num_episodes=jnp.zeros_like(stats.num_episodes),
            sum_return=jnp.zeros_like(stats.sum_return),
            sum_length=jnp.zeros_like(stats.sum_length),
            sum_final_equity=(
                None if stats.sum_final_equity is None else jnp.zeros_like(stats.sum_final_equity)
            ),
        )
        return replace(state, info={**state.info, EPISODE_STATISTICS: stats})

    # -- protocol ------------------------------------------------------------------------------
    def _attach(self, state: StateT, stats: EpisodeStatistics) -> StateT:
        return replace(state, info={**state.info, EPISODE_STATISTICS: stats})

    def reset(self, *, key: KeyArray, **kwargs: Any) -> StateT:
        """Reset; with `state=` (and `done=` for vector envs) the aggregates carry over.

        Args:
            key: as the wrapped env's `reset`.
            state: optional previous state of this wrapper: its aggregates are kept.
            done: with `state`, which envs to reset (vector envs; passed down).

        Returns:
            The state with fresh per-episode counters where reset.
        """
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        old = kwargs.pop("state", None)
        done = kwargs.pop("done", None)
        env: Any = self.env
        out: Any
        if old is None:
            out = env.reset(key=key, **kwargs)
            check_single_agent(out, "RecordEpisodeStatistics")
            return self._attach(out, _fresh(out, _equity_key(self._declared_equity, out.info)))
        inner_old = strip_info(old, (EPISODE_STATISTICS,))
        if self._depth > 0:
            if done is None:
                raise ValueError(
                    "RecordEpisodeStatistics.reset: a vector env needs `done` with `state`"
                )
            out = env.reset(key=key, state=inner_old, done=done, **kwargs)
        else:
            out = self.env.reset(key=key, **kwargs)
            if done is not None:
                out = where_batch(jnp.asarray(done), out, inner_old)
        stats = self.statistics(old)
        where = jnp.ones(jnp.shape(out.reward), jnp.bool_) if done is None else jnp.asarray(done)
        fresh = _fresh(out, _equity_key(self._declared_equity, out.info))
        stats = replace(
            stats,
            current_return=jnp.where(where, fresh.current_return, stats.current_return),
            current_length=jnp.where(where, fresh.current_length, stats.current_length),
            ended=jnp.where(where, fresh.ended, stats.ended),
            awaiting_reset=jnp.where(where, fresh.awaiting_reset, stats.awaiting_reset),
        )
        return self._attach(out, stats)

    def step(self, state: StateT, action: PyTree, params: PyTree = None) -> StateT:
        """Step (`params=` passed on when given) and update the statistics."""
        stats = self.statistics(state)
        inner = strip_info(state, (EPISODE_STATISTICS,))
        out: Any = step_env(self.env, inner, action, params)
        check_single_agent(out, "RecordEpisodeStatistics")
        if self._mode == "same-step":
            counted = ~stats.awaiting_reset
        else:  # next-step: the step after an end is the reset step; off: wait for a reset
            counted = ~stats.awaiting_reset & ~state.done
        done = out.termination | out.truncation
        reward = jnp.asarray(out.reward).astype(jnp.result_type(stats.current_return))
        ret = jnp.where(counted, stats.current_return + reward, stats.current_return)
        length = jnp.where(counted, stats.current_length + 1, stats.current_length)
        ended = counted & done
        zero = jnp.zeros_like(ret)
        izero = jnp.zeros_like(length)

        final_equity, sum_final_equity = stats.final_equity, stats.sum_final_equity
        if final_equity is not None and sum_final_equity is not None:
            key = _equity_key(self._declared_equity, out.info)
            terminal = out.info.get(FINAL_INFO, out.info)
            equity = jnp.asarray(terminal[key]).astype(jnp.result_type(final_equity))
            final_equity = jnp.where(ended, equity, final_equity)
            sum_final_equity = sum_final_equity + jnp.where(ended, equity, 0).astype(
                jnp.result_type(sum_final_equity)
            )
        stats = EpisodeStatistics(
            current_return=jnp.where(ended, zero, ret),
            current_length=jnp.where(ended, izero, length),
            ended=ended,
            episode_return=jnp.where(ended, ret, stats.episode_return),
            episode_length=jnp.where(ended, length, stats.episode_length),
            final_equity=final_equity,
            num_episodes=stats.num_episodes + ended.astype(jnp.int32),
            sum_return=stats.sum_return + jnp.where(ended, ret, zero),
            sum_length=stats.sum_length + jnp.where(ended, length, izero),
            sum_final_equity=sum_final_equity,
            awaiting_reset=stats.awaiting_reset | (ended & (self._mode == "off")),
        )
        return self._attach(out, stats)
