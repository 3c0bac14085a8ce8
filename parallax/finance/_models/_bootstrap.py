"""`BlockBootstrap`: a circular block bootstrap of historical log returns."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ... import rng
from ...rng import Slot
from ._base import (
    _BLOCK,
    _DT,
    MarketModel,
    ModelState,
    _check_steps,
    _f,
    _initial_prices,
    _integer,
    _require,
    _rows,
    _slots,
    _step_length,
)


# --------------------------------------------------------------------- BlockBootstrap
class BlockBootstrap(MarketModel):
    """Circular block bootstrap of historical log returns (sekai `BlockBootstrap`).

    Block `b` (steps `b*B .. b*B + B - 1`, `B = block_size`) starts at a uniform row
    `randint(T)` (slot BLOCK, step b); step t uses return row `(start_b + t mod B) mod T`.

    Args:
        returns: per-step log returns `(T, n)` or `(T,)` (finite).
        block_size: rows per block, `1 <= block_size <= T`.
        s0: initial prices (> 0); dt: step length in years.
    """

    _leaves = ("returns", "block_size", "s0", "dt")
    returns: Any
    block_size: Any
    s0: Any
    dt: Any
    SLOTS = _slots(Slot(_BLOCK, "BLOCK", "step b: block b", "0", "randint(T): block start"))

    def __init__(
        self, returns: Any, *, block_size: int = 20, s0: Any = 100.0, dt: float = _DT
    ) -> None:
        data = np.asarray(returns, dtype=np.float64)
        if data.ndim == 1:
            data = data[:, None]
        _require(data.ndim == 2, f"returns must be 1-D or 2-D, got shape {data.shape}.")
        _require(data.shape[0] >= 1 and data.shape[1] >= 1, "returns must not be empty.")
        _require(np.all(np.isfinite(data)), "returns must be finite.")
        size = _integer("block_size", block_size)
        _require(
            1 <= size <= data.shape[0], f"block_size must be in [1, {data.shape[0]}], got {size}."
        )
        n = data.shape[1]
        self._set(
            n_assets=n,
            dt=np.float64(_step_length(dt)),
            returns=data,
            block_size=np.int32(size),
            s0=_initial_prices(s0, n),
        )

    def draw_keys(self) -> tuple[tuple[Any, ...], ...]:
        return (("bootstrap row", _BLOCK),)

    def draws(
        self, episode_key: jax.Array, row: jax.Array, dtype: Any
    ) -> dict[tuple[Any, ...], jax.Array]:
        n_rows = np.shape(self.returns)[0]
        size = jnp.asarray(self.block_size, jnp.int32)
        t = jnp.asarray(row, jnp.int32)
        block = (t // size).astype(jnp.uint32)
        start = rng.randint(episode_key, block, _BLOCK, 0, n_rows)
        return {("bootstrap row", _BLOCK): (start + t % size) % n_rows}

    def advance(
        self, state: ModelState, draws: dict[tuple[Any, ...], jax.Array]
    ) -> tuple[ModelState, jax.Array]:
        table = _f(self.returns, state.log_level.dtype)
        new = ModelState(state.log_level + table[draws[("bootstrap row", _BLOCK)]], {})
        return new, self.prices(new)

    def sekai_draws(self, episode_key: jax.Array, n_steps: int) -> list[tuple[str, tuple, Any]]:
        steps = _check_steps(n_steps)
        size, n_rows = int(self.block_size), int(np.shape(self.returns)[0])
        blocks = -(-steps // size)
        starts = rng.randint(episode_key, _rows(blocks), _BLOCK, 0, n_rows)
        return [("integers", (0, n_rows, (blocks,)), np.asarray(starts, np.int64))]
