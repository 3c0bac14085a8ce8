"""The Python side of the `parallax bench` command: time a batched env's jitted rollout.

- `benchmark(env_id, num_envs, ...)`: one measurement (one batch size), the dict that
  `parallax bench --json` prints (steps per second, compile time, memory, episodes ended,
  and the ratio to a competitor when `compare=` names one);
- `format_table(results)`: the table the command prints;
- `plot_scaling(results, path)`: the steps/s-vs-`num_envs` plot of `parallax bench ID
  --scaling`;
- `tree_bytes(tree)`: the bytes a pytree of arrays holds (the result's `state_bytes`);
- `random_actions`, `action_scan`: the random actions and the rollout loop it times (also
  exported by `parallax` itself).

`compare=` (`parallax bench ID --compare sekai|gymnax|parallax-rl`) measures a competitor
in the same run; its runners are developer tools in `benchmarks/competitors.py` of a source
checkout, not in the installed package, and without one `compare=` raises an `ImportError`
that says how to run the comparison.

Example:
    >>> from parallax.bench import benchmark
    >>> result = benchmark("GridWorld-v0", 4, steps=8, repeats=1, progress=False)
    >>> result["env"], result["num_envs"], result["steps_per_second"] > 0
    ('GridWorld-v0', 4, True)
"""

from ._actions import action_scan as action_scan
from ._actions import random_actions as random_actions
from ._bench_report import format_table as format_table
from ._bench_report import plot_scaling as plot_scaling
from ._bench_runner import tree_bytes as tree_bytes
from ._bench_timing import benchmark as benchmark

__all__ = [
    "action_scan",
    "benchmark",
    "format_table",
    "plot_scaling",
    "random_actions",
    "tree_bytes",
]
