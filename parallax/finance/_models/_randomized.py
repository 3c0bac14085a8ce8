"""`Randomized`: a distribution over models and parameter ranges, drawn per episode."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ... import rng
from ...rng import Slot, SlotTable
from ._base import (
    _CHOICE,
    _PARAM,
    _SHARED_KINDS,
    MarketModel,
    ModelState,
    _categorical,
    _check_steps,
    _draw,
    _f,
    _float,
    _np,
    _require,
)
from ._convert import from_sekai
from ._gbm import CointegratedPair
from ._regimes import RegimeSwitching


# ------------------------------------------------------------------------- Randomized
class Randomized(MarketModel):
    """A distribution over models and parameters, drawn per episode (fixed shapes).

    At `init` one of `models` is chosen (probabilities `probs`, uniform of slot CHOICE by
    sekai's categorical rule) and each ranged parameter of the chosen model is drawn as
    `low + (high - low) u` (slot PARAM, index `8 * c + f` for model `c`'s f-th range,
    broadcast over assets). `step` advances every model on one set of draws (a draw that
    several models use is made once) and keeps the chosen model's level, so its cost is the
    union of the models' draws plus the sum of their arithmetic, batched or not. sekai's
    `Randomized(factory)` takes arbitrary Python; this is the traceable equivalent (a
    factory that draws `random()` for the choice, then one `random()` per range in order,
    and builds the model, gives sekai the same path).

    Args:
        models: one model or a sequence of models (not `Randomized`) sharing n_assets and dt.
        ranges: for each model, a mapping `parameter -> (low, high)` (or None); a single
            mapping when one model is given.
        probs: `(K,)` choice probabilities; default uniform.

    Raises:
        TypeError: a non-model, or a callable factory (arbitrary Python cannot be traced).
        ValueError: models that differ in n_assets or dt, unknown or non-float parameter
            names, `low > high`, non-finite bounds, or bounds outside the parameter's
            valid range (checked by rebuilding the model at each corner).
    """

    _leaves = ("models", "lows", "highs", "cum_probs")
    _static = ("n_assets", "names")
    models: Any
    lows: Any
    highs: Any
    cum_probs: Any
    names: Any
    SLOTS = SlotTable(
        Slot(_CHOICE, "CHOICE", "step 0", "0", "uniform(): the model"),
        Slot(_PARAM, "PARAM", "step 0", "8 c + f", "uniform(): parameter f of model c"),
    )

    def __init__(self, models: Any, ranges: Any = None, *, probs: Any = None) -> None:
        if callable(models) and not isinstance(models, MarketModel):
            raise TypeError(
                "factory must be a model or a sequence of models with parameter ranges; an "
                "arbitrary Python factory cannot be traced (Randomized(models, ranges))."
            )
        single = isinstance(models, MarketModel) or not isinstance(models, Sequence)
        seq = [models] if single else list(models)
        if ranges is None:
            rng_list: list[Any] = [None] * len(seq)
        elif single or isinstance(ranges, Mapping):
            rng_list = [ranges] if single else [ranges] * len(seq)
        else:
            rng_list = list(ranges)
        _require(len(seq) >= 1, "models must contain at least one model.")
        _require(
            len(rng_list) == len(seq),
            f"ranges must have one entry per model ({len(seq)}), got {len(rng_list)}.",
        )
        converted = []
        for m in seq:
            if not isinstance(m, MarketModel) and type(m).__module__.startswith("sekai"):
                m = from_sekai(m)
            if not isinstance(m, MarketModel):
                raise TypeError(f"models must be market models, got {type(m).__name__}.")
            if isinstance(m, Randomized):
                raise TypeError("models must not be Randomized (nest the choices instead).")
            converted.append(m)
        first = converted[0]
        for m in converted[1:]:
            _require(m.n_assets == first.n_assets, "all models must share n_assets.")
            same_dt = float(getattr(m, "dt")) == float(getattr(first, "dt"))  # noqa: B009
            _require(same_dt, "all models must share dt.")
        names: list[tuple[str, ...]] = []
        lows: list[np.ndarray] = []
        highs: list[np.ndarray] = []
        for c, (m, spec) in enumerate(zip(converted, rng_list, strict=True)):
            spec = dict(spec or {})
            _require(len(spec) <= 8, f"ranges[{c}] has more than 8 parameters.")
            lo, hi = [], []
            for name, bounds in spec.items():
                value = getattr(m, name, None) if name in m._leaves else None
                if value is None or np.asarray(value).dtype.kind != "f" or name == "chol":
                    allowed = [k for k in m._leaves if k not in ("chol", "returns", "block_size")]
                    raise ValueError(
                        f"ranges[{c}]: {name!r} is not a float parameter of "
                        f"{type(m).__name__}; allowed: {allowed}"
                    )
                pair = np.asarray(bounds, dtype=np.float64)
                _require(
                    pair.shape == (2,) and np.all(np.isfinite(pair)) and pair[0] <= pair[1],
                    f"ranges[{c}][{name!r}] must be finite (low, high) with low <= high, "
                    f"got {bounds!r}.",
                )
                lo.append(pair[0])
                hi.append(pair[1])
            _check_corners(m, spec, c)
            names.append(tuple(spec))
            lows.append(np.asarray(lo, np.float64))
            highs.append(np.asarray(hi, np.float64))
        k = len(converted)
        p = np.full(k, 1.0 / k) if probs is None else np.asarray(probs, dtype=np.float64)
        _require(p.shape == (k,), f"probs must have shape ({k},), got {p.shape}.")
        _require(
            np.all(np.isfinite(p)) and np.all(p >= 0), "probs must be finite and non-negative."
        )
        _require(abs(p.sum() - 1.0) <= 1e-8, "probs must sum to 1.")
        self._set(
            n_assets=first.n_assets,
            names=tuple(names),
            models=tuple(converted),
            lows=tuple(lows),
            highs=tuple(highs),
            cum_probs=np.cumsum(p),
        )

    @property
    def dt(self) -> Any:
        """The shared step length of the models."""
        return self.models[0].dt

    @property
    def s0(self) -> Any:
        """The first model's initial prices (each model keeps its own)."""
        return self.models[0].s0

    def draw(self, episode_key: jax.Array) -> tuple[jax.Array, tuple[MarketModel, ...]]:
        """The episode's model index and every model with its ranged parameters drawn."""
        dtype = _float()
        u = rng.uniform(episode_key, 0, _CHOICE, 0, dtype=dtype)
        choice = _categorical(_f(self.cum_probs, dtype), u).astype(jnp.int32)
        drawn = []
        for c, m in enumerate(self.models):
            changes = {}
            for f, name in enumerate(self.names[c]):
                uf = rng.uniform(episode_key, 0, _PARAM, 8 * c + f, dtype=dtype)
                lo, hi = _f(self.lows[c][f], dtype), _f(self.highs[c][f], dtype)
                value = lo + (hi - lo) * uf
                changes[name] = jnp.broadcast_to(value, np.shape(getattr(m, name)))
            fixed = m.replace(**changes)
            drawn.append(
                jax.tree.map(
                    lambda x: (
                        _f(x, dtype) if jnp.issubdtype(x.dtype, jnp.floating) else jnp.asarray(x)
                    ),
                    fixed,
                )
            )
        return choice, tuple(drawn)

    def init(self, episode_key: jax.Array) -> ModelState:
        choice, drawn = self.draw(episode_key)
        states = tuple(m.init(episode_key) for m in drawn)
        level = jnp.stack([s.log_level for s in states])[choice]
        return ModelState(level, {"choice": choice, "models": drawn, "states": states})

    def _model_keys(self, c: int) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
        """`(key in model c, key here)`: shared kinds keep their key, others get `c` first."""
        return [
            (key, key if key[0] in _SHARED_KINDS else (c, *key))
            for key in self.models[c].draw_keys()
        ]

    def draw_keys(self) -> tuple[tuple[Any, ...], ...]:
        keys: dict[tuple[Any, ...], None] = {}
        for c in range(len(self.models)):
            keys.update((here, None) for _, here in self._model_keys(c))
        return tuple(keys)

    def draws(
        self, episode_key: jax.Array, row: jax.Array, dtype: Any
    ) -> dict[tuple[Any, ...], jax.Array]:
        out = _draw(episode_key, row, dtype, self.draw_keys())
        for c, m in enumerate(self.models):
            own = [(key, here) for key, here in self._model_keys(c) if here not in out]
            if own:
                values = m.draws(episode_key, row, dtype)
                out.update((here, values[key]) for key, here in own)
        return out

    def advance(
        self, state: ModelState, draws: dict[tuple[Any, ...], jax.Array]
    ) -> tuple[ModelState, jax.Array]:
        """Every model advances on the shared draws; the level is the chosen model's.

        Under `vmap` a `lax.switch` over the models would run every branch anyway, each with
        its own draws, and select every model's state; here each draw is made once and only
        the level is selected. Each model's state is the one its own `step` gives.
        """
        drawn, states = state.latent["models"], state.latent["states"]
        new_states = tuple(
            m.advance(s, {key: draws[here] for key, here in self._model_keys(c)})[0]
            for c, (m, s) in enumerate(zip(drawn, states, strict=True))
        )
        choice = state.latent["choice"]
        level = jax.lax.select_n(choice, *(s.log_level for s in new_states))
        new = ModelState(level, {"choice": choice, "models": drawn, "states": new_states})
        return new, self.prices(new)

    def prices(self, state: ModelState) -> jax.Array:
        """The chosen model's `s0 * exp(log_level)` (its own `prices`, bit for bit)."""
        dtype = state.log_level.dtype
        s0 = [
            jnp.broadcast_to(_f(getattr(m, "s0"), dtype), (self.n_assets,))  # noqa: B009
            for m in state.latent["models"]
        ]
        return jax.lax.select_n(state.latent["choice"], *s0) * jnp.exp(state.log_level)

    def record(self, state: ModelState) -> dict[str, jax.Array]:
        return {"choice": state.latent["choice"]}

    def sekai_draws(self, episode_key: jax.Array, n_steps: int) -> list[tuple[str, tuple, Any]]:
        """The draws of a sekai factory that mirrors this distribution (see the class doc)."""
        steps, dtype = _check_steps(n_steps), _float()
        choice = int(
            _categorical(
                _np(self.cum_probs),
                np.float64(rng.uniform(episode_key, 0, _CHOICE, 0, dtype=dtype)),
            )
        )
        out: list[tuple[str, tuple, Any]] = [
            ("random", (), float(rng.uniform(episode_key, 0, _CHOICE, 0, dtype=dtype)))
        ]
        for f in range(len(self.names[choice])):
            uf = rng.uniform(episode_key, 0, _PARAM, 8 * choice + f, dtype=dtype)
            out.append(("random", (), float(uf)))
        _, drawn = self.draw(episode_key)
        return out + drawn[choice].sekai_draws(episode_key, steps)


def _check_corners(model: MarketModel, spec: Mapping[str, Any], c: int) -> None:
    """Rebuild `model` at every corner of the ranges' box: bounds must be valid values."""
    if not spec:
        return
    if isinstance(model, RegimeSwitching):
        raise ValueError(f"ranges[{c}]: parameter ranges are not supported for RegimeSwitching.")
    kwargs = _kwargs(model)
    names = list(spec)
    for corner in itertools.product((0, 1), repeat=len(names)):
        trial = dict(kwargs)
        for name, side in zip(names, corner, strict=True):
            trial[name] = float(np.asarray(spec[name], np.float64)[side])
        try:
            type(model)(**trial)
        except (ValueError, TypeError) as err:
            raise ValueError(
                f"ranges[{c}]: the corner {dict(zip(names, corner, strict=True))} "
                f"(0 = low, 1 = high) gives an invalid {type(model).__name__}: {err}"
            ) from None


def _kwargs(model: MarketModel) -> dict[str, Any]:
    """Constructor arguments that rebuild a (non-regime, non-randomized) model."""
    out: dict[str, Any] = {}
    for k in model._leaves:
        if k in ("chol",):
            continue
        v = getattr(model, k)
        out[k] = np.asarray(v) if k != "block_size" else int(v)
    if "chol" in model._leaves:
        chol = getattr(model, "chol")  # noqa: B009
        out["corr"] = None if chol is None else _np(chol) @ _np(chol).T
    out["dt"] = float(out["dt"])
    if isinstance(model, CointegratedPair):
        for k in ("mu", "sigma", "theta", "spread_sigma"):
            out[k] = float(out[k])
    return out
