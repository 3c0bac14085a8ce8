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
    _PRICE,
    MarketModel,
    ModelState,
    _asset_count,
    _check_steps,
    _cholesky,
    _correlate,
    _f,
    _float,
    _initial_prices,
    _normal_draws,
    _normal_key,
    _ou,
    _real,
    _require,
    _slots,
    _step_length,
    _vector,
)


# ------------------------------------------------------------------------------- GBM
class GBM(MarketModel):
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
    SLOTS = _slots()

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
        n = _asset_count(n_assets, corr, mu=mu, sigma=sigma, s0=s0)
        sig = _vector("sigma", sigma, n)
        _require(np.all(sig >= 0), "sigma must be non-negative.")
        _, chol = _cholesky(corr, n)
        self._set(
            n_assets=n,
            dt=np.float64(_step_length(dt)),
            mu=_vector("mu", mu, n),
            sigma=sig,
            s0=_initial_prices(s0, n),
            chol=chol,
        )

    def draw_keys(self) -> tuple[tuple[Any, ...], ...]:
        return (_normal_key(_PRICE, self.n_assets),)

    def advance(
        self, state: ModelState, draws: dict[tuple[Any, ...], jax.Array]
    ) -> tuple[ModelState, jax.Array]:
        dtype = state.log_level.dtype
        z = draws[_normal_key(_PRICE, self.n_assets)]
        z = _correlate(z, None if self.chol is None else _f(self.chol, dtype))
        mu, sigma, dt = _f(self.mu, dtype), _f(self.sigma, dtype), _f(self.dt, dtype)
        inc = (mu - 0.5 * sigma**2) * dt + sigma * jnp.sqrt(dt) * z
        new = ModelState(state.log_level + inc, {})
        return new, self.prices(new)

    def sekai_draws(self, episode_key: jax.Array, n_steps: int) -> list[tuple[str, tuple, Any]]:
        return _normal_draws(self, episode_key, _check_steps(n_steps), self.n_assets)


# ---------------------------------------------------------------------- MeanReverting
class MeanReverting(MarketModel):
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
    SLOTS = _slots()

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
        n = _asset_count(n_assets, corr, theta=theta, mean=mean, sigma=sigma, s0=s0)
        th, me, sig = (
            _vector("theta", theta, n),
            _vector("mean", mean, n),
            _vector("sigma", sigma, n),
        )
        _require(np.all(th > 0), "theta must be positive.")
        _require(np.all(me > 0), "mean must be positive.")
        _require(np.all(sig >= 0), "sigma must be non-negative.")
        _, chol = _cholesky(corr, n)
        self._set(
            n_assets=n,
            dt=np.float64(_step_length(dt)),
            theta=th,
            mean=me,
            sigma=sig,
            s0=_initial_prices(s0, n),
            chol=chol,
        )

    def draw_keys(self) -> tuple[tuple[Any, ...], ...]:
        return (_normal_key(_PRICE, self.n_assets),)

    def advance(
        self, state: ModelState, draws: dict[tuple[Any, ...], jax.Array]
    ) -> tuple[ModelState, jax.Array]:
        dtype = state.log_level.dtype
        z = draws[_normal_key(_PRICE, self.n_assets)]
        z = _correlate(z, None if self.chol is None else _f(self.chol, dtype))
        th, me, sig, s0, dt = (
            _f(getattr(self, k), dtype) for k in ("theta", "mean", "sigma", "s0", "dt")
        )
        decay, scale = _ou(th, sig, dt)
        target = jnp.log(me) - jnp.log(s0)
        x = target + (state.log_level - target) * decay + scale * z
        new = ModelState(x, {})
        return new, self.prices(new)

    def sekai_draws(self, episode_key: jax.Array, n_steps: int) -> list[tuple[str, tuple, Any]]:
        return _normal_draws(self, episode_key, _check_steps(n_steps), self.n_assets)


# ------------------------------------------------------------------- CointegratedPair
class CointegratedPair(MarketModel):
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
    SLOTS = _slots()

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

    def draw_keys(self) -> tuple[tuple[Any, ...], ...]:
        return (_normal_key(_PRICE, 2),)

    def advance(
        self, state: ModelState, draws: dict[tuple[Any, ...], jax.Array]
    ) -> tuple[ModelState, jax.Array]:
        dtype = state.log_level.dtype
        z = draws[_normal_key(_PRICE, 2)]
        mu, sig, th, ssig, dt = (
            _f(getattr(self, k), dtype) for k in ("mu", "sigma", "theta", "spread_sigma", "dt")
        )
        trend = state.latent["trend"] + ((mu - 0.5 * sig**2) * dt + sig * jnp.sqrt(dt) * z[0])
        decay, scale = _ou(th, ssig, dt)
        spread = state.latent["spread"] * decay + scale * z[1]
        level = jnp.stack([trend + 0.5 * spread, trend - 0.5 * spread])
        new = ModelState(level, {"trend": trend, "spread": spread})
        return new, self.prices(new)

    def record(self, state: ModelState) -> dict[str, jax.Array]:
        return {"spread": state.latent["spread"]}

    def sekai_draws(self, episode_key: jax.Array, n_steps: int) -> list[tuple[str, tuple, Any]]:
        return _normal_draws(self, episode_key, _check_steps(n_steps), 2)
