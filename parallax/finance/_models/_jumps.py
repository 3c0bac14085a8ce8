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
    ModelState,
    _check_steps,
    _f,
    _float,
    _normal_key,
    _poisson,
    _rows,
    _slots,
    _uniform_key,
)
from ._diffusion import _Diffusion, _Draws, _gbm_increment, _Moved, _Params


# ----------------------------------------------------------------------------- Merton
class MertonJumpDiffusion(_Diffusion):
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
        params = {
            "mu": mu,
            "sigma": sigma,
            "jump_intensity": jump_intensity,
            "jump_mean": jump_mean,
            "jump_std": jump_std,
        }
        checks = dict.fromkeys(("sigma", "jump_intensity", "jump_std"), "be non-negative")
        self._set_params(n_assets, corr, s0, dt, params, checks)

    def init(self, episode_key: jax.Array) -> ModelState:
        zeros = jnp.zeros((self.n_assets,), _float())
        return ModelState(zeros, {"jumps": zeros})

    def _counts(self, u: jax.Array, dtype: Any) -> jax.Array:
        return _poisson(u, _f(self.jump_intensity, dtype) * _f(self.dt, dtype))

    def draw_keys(self) -> tuple[tuple[Any, ...], ...]:
        n = self.n_assets
        return (*super().draw_keys(), _uniform_key(_JUMP_COUNT, n), _normal_key(_JUMP_SIZE, n))

    def _move(self, state: ModelState, z: jax.Array, p: _Params, draws: _Draws) -> _Moved:
        n = self.n_assets
        counts = self._counts(draws[_uniform_key(_JUMP_COUNT, n)], state.log_level.dtype)
        w = draws[_normal_key(_JUMP_SIZE, n)]
        k = jnp.expm1(p["jump_mean"] + 0.5 * p["jump_std"] ** 2)
        compensator = p["jump_intensity"] * k
        diffusion = _gbm_increment(p["mu"], p["sigma"], p["dt"], z, compensator)
        jumps = counts * p["jump_mean"] + jnp.sqrt(counts) * p["jump_std"] * w
        return state.log_level + (diffusion + jumps), {"jumps": counts}

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
