"""The price-history plumbing shared by `TradingEnv` and `PortfolioEnv`.

- `check_sources`: sekai's checks of the `prices=` / `data=` / `model=` arguments.
- `as_market_model`: a `model=` as a parallax market model (sekai simulators converted).
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
from ._plots import EpisodeRender
from ._samplers import FixedStart, RandomStart, Sampler, SequentialStart

__all__ = ["HistoryEnv", "as_market_model", "check_sources"]


def as_market_model(env: str, model: Any) -> Any:
    """`model=` as a parallax market model: ours as is, a sekai simulator converted.

    Raises:
        TypeError: neither (naming the type), or a sekai model that cannot be converted
            (sekai's `Randomized`, whose factory is arbitrary Python: build
            `parallax.finance.Randomized(models, ranges)` instead).
    """
    from ._models import MarketModel, from_sekai

    if isinstance(model, MarketModel):
        return model
    if type(model).__module__.startswith("sekai."):
        try:
            return from_sekai(model)
        except TypeError as err:
            raise TypeError(f"{env}: model= {err}") from None
    raise TypeError(
        f"{env}: model= takes a market model (parallax.finance.GBM, Heston, ... or a sekai "
        f"simulator), got {type(model).__name__}"
    )


def _is_market_data(x: Any) -> bool:
    from ._data import MarketData

    if isinstance(x, MarketData):
        return True
    return type(x).__name__ == "MarketData" and type(x).__module__.startswith("sekai.")


def check_sources(env: str, *, prices: Any, data: Any, model: Any) -> None:
    """At most one price source, each of the right kind (sekai's checks and error types).

    Raises:
        TypeError: a `MarketData` (ours or sekai's) passed as `prices=`, or a
            non-`MarketData` as `data=`.
        ValueError: more than one source.
    """
    if _is_market_data(prices):
        raise TypeError(f"{env}: pass a MarketData as data=, not prices=")
    if data is not None and not _is_market_data(data):
        raise TypeError(
            f"{env}: data= takes a MarketData (parallax.finance.MarketData or sekai's), got "
            f"{type(data).__name__}; pass a price array or pandas object as prices="
        )
    given = [n for n, v in (("prices", prices), ("data", data), ("model", model)) if v is not None]
    if len(given) > 1:
        raise ValueError(f"{env} got {' and '.join(g + '=' for g in given)}; pass one source")


class HistoryEnv(FinanceEnv, EpisodeRender):
    """Shared base of `TradingEnv` and `PortfolioEnv` (see those for the public API)."""

    market: Market
    sampler: Sampler
    timestamps: np.ndarray | None
    inputs: Any = None
    """The `MarketInputs` of a `data=` source (None otherwise)."""
    _name: str

    # -- construction helpers --------------------------------------------------------------
    def _check_sampler(self) -> None:
        """A fixed start must be a valid window (sekai checks it at reset; we check here)."""
        if self.market.simulated:
            return
        n_valid = self.market.n_valid
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
            raise ValueError(f"{self._name}: start= needs a price history (prices= or data=)")
        if isinstance(start, bool | np.bool_):
            raise TypeError(f"start must be a row position or a timestamp, got {start!r}")
        if self.inputs is not None:
            if isinstance(start, jax.Array) and not isinstance(start, jax.core.Tracer):
                start = int(start)
            return int(self.inputs.decision_row(start))
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
            raise ValueError(
                f"{self._name}: sequential starts need a price history (prices= or data=)"
            )
        if sampler is None:
            sampler = (
                self.sampler if isinstance(self.sampler, SequentialStart) else SequentialStart()
            )
        positions = sampler.positions(self.market.n_valid, self.market.episode_length, count)
        return positions + self.market.first_start + self.market.lookback

    def _window_start(self, episode_key: Array, start: Any, previous: Any = None) -> Array:
        """The window start row for a reset: from `start` (a decision row) or the sampler.

        `previous` (a state of this env, or None) is read only by a sequential walk, which
        starts the window after the previous episode's (`SequentialStart.next_position`).
        """
        market = self.market
        if start is not None:
            if market.simulated:
                raise ValueError(f"{self._name}: start= needs a price history (prices= or data=)")
            if isinstance(start, jax.core.Tracer) or (
                isinstance(start, jax.Array) and start.ndim > 0
            ):
                row = jnp.asarray(start, jnp.int32)
                row = jnp.where(row < 0, row + market.n_rows, row)
                first = market.lookback + market.first_start
                last = market.lookback + market.n_starts - 1
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
        first = market.first_start  # sampler position k is the window at row first + k
        if isinstance(sampler, RandomStart):
            pos = rng.randint(episode_key, 0, SLOTS.START, 0, market.n_valid, dtype=jnp.int32)
            return pos + first if first else pos
        if isinstance(sampler, SequentialStart) and previous is not None:
            pos = sampler.next_position(
                previous.env_state.market.start - first,
                n_valid=market.n_valid,
                episode_length=market.episode_length,
            )
            return pos + first if first else pos
        return jnp.asarray(sampler.start + first, jnp.int32)

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
            the built-in GBM, the model's `sekai_draws(episode_key, S)` for a `model=`, `("integers", (0, n_valid), position)` for `RandomStart`,
            nothing otherwise.
        """
        ek = rng.episode_key(key)
        market = self.market
        model = getattr(self.params, "model", None)
        if market.simulated and model is not None:
            draws: list[tuple[str, tuple[Any, ...], Any]] = model.sekai_draws(
                ek, market.lookback + market.episode_length
            )
            return draws
        if market.simulated:
            dtype = jax.dtypes.canonicalize_dtype(jnp.float64)
            block = np.asarray(market.raw_shocks(ek, dtype), dtype=np.float64)
            shape = (market.lookback + market.episode_length, market.n_assets)
            return [("standard_normal", (shape,), block)]
        if start is None and isinstance(self.sampler, RandomStart):
            pos = int(self._window_start(ek, None)) - market.first_start
            return [("integers", (0, market.n_valid), pos)]
        return []
