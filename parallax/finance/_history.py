"""The price-history plumbing shared by `TradingEnv` and `PortfolioEnv`.

- `check_sources`: sekai's checks of the `prices=` / `data=` / `model=` arguments.
- `unsupported_source`: the refusal of a valid `data=` / `model=` (not supported yet).
- `HistoryEnv`: the base class with what both envs share (on top of `FinanceEnv`): the
  price source, the sampler, the resolution of a per-reset `start` (sekai's
  `options={"start": ...}`), the window start chosen at reset (from `start`, the sampler,
  or for a sequential walk the `previous` episode's window: `reset_uses_previous`), the
  draws sekai would make (for differential tests) and `sequential_starts`.
"""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .. import rng
from ._common import FinanceEnv
from ._market import SLOTS, Market
from ._samplers import FixedStart, RandomStart, Sampler, SequentialStart

__all__ = ["HistoryEnv", "check_sources", "unsupported_source"]


def _is_market_data(x: Any) -> bool:
    return type(x).__name__ == "MarketData" and type(x).__module__.startswith("sekai.")


def check_sources(env: str, *, prices: Any, data: Any, model: Any) -> None:
    """At most one price source, each of the right kind (sekai's checks and error types).

    Raises:
        TypeError: a sekai `MarketData` passed as `prices=`, or a non-`MarketData` as `data=`.
        ValueError: more than one source.
        NotImplementedError: a valid `data=` or `model=` (not supported by parallax yet).
    """
    if _is_market_data(prices):
        raise TypeError(f"{env}: pass a MarketData as data=, not prices=")
    if data is not None and not _is_market_data(data):
        raise TypeError(f"{env}: data= takes a sekai MarketData, got {type(data).__name__}")
    given = [n for n, v in (("prices", prices), ("data", data), ("model", model)) if v is not None]
    if len(given) > 1:
        raise ValueError(f"{env} got {' and '.join(g + '=' for g in given)}; pass one source")


def unsupported_source(env: str, data: Any, model: Any) -> None:
    """Refuse a valid `data=` or `model=` source, which parallax does not support yet."""
    if data is not None:
        raise NotImplementedError(
            f"{env}: data= (a sekai MarketData) is not supported; pass its prices as prices="
        )
    if model is not None:
        raise NotImplementedError(
            f"{env}: model= (a sekai market model) is not supported; the built-in GBM "
            "(mu=, sigma=, ...) and prices= are"
        )


class HistoryEnv(FinanceEnv):
    """Shared base of `TradingEnv` and `PortfolioEnv` (see those for the public API)."""

    market: Market
    sampler: Sampler
    timestamps: np.ndarray | None
    _name: str

    # -- construction helpers --------------------------------------------------------------
    def _check_sampler(self) -> None:
        """A fixed start must be a valid window (sekai checks it at reset; we check here)."""
        if self.market.simulated:
            return
        n_valid = self.market.n_starts
        sampler = self.sampler
        if isinstance(sampler, FixedStart | SequentialStart) and sampler.start >= n_valid:
            raise ValueError(
                f"sampler start {sampler.start} is beyond the last window start {n_valid - 1}"
            )

    # -- starts ----------------------------------------------------------------------------
    @property
    def reset_uses_previous(self) -> bool:
        """Whether `reset(key=..., previous=state)` reads the finished episode's state.

        True for a history walked by `SequentialStart`: the next window follows the previous
        episode's. `AutoResetWrapper` and `VmapWrapper` pass `previous=` to the envs that
        declare this (and only to them), so the walk survives auto-resets inside `jit`.
        """
        return not self.market.simulated and isinstance(self.sampler, SequentialStart)

    @property
    def n_starts(self) -> int:
        """The number of episode windows in the history (1 for a simulated market)."""
        return self.market.n_starts

    def resolve_start(self, start: Any) -> int:
        """The first-decision row for `reset(start=...)`, checked on the host as sekai does.

        Args:
            start: an int row (numpy ints too; negative counts from the end), or a
                timestamp: a float on the default numeric axis (the first row at or after
                it), a `sekai.finance.Time`, or for a history indexed by dates anything
                `numpy.datetime64` accepts.

        Returns:
            The absolute row of the first decision, in `[L, L + n_starts - 1]`.

        Raises:
            ValueError: a simulated market, or a row outside the valid range.
            TypeError: a bool.
        """
        if self.market.simulated:
            raise ValueError(f"{self._name}: start= needs a price history (prices=)")
        if isinstance(start, bool | np.bool_):
            raise TypeError(f"start must be a row position or a timestamp, got {start!r}")
        n_rows = self.market.n_rows
        if isinstance(start, int | np.integer):
            row = int(start) if start >= 0 else n_rows + int(start)
        elif (
            isinstance(start, jax.Array)
            and start.ndim == 0
            and not isinstance(start, jax.core.Tracer)
        ):
            if not jnp.issubdtype(start.dtype, jnp.integer):
                raise TypeError(f"start must be an int row, got {start!r}")
            return self.resolve_start(int(start))
        else:
            row = self._row_of_timestamp(start)
        first, last = self.market.lookback, self.market.lookback + self.market.n_starts - 1
        if not first <= row <= last:
            raise ValueError(
                f"start {start!r} (row {row}) is outside the valid range of first decisions: "
                f"rows {first}..{last}"
            )
        return row

    def _row_of_timestamp(self, when: Any) -> int:
        value = when.value if type(when).__name__ == "Time" else when
        stamps = self.timestamps
        assert stamps is not None
        if stamps.dtype.kind == "M":
            try:
                key = np.datetime64(value, "ns")
            except (TypeError, ValueError):
                raise ValueError(f"start {when!r} is not a date or time") from None
            if np.isnat(key):
                raise ValueError(f"start {when!r} is NaT")
            return int(np.searchsorted(stamps, key, side="left"))
        if isinstance(value, bool | np.bool_) or not isinstance(
            value, int | float | np.integer | np.floating
        ):
            raise ValueError(f"start {when!r} is not a number (the timestamps are row numbers)")
        if not math.isfinite(float(value)):
            raise ValueError(f"start {when!r} is not finite")
        return int(np.searchsorted(stamps, value, side="left"))

    def sequential_starts(self, count: int, sampler: SequentialStart | None = None) -> np.ndarray:
        """First-decision rows of `count` consecutive episodes, listed on the host.

        The rows a sequential walk visits (inside `jit` the env walks them itself, from
        `reset(previous=...)`); also usable as `reset(start=...)` rows.

        Args:
            count: how many episodes.
            sampler: a `SequentialStart`; default the env's own sampler if it is one, else
                `SequentialStart()`.

        Returns:
            int64 `(count,)` rows, what sekai's sequential sampler would hand out in turn.
        """
        if self.market.simulated:
            raise ValueError(f"{self._name}: sequential starts need a price history (prices=)")
        if sampler is None:
            sampler = (
                self.sampler if isinstance(self.sampler, SequentialStart) else SequentialStart()
            )
        positions = sampler.positions(self.market.n_starts, self.market.episode_length, count)
        return positions + self.market.lookback

    def _window_start(self, episode_key: Array, start: Any, previous: Any = None) -> Array:
        """The window start row for a reset: from `start` (a decision row) or the sampler.

        `previous` (a state of this env, or None) is read only by a sequential walk, which
        starts the window after the previous episode's (`SequentialStart.next_position`).
        """
        market = self.market
        if start is not None:
            if market.simulated:
                raise ValueError(f"{self._name}: start= needs a price history (prices=)")
            if isinstance(start, jax.core.Tracer) or (
                isinstance(start, jax.Array) and start.ndim > 0
            ):
                row = jnp.asarray(start, jnp.int32)
                row = jnp.where(row < 0, row + market.n_rows, row)
                first, last = market.lookback, market.lookback + market.n_starts - 1
                row = eqx.error_if(
                    row,
                    (row < first) | (row > last),
                    f"{self._name}: start outside the valid rows {first}..{last}",
                )
                return row - market.lookback
            return jnp.asarray(self.resolve_start(start) - market.lookback, jnp.int32)
        if market.simulated:
            return jnp.zeros((), jnp.int32)
        sampler = self.sampler
        if isinstance(sampler, RandomStart):
            return rng.randint(episode_key, 0, SLOTS.START, 0, market.n_starts, dtype=jnp.int32)
        if isinstance(sampler, SequentialStart) and previous is not None:
            # The window start row is the sampler's position (the first window is row 0).
            return sampler.next_position(
                previous.env_state.market.start,
                n_valid=market.n_starts,
                episode_length=market.episode_length,
            )
        return jnp.asarray(sampler.start, jnp.int32)

    # -- differential testing --------------------------------------------------------------
    def sekai_draws(self, key: Array, start: Any = None) -> list[tuple[str, tuple[Any, ...], Any]]:
        """The calls sekai's `reset()` makes on `env.rng` to reproduce our `reset(key=key)`.

        A noise-injection hook: serve these, in order, from a shim generator set as the
        sekai env's `rng` and its episode equals ours. Computed with the same
        `parallax.rng` draws the env uses (float64 under x64).

        Args:
            key: the reset key.
            start: the `start=` given to our reset, if any (then sekai draws nothing).

        Returns:
            A list of `(method, args, value)`: `("standard_normal", ((S, n),), block)` for
            a simulated market, `("integers", (0, n_valid), position)` for `RandomStart`,
            nothing otherwise.
        """
        ek = rng.episode_key(key)
        market = self.market
        if market.simulated:
            dtype = jax.dtypes.canonicalize_dtype(jnp.float64)
            block = np.asarray(market.raw_shocks(ek, dtype), dtype=np.float64)
            shape = (market.lookback + market.episode_length, market.n_assets)
            return [("standard_normal", (shape,), block)]
        if start is None and isinstance(self.sampler, RandomStart):
            pos = int(self._window_start(ek, None))
            return [("integers", (0, market.n_starts), pos)]
        return []
