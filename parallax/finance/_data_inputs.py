"""What a Trading/Portfolio env reads from market data: `market_inputs` and `MarketInputs`.

- `market_inputs(data, lookback=..., episode_length=...)`: a `MarketInputs` with what the
  envs take today (`prices`, the `dt` implied by dates) plus the per-row cost inputs
  (`volume` in currency, `spread`), the host time axis, and sekai's warm-up offsets
  (`first_start`, `n_valid`, `decision_row`), checked as sekai checks a `data=`.
- `MarketInputs`: those host arrays, built once at construction, with the row arithmetic
  of sekai's window starts and `context_at(row)`, a cost call's data inputs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._data import MarketData, _readonly, row_of

__all__ = ["MarketInputs", "market_inputs"]


@dataclasses.dataclass(frozen=True)
class MarketInputs:
    """What a Trading/Portfolio env reads from a `MarketData` (host arrays, built once).

    Attributes:
        prices: float64 close prices, `(T,)` for a one-asset env, else `(T, N)`: the
            `prices=` argument of the envs today.
        volume: float64 `(T, N)` traded value per row in currency (shares x close), the
            `volume=` input of `SquareRootImpact`; None without a volume field.
        spread: float64 `(T, N)` quoted spread (fraction of the price), the `spread=` input
            of the quoted `SpreadCost()`; None without a spread field.
        timestamps: `(T,)` host time axis (`timestamp(row)` maps an env's int row to it).
        dt: years per step implied by dates (`1 / periods_per_year`), or None (the env's
            default, 1/252), for the envs' `dt=`.
        lookback: the env's lookback `L`.
        episode_length: the env's episode length `E`.
        warmup: the data's warm-up rows.
        fields: the names of the data's fields (for `check_cost_inputs`).
    """

    prices: np.ndarray
    volume: np.ndarray | None
    spread: np.ndarray | None
    timestamps: np.ndarray
    dt: float | None
    lookback: int
    episode_length: int
    warmup: int
    fields: frozenset[str]

    @property
    def n_starts(self) -> int:
        """Window starts in the data, `T - (L + E + 1) + 1`, warm-up ignored."""
        return int(self.prices.shape[0]) - (self.lookback + self.episode_length + 1) + 1

    @property
    def first_start(self) -> int:
        """The first window start whose first decision is not a warm-up row: `max(0, warmup - L)`."""
        return max(0, self.warmup - self.lookback)

    @property
    def n_valid(self) -> int:
        """Windows a sampler chooses among: `n_starts - first_start` (sampler position `k` is
        the window starting at row `first_start + k`)."""
        return self.n_starts - self.first_start

    def window_start(self, position: int) -> int:
        """The window start row of sampler position `position` (sekai's `sample_start`).

        Raises:
            ValueError: a position outside `[0, n_valid)`.
        """
        if not 0 <= position < self.n_valid:
            raise ValueError(
                f"position {position} is outside the {self.n_valid} windows after the "
                f"{self.warmup} warm-up rows (positions 0..{self.n_valid - 1})"
            )
        return self.first_start + int(position)

    def decision_row(self, start: Any) -> int:
        """The first-decision row for sekai's `options={"start": start}`, checked on the host.

        Args:
            start: an int row (negative counts from the end), or a timestamp (a float on a
                numeric axis, a date on a dated one, `Time(t)` on any): the first row at or
                after it.

        Returns:
            The row, in `[max(L, warmup), L + n_starts - 1]`; the window starts `L` earlier.

        Raises:
            TypeError: a bool.
            ValueError: a timestamp that does not suit the axis, or a row outside the range.
        """
        row = row_of(self.timestamps, start, what="start")
        first, last = max(self.lookback, self.warmup), self.lookback + self.n_starts - 1
        if not first <= row <= last:
            reason = (
                f" (rows before {self.warmup} are warm-up history, never traded on)"
                if self.lookback <= row < self.warmup
                else ""
            )
            raise ValueError(
                f"start {start!r} (row {row}) is outside the valid range of first decisions: "
                f"rows {first}..{last}{reason}"
            )
        return row

    def timestamp(self, row: Any) -> Any:
        """The host timestamp of an absolute row (an env's int `info["timestamp"]`)."""
        return self.timestamps[np.asarray(row)]

    def context_at(self, row: Any, dtype: Any = None) -> dict[str, Array]:
        """The data inputs of a cost call at absolute row `row` (may be traced): `volume`
        and `spread`, `(N,)` each, as present; pass them as `cost(trades, ..., **ctx)`."""
        out = {}
        for name in ("volume", "spread"):
            value = getattr(self, name)
            if value is not None:
                out[name] = jnp.asarray(value, dtype)[row]
        return out


def market_inputs(
    data: Any, *, lookback: int, episode_length: int, one_asset: bool = False
) -> MarketInputs:
    """The arrays a Trading/Portfolio env needs from `data`, checked as sekai checks a `data=`.

    Args:
        data: our `MarketData`, or sekai's (converted with `MarketData.from_sekai`).
        lookback: the env's lookback `L` (>= 1).
        episode_length: the env's episode length `E` (>= 1).
        one_asset: True for Trading-v0 (`prices` is then `(T,)`).

    Returns:
        A `MarketInputs`.

    Raises:
        TypeError: `data` is not a `MarketData`.
        ValueError: fewer than `L + E + 1` rows, a missing price (the envs need a complete
            panel), several assets with `one_asset`, or no window after the warm-up rows.

    Example:
        >>> import numpy as np
        >>> data = MarketData(np.linspace(100.0, 110.0, 40), volume=np.full(40, 1e4), warmup=10)
        >>> inputs = market_inputs(data, lookback=4, episode_length=10, one_asset=True)
        >>> inputs.prices.shape, inputs.first_start, inputs.n_valid, inputs.decision_row(10)
        ((40,), 6, 20, 10)
        >>> float(inputs.volume[0, 0])  # currency: shares x close
        1000000.0
    """
    if not isinstance(data, MarketData):
        if type(data).__name__ == "MarketData" and type(data).__module__.startswith("sekai."):
            data = MarketData.from_sekai(data)
        else:
            raise TypeError(f"data must be a MarketData, got {type(data).__name__}")
    window = lookback + episode_length + 1
    if data.n_steps < window:
        raise ValueError(
            f"data has {data.n_steps} rows but at least {window} are needed "
            "(lookback + episode_length + 1)"
        )
    if not np.all(np.isfinite(data.close)):
        raise ValueError(
            "data has missing prices (unlisted assets); the finance envs need a complete panel"
        )
    if one_asset and data.n_assets != 1:
        raise ValueError(
            f"this env trades one asset but data has {data.n_assets} ({list(data.assets)})"
        )
    close = np.asarray(data.close)
    volume = None if data.volume is None else _readonly(np.asarray(data.volume) * close)
    inputs = MarketInputs(
        prices=_readonly(close[:, 0].copy()) if one_asset else close,
        volume=volume,
        spread=data.spread,
        timestamps=data.timestamps,
        dt=None if not data.periods_per_year else 1.0 / data.periods_per_year,
        lookback=int(lookback),
        episode_length=int(episode_length),
        warmup=data.warmup,
        fields=frozenset(data.fields),
    )
    if inputs.first_start >= inputs.n_starts:
        raise ValueError(
            f"no episode fits after the {data.warmup} warm-up rows: with lookback={lookback} "
            f"the first decision may not come before row {data.warmup}, but the last window "
            f"starts at row {inputs.n_starts - 1}"
        )
    return inputs
