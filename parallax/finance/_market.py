"""Price sources shared by `TradingEnv` and `PortfolioEnv`: lazy GBM and historical windows.

- `SLOTS`: the `parallax.rng` slot table of the two envs (`PRICE`, `START`).
- `MarketState`: the per-episode market data carried in the env state: the window start,
  the current prices and log prices, the running sum of log increments, and the rolling
  window of the last `lookback` log returns (what the observation shows).
- `Market`: static description of a market (simulated or a history; lookback, episode
  length, number of assets) with pure `reset` and `advance`.
- `correlation_default(n)`: sekai's fixed default correlation for `Portfolio-v0`.
- `load_prices(prices, ndim, min_rows)`: sekai's checks of a user price history.
- `simple_return(log_return)`: a step's simple return from its log return.

Episodes are generated lazily (no `(W, n)` path is built at reset). An episode uses the
window rows `0 .. L + E` (`L` = lookback, `E` = episode length), decision `t` is at row
`L + t`. Simulated markets follow sekai's GBM: the shock of path row `j` (between rows `j`
and `j + 1`) is `z_j = parallax.rng.normal(episode_key, j, SLOTS.PRICE, asset)`, correlated
as `z_j @ chol.T`; the log increment is `(mu - sigma^2 / 2) dt + sigma sqrt(dt) z_j`, and
row `j`'s price is `s0 exp(sum of increments before j)`. A reset draws rows `0 .. L-1`
(O(L n) work), each step one more row.

Returns are kept in log space: the window holds the log increments themselves and `advance`
returns the step's log return, never the ratio of two prices. A float32 price may underflow
to 0 or overflow to inf over a long or volatile episode (it is only reported in `info`),
but the returns, rewards and observations stay finite wherever float64 is.
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
from ._validation import float64_array

__all__ = [
    "SLOTS",
    "Market",
    "MarketState",
    "correlation_default",
    "load_prices",
    "simple_return",
]

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
        price: float `(n,)`, the current prices (window row `L + t`); in float32 it may
            underflow to 0 or overflow to inf (nothing is computed from it).
        log_price: float `(n,)`, `log(price)`, computed without forming the price.
        log_level: float `(n,)`, the running sum of simulated log increments (zeros for a
            history).
        window: float32 `(L, n)`, the last `L` log returns, oldest first.
        latent: the market model's other state (`ModelState.latent`: variance, regime,
            ...) when the env simulates a `model=`; None for the built-in GBM and histories.
    """

    start: Int[Array, ""]
    price: Float[Array, " n"]
    log_price: Float[Array, " n"]
    log_level: Float[Array, " n"]
    window: Float[Array, "L n"]
    latent: Any = None


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
        ValueError: wrong dimensions, too few rows, no asset (a `(T, 0)` array), or a price
            that is not finite and > 0.
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
    arr = float64_array(prices)
    if arr is None:
        raise ValueError(f"prices must be an array of numbers, got {type(prices).__name__}")
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
    if arr.ndim == 2 and arr.shape[1] == 0:
        # sekai: "MarketData needs at least 2 rows and 1 asset, got shape (60, 0)"
        raise ValueError(f"prices needs at least 2 rows and 1 asset, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError("prices must be finite and strictly positive")
    return (arr[:, None] if ndim == 1 else arr), dt


def simple_return(log_return: Array) -> Array:
    """`exp(log_return) - 1` (as `expm1`), capped at the dtype's largest finite value.

    The simple return of a step from its log return, without the ratio of two prices (which
    is 0/0 once float32 prices underflow). The cap keeps a flat position's gain `0 * r` at 0
    on a move too large for the dtype.
    """
    return jnp.minimum(jnp.expm1(log_return), jnp.finfo(log_return.dtype).max)


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
        self.first_start = 0
        self.volume: np.ndarray | None = None
        self.spread: np.ndarray | None = None
        if history is not None:
            self.log_returns = np.diff(np.log(history), axis=0)
            self.n_rows = history.shape[0]
            self.n_starts = self.n_rows - (lookback + episode_length + 1) + 1
        else:
            self.n_rows = 0
            self.n_starts = 1

    def use_data(self, inputs: Any) -> None:
        """Read `data=`'s warm-up offset and cost inputs (a `MarketInputs`) too."""
        self.first_start = int(inputs.first_start)
        self.volume = None if inputs.volume is None else np.asarray(inputs.volume, np.float64)
        self.spread = None if inputs.spread is None else np.asarray(inputs.spread, np.float64)

    @property
    def n_valid(self) -> int:
        """Windows a sampler chooses among (after the data's warm-up rows; `n_starts` else)."""
        return self.n_starts - self.first_start

    def cost_inputs(
        self, market: MarketState, t: Array, needs: frozenset[str], dtype: Any
    ) -> dict[str, Array]:
        """The data inputs of a cost call at decision `t` (sekai's cost context).

        `volatility`: the population std of the window's `L` log returns (before the step);
        `volume` (currency) and `spread` at the decision row, for the names in `needs`.
        """
        out: dict[str, Array] = {}
        if self.history is None:
            return out
        row = market.start + self.lookback + jnp.minimum(t, self.episode_length - 1)
        if "volatility" in needs:
            _, log_returns = self._tables(dtype)
            window = jax.lax.dynamic_slice_in_dim(log_returns, row - self.lookback, self.lookback)
            mean = jnp.mean(window, axis=0, keepdims=True)
            out["volatility"] = jnp.sqrt(jnp.mean(jnp.square(window - mean), axis=0))
        for name in ("volume", "spread"):
            table = getattr(self, name)
            if name in needs and table is not None:
                values = jnp.asarray(table, dtype)
                out[name] = jax.lax.dynamic_index_in_dim(values, row, keepdims=False)
        return out

    @property
    def simulated(self) -> bool:
        """Whether prices are simulated (GBM)."""
        return self.history is None

    def _tables(self, dtype: Any) -> tuple[Array, Array]:
        """The history's prices and log returns in `dtype` (host copies cached per dtype)."""
        name = np.dtype(dtype).name
        if name not in self._cache:
            assert self.history is not None
            # Prices outside float32's range become 0 or inf there (only `info["price"]`
            # reads them); the log returns, computed in float64, stay finite.
            with np.errstate(over="ignore", under="ignore"):
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
        model: Any = None,
    ) -> MarketState:
        """The market at the first decision of an episode.

        Args:
            episode_key: uint32 `(2,)` from `parallax.rng.episode_key`.
            start: int32 `()`, the window start row (ignored when simulated).
            mu, sigma: float `()` or `(n,)`; s0: float `()` or `(n,)`; dt: float `()`.
            chol: float `(n, n)` lower Cholesky factor, or None.
            dtype: the float dtype.
            model: a market model (`parallax.finance.Heston`, ...) to simulate instead of
                the built-in GBM (then `mu`, `sigma`, `s0`, `chol` are unused): `init`
                followed by `L` steps for the lookback window.

        Returns:
            The `MarketState` at row `L`.
        """
        n, lookback = self.n_assets, self.lookback
        if model is not None:
            return _model_reset(model, episode_key, lookback, dtype)
        if self.history is None:
            rows = jnp.arange(lookback, dtype=jnp.uint32)
            inc = self.increments(self.shocks(episode_key, rows, chol, dtype), mu, sigma, dt)
            level = _cumsum_rows(inc)[lookback - 1]
            s0 = jnp.broadcast_to(s0, (n,))
            return MarketState(
                start=jnp.zeros((), jnp.int32),
                price=s0 * jnp.exp(level),
                log_price=jnp.log(s0) + level,
                log_level=level,
                # the log returns are the increments (no ratio of prices that may underflow)
                window=inc.astype(jnp.float32),
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
        model: Any = None,
    ) -> tuple[MarketState, Array, Array]:
        """Move from decision `t` to `t + 1` (one `model.step` at path row `L + t` for a
        `model`).

        Returns:
            `(next market state, log return of the step (n,), price after (n,))`; the
            simple return is `expm1(log return)` (= `after / before - 1`, computed without
            the ratio). For a history, an episode that is over reads its last row again (as
            sekai's frozen sub-envs do).
        """
        dtype = market.price.dtype
        lookback = self.lookback
        if model is not None:
            return _model_advance(model, market, episode_key, t + lookback)
        if self.history is None:
            row = (t + lookback).astype(jnp.uint32)
            z = self.shocks(episode_key, row[None], chol, dtype)[0]
            new_return = self.increments(z, mu, sigma, dt)
            level = market.log_level + new_return
            price = jnp.broadcast_to(s0, level.shape) * jnp.exp(level)
            log_price = market.log_price + new_return
        else:
            table, log_returns = self._tables(dtype)
            row = market.start + lookback + jnp.minimum(t, self.episode_length - 1)
            price = jax.lax.dynamic_index_in_dim(table, row + 1, keepdims=False)
            new_return = jax.lax.dynamic_index_in_dim(log_returns, row, keepdims=False)
            log_price = market.log_price
            level = market.log_level
        window = jnp.concatenate([market.window[1:], new_return[None].astype(jnp.float32)], axis=0)
        nxt = MarketState(
            start=market.start, price=price, log_price=log_price, log_level=level, window=window
        )
        return nxt, new_return, price


def _model_reset(model: Any, episode_key: Array, lookback: int, dtype: Any) -> MarketState:
    """A model's market at row `L`: `init`, then `L` steps (the lookback window)."""
    from ._models import ModelState

    first = model.init(episode_key)
    first = ModelState(first.log_level.astype(dtype), first.latent)

    def body(state: Any, row: Array) -> tuple[Any, Array]:
        nxt, _ = model.step(state, episode_key, row)
        return nxt, nxt.log_level - state.log_level

    state, increments = jax.lax.scan(body, first, jnp.arange(lookback, dtype=jnp.uint32))
    level = state.log_level
    return MarketState(
        start=jnp.zeros((), jnp.int32),
        price=model.prices(state),
        log_price=jnp.log(model.prices(first)) + level,
        log_level=level,
        window=increments.astype(jnp.float32),
        latent=state.latent,
    )


def _model_advance(
    model: Any, market: MarketState, episode_key: Array, row: Array
) -> tuple[MarketState, Array, Array]:
    """One `model.step` at path row `row`: the step's log return is the change in level."""
    from ._models import ModelState

    state, price = model.step(
        ModelState(market.log_level, market.latent), episode_key, row.astype(jnp.uint32)
    )
    new_return = state.log_level - market.log_level
    window = jnp.concatenate([market.window[1:], new_return[None].astype(jnp.float32)], axis=0)
    nxt = MarketState(
        start=market.start,
        price=price,
        log_price=market.log_price + new_return,
        log_level=state.log_level,
        window=window,
        latent=state.latent,
    )
    return nxt, new_return, price
