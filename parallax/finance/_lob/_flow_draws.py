"""The random draws of the background flow: the slot table and the uniforms' transforms.

- `FLOW_SLOTS`: the `parallax.rng` slot table of every draw the flow makes.
- `_flow_draw`: a draw's uniform, in the flow's float type (`_float`).
- `_exponential_from_uniform`, `_offset_from_uniform`: a waiting time and a limit order's
  offset from a uniform.
- `_size_table`, `_size_from_table`, `_size_from_uniform`: an order's size,
  `1 + Poisson(mean_size - 1)`, from a uniform by inversion.

Which draw of which slot an iteration takes is the loop's (`_flow_state._draws`); see
`_flow` for how the draws are indexed.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ... import rng

__all__ = ["FLOW_SLOTS"]


FLOW_SLOTS = rng.SlotTable(
    rng.Slot(0, "INIT_SIZE", "initialise (decision 0)", "order j of the seed book", "uniform"),
    rng.Slot(1, "WAIT", "every event", "n-th event of the interval", "uniform -> exponential"),
    rng.Slot(2, "EVENT", "every event", "n-th event of the interval", "uniform (event type)"),
    rng.Slot(3, "OFFSET", "every limit order", "n-th limit order", "uniform -> offset"),
    rng.Slot(4, "SIZE", "every order", "n-th order", "uniform -> 1 + Poisson(mean_size - 1)"),
    rng.Slot(5, "CANCEL", "every cancellation", "n-th cancellation", "randint(n_background)"),
)
"""The draws of the flow; the step of each draw is the decision index."""


def _float() -> Any:
    return jnp.zeros(()).dtype  # float64 under jax_enable_x64, else float32


def _size_from_uniform(u: jax.Array, mean_size: jax.Array) -> jax.Array:
    """`1 + Poisson(mean_size - 1)` by inversion of `u` (sekai: `1 + rng.poisson(...)`).

    Elementwise over `u` and `mean_size` (broadcast): `_size_from_table` with each mean's
    `_size_table`. The flow's loop builds the table once an interval instead.
    """

    def one(u: jax.Array, mean_size: jax.Array) -> jax.Array:
        return _size_from_table(u, _size_table(mean_size, u.dtype))

    return jnp.vectorize(one)(u, jnp.asarray(mean_size, u.dtype))


# Terms in a size table: at the default `mean_size` (3) a count reaches them with
# probability about 1e-10; a count that does finishes by the sequential search.
_SIZE_TERMS = 16


class _SizeTable(NamedTuple):
    """The first CDF terms of `1 + Poisson(mean_size - 1)` (see `_size_table`)."""

    cdf: jax.Array  # (_SIZE_TERMS + 1,): cdf_0 .. cdf_K, K = _SIZE_TERMS
    p: jax.Array  # p_K, the last term
    mean: jax.Array  # mean_size - 1


def _size_table(mean_size: jax.Array, dtype: Any) -> _SizeTable:
    """The CDF terms `_size_from_table` inverts, for one `mean_size`.

    With `m = mean_size - 1` (0 above 30, where the normal approximation takes over):
    `p_0 = exp(-m)`, `p_j = p_{j-1} m / j`, `cdf_j = cdf_{j-1} + p_j`. They are built by a
    loop whose trip count XLA cannot see, so every `/ j` stays a division, as in the
    search that goes on from the table: a constant `j` would let XLA multiply by `1 / j`
    or, for `j = 1`, fuse the term into a multiply-add, either of which can move a term
    by one unit in the last place.
    """
    mean = jnp.asarray(mean_size, dtype) - 1.0
    m = jnp.where(mean <= 30.0, mean, 0.0)
    p0 = jnp.exp(-m)
    cdf0 = jnp.full(_SIZE_TERMS + 1, jnp.nan, dtype).at[0].set(p0)

    def more(carry: Any) -> jax.Array:
        j, p, _, _ = carry
        return (j < _SIZE_TERMS) & (p >= 0)  # (a NaN mean stops at once: no count)

    def term(carry: Any) -> Any:
        j, p, cdf, table = carry
        j1 = j + 1
        p = p * m / j1.astype(dtype)
        cdf = cdf + p
        return j1, p, cdf, table.at[j1].set(cdf)

    _, p, _, cdf = lax.while_loop(more, term, (jnp.int32(0), p0, p0, cdf0))
    return _SizeTable(cdf=cdf, p=p, mean=mean)


def _size_from_table(u: jax.Array, table: _SizeTable) -> jax.Array:
    """`1 + Poisson(mean_size - 1)` for a uniform `u` `()` by inversion: the smallest `k`
    with `u < cdf_k`, exactly, for `mean_size <= 31`; above, the rounded normal
    approximation `m + sqrt(m) Phi^-1(u)` (sekai's sizes are `1 + rng.poisson(...)`).

    The count is the number of the table's first `_SIZE_TERMS` terms that `u` reaches
    (they rise with `k`); only a `u` that reaches the last one goes on to a sequential
    search. So the flow's loop, which draws a size in most iterations, no longer turns a
    search loop of its own each time (at N = 1024 about six turns of some eight small
    kernels an iteration, a tenth of a step).
    """
    mean = table.mean
    small = mean <= 30.0
    m = jnp.where(small, mean, 0.0)
    cap = m + 12.0 * jnp.sqrt(m) + 20.0  # a guard: no count goes beyond
    j = jnp.arange(_SIZE_TERMS, dtype=u.dtype)
    k = jnp.sum((u >= table.cdf[:_SIZE_TERMS]) & (j < cap), dtype=jnp.int32)

    def go_on(carry: Any) -> jax.Array:
        k, _, cdf = carry
        return (u >= cdf) & (k.astype(u.dtype) < cap)

    def search(carry: Any) -> Any:
        k, p, cdf = carry
        k1 = k + 1
        p = p * m / k1.astype(u.dtype)
        return k1, p, cdf + p

    k, _, _ = lax.while_loop(go_on, search, (k, table.p, table.cdf[_SIZE_TERMS]))

    def normal_approximation() -> jax.Array:
        z = jnp.sqrt(2.0) * lax.erf_inv(2.0 * u - 1.0)
        return jnp.maximum(jnp.floor(mean + jnp.sqrt(mean) * z + 0.5), 0.0).astype(u.dtype)

    big = lax.cond(~small, normal_approximation, lambda: jnp.zeros((), u.dtype))
    return 1 + jnp.where(small, k.astype(u.dtype), big).astype(jnp.int32)


def _exponential_from_uniform(u: jax.Array) -> jax.Array:
    """A standard exponential waiting time, `-log1p(-u)`."""
    return -jnp.log1p(-u)


def _offset_from_uniform(u: jax.Array, max_offset: jax.Array, decay: jax.Array) -> jax.Array:
    """sekai's truncated-geometric offset in `1..max_offset` from a uniform `u`."""
    n = max_offset.astype(u.dtype)
    safe = jnp.where(decay > 0, decay, 1.0)
    geometric = jnp.ceil(-jnp.log1p(u * jnp.expm1(-safe * n)) / safe)
    uniform = jnp.floor(u * n) + 1.0
    k = jnp.where(decay > 0, geometric, uniform)
    return jnp.clip(k, 1.0, n).astype(jnp.int32)


def _flow_draw(episode_key: Any, decision_index: Any, slot: int, index: Any) -> jax.Array:
    """The uniform the flow uses for draw `index` of `slot` (float64 under x64)."""
    return rng.uniform(episode_key, decision_index, slot, index, dtype=_float())
