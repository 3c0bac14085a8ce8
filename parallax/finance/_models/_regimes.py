"""`RegimeSwitching`: GBMs switched by a hidden Markov chain."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ... import rng
from ...rng import Slot
from ._base import (
    _PRICE,
    _REGIME,
    _REGIME_INIT,
    ModelState,
    _categorical,
    _check_steps,
    _correlate,
    _f,
    _float,
    _normal_key,
    _require,
    _rows,
    _slots,
    _uniform_key,
)
from ._diffusion import _Diffusion, _Draws, _gbm_increment, _Moved, _Params
from ._gbm import GBM


# -------------------------------------------------------------------- RegimeSwitching
def _as_gbm(model: Any) -> Any:
    """A sekai `GBM` as ours (anything else is returned for the type check)."""
    if type(model).__module__.startswith("sekai") and type(model).__name__ == "GBM":
        return GBM(
            model.mu,
            model.sigma,
            s0=model.s0,
            corr=model.corr,
            dt=model.dt,
            n_assets=model.n_assets,
        )
    return model


def _stationary(transition: np.ndarray) -> np.ndarray:
    """A stationary distribution of a row-stochastic matrix (least squares, clipped)."""
    k = transition.shape[0]
    a = np.concatenate([transition.T - np.eye(k), np.ones((1, k))], axis=0)
    b = np.zeros(k + 1)
    b[k] = 1.0
    pi = np.maximum(np.linalg.lstsq(a, b, rcond=None)[0], 0.0)
    out: np.ndarray = pi / pi.sum()
    return out


class RegimeSwitching(_Diffusion):
    """GBM whose drift, volatility and correlation follow a Markov chain (sekai's).

    The regime `r_0` is drawn from `initial` (uniform of slot REGIME_INIT), then
    `r_{t+1}` from row `r_t` of `transition` (uniform of slot REGIME at step t), both by
    sekai's rule: the number of cumulative probabilities <= u, capped at K - 1. The
    increment of step t is regime `r_t`'s GBM. State `"regime"`: `r_t` as float.

    Args:
        regimes: K >= 1 `GBM`s (ours or sekai's) sharing n_assets, dt and s0.
        transition: `(K, K)` row-stochastic matrix.
        initial: `(K,)` distribution of `r_0`; default the stationary distribution.
    """

    _leaves = ("mu", "sigma", "chol", "cum_initial", "cum_transition", "s0", "dt")
    _static = ("n_assets", "n_regimes")
    mu: Any
    sigma: Any
    chol: Any
    cum_initial: Any
    cum_transition: Any
    s0: Any
    dt: Any
    n_regimes: Any
    SLOTS = _slots(
        Slot(_REGIME_INIT, "REGIME_INIT", "step 0", "0", "uniform(): initial regime"),
        Slot(_REGIME, "REGIME", "step t: regime of row t+1", "0", "uniform(): transition"),
    )

    def __init__(self, regimes: Sequence[Any], transition: Any, *, initial: Any = None) -> None:
        models = tuple(regimes)
        _require(len(models) >= 1, "regimes must contain at least one GBM.")
        models = tuple(_as_gbm(m) for m in models)
        for m in models:
            if not isinstance(m, GBM):
                raise TypeError(f"regimes must be GBM instances, got {type(m).__name__}.")
        first = models[0]
        for m in models[1:]:
            _require(m.n_assets == first.n_assets, "all regimes must share n_assets.")
            _require(float(m.dt) == float(first.dt), "all regimes must share dt.")
            _require(np.array_equal(m.s0, first.s0), "all regimes must share s0.")
        k = len(models)
        matrix = np.asarray(transition, dtype=np.float64)
        _require(matrix.shape == (k, k), f"transition must have shape ({k}, {k}).")
        _require(np.all(np.isfinite(matrix)), "transition must be finite.")
        _require(np.all(matrix >= 0), "transition must be non-negative.")
        _require(
            np.allclose(matrix.sum(axis=1), 1.0, rtol=0.0, atol=1e-8),
            "each row of transition must sum to 1.",
        )
        if initial is None:
            start = _stationary(matrix)
        else:
            start = np.asarray(initial, dtype=np.float64)
            _require(start.shape == (k,), f"initial must have shape ({k},).")
            _require(
                np.all(np.isfinite(start)) and np.all(start >= 0),
                "initial must be finite and non-negative.",
            )
            _require(abs(start.sum() - 1.0) <= 1e-8, "initial must sum to 1.")
        n = first.n_assets
        eye = np.eye(n)
        self._set(
            n_assets=n,
            n_regimes=k,
            dt=np.float64(first.dt),
            s0=np.asarray(first.s0),
            mu=np.stack([np.asarray(m.mu) for m in models]),
            sigma=np.stack([np.asarray(m.sigma) for m in models]),
            chol=None
            if all(m.chol is None for m in models)
            else np.stack([eye if m.chol is None else np.asarray(m.chol) for m in models]),
            cum_initial=np.cumsum(start),
            cum_transition=np.cumsum(matrix, axis=1),
        )

    def init(self, episode_key: jax.Array) -> ModelState:
        dtype = _float()
        u0 = rng.uniform(episode_key, 0, _REGIME_INIT, 0, dtype=dtype)
        regime = _categorical(_f(self.cum_initial, dtype), u0).astype(jnp.int32)
        return ModelState(jnp.zeros((self.n_assets,), dtype), {"regime": regime})

    def draw_keys(self) -> tuple[tuple[Any, ...], ...]:
        return (*super().draw_keys(), _uniform_key(_REGIME, 1))

    def _shock(self, state: ModelState, draws: _Draws, dtype: Any) -> jax.Array:
        """The PRICE normals, correlated by the current regime's `chol`."""
        z = draws[_normal_key(_PRICE, self.n_assets)]
        if self.chol is None:
            return z
        return _correlate(z, _f(self.chol, dtype)[state.latent["regime"]])

    def _move(self, state: ModelState, z: jax.Array, p: _Params, draws: _Draws) -> _Moved:
        r = state.latent["regime"]
        inc = _gbm_increment(p["mu"][r], p["sigma"][r], p["dt"], z)
        u = draws[_uniform_key(_REGIME, 1)][0]
        nxt = _categorical(p["cum_transition"][r], u).astype(jnp.int32)
        return state.log_level + inc, {"regime": nxt}

    def record(self, state: ModelState) -> dict[str, jax.Array]:
        return {"regime": state.latent["regime"].astype(state.log_level.dtype)}

    def sekai_draws(self, episode_key: jax.Array, n_steps: int) -> list[tuple[str, tuple, Any]]:
        steps, dtype = _check_steps(n_steps), _float()
        u0 = np.asarray(rng.uniform(episode_key, 0, _REGIME_INIT, 0, dtype=dtype), np.float64)
        u = np.asarray(rng.uniform(episode_key, _rows(steps), _REGIME, 0, dtype=dtype), np.float64)
        return [
            ("random", ((),), u0),
            ("random", ((steps,),), u),
            (
                "standard_normal",
                ((steps, self.n_assets),),
                self._normals(episode_key, steps, _PRICE, self.n_assets),
            ),
        ]
