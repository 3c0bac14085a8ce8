"""Stochastic-volatility models: `Heston` (full-truncation Euler), `GARCH` (1,1)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...rng import Slot
from ._base import (
    _DT,
    _PRICE,
    _VARIANCE,
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
    _require,
    _slots,
    _step_length,
    _vector,
)


# ----------------------------------------------------------------------------- Heston
class Heston(MarketModel):
    """Heston stochastic volatility, full-truncation Euler (sekai `Heston`).

    With `v+ = max(v, 0)`: `x += (mu - v+/2) dt + sqrt(v+ dt) z1` and
    `v += kappa (theta - v+) dt + xi sqrt(v+ dt) z2`, `z2 = rho z1 + sqrt(1 - rho^2) e`;
    `z1` (slot PRICE) is correlated across assets by `corr`, `e` is slot VARIANCE.
    State `"variance"`: `v+` at each row.

    Args:
        mu: drift; kappa: mean-reversion speed (> 0); theta: long-run variance (> 0);
        xi: volatility of variance (> 0); rho: price/variance correlation in [-1, 1];
        v0: initial variance (>= 0, default theta); s0, corr, dt, n_assets: as `GBM`.
    """

    _leaves = ("mu", "kappa", "theta", "xi", "rho", "v0", "s0", "dt", "chol")
    mu: Any
    kappa: Any
    theta: Any
    xi: Any
    rho: Any
    v0: Any
    s0: Any
    dt: Any
    chol: Any
    SLOTS = _slots(
        Slot(_VARIANCE, "VARIANCE", "step t", "asset j", "normal(): independent variance shock")
    )

    def __init__(
        self,
        mu: Any = 0.05,
        kappa: Any = 2.0,
        theta: Any = 0.04,
        xi: Any = 0.3,
        rho: Any = -0.7,
        *,
        v0: Any = None,
        s0: Any = 100.0,
        corr: Any = None,
        dt: float = _DT,
        n_assets: int | None = None,
    ) -> None:
        n = _asset_count(
            n_assets, corr, mu=mu, kappa=kappa, theta=theta, xi=xi, rho=rho, v0=v0, s0=s0
        )
        kap, th, x, r = (
            _vector(k, v, n)
            for k, v in (("kappa", kappa), ("theta", theta), ("xi", xi), ("rho", rho))
        )
        var0 = th if v0 is None else _vector("v0", v0, n)
        _require(np.all(kap > 0), "kappa must be positive.")
        _require(np.all(th > 0), "theta must be positive.")
        _require(np.all(x > 0), "xi must be positive.")
        _require(np.all(np.abs(r) <= 1), "rho must lie in [-1, 1].")
        _require(np.all(var0 >= 0), "v0 must be non-negative.")
        _, chol = _cholesky(corr, n)
        self._set(
            n_assets=n,
            dt=np.float64(_step_length(dt)),
            mu=_vector("mu", mu, n),
            kappa=kap,
            theta=th,
            xi=x,
            rho=r,
            v0=var0,
            s0=_initial_prices(s0, n),
            chol=chol,
        )

    def init(self, episode_key: jax.Array) -> ModelState:
        dtype = _float()
        v = jnp.broadcast_to(_f(self.v0, dtype), (self.n_assets,))
        return ModelState(jnp.zeros((self.n_assets,), dtype), {"v": v})

    def draw_keys(self) -> tuple[tuple[Any, ...], ...]:
        return (_normal_key(_PRICE, self.n_assets), _normal_key(_VARIANCE, self.n_assets))

    def advance(
        self, state: ModelState, draws: dict[tuple[Any, ...], jax.Array]
    ) -> tuple[ModelState, jax.Array]:
        dtype = state.log_level.dtype
        z1 = draws[_normal_key(_PRICE, self.n_assets)]
        e = draws[_normal_key(_VARIANCE, self.n_assets)]
        z1 = _correlate(z1, None if self.chol is None else _f(self.chol, dtype))
        p = {k: _f(getattr(self, k), dtype) for k in ("mu", "kappa", "theta", "xi", "rho", "dt")}
        z2 = p["rho"] * z1 + jnp.sqrt(1.0 - p["rho"] ** 2) * e
        v = state.latent["v"]
        v_plus = jnp.maximum(v, 0.0)
        root = jnp.sqrt(v_plus * p["dt"])
        x = state.log_level + (p["mu"] - 0.5 * v_plus) * p["dt"] + root * z1
        v = v + p["kappa"] * (p["theta"] - v_plus) * p["dt"] + p["xi"] * root * z2
        new = ModelState(x, {"v": v})
        return new, self.prices(new)

    def record(self, state: ModelState) -> dict[str, jax.Array]:
        return {"variance": jnp.maximum(state.latent["v"], 0.0)}

    def sekai_draws(self, episode_key: jax.Array, n_steps: int) -> list[tuple[str, tuple, Any]]:
        steps, n = _check_steps(n_steps), self.n_assets
        z = self._normals(episode_key, steps, _PRICE, n)
        e = self._normals(episode_key, steps, _VARIANCE, n)
        return [("standard_normal", ((steps, 2, n),), np.stack([z, e], axis=1))]


# ------------------------------------------------------------------------------ GARCH
class GARCH(MarketModel):
    """GARCH(1,1) on per-step log returns (sekai `GARCH`).

    `h_0 = omega / (1 - alpha - beta)`; each step `eps = sqrt(h) (L z)_i`, increment
    `mu dt + eps`, then `h <- omega + alpha eps^2 + beta h`. State `"variance"`: `h_t`.

    Args:
        omega: per-step variance intercept (> 0).
        alpha: weight of the last squared shock (>= 0, with `alpha + beta < 1`).
        beta: weight of the last variance (>= 0, with `alpha + beta < 1`).
        mu: annualised drift.
        s0: as `GBM`.
        corr: as `GBM`.
        dt: as `GBM`.
        n_assets: as `GBM`.
    """

    _leaves = ("omega", "alpha", "beta", "mu", "s0", "dt", "chol")
    omega: Any
    alpha: Any
    beta: Any
    mu: Any
    s0: Any
    dt: Any
    chol: Any
    SLOTS = _slots()

    def __init__(
        self,
        omega: Any = 1e-6,
        alpha: Any = 0.08,
        beta: Any = 0.9,
        *,
        mu: Any = 0.0,
        s0: Any = 100.0,
        corr: Any = None,
        dt: float = _DT,
        n_assets: int | None = None,
    ) -> None:
        n = _asset_count(n_assets, corr, omega=omega, alpha=alpha, beta=beta, mu=mu, s0=s0)
        om, al, be = (
            _vector("omega", omega, n),
            _vector("alpha", alpha, n),
            _vector("beta", beta, n),
        )
        _require(np.all(om > 0), "omega must be positive.")
        _require(np.all(al >= 0), "alpha must be non-negative.")
        _require(np.all(be >= 0), "beta must be non-negative.")
        _require(np.all(al + be < 1), "alpha + beta must be < 1.")
        _, chol = _cholesky(corr, n)
        self._set(
            n_assets=n,
            dt=np.float64(_step_length(dt)),
            omega=om,
            alpha=al,
            beta=be,
            mu=_vector("mu", mu, n),
            s0=_initial_prices(s0, n),
            chol=chol,
        )

    def init(self, episode_key: jax.Array) -> ModelState:
        dtype = _float()
        om, al, be = (_f(getattr(self, k), dtype) for k in ("omega", "alpha", "beta"))
        h = jnp.broadcast_to(om / (1.0 - al - be), (self.n_assets,))
        return ModelState(jnp.zeros((self.n_assets,), dtype), {"variance": h})

    def draw_keys(self) -> tuple[tuple[Any, ...], ...]:
        return (_normal_key(_PRICE, self.n_assets),)

    def advance(
        self, state: ModelState, draws: dict[tuple[Any, ...], jax.Array]
    ) -> tuple[ModelState, jax.Array]:
        dtype = state.log_level.dtype
        z = draws[_normal_key(_PRICE, self.n_assets)]
        z = _correlate(z, None if self.chol is None else _f(self.chol, dtype))
        om, al, be, mu, dt = (
            _f(getattr(self, k), dtype) for k in ("omega", "alpha", "beta", "mu", "dt")
        )
        h = state.latent["variance"]
        eps = jnp.sqrt(h) * z
        new = ModelState(state.log_level + (mu * dt + eps), {"variance": om + al * eps**2 + be * h})
        return new, self.prices(new)

    def record(self, state: ModelState) -> dict[str, jax.Array]:
        return {"variance": state.latent["variance"]}

    def sekai_draws(self, episode_key: jax.Array, n_steps: int) -> list[tuple[str, tuple, Any]]:
        return _normal_draws(self, episode_key, _check_steps(n_steps), self.n_assets)
