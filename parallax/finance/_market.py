"""Price sources shared by `TradingEnv` and `PortfolioEnv`: lazy GBM and historical windows.

- `SLOTS`: the `parallax.rng` slot table of the two envs (`PRICE`, `START`).
- `MarketState`: the per-episode market data carried in the env state: the window start,
  the current prices and log prices, the running sum of log increments, and the rolling
  window of the last `lookback` log returns (what the observation shows).
- `Market`: static description of a market (simulated or a history; lookback, episode
  length, number of assets) with pure `reset` and `advance`.
- `correlation_default(n)`: sekai's fixed default correlation for `Portfolio-v0`.
- `load_prices(prices, ndim, min_rows)`: sekai's checks of a user price history.

Episodes are generated lazily (no `(W, n)` path is built at reset). An episode uses the
window rows `0 .. L + E` (`L` = lookback, `E` = episode length), decision `t` is at row
`L + t`. Simulated markets follow sekai's GBM: the shock of path row `j` (between rows `j`
and `j + 1`) is `z_j = parallax.rng.normal(episode_key, j, SLOTS.PRICE, asset)`, correlated
as `z_j @ chol.T`; the log increment is `(mu - sigma^2 / 2) dt + sigma sqrt(dt) z_j`, and
row `j`'s price is `s0 exp(sum of increments before j)`. A reset draws rows `0 .. L-1`
(O(L n) work), each step one more row.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .. import rng
from ..rng import Slot, SlotTable

__all__ = ["SLOTS", "Market", "MarketState", "correlation_default", "load_prices"]

SLOTS = SlotTable(
    Slot(
        0,
        "PRICE",
        "reset: path rows 0..L-1; step t: path row L+t (the draw's step is the path row)",
        "asset j",
        "normal(): GBM shock of the row",
    ),
    Slot(
        1,
        "START",
        "reset (step 0), history with RandomStart only",
        "0",
        "randint(n_valid): the window position",
    ),
)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class MarketState:
    """The market part of a finance env's state (`n` assets, lookback `L`).

    Attributes:
        start: int32 `()`, the absolute row of the window's first price (0 when simulated).
        price: float `(n,)`, the current prices (window row `L + t`).
        log_price: float `(n,)`, `log(price)`.
        log_level: float `(n,)`, the running sum of simulated log increments (zeros for a
            history).
        window: float32 `(L, n)`, the last `L` log returns, oldest first.
    """

    start: Int[Array, ""]
    price: Float[Array, " n"]
    log_price: Float[Array, " n"]
    log_level: Float[Array, " n"]
    window: Float[Array, "L n"]


def correlation_default(n: int) -> np.ndarray:
    """sekai's fixed default correlation matrix for `n` assets (float64 `(n, n)`).

    A one-factor-per-two-assets matrix drawn once from `numpy.random.default_rng(0)`:
    `F = 0.5 * normal((n, max(1, n // 2)))`, `C = F F^T + 0.75 I`, normalised to a unit
    diagonal. Computed with numpy, so it is bit-identical to sekai's (including the
    `0.9999999999999999` diagonal element for n = 5).

    Example:
        >>> c = correlation_default(5)
        >>> c.shape, float(c[0, 0])
        ((5, 5), 1.0)
    """
    strength = 0.5
    factors = np.random.default_rng(0).standard_normal((n, max(1, n // 2))) * strength
    cov = factors @ factors.T + np.eye(n) * (1 - strength**2)
    scale = np.sqrt(np.diag(cov))
    out: np.ndarray = cov / np.outer(scale, scale)
    return out


def _is_pandas(x: Any) -> bool:
    mod = type(x).__module__
    return mod.split(".")[0] == "pandas" and type(x).__name__ in ("Series", "DataFrame")


def load_prices(prices: Any, *, ndim: int, min_rows: int) -> tuple[np.ndarray, float | None]:
    """Check a price history as sekai does and return it as float64 `(T, n)`.

    Args:
        prices: an array, or a pandas Series/DataFrame (one indexed by dates also gives the
            implied step length).
        ndim: 1 for a one-asset env (a `(T, 1)` array is accepted), 2 for a multi-asset
            env (a 1-D array is read as `(T, 1)`).
        min_rows: the rows one episode needs (`lookback + episode_length + 1`).

    Returns:
        `(prices (T, n) float64, dt or None)`; `dt = 1 / periods_per_year` for dates.

    Raises:
        ValueError: wrong dimensions, too few rows, or a price that is not finite and > 0.
    """
    dt = None
    if _is_pandas(prices):
        index = prices.index
        if type(index).__name__ == "DatetimeIndex" and len(index) > 1:
            stamps = np.asarray(index.values, dtype="datetime64[ns]")
            span = (stamps[-1] - stamps[0]) / np.timedelta64(1, "D")
            if span > 0:
                dt = 1.0 / float((len(stamps) - 1) / (span / 365.25))
        prices = prices.to_numpy()
    try:
        arr = np.asarray(prices, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"prices must be an array of numbers, got {type(prices).__name__}"
        ) from None
    if ndim == 2 and arr.ndim == 1:
        arr = arr[:, None]
    if ndim == 1 and arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != ndim:
        raise ValueError(f"prices must be {ndim}-D, got shape {arr.shape}")
    if arr.shape[0] < min_rows:
        raise ValueError(
            f"prices has {arr.shape[0]} rows but at least {min_rows} are needed "
            "(lookback + episode_length + 1)"
        )
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError("prices must be finite and strictly positive")
    return (arr[:, None] if ndim == 1 else arr), dt


def float_dtype() -> Any:
    """The env's float dtype now: float64 with `jax_enable_x64`, else float32."""
    return jax.dtypes.canonicalize_dtype(jnp.float64)


def _cumsum_rows(x: Array) -> Array:
    """Cumulative sum over the first axis, one row after the other (numpy's order).

    `jnp.cumsum` may reassociate, and differently for a batch than for one env.
    """

    def body(total: Array, row: Array) -> tuple[Array, Array]:
        total = total + row
        return total, total

    return jax.lax.scan(body, jnp.zeros_like(x[0]), x)[1]


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _shock_block(episode_key: Array, rows: int, n_assets: int, dtype: Any) -> Array:
    steps = jnp.arange(rows, dtype=jnp.uint32)
    return rng.normal_vector(episode_key, steps, SLOTS.PRICE, n_assets, dtype=dtype)


class Market:
    """A market: simulated GBM or a price history, cut into episodes of `L + E + 1` rows.

    Args:
        lookback: `L`, log returns in the observation.
        episode_length: `E`, steps per episode.
        n_assets: `n`.
        history: float64 `(T, n)` prices, or None for GBM.
        correlated: whether simulated shocks are correlated with a Cholesky factor.
    """

    def __init__(
        self,
        *,
        lookback: int,
        episode_length: int,
        n_assets: int,
        history: np.ndarray | None,
        correlated: bool,
    ) -> None:
        self.lookback = lookback
        self.episode_length = episode_length
        self.n_assets = n_assets
        self.correlated = correlated
        self.history = history
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if history is not None:
            self.log_returns = np.diff(np.log(history), axis=0)
            self.n_rows = history.shape[0]
            self.n_starts = self.n_rows - (lookback + episode_length + 1) + 1
        else:
            self.n_rows = 0
            self.n_starts = 1

    @property
    def simulated(self) -> bool:
        """Whether prices are simulated (GBM)."""
        return self.history is None

    def _tables(self, dtype: Any) -> tuple[Array, Array]:
        """The history's prices and log returns in `dtype` (host copies cached per dtype)."""
        name = np.dtype(dtype).name
        if name not in self._cache:
            assert self.history is not None
            self._cache[name] = (
                np.asarray(self.history, dtype=dtype),
                np.asarray(self.log_returns, dtype=dtype),
            )
        prices, log_returns = self._cache[name]
        return jnp.asarray(prices), jnp.asarray(log_returns)

    # -- simulated -------------------------------------------------------------------------
    def shocks(self, episode_key: Array, rows: Array, chol: Array | None, dtype: Any) -> Array:
        """Correlated standard normal shocks of path rows `rows` (int `(R,)`), `(R, n)`."""
        z = rng.normal_vector(episode_key, rows, SLOTS.PRICE, self.n_assets, dtype=dtype)
        if self.correlated and chol is not None:
            # z @ chol.T, summed left to right so that a batch computes what one env does
            # (a batched matmul may accumulate in another order).
            out = z[:, :1] * chol[None, :, 0]
            for k in range(1, self.n_assets):
                out = out + z[:, k : k + 1] * chol[None, :, k]
            z = out
        return z

    def raw_shocks(self, episode_key: Array, dtype: Any) -> Array:
        """The uncorrelated `(S, n)` block of an episode's shocks (`S = L + E`), for tests.

        It is what sekai's `standard_normal((S, n))` must return to reproduce the episode.
        """
        return _shock_block(episode_key, self.lookback + self.episode_length, self.n_assets, dtype)

    @staticmethod
    def increments(shocks: Array, mu: Array, sigma: Array, dt: Array) -> Array:
        """GBM log increments `(mu - sigma^2 / 2) dt + sigma sqrt(dt) z`, in sekai's order."""
        drift = jnp.broadcast_to((mu - 0.5 * sigma**2) * dt, shocks.shape[-1:])
        scale = jnp.broadcast_to(sigma * jnp.sqrt(dt), shocks.shape[-1:])
        if shocks.ndim == 2:
            drift, scale = drift[None, :], scale[None, :]
        return drift + scale * shocks

    # -- episodes --------------------------------------------------------------------------
    def reset(
        self,
        episode_key: Array,
        start: Array,
        *,
        mu: Array,
        sigma: Array,
        s0: Array,
        dt: Array,
        chol: Array | None,
        dtype: Any,
    ) -> MarketState:
        """The market at the first decision of an episode.

        Args:
            episode_key: uint32 `(2,)` from `parallax.rng.episode_key`.
            start: int32 `()`, the window start row (ignored when simulated).
            mu, sigma: float `()` or `(n,)`; s0: float `()` or `(n,)`; dt: float `()`.
            chol: float `(n, n)` lower Cholesky factor, or None.
            dtype: the float dtype.

        Returns:
            The `MarketState` at row `L`.
        """
        n, lookback = self.n_assets, self.lookback
        if self.history is None:
            rows = jnp.arange(lookback, dtype=jnp.uint32)
            inc = self.increments(self.shocks(episode_key, rows, chol, dtype), mu, sigma, dt)
            level = _cumsum_rows(inc)
            levels = jnp.concatenate([jnp.zeros((1, n), dtype), level], axis=0)
            prices = jnp.broadcast_to(s0, (n,))[None, :] * jnp.exp(levels)
            logs = jnp.log(prices)
            window = (logs[1:] - logs[:-1]).astype(jnp.float32)
            return MarketState(
                start=jnp.zeros((), jnp.int32),
                price=prices[lookback],
                log_price=logs[lookback],
                log_level=level[lookback - 1],
                window=window,
            )
        table, log_returns = self._tables(dtype)
        start = jnp.asarray(start, jnp.int32)
        price = jax.lax.dynamic_index_in_dim(table, start + lookback, keepdims=False)
        window = jax.lax.dynamic_slice_in_dim(log_returns, start, lookback)
        return MarketState(
            start=start,
            price=price,
            log_price=jnp.log(price),
            log_level=jnp.zeros((n,), dtype),
            window=window.astype(jnp.float32),
        )

    def advance(
        self,
        market: MarketState,
        episode_key: Array,
        t: Array,
        *,
        mu: Array,
        sigma: Array,
        s0: Array,
        dt: Array,
        chol: Array | None,
    ) -> tuple[MarketState, Array, Array]:
        """Move from decision `t` to `t + 1`.

        Returns:
            `(next market state, price before (n,), price after (n,))`. For a history, an
            episode that is over reads its last row again (as sekai's frozen sub-envs do).
        """
        dtype = market.price.dtype
        lookback = self.lookback
        if self.history is None:
            row = (t + lookback).astype(jnp.uint32)
            z = self.shocks(episode_key, row[None], chol, dtype)[0]
            level = market.log_level + self.increments(z, mu, sigma, dt)
            price = jnp.broadcast_to(s0, level.shape) * jnp.exp(level)
            log_price = jnp.log(price)
            new_return = log_price - market.log_price
            before = market.price
        else:
            table, log_returns = self._tables(dtype)
            row = market.start + lookback + jnp.minimum(t, self.episode_length - 1)
            before = jax.lax.dynamic_index_in_dim(table, row, keepdims=False)
            price = jax.lax.dynamic_index_in_dim(table, row + 1, keepdims=False)
            new_return = jax.lax.dynamic_index_in_dim(log_returns, row, keepdims=False)
            log_price = market.log_price
            level = market.log_level
        window = jnp.concatenate([market.window[1:], new_return[None].astype(jnp.float32)], axis=0)
        nxt = MarketState(
            start=market.start, price=price, log_price=log_price, log_level=level, window=window
        )
        return nxt, before, price
