"""GBM-driven models: `GBM` (correlated), `MeanReverting` (exponential OU),
`CointegratedPair` (a shared trend and an OU spread).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._base import (
    _DT,
    ModelState,
    _float,
    _initial_prices,
    _ou,
    _real,
    _require,
    _step_length,
)
from ._diffusion import _Diffusion, _Draws, _gbm_increment, _Moved, _Params


# ------------------------------------------------------------------------------- GBM
class GBM(_Diffusion):
    """Geometric Brownian motion (sekai `GBM`), optionally correlated across assets.

    `log S_{t+1} = log S_t + (mu - sigma^2 / 2) dt + sigma sqrt(dt) (L z_t)_i`, with `L`
    the lower Cholesky factor of `corr` (identity without it) and `z_t` iid normals
    (slot PRICE, step t, index i). With slot 0 this is the envs' built-in market.

    Args:
        mu: annualised drift, scalar or `(n_assets,)`.
        sigma: annualised volatility (>= 0), scalar or `(n_assets,)`.
        s0: initial price (> 0), scalar or `(n_assets,)`.
        corr: optional `(n, n)` correlation matrix (symmetric, unit diagonal, pos. def.).
        dt: step length in years (> 0).
        n_assets: number of assets when every parameter is a scalar.

    Raises:
        ValueError / TypeError: as sekai's `GBM`, naming the argument.

    Example:
        >>> import jax
        >>> from parallax import rng
        >>> from parallax.finance import GBM
        >>> m = GBM(mu=0.05, sigma=0.2, n_assets=2)
        >>> m.simulate(rng.episode_key(jax.random.key(0)), 10).prices.shape
        (11, 2)
    """

    _leaves = ("mu", "sigma", "s0", "dt", "chol")
    mu: Any
    sigma: Any
    s0: Any
    dt: Any
    chol: Any

    def __init__(
        self,
        mu: Any = 0.0,
        sigma: Any = 0.2,
        *,
        s0: Any = 100.0,
        corr: Any = None,
        dt: float = _DT,
        n_assets: int | None = None,
    ) -> None:
        params = {"mu": mu, "sigma": sigma}
        self._set_params(n_assets, corr, s0, dt, params, {"sigma": "be non-negative"})

    def _move(self, state: ModelState, z: jax.Array, p: _Params, draws: _Draws) -> _Moved:
        return state.log_level + _gbm_increment(p["mu"], p["sigma"], p["dt"], z), {}


# ---------------------------------------------------------------------- MeanReverting
class MeanReverting(_Diffusion):
    """Exponential Ornstein-Uhlenbeck prices (sekai `MeanReverting`), exact transition.

    With `x = log(S / s0)` and target `m = log(mean) - log(s0)`:
    `x <- m + (x - m) e^{-theta dt} + sigma sqrt(-expm1(-2 theta dt) / (2 theta)) (L z)_i`.

    Args:
        theta: reversion speed (> 0); mean: price level reverted to (> 0); sigma (>= 0);
        s0, corr, dt, n_assets: as `GBM`.
    """

    _leaves = ("theta", "mean", "sigma", "s0", "dt", "chol")
    theta: Any
    mean: Any
    sigma: Any
    s0: Any
    dt: Any
    chol: Any

    def __init__(
        self,
        theta: Any = 5.0,
        mean: Any = 100.0,
        sigma: Any = 0.2,
        *,
        s0: Any = 100.0,
        corr: Any = None,
        dt: float = _DT,
        n_assets: int | None = None,
    ) -> None:
        params = {"theta": theta, "mean": mean, "sigma": sigma}
        checks = {"theta": "be positive", "mean": "be positive", "sigma": "be non-negative"}
        self._set_params(n_assets, corr, s0, dt, params, checks)

    def _move(self, state: ModelState, z: jax.Array, p: _Params, draws: _Draws) -> _Moved:
        decay, scale = _ou(p["theta"], p["sigma"], p["dt"])
        target = jnp.log(p["mean"]) - jnp.log(p["s0"])
        return target + (state.log_level - target) * decay + scale * z, {}


# ------------------------------------------------------------------- CointegratedPair
class CointegratedPair(_Diffusion):
    """Two assets: a shared GBM trend plus a stationary OU spread (sekai's).

    Trend `x += (mu - sigma^2/2) dt + sigma sqrt(dt) z_0`, spread
    `s <- s e^{-theta dt} + spread_sigma sqrt(-expm1(-2 theta dt)/(2 theta)) z_1` (both
    from 0; `z_i` = slot PRICE index i); `log P1 = log s0_0 + x + s/2`,
    `log P2 = log s0_1 + x - s/2`. State `"spread"`: `s_t`.

    Args:
        mu: drift of the common trend (a scalar).
        sigma: volatility of the common trend (a scalar, >= 0).
        theta: mean-reversion speed of the spread (a scalar, > 0).
        spread_sigma: volatility of the spread (a scalar, >= 0).
        s0: initial prices, a scalar or length 2 (> 0).
        dt: as `GBM`.
    """

    _leaves = ("mu", "sigma", "theta", "spread_sigma", "s0", "dt")
    mu: Any
    sigma: Any
    theta: Any
    spread_sigma: Any
    s0: Any
    dt: Any

    def __init__(
        self,
        mu: float = 0.05,
        sigma: float = 0.2,
        theta: float = 5.0,
        spread_sigma: float = 0.1,
        *,
        s0: Any = (100.0, 100.0),
        dt: float = _DT,
    ) -> None:
        sig = _real("sigma", sigma)
        th = _real("theta", theta)
        ssig = _real("spread_sigma", spread_sigma)
        _require(sig >= 0, "sigma must be non-negative.")
        _require(th > 0, "theta must be positive.")
        _require(ssig >= 0, "spread_sigma must be non-negative.")
        self._set(
            n_assets=2,
            dt=np.float64(_step_length(dt)),
            mu=np.float64(_real("mu", mu)),
            sigma=np.float64(sig),
            theta=np.float64(th),
            spread_sigma=np.float64(ssig),
            s0=_initial_prices(s0, 2),
        )

    def init(self, episode_key: jax.Array) -> ModelState:
        zero = jnp.zeros((), _float())
        return ModelState(jnp.zeros((2,), _float()), {"trend": zero, "spread": zero})

    def _move(self, state: ModelState, z: jax.Array, p: _Params, draws: _Draws) -> _Moved:
        trend = state.latent["trend"] + _gbm_increment(p["mu"], p["sigma"], p["dt"], z[0])
        decay, scale = _ou(p["theta"], p["spread_sigma"], p["dt"])
        spread = state.latent["spread"] * decay + scale * z[1]
        level = jnp.stack([trend + 0.5 * spread, trend - 0.5 * spread])
        return level, {"trend": trend, "spread": spread}

    def record(self, state: ModelState) -> dict[str, jax.Array]:
        return {"spread": state.latent["spread"]}
