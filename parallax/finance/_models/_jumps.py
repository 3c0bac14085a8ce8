"""`MertonJumpDiffusion`: GBM plus compound-Poisson log-normal jumps."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ... import rng
from ...rng import Slot
from ._base import (
    _DT,
    _JUMP_COUNT,
    _JUMP_SIZE,
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
    _normal_key,
    _poisson,
    _require,
    _rows,
    _slots,
    _step_length,
    _uniform_key,
    _vector,
)


# ----------------------------------------------------------------------------- Merton
class MertonJumpDiffusion(MarketModel):
    """GBM plus compound-Poisson log-normal jumps (sekai `MertonJumpDiffusion`).

    Increment `(mu - sigma^2/2 - lambda k) dt + sigma sqrt(dt) (L z)_i + N m + sqrt(N) s w`
    with `k = expm1(m + s^2/2)`, `N ~ Poisson(lambda dt)` (inverted from the uniform of slot
    JUMP_COUNT), `w` slot JUMP_SIZE. State `"jumps"`: the count of the step ending at the row.

    Args:
        mu: as `GBM`.
        sigma: as `GBM`.
        jump_intensity: jumps per year (>= 0).
        jump_mean: mean of a log jump.
        jump_std: standard deviation of a log jump (>= 0).
        s0: as `GBM`.
        corr: as `GBM`.
        dt: as `GBM`.
        n_assets: as `GBM`.
    """

    _leaves = ("mu", "sigma", "jump_intensity", "jump_mean", "jump_std", "s0", "dt", "chol")
    mu: Any
    sigma: Any
    jump_intensity: Any
    jump_mean: Any
    jump_std: Any
    s0: Any
    dt: Any
    chol: Any
    SLOTS = _slots(
        Slot(_JUMP_COUNT, "JUMP_COUNT", "step t", "asset j", "uniform() -> Poisson(lambda dt)"),
        Slot(_JUMP_SIZE, "JUMP_SIZE", "step t", "asset j", "normal(): jump size shock"),
    )

    def __init__(
        self,
        mu: Any = 0.05,
        sigma: Any = 0.2,
        jump_intensity: Any = 1.0,
        jump_mean: Any = -0.05,
        jump_std: Any = 0.1,
        *,
        s0: Any = 100.0,
        corr: Any = None,
        dt: float = _DT,
        n_assets: int | None = None,
    ) -> None:
        n = _asset_count(
            n_assets,
            corr,
            mu=mu,
            sigma=sigma,
            jump_intensity=jump_intensity,
            jump_mean=jump_mean,
            jump_std=jump_std,
            s0=s0,
        )
        sig = _vector("sigma", sigma, n)
        lam = _vector("jump_intensity", jump_intensity, n)
        std = _vector("jump_std", jump_std, n)
        _require(np.all(sig >= 0), "sigma must be non-negative.")
        _require(np.all(lam >= 0), "jump_intensity must be non-negative.")
        _require(np.all(std >= 0), "jump_std must be non-negative.")
        _, chol = _cholesky(corr, n)
        self._set(
            n_assets=n,
            dt=np.float64(_step_length(dt)),
            mu=_vector("mu", mu, n),
            sigma=sig,
            jump_intensity=lam,
            jump_mean=_vector("jump_mean", jump_mean, n),
            jump_std=std,
            s0=_initial_prices(s0, n),
            chol=chol,
        )

    def init(self, episode_key: jax.Array) -> ModelState:
        zeros = jnp.zeros((self.n_assets,), _float())
        return ModelState(zeros, {"jumps": zeros})

    def _counts(self, u: jax.Array, dtype: Any) -> jax.Array:
        return _poisson(u, _f(self.jump_intensity, dtype) * _f(self.dt, dtype))

    def draw_keys(self) -> tuple[tuple[Any, ...], ...]:
        n = self.n_assets
        return (
            _normal_key(_PRICE, n),
            _uniform_key(_JUMP_COUNT, n),
            _normal_key(_JUMP_SIZE, n),
        )

    def advance(
        self, state: ModelState, draws: dict[tuple[Any, ...], jax.Array]
    ) -> tuple[ModelState, jax.Array]:
        dtype = state.log_level.dtype
        n = self.n_assets
        z = _correlate(
            draws[_normal_key(_PRICE, n)],
            None if self.chol is None else _f(self.chol, dtype),
        )
        counts = self._counts(draws[_uniform_key(_JUMP_COUNT, n)], dtype)
        w = draws[_normal_key(_JUMP_SIZE, n)]
        p = {k: _f(getattr(self, k), dtype) for k in self._leaves if k not in ("chol", "s0")}
        k = jnp.expm1(p["jump_mean"] + 0.5 * p["jump_std"] ** 2)
        drift = (p["mu"] - 0.5 * p["sigma"] ** 2 - p["jump_intensity"] * k) * p["dt"]
        jumps = counts * p["jump_mean"] + jnp.sqrt(counts) * p["jump_std"] * w
        inc = drift + p["sigma"] * jnp.sqrt(p["dt"]) * z + jumps
        new = ModelState(state.log_level + inc, {"jumps": counts})
        return new, self.prices(new)

    def record(self, state: ModelState) -> dict[str, jax.Array]:
        return {"jumps": state.latent["jumps"]}

    def sekai_draws(self, episode_key: jax.Array, n_steps: int) -> list[tuple[str, tuple, Any]]:
        steps, n = _check_steps(n_steps), self.n_assets
        counts = _all_counts(self, episode_key, steps)
        return [
            ("standard_normal", ((steps, n),), self._normals(episode_key, steps, _PRICE, n)),
            ("poisson", ((steps, n),), np.asarray(counts).astype(np.int64)),
            ("standard_normal", ((steps, n),), self._normals(episode_key, steps, _JUMP_SIZE, n)),
        ]


@functools.partial(jax.jit, static_argnums=2)
def _all_counts(model: MertonJumpDiffusion, episode_key: jax.Array, steps: int) -> jax.Array:
    def counts(row: jax.Array) -> jax.Array:
        u = rng.uniform_vector(episode_key, row, _JUMP_COUNT, model.n_assets, dtype=_float())
        return model._counts(u, _float())

    return jax.vmap(counts)(_rows(steps))
