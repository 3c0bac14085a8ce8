"""Train PPO (`parallax.train`) on a registered environment from the command line.

    python examples/ppo.py --env OptimalExecution-v0 --total-steps 300000 --seed 0

prints a progress bar while training (unless `--no-progress`) and ends with one JSON line:
`env`, `seed`, `total_steps`, `mean_episode_reward` (trained policy, deterministic actions),
`random_policy_reward`, `baseline_reward` (finance envs), `sell_all_reward`
(OptimalExecution-v0), `train_seconds`, and the learning curve's last training return.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from parallax import train


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--env", default="GridWorld-v0", help="a registered id, e.g. OptimalExecution-v0"
    )
    parser.add_argument("--total-steps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-envs", type=int, default=None)
    parser.add_argument("--num-steps", type=int, default=None, help="rollout length per update")
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    config = train.preset(
        args.env,
        total_steps=args.total_steps,
        num_envs=args.num_envs,
        num_steps=args.num_steps,
        lr=args.lr,
    )
    result = train.run(config, seed=args.seed, progress=not args.no_progress)
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
