"""The model-step skeleton of the market models driven by the PRICE normals (`_Diffusion`).

- `_Diffusion`: a `MarketModel` whose step draws the normals of slot PRICE (one per asset),
  correlates them by `chol`, and hands them with its float leaves to the model's `_move`
  (its own dynamics); also the per-asset params plumbing (`_set_params`, sekai's checks in
  sekai's order) and sekai's draws of such a model (`standard_normal((n_steps, n))`);
- `_gbm_increment`: the GBM log increment `(mu - sigma^2/2) dt + sigma sqrt(dt) z`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._base import (
    _PRICE,
    MarketModel,
    ModelState,
    _asset_count,
    _check_steps,
    _cholesky,
    _correlate,
    _f,
    _initial_prices,
    _normal_key,
    _require,
    _slots,
    _step_length,
    _vector,
)

# A step's draws by draw key, the float leaves of a model by name, and what `_move` gives.
_Draws = dict[tuple[Any, ...], jax.Array]
_Params = dict[str, jax.Array]
_Moved = tuple[jax.Array, dict[str, jax.Array]]

# What a checked parameter must satisfy, as its message says it: `f"{name} must {rule}."`.
_RULES: dict[str, Callable[[np.ndarray], Any]] = {
    "be positive": lambda v: v > 0,
    "be non-negative": lambda v: v >= 0,
    "lie in [-1, 1]": lambda v: np.abs(v) <= 1,
}


def _gbm_increment(
    mu: jax.Array, sigma: jax.Array, dt: jax.Array, z: jax.Array, compensator: Any = None
) -> jax.Array:
    """`(mu - sigma^2/2 - compensator) dt + sigma sqrt(dt) z`, the GBM log increment.

    `compensator` (Merton's `lambda k`) is subtracted from the drift rate when given.
    """
    rate = mu - 0.5 * sigma**2
    if compensator is not None:
        rate = rate - compensator
    return rate * dt + sigma * jnp.sqrt(dt) * z


class _Diffusion(MarketModel):
    """A market model driven by the normals of slot PRICE (step t, index asset j).

    Its `step` is `advance(state, draws)`: `z = _shock(state, draws, dtype)` (the PRICE
    normals times `chol`, when the model has one), then the model's `_move(state, z, p,
    draws)` with `p` its float leaves but `chol` in the state's dtype, which gives the next
    `log_level` and `latent`; `prices` and sekai's draws follow. A subclass that draws more
    extends `draw_keys` (the PRICE normals first) and `sekai_draws`.
    """

    SLOTS = _slots()

    def _set_params(
        self,
        n_assets: Any,
        corr: Any,
        s0: Any,
        dt: Any,
        params: dict[str, Any],
        checks: dict[str, str],
        *,
        joint: Sequence[tuple[Callable[[dict[str, np.ndarray]], Any], str]] = (),
        defaults: Mapping[str, str] | None = None,
    ) -> None:
        """Set the per-asset parameters `params`, `s0`, `dt` and `chol`, with sekai's checks.

        In sekai's order: the asset count (of `n_assets`, `params`, `s0` and `corr`); the
        `checks` parameters as vectors (one left None takes the vector of `defaults[name]`),
        then each must `checks[name]` (a `_RULES` key), then each `joint` predicate of
        them holds (else its message); then `corr`, `dt`, the other parameters and `s0`.
        """
        n = _asset_count(n_assets, corr, **params, s0=s0)
        fallback = defaults or {}
        checked: dict[str, np.ndarray] = {}
        for name in checks:
            if params[name] is None and name in fallback:
                checked[name] = checked[fallback[name]]
            else:
                checked[name] = _vector(name, params[name], n)
        for name, rule in checks.items():
            _require(np.all(_RULES[rule](checked[name])), f"{name} must {rule}.")
        for holds, message in joint:
            _require(np.all(holds(checked)), message)
        _, chol = _cholesky(corr, n)
        step = np.float64(_step_length(dt))
        vectors = {k: checked[k] if k in checked else _vector(k, v, n) for k, v in params.items()}
        self._set(n_assets=n, dt=step, **vectors, s0=_initial_prices(s0, n), chol=chol)

    def draw_keys(self) -> tuple[tuple[Any, ...], ...]:
        return (_normal_key(_PRICE, self.n_assets),)

    def _shock(self, state: ModelState, draws: _Draws, dtype: Any) -> jax.Array:
        """The step's PRICE normals, correlated across assets by `chol` (if the model has it)."""
        del state
        chol = getattr(self, "chol", None)
        z = draws[_normal_key(_PRICE, self.n_assets)]
        return _correlate(z, None if chol is None else _f(chol, dtype))

    def _move(self, state: ModelState, z: jax.Array, p: _Params, draws: _Draws) -> _Moved:
        """The model's dynamics: the next `(log_level, latent)` from the shock `z`."""
        raise NotImplementedError

    def advance(self, state: ModelState, draws: _Draws) -> tuple[ModelState, jax.Array]:
        dtype = state.log_level.dtype
        z = self._shock(state, draws, dtype)
        p = {k: _f(getattr(self, k), dtype) for k in self._leaves if k != "chol"}
        new = ModelState(*self._move(state, z, p, draws))
        return new, self.prices(new)

    def sekai_draws(self, episode_key: jax.Array, n_steps: int) -> list[tuple[str, tuple, Any]]:
        steps = _check_steps(n_steps)
        z = self._normals(episode_key, steps, _PRICE, self.n_assets)
        return [("standard_normal", ((steps, self.n_assets),), z)]
