"""Full PPO runs of `parallax.train`: learning curves and final scores for the docs.

For each environment, trains `--seeds` seeds in one `jit(vmap(train))`, evaluates every
trained policy (deterministic actions) against a random policy and, for the finance envs,
the closed-form baseline on the same 256 episodes, and writes

- `docs/assets/ppo_<env>.png`: the training return per update (mean and range over seeds)
  with the evaluation scores as horizontal lines;
- `docs/assets/ppo_results.json`: the numbers (per seed and averaged) and the runtimes.

Usage (a few minutes per env on a laptop CPU; gymnax/CartPole-v1 needs gymnax):

    python benchmarks/ppo_learning.py [--envs OptimalExecution-v0 MarketMaking-v0 ...]
                                      [--seeds 3] [--out docs/assets]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import time
import warnings
from typing import Any

import jax
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_ENVS = ("OptimalExecution-v0", "MarketMaking-v0", "gymnax/CartPole-v1")


def _load_ppo() -> Any:
    from parallax import train

    return train


def run_env(ppo: Any, env_id: str, seeds: int) -> dict[str, Any]:
    """Train `seeds` seeds of the preset for `env_id` in one jit; evaluate each."""
    config = ppo.preset(env_id)
    train = jax.jit(jax.vmap(ppo.make_train(config)))
    start = time.perf_counter()
    out = jax.block_until_ready(train(jax.random.split(jax.random.key(0), seeds)))
    seconds = time.perf_counter() - start
    evaluate = jax.jit(ppo.make_evaluate(config))
    per_seed = []
    for i in range(seeds):
        params = jax.tree.map(lambda x, i=i: x[i], out["params"])
        state = jax.tree.map(lambda x, i=i: x[i], out["env_state"])
        scores = evaluate(jax.random.key(10_000), params, state)
        per_seed.append({k: float(v) for k, v in scores.items()})
    mean = {k: float(np.mean([s[k] for s in per_seed])) for k in per_seed[0]}
    curves = np.asarray(out["metrics"]["mean_return"], dtype=np.float64)
    return {
        "env": env_id,
        "config": {k: v for k, v in vars(config).items() if k != "env_kwargs"},
        "total_steps_per_seed": config.num_updates * config.num_envs * config.num_steps,
        "seeds": seeds,
        "train_seconds_all_seeds": round(seconds, 1),
        "mean": mean,
        "per_seed": per_seed,
        "steps": [(u + 1) * config.num_envs * config.num_steps for u in range(config.num_updates)],
        "curves": curves.tolist(),
    }


def plot(result: dict[str, Any], path: pathlib.Path) -> None:
    """Training return per update (mean and range over seeds) and the evaluation lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.asarray(result["steps"])
    curves = np.asarray(result["curves"], dtype=np.float64)
    with warnings.catch_warnings():  # updates before the first finished episode are NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(curves, axis=0)
        low, high = np.nanmin(curves, axis=0), np.nanmax(curves, axis=0)
    keep = np.isfinite(mean)  # an update in which no episode finished has no return
    steps, mean, low, high = steps[keep], mean[keep], low[keep], high[keep]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, mean, color="C0", label="PPO training return (stochastic policy)")
    ax.fill_between(steps, low, high, color="C0", alpha=0.2, linewidth=0)
    lines = [
        ("mean_episode_reward", "PPO evaluation (deterministic)", "C0", "--"),
        ("baseline_reward", "closed-form baseline", "C2", "-"),
        ("random_policy_reward", "random policy", "C3", ":"),
        ("sell_all_reward", "sell everything at once", "C7", "-."),
    ]
    for key, label, color, style in lines:
        if key in result["mean"]:
            ax.axhline(
                result["mean"][key],
                color=color,
                linestyle=style,
                label=f"{label}: {result['mean'][key]:.1f}",
            )
    ax.set_xlabel("environment steps (per seed)")
    ax.set_ylabel("mean episode reward")
    ax.set_title(f"PPO on {result['env']} ({result['seeds']} seeds)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(DEFAULT_ENVS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "docs" / "assets"))
    args = parser.parse_args(argv)
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    ppo = _load_ppo()
    results_path = out_dir / "ppo_results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    results["machine"] = {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": __import__("os").cpu_count(),
    }
    for env_id in args.envs:
        result = run_env(ppo, env_id, args.seeds)
        name = env_id.replace("/", "_").replace("-v", "_v").lower()
        plot(result, out_dir / f"ppo_{name}.png")
        results.setdefault("runs", {})[env_id] = result
        print(
            json.dumps(
                {
                    "env": env_id,
                    **result["mean"],
                    "train_seconds_all_seeds": result["train_seconds_all_seeds"],
                }
            ),
            flush=True,
        )
        results_path.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
