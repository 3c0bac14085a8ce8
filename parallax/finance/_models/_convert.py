"""`from_sekai`: our model equivalent to a sekai 0.2.0 market model."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._base import (
    MarketModel,
)
from ._bootstrap import BlockBootstrap
from ._gbm import GBM, CointegratedPair, MeanReverting
from ._jumps import MertonJumpDiffusion
from ._regimes import RegimeSwitching
from ._volatility import GARCH, Heston

# --------------------------------------------------------------------------- from_sekai
_SEKAI_NAMES = (
    "GBM",
    "Heston",
    "MertonJumpDiffusion",
    "GARCH",
    "MeanReverting",
    "CointegratedPair",
    "BlockBootstrap",
)


def from_sekai(model: Any) -> MarketModel:
    """Our equivalent of a sekai 0.2.0 market model (`sekai.finance.simulators`).

    Accepts GBM, Heston, MertonJumpDiffusion, RegimeSwitching, GARCH, MeanReverting,
    CointegratedPair and BlockBootstrap (our models are returned as they are).

    Raises:
        TypeError: for sekai's `Randomized` (its factory is arbitrary Python; build our
            `Randomized(models, ranges)` instead), `ListingProcess`, or a non-model.
    """
    if isinstance(model, MarketModel):
        return model
    name = type(model).__name__
    if not type(model).__module__.startswith("sekai"):
        raise TypeError(f"from_sekai expects a sekai market model, got {name}.")
    if name == "Randomized":
        raise TypeError(
            "sekai's Randomized takes an arbitrary Python factory, which cannot be traced; "
            "build parallax.finance.Randomized(models, ranges) instead."
        )
    if name == "RegimeSwitching":
        return RegimeSwitching(
            [from_sekai(m) for m in model.regimes], model.transition, initial=model.initial
        )
    if name not in _SEKAI_NAMES:
        raise TypeError(f"from_sekai: unsupported model {name}.")
    corr = getattr(model, "corr", None)
    common: dict[str, Any] = {"s0": np.asarray(model.s0), "dt": float(model.dt)}
    if name == "GBM":
        return GBM(model.mu, model.sigma, corr=corr, n_assets=model.n_assets, **common)
    if name == "Heston":
        return Heston(
            model.mu, model.kappa, model.theta, model.xi, model.rho,
            v0=model.v0, corr=corr, n_assets=model.n_assets, **common,
        )  # fmt: skip
    if name == "MertonJumpDiffusion":
        return MertonJumpDiffusion(
            model.mu, model.sigma, model.jump_intensity, model.jump_mean, model.jump_std,
            corr=corr, n_assets=model.n_assets, **common,
        )  # fmt: skip
    if name == "GARCH":
        return GARCH(
            model.omega, model.alpha, model.beta, mu=model.mu, corr=corr,
            n_assets=model.n_assets, **common,
        )  # fmt: skip
    if name == "MeanReverting":
        return MeanReverting(
            model.theta, model.mean, model.sigma, corr=corr, n_assets=model.n_assets, **common
        )
    if name == "CointegratedPair":
        return CointegratedPair(model.mu, model.sigma, model.theta, model.spread_sigma, **common)
    return BlockBootstrap(model.returns, block_size=model.block_size, **common)
