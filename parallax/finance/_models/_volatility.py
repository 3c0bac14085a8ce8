"""Stochastic-volatility models: `Heston` (full-truncation Euler), `GARCH` (1,1)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...rng import Slot
from ._base import _DT, _PRICE, _VARIANCE, ModelState, _check_steps, _f, _float, _normal_key, _slots
from ._diffusion import _Diffusion, _Draws, _Moved, _Params


# ----------------------------------------------------------------------------- Heston
class Heston(_Diffusion):
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
        params = {"mu": mu, "kappa": kappa, "theta": theta, "xi": xi, "rho": rho, "v0": v0}
        checks = dict.fromkeys(("kappa", "theta", "xi"), "be positive")
        checks |= {"rho": "lie in [-1, 1]", "v0": "be non-negative"}
        defaults = {"v0": "theta"}  # v0=None starts at theta
        self._set_params(n_assets, corr, s0, dt, params, checks, defaults=defaults)

    def init(self, episode_key: jax.Array) -> ModelState:
        dtype = _float()
        v = jnp.broadcast_to(_f(self.v0, dtype), (self.n_assets,))
        return ModelState(jnp.zeros((self.n_assets,), dtype), {"v": v})

    def draw_keys(self) -> tuple[tuple[Any, ...], ...]:
        return (*super().draw_keys(), _normal_key(_VARIANCE, self.n_assets))

    def _move(self, state: ModelState, z: jax.Array, p: _Params, draws: _Draws) -> _Moved:
        e = draws[_normal_key(_VARIANCE, self.n_assets)]
        z2 = p["rho"] * z + jnp.sqrt(1.0 - p["rho"] ** 2) * e
        v = state.latent["v"]
        v_plus = jnp.maximum(v, 0.0)
        root = jnp.sqrt(v_plus * p["dt"])
        x = state.log_level + (p["mu"] - 0.5 * v_plus) * p["dt"] + root * z
        v = v + p["kappa"] * (p["theta"] - v_plus) * p["dt"] + p["xi"] * root * z2
        return x, {"v": v}

    def record(self, state: ModelState) -> dict[str, jax.Array]:
        return {"variance": jnp.maximum(state.latent["v"], 0.0)}

    def sekai_draws(self, episode_key: jax.Array, n_steps: int) -> list[tuple[str, tuple, Any]]:
        steps, n = _check_steps(n_steps), self.n_assets
        z = self._normals(episode_key, steps, _PRICE, n)
        e = self._normals(episode_key, steps, _VARIANCE, n)
        return [("standard_normal", ((steps, 2, n),), np.stack([z, e], axis=1))]


# ------------------------------------------------------------------------------ GARCH
class GARCH(_Diffusion):
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
        params = {"omega": omega, "alpha": alpha, "beta": beta, "mu": mu}
        checks = {"omega": "be positive", "alpha": "be non-negative", "beta": "be non-negative"}
        stationary = (lambda v: v["alpha"] + v["beta"] < 1, "alpha + beta must be < 1.")
        self._set_params(n_assets, corr, s0, dt, params, checks, joint=(stationary,))

    def init(self, episode_key: jax.Array) -> ModelState:
        dtype = _float()
        om, al, be = (_f(getattr(self, k), dtype) for k in ("omega", "alpha", "beta"))
        h = jnp.broadcast_to(om / (1.0 - al - be), (self.n_assets,))
        return ModelState(jnp.zeros((self.n_assets,), dtype), {"variance": h})

    def _move(self, state: ModelState, z: jax.Array, p: _Params, draws: _Draws) -> _Moved:
        h = state.latent["variance"]
        eps = jnp.sqrt(h) * z
        h_next = p["omega"] + p["alpha"] * eps**2 + p["beta"] * h
        return state.log_level + (p["mu"] * p["dt"] + eps), {"variance": h_next}

    def record(self, state: ModelState) -> dict[str, jax.Array]:
        return {"variance": state.latent["variance"]}
