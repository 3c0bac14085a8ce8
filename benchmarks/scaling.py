"""Scaling of the finance envs with the batch size N: steps/s, compile time and memory.

For each finance env and each N (ascending), one `parallax.bench.benchmark` call with
`compare="sekai"`: our jitted `lax.scan` rollout of `make_vec(id, N)` (auto-reset on, short
episodes so resets happen) and sekai 0.2.0's native vector env, interleaved repeat by
repeat. Recorded per point: env steps/s of both (median of repeats), the ratio, the compile
time of our rollout, the state size, XLA's memory analysis of the compiled rollout
(arguments, outputs, temporaries), device memory statistics where the backend has them, and
the process's peak RSS (cumulative: N grows, so it tracks the largest N so far).

The scan length shrinks as N grows (about `2**19` env steps per timed call, 16 to 2048
steps); sekai, a Python loop, steps about `2**16 / N` times per call (4 to 256).

    python benchmarks/scaling.py [--num-envs 16 64 256 1024 4096 16384] [--json out.json]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import ENV_KWARGS, run_meta, write_results

IDS = tuple(ENV_KWARGS)


def steps_for(num_envs: int, budget_log2: int = 19) -> int:
    """Scan length for batch size `num_envs`: about `2**budget_log2` env steps per call."""
    return int(min(2048, max(16, (1 << budget_log2) // num_envs)))


def sekai_steps_for(num_envs: int) -> int:
    """Steps per timed call of sekai's native vector env (a Python loop)."""
    return int(min(256, max(4, (1 << 16) // num_envs)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", nargs="+", default=list(IDS))
    parser.add_argument("--num-envs", nargs="+", type=int, default=[16, 64, 256, 1024, 4096, 16384])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget-log2", type=int, default=19, help="log2 env steps per call")
    parser.add_argument("--no-sekai", action="store_true", help="ours only")
    parser.add_argument("--json", default=str(Path(__file__).parent / "results" / "scaling.json"))
    args = parser.parse_args(argv)

    from parallax.bench import benchmark

    rows = []
    for env_id in args.ids:
        for n in sorted(args.num_envs):
            r = benchmark(
                env_id,
                n,
                steps=steps_for(n, args.budget_log2),
                repeats=args.repeats,
                compare=None if args.no_sekai else "sekai",
                competitor_steps=sekai_steps_for(n),
                env_kwargs=ENV_KWARGS.get(env_id, {}),
                progress=False,
            )
            rows.append(r)
            theirs = r.get("competitor_steps_per_second")
            print(
                f"{env_id:<20} N={n:<6} ours {r['steps_per_second']:>13,.0f}/s"
                + (f"  sekai {theirs:>11,.0f}/s  x{r['ratio']:.1f}" if theirs else "")
                + f"  compile {r['compile_seconds']:.1f}s  state {r['state_bytes']:,} B"
                + f"  rss {r['peak_rss_bytes'] / 2**20:,.0f} MiB",
                flush=True,
            )
    write_results(args.json, {"meta": run_meta(), "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
