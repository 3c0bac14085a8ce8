"""The shared machinery of the market models (`parallax.finance._models`).

- `MarketModel`: the base class, an immutable params pytree (leaves listed in `_leaves`,
  static fields in `_static`) with `init`, `step` (= `advance` of `draws`), `prices`,
  `record`, `simulate`, `sekai_draws` and `replace`;
- draw keys (`_normal_key`, `_uniform_key`) and `_draw`, which makes the draws of a list
  of keys, each once;
- `ModelState` (`log_level` and the model's `latent` dict) and `Simulation` (a whole path);
- the slot numbers shared by every model (`PRICE` is slot 0, as in the envs' market);
- sekai's argument checks (`_require`, `_vector`, `_cholesky`, ... with sekai's messages);
- numerics: `_correlate` (`z @ L.T` summed in a fixed order), `_ou` (exact OU transition),
  `_categorical` (sekai's rule), `_poisson` (inversion of a uniform).
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Sequence
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from ... import rng
from ...rng import Slot, SlotTable

_DT = 1 / 252

# Slot numbers. PRICE is slot 0, as in the envs' built-in GBM (`parallax.finance.SLOTS`),
# so `GBM` reproduces the envs' simulated market; slot 1 is the envs' START.
_PRICE, _VARIANCE, _JUMP_COUNT, _JUMP_SIZE, _REGIME_INIT, _REGIME, _BLOCK = 0, 2, 3, 4, 5, 6, 7
_CHOICE, _PARAM = 8, 9

_PRICE_SLOT = Slot(_PRICE, "PRICE", "step t: path row t -> t+1", "asset j", "normal(): shock")


def _slots(*extra: Slot) -> SlotTable:
    return SlotTable(_PRICE_SLOT, *extra)


# ----------------------------------------------------------------------------------- state
@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ModelState:
    """The state of a market model at one path row.

    Attributes:
        log_level: float `(n,)`, `log(price / s0)` at the current row.
        latent: the model's other state (variance, regime, spread, ...), a dict of arrays.
    """

    log_level: Any
    latent: Any


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Simulation:
    """A materialised path: `prices (n_steps + 1, n)` and sekai's `state` series."""

    prices: Any
    state: Any


# ------------------------------------------------------------------- sekai's validation
def _require(condition: Any, message: str) -> None:
    if not bool(condition):
        raise ValueError(message)


def _integer(name: str, value: Any) -> int:
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}.")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}.") from None


def _real(name: str, value: Any) -> float:
    arr = np.asarray(value, dtype=np.float64)
    _require(arr.ndim == 0, f"{name} must be a scalar, got shape {arr.shape}.")
    number = float(arr)
    _require(math.isfinite(number), f"{name} must be finite, got {number}.")
    return number


def _step_length(dt: Any) -> float:
    number = _real("dt", dt)
    _require(number > 0, f"dt must be positive, got {number}.")
    return number


def _asset_count(n_assets: Any, corr: Any, **params: Any) -> int:
    """The number of assets implied by `n_assets`, per-asset parameters and `corr`."""
    implied: list[tuple[str, int]] = []
    if n_assets is not None:
        count = _integer("n_assets", n_assets)
        _require(count >= 1, f"n_assets must be >= 1, got {count}.")
        implied.append(("n_assets", count))
    for name, value in params.items():
        if value is None:
            continue
        shape = np.shape(value)
        _require(len(shape) <= 1, f"{name} must be a scalar or a 1-D array, got shape {shape}.")
        if len(shape) == 1 and shape[0] != 1:
            _require(shape[0] >= 1, f"{name} must not be empty.")
            implied.append((name, shape[0]))
    if corr is not None and np.ndim(corr) == 2:
        implied.append(("corr", np.shape(corr)[0]))
    if not implied:
        return 1
    first, n = implied[0]
    for name, m in implied[1:]:
        _require(m == n, f"{name} implies {m} assets but {first} implies {n}.")
    return n


def _vector(name: str, value: Any, n: int) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    _require(
        arr.ndim == 0 or (arr.ndim == 1 and arr.shape[0] in (1, n)),
        f"{name} must be a scalar or an array of length {n}, got shape {arr.shape}.",
    )
    _require(np.all(np.isfinite(arr)), f"{name} must be finite.")
    return np.array(np.broadcast_to(arr, (n,)))


def _initial_prices(s0: Any, n: int) -> np.ndarray:
    out = _vector("s0", s0, n)
    _require(np.all(out > 0), "s0 must be strictly positive.")
    return out


def _cholesky(corr: Any, n: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    if corr is None:
        return None, None
    arr = np.asarray(corr, dtype=np.float64)
    _require(arr.shape == (n, n), f"corr must have shape ({n}, {n}), got {arr.shape}.")
    _require(np.all(np.isfinite(arr)), "corr must be finite.")
    _require(np.allclose(arr, arr.T, rtol=0.0, atol=1e-8), "corr must be symmetric.")
    _require(np.allclose(np.diag(arr), 1.0, rtol=0.0, atol=1e-8), "corr must have a unit diagonal.")
    try:
        lower = np.linalg.cholesky(arr)
    except np.linalg.LinAlgError:
        raise ValueError("corr must be positive definite.") from None
    return arr, lower


def _check_steps(n_steps: Any) -> int:
    steps = _integer("n_steps", n_steps)
    _require(steps >= 1, f"n_steps must be >= 1, got {steps}.")
    return steps


# --------------------------------------------------------------------------- numerics
def _float() -> Any:
    return jax.dtypes.canonicalize_dtype(jnp.float64)


def _f(x: Any, dtype: Any) -> jax.Array:
    return jnp.asarray(x, dtype)


def _correlate(z: jax.Array, chol: jax.Array | None) -> jax.Array:
    """`z @ chol.T` over the last axis, summed left to right (the same for any batch)."""
    if chol is None:
        return z
    n = z.shape[-1]
    out = z[..., :1] * chol[:, 0]
    for k in range(1, n):
        out = out + z[..., k : k + 1] * chol[:, k]
    return out


def _ou(theta: jax.Array, sigma: jax.Array, dt: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Exact Ornstein-Uhlenbeck transition `x' = x decay + scale z` (zero mean)."""
    decay = jnp.exp(-theta * dt)
    scale = sigma * jnp.sqrt(-jnp.expm1(-2.0 * theta * dt) / (2.0 * theta))
    return decay, scale


def _categorical(cumulative: Any, u: Any) -> jax.Array:
    """sekai's categorical draw: the number of cumulative probabilities <= u, capped."""
    k = cumulative.shape[-1]
    count = jnp.sum(
        (jnp.asarray(u)[..., None] >= jnp.asarray(cumulative)).astype(jnp.int32), axis=-1
    )
    return jnp.minimum(count, k - 1)


# The Poisson search first compares `u` with this many terms of the CDF at once (a function
# of the mean only, so one table serves every path when the mean is shared); only counts of
# at least this many go on to the sequential search. Jumps per step are rare (lambda dt is
# about 0.004 for sekai's defaults), so that search almost never runs an iteration.
_POISSON_TERMS = 2


def _poisson(u: jax.Array, mean: jax.Array) -> jax.Array:
    """Poisson counts by inversion of uniforms `u`: the smallest k with `CDF(k) > u`.

    Exact inversion for means up to 30: `u` is compared with the first `_POISSON_TERMS`
    terms of the CDF, then a sequential search (as long as the largest count of the batch)
    finishes the counts that reach them; the result is that of the search alone. Above 30,
    the rounded normal approximation `m + sqrt(m) Phi^-1(u)` (`Phi^-1(u) = sqrt(2)
    erfinv(2u - 1)`), computed only when some mean is above 30 (when the means are shared
    by the batch; under `vmap` over means, both are computed).
    """
    small = mean <= 30.0
    m = jnp.where(small, mean, 0.0)
    cap = m + 12.0 * jnp.sqrt(m) + 20.0

    # Terms j <= _POISSON_TERMS of the CDF, with the search's own arithmetic (a function of
    # the mean only): p_j = p_{j-1} m / j, cdf_j = cdf_{j-1} + p_j. For m >= 0, cdf_j rises
    # with j and `j < cap` holds for j < 20, so the number of j < _POISSON_TERMS with
    # `u >= cdf_j` is where the search would stop if below _POISSON_TERMS; a mean that gives
    # a NaN cap (m < 0) stops both at 0.
    shape = jnp.broadcast_shapes(u.shape, m.shape)
    p = jnp.exp(-m)
    cdf = p
    k = jnp.zeros(shape, jnp.int32)
    for j in range(_POISSON_TERMS):
        if j:
            p = p * m / jnp.asarray(j, u.dtype)
            cdf = cdf + p
        k = k + ((u >= cdf) & (j < cap)).astype(jnp.int32)
    p = p * m / jnp.asarray(_POISSON_TERMS, u.dtype)
    cdf = cdf + p

    def more(carry: tuple[jax.Array, jax.Array, jax.Array]) -> jax.Array:
        k, _, cdf = carry
        return jnp.any((u >= cdf) & (k.astype(u.dtype) < cap))

    def body(
        carry: tuple[jax.Array, jax.Array, jax.Array],
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        k, p, cdf = carry
        go = (u >= cdf) & (k.astype(u.dtype) < cap)
        k1 = k + go.astype(k.dtype)
        p = jnp.where(go, p * m / k1.astype(u.dtype), p)
        return k1, p, jnp.where(go, cdf + p, cdf)

    # The search goes on from term _POISSON_TERMS for every path: one whose count is smaller
    # has u < cdf_count <= cdf_{_POISSON_TERMS} and does not move.
    start = (k, jnp.broadcast_to(p, shape), jnp.broadcast_to(cdf, shape))
    k, _, _ = jax.lax.while_loop(more, body, start)

    def normal_approximation() -> jax.Array:
        z = jnp.sqrt(2.0) * jax.lax.erf_inv(2.0 * u - 1.0)
        return jnp.broadcast_to(
            jnp.maximum(jnp.floor(mean + jnp.sqrt(mean) * z + 0.5), 0.0), k.shape
        ).astype(u.dtype)

    big = jax.lax.cond(jnp.any(~small), normal_approximation, lambda: jnp.zeros(k.shape, u.dtype))
    return jnp.where(small, k.astype(u.dtype), big)


def _rows(n_steps: int) -> jax.Array:
    return jnp.arange(n_steps, dtype=jnp.uint32)


def _np(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


# ------------------------------------------------------------------------ step draws
# A step's random numbers are named by draw keys. `("normal", slot, width)` and
# `("uniform", slot, width)` are `rng.normal_vector` / `rng.uniform_vector(episode_key, row,
# slot, width)`: the same key is the same numbers in every model, so a mixture of models
# (`Randomized`) draws each once. Any other key (a tuple led by another word) belongs to the
# model that names it, which computes it in its own `draws`.
_SHARED_KINDS = ("normal", "uniform")


def _normal_key(slot: int, width: int) -> tuple[str, int, int]:
    return ("normal", slot, width)


def _uniform_key(slot: int, width: int) -> tuple[str, int, int]:
    return ("uniform", slot, width)


def _draw(
    episode_key: jax.Array, row: jax.Array, dtype: Any, keys: Sequence[tuple[Any, ...]]
) -> dict[tuple[Any, ...], jax.Array]:
    """The shared-kind draws named by `keys` (others are skipped), each made once.

    One `*_vector` call per key. (One call over a column of slots would compute the
    per-(episode, step) part of the hash once, 11 flops less per pair of normals, but XLA:CPU
    ran that program 4-10x slower, and its fusions contracted a correlated model's
    arithmetic differently.)
    """
    out: dict[tuple[Any, ...], jax.Array] = {}
    vectors = {"normal": rng.normal_vector, "uniform": rng.uniform_vector}
    for key in keys:
        if key[0] in vectors and key not in out:
            out[key] = vectors[key[0]](episode_key, row, key[1], key[2], dtype=dtype)
    return out


# ------------------------------------------------------------------------------- base
class MarketModel:
    """Base class: an immutable params pytree with pure `init`/`step` dynamics.

    Subclasses list their array leaves in `_leaves` and their static fields in `_static`;
    `replace(**changes)` swaps leaves without validation (usable under `jit`/`vmap`).
    """

    _leaves: ClassVar[tuple[str, ...]] = ()
    _static: ClassVar[tuple[str, ...]] = ("n_assets",)
    SLOTS: ClassVar[SlotTable]
    n_assets: int

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        jax.tree_util.register_pytree_with_keys(
            cls,
            lambda m: (
                tuple((jax.tree_util.GetAttrKey(k), getattr(m, k)) for k in m._leaves),
                tuple(getattr(m, k) for k in m._static),
            ),
            cls._unflatten,  # type: ignore[arg-type]
            lambda m: (
                tuple(getattr(m, k) for k in m._leaves),
                tuple(getattr(m, k) for k in m._static),
            ),
        )

    @classmethod
    def _unflatten(cls, static: tuple[Any, ...], leaves: Sequence[Any]) -> Any:
        out = object.__new__(cls)
        for name, value in zip(cls._static, static, strict=True):
            object.__setattr__(out, name, value)
        for name, value in zip(cls._leaves, leaves, strict=True):
            object.__setattr__(out, name, value)
        return out

    def _set(self, **fields: Any) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"{type(self).__name__} is immutable; build a new model or use .replace()."
        )

    @property
    def corr(self) -> np.ndarray | None:
        """The correlation matrix `chol @ chol.T` (None when uncorrelated)."""
        chol = getattr(self, "chol", None)
        if chol is None:
            return None
        out: np.ndarray = _np(chol) @ _np(chol).T
        return out

    def replace(self, **changes: Any) -> Any:
        """A copy with some leaves replaced (no validation; works on traced values)."""
        unknown = set(changes) - set(self._leaves)
        if unknown:
            raise ValueError(
                f"{type(self).__name__}.replace: unknown parameter(s) {sorted(unknown)}; "
                f"allowed: {list(self._leaves)}"
            )
        leaves = [changes.get(k, getattr(self, k)) for k in self._leaves]
        return self._unflatten(tuple(getattr(self, k) for k in self._static), leaves)

    def __repr__(self) -> str:
        fields = [f"{k}={getattr(self, k)!r}" for k in self._static if k != "n_assets"]
        for k in self._leaves:
            v = getattr(self, k)
            if v is None:
                continue
            try:
                arr = np.asarray(v)
                fields.append(f"{k}={arr.tolist() if arr.size <= 8 else '...'}")
            except Exception:  # a traced leaf
                fields.append(f"{k}=...")
        return f"{type(self).__name__}(n_assets={self.n_assets}, {', '.join(fields)})"

    # -- dynamics ------------------------------------------------------------------------
    def init(self, episode_key: jax.Array) -> ModelState:
        """The state at path row 0 (log level 0, prices `s0`)."""
        del episode_key
        return ModelState(jnp.zeros((self.n_assets,), _float()), {})

    def step(
        self, state: ModelState, episode_key: jax.Array, t: Any
    ) -> tuple[ModelState, jax.Array]:
        """Advance from path row `t` to `t + 1`; returns the new state and its prices.

        This is `advance(state, draws(episode_key, t, dtype))`, the dtype being the state's.
        """
        row = jnp.asarray(t, jnp.uint32)
        return self.advance(state, self.draws(episode_key, row, state.log_level.dtype))

    def draw_keys(self) -> tuple[tuple[Any, ...], ...]:
        """The keys of the random numbers one step uses (see `draws`)."""
        return ()

    def draws(
        self, episode_key: jax.Array, row: jax.Array, dtype: Any
    ) -> dict[tuple[Any, ...], jax.Array]:
        """The random numbers of the step from path row `row`, by draw key.

        `("normal", slot, width)` is `rng.normal_vector(episode_key, row, slot, width)` and
        `("uniform", slot, width)` the uniform one; a model with another key overrides this
        (its value may depend on the model's static fields, never on its float leaves).

        Args:
            episode_key: uint32 `(2,)`.
            row: uint32 `()`, the path row the step starts from.
            dtype: the float dtype of the state.
        """
        return _draw(episode_key, row, dtype, self.draw_keys())

    def advance(
        self, state: ModelState, draws: dict[tuple[Any, ...], jax.Array]
    ) -> tuple[ModelState, jax.Array]:
        """The step's arithmetic: the next state and its prices, given the step's `draws`."""
        raise NotImplementedError

    def prices(self, state: ModelState) -> jax.Array:
        """`s0 * exp(log_level)` of a state, float `(n,)`."""
        s0 = getattr(self, "s0")  # noqa: B009 (every model has s0)
        return _f(s0, state.log_level.dtype) * jnp.exp(state.log_level)

    def record(self, state: ModelState) -> dict[str, jax.Array]:
        """sekai's `Simulation.state` entries at the state's row."""
        del state
        return {}

    def simulate(self, episode_key: jax.Array, n_steps: int) -> Simulation:
        """A whole path: prices `(n_steps + 1, n)` and sekai's state series.

        Args:
            episode_key: uint32 `(2,)` from `parallax.rng.episode_key`.
            n_steps: number of steps (>= 1, static).
        """
        steps = _check_steps(n_steps)
        first = self.init(episode_key)

        def body(state: ModelState, t: jax.Array) -> tuple[ModelState, Any]:
            state, prices = self.step(state, episode_key, t)
            return state, (prices, self.record(state))

        _, (prices, records) = jax.lax.scan(body, first, _rows(steps))
        p0 = self.prices(first)[None]
        rec0 = self.record(first)
        return Simulation(
            jnp.concatenate([p0, prices], axis=0),
            {k: jnp.concatenate([rec0[k][None], v], axis=0) for k, v in records.items()},
        )

    def sekai_draws(self, episode_key: jax.Array, n_steps: int) -> list[tuple[str, tuple, Any]]:
        """The draws sekai's `simulate(rng, n_steps)` makes, in order, with our values.

        Each is `(method, args, value)` as `tests/finance_support.ReplayGenerator` takes
        them. Use with `jax_enable_x64` on: sekai's draws are float64.
        """
        raise NotImplementedError

    def _normals(self, episode_key: jax.Array, n_steps: int, slot: int, width: int) -> np.ndarray:
        return np.asarray(
            rng.normal_vector(episode_key, _rows(n_steps), slot, width, dtype=_float()),
            np.float64,
        )
