"""Sample paths of every market model of `parallax.finance`, one panel each.

Each model runs 16 one-year paths (252 daily steps) at once under `jax.vmap`, every path
from its own episode key; the figure is the one on the documentation's "Market models"
page (`docs/assets/finance_model_paths.png`).

    python examples/market_models.py --out docs/assets/finance_model_paths.png
"""

from __future__ import annotations

import argparse
from typing import Any

import jax
import numpy as np

from parallax import finance as pf
from parallax import rng


def models() -> dict[str, pf.MarketModel]:
    """One instance of each model with sekai's defaults, and a few settings that show it."""
    return {
        "GBM": pf.GBM(mu=0.05, sigma=0.2),
        "Heston": pf.Heston(),
        "MertonJumpDiffusion": pf.MertonJumpDiffusion(jump_intensity=3.0, jump_mean=-0.05),
        "RegimeSwitching": pf.RegimeSwitching(
            [pf.GBM(0.1, 0.1), pf.GBM(-0.3, 0.5)], [[0.98, 0.02], [0.1, 0.9]]
        ),
        "GARCH": pf.GARCH(),
        "MeanReverting": pf.MeanReverting(theta=5.0, mean=100.0),
        "CointegratedPair": pf.CointegratedPair(),
        "BlockBootstrap": pf.BlockBootstrap(
            returns=np.random.default_rng(0).normal(0.0003, 0.01, size=500), block_size=20
        ),
    }


def sample_paths(model: pf.MarketModel, num_paths: int, steps: int, seed: int = 0) -> np.ndarray:
    """`(num_paths, steps + 1, n_assets)` prices, each path from its own episode key."""
    keys = rng.episode_key(jax.random.split(jax.random.key(seed), num_paths))
    return np.asarray(jax.jit(jax.vmap(lambda k: model.simulate(k, steps).prices))(keys))


def figure(num_paths: int = 16, steps: int = 252) -> Any:
    """A grid of panels: the sample paths of each model (first asset; both of the pair)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = models()
    fig, axes = plt.subplots(2, 4, figsize=(14, 6), sharex=True)
    days = np.arange(steps + 1)
    for ax, (name, model) in zip(axes.ravel(), chosen.items()):
        paths = sample_paths(model, num_paths, steps)
        assets = range(paths.shape[-1]) if name == "CointegratedPair" else [0]
        for asset in assets:
            for path in paths[: num_paths // len(assets), :, asset]:
                ax.plot(days, path, lw=0.7, alpha=0.7, color=f"C{asset}")
        ax.set_title(name, fontsize=10)
    for ax in axes[-1]:
        ax.set_xlabel("step (days)")
    fig.suptitle(f"{num_paths} sample paths per model, parallax.finance market models")
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="finance_model_paths.png")
    parser.add_argument("--paths", type=int, default=16)
    parser.add_argument("--steps", type=int, default=252)
    args = parser.parse_args(argv)
    figure(args.paths, args.steps).savefig(args.out, dpi=80)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
