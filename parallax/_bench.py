"""`parallax bench`: the command line that times a batched env's jitted rollout.

- `main(argv)`: `parallax bench ID [--num-envs N ...] [--steps T] ...` (see `parallax bench
  --help`), routed here by `parallax._cli`;
- `build_parser()`: its argument parser.

The measurement is `parallax.bench.benchmark` (`_bench_timing.py`), the table and the
`--scaling` plot are in `_bench_report.py`, and `--compare NAME` runs a competitor from
`benchmarks/competitors.py` of a source checkout (not part of the wheel).

`--devices K|all` is the whole-machine path: before JAX starts, the CPU is presented as K
devices (`all`: one a physical core, `parallax.use_all_cpu_cores`), our batch is split over
them with `jax.shard_map`, and the same run times one device beside the split, interleaved,
so that the table and the JSON give both figures, each with its device count. The older
name `--cpu-devices K` is the same option.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import jax

from ._bench_report import SCALING_SIZES, format_table, plot_scaling
from ._bench_timing import COMPETITORS, benchmark
from ._cli import DefaultsHelpFormatter
from ._cpu import physical_cores, set_cpu_devices, set_cpu_threads
from ._validate import positive_int

__all__ = ["SCALING_SIZES", "build_parser", "main"]


# -- command line ---------------------------------------------------------------------------
def _positive_int(text: str) -> int:
    try:
        return positive_int(int(text), "the value", "parallax bench")
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {text!r}") from None


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative int, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative int, got {value}")
    return value


def _devices(text: str) -> int | str:
    """`--devices`: `all`, or a device count >= 1."""
    if text.strip().lower() == "all":
        return "all"
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"expected 'all' or an int >= 1 (the devices to split the batch over; 'all' is "
            f"one a physical core, {physical_cores()} on this machine), got {text!r}"
        )
    return value


def _env_kwarg(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with KEY a name, got {text!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw  # a bare word is a string: sampler=random
    return key, value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `parallax bench`."""
    parser = argparse.ArgumentParser(
        prog="parallax bench",
        description=(
            "Time a jitted lax.scan rollout of parallax.make_vec(ID, N) with random actions: "
            "compile time and env steps/s (median, min, max over repeats), optionally against "
            "a competitor measured in the same run at the same batch size."
        ),
        epilog=(
            "--json prints one JSON object for one --num-envs value, or a JSON list of such "
            "objects (one per N, in the order given) for several. With --devices K > 1 each "
            "object's figures are the K-device ones (its `devices`), and `single_device` "
            "holds the one-device figures of the same run."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument("env_id", metavar="ID", help="a registered id (see `parallax list`)")
    parser.add_argument(
        "--num-envs", type=_positive_int, nargs="+", default=[1024], metavar="N", help="batch sizes"
    )
    parser.add_argument(
        "--steps", type=_positive_int, default=200, metavar="T", help="env steps per timed call"
    )
    parser.add_argument(
        "--repeats", type=_positive_int, default=5, metavar="R", help="timed calls per side"
    )
    parser.add_argument(
        "--autoreset",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="same-step auto-reset",
    )
    parser.add_argument(
        "--max-episode-steps", type=_positive_int, default=None, metavar="M", help="a TimeLimit"
    )
    parser.add_argument(
        "--dtype",
        choices=["float32", "float64"],
        default="float32",
        help="float64 enables jax_enable_x64",
    )
    parser.add_argument(
        "--compare",
        choices=COMPETITORS,
        default=None,
        help="competitor, measured in the same run (needs a source checkout: its runners are "
        "in benchmarks/competitors.py, not in the installed package)",
    )
    parser.add_argument(
        "--competitor-steps",
        type=_positive_int,
        default=None,
        metavar="T",
        help="steps per timed call of sekai (default: --steps)",
    )
    parser.add_argument(
        "--competitor-envs",
        type=_positive_int,
        default=None,
        metavar="K",
        help="envs that sekai's Python loop times, for an id sekai cannot vectorize natively "
        "(LimitOrderBook-v0; default 16, at most N): its throughput is then per env step",
    )
    parser.add_argument(
        "--parallax-rl-python",
        default=None,
        metavar="PATH",
        help="python of a venv with parallax-rl 0.4.0 (or $PARALLAX_RL_PYTHON)",
    )
    parser.add_argument(
        "--env-kwarg",
        type=_env_kwarg,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an env keyword argument (Python literal or bare string), repeatable",
    )
    parser.add_argument(
        "--seed", type=_non_negative_int, default=0, metavar="S", help="the random actions' seed"
    )
    parser.add_argument(
        "--scaling",
        action="store_true",
        help=(
            f"measure N = {' '.join(map(str, SCALING_SIZES))} (unless --num-envs is given) "
            "and save a steps/s-vs-N plot on this device (needs matplotlib)"
        ),
    )
    parser.add_argument(
        "--plot",
        default=None,
        metavar="PATH",
        help="where --scaling saves its plot (default: bench_scaling_<ID>.png)",
    )
    parser.add_argument(
        "--cpu-threads",
        type=_positive_int,
        default=None,
        metavar="K",
        help="size of XLA:CPU's thread pool (sets PJRT_NPROC; default: one per CPU). 1 removes "
        "the hand-offs between pool threads that slow small-kernel rollouts on the CPU",
    )
    parser.add_argument(
        "--devices",
        type=_devices,
        default=None,
        metavar="K|all",
        help="the whole machine: present the CPU as K JAX devices (all: one a physical core, "
        f"{physical_cores()} here) and split our batch over them, each device stepping its "
        "N/K envs alone (jax.shard_map, no communication), so that K programs run at once, "
        "one a core; the same run also times one device, interleaved, and reports both, "
        "each with its device count (default: 1, one device)",
    )
    parser.add_argument(  # the option's first name, kept for existing commands
        "--cpu-devices", type=_devices, default=None, help=argparse.SUPPRESS
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


@contextmanager
def _x64(enabled: bool) -> Iterator[None]:
    with jax.enable_x64(enabled):
        yield


def _use_devices(
    parser: argparse.ArgumentParser, args: argparse.Namespace, sizes: list[int]
) -> int:
    """The device count of `--devices` (or `--cpu-devices`), made before JAX starts.

    More than one: the CPU is presented as that many devices (`set_cpu_devices`, which
    raises a RuntimeError once JAX has started with another count). `all` is one a
    physical core, or every device of the default backend when that is not the CPU.
    """
    if args.devices is not None and args.cpu_devices is not None:
        parser.error("--devices and --cpu-devices are one option (its new and old name): give one")
    option = "--devices" if args.cpu_devices is None else "--cpu-devices"
    wanted = args.devices if args.cpu_devices is None else args.cpu_devices
    if wanted is None:
        return 1
    if wanted != "all":
        count = int(wanted)
        bad = [n for n in sizes if n % count]
        if bad:
            parser.error(f"--num-envs {bad[0]} is not divisible by {option} {count}")
        if count > 1:
            set_cpu_devices(count)
        return count
    count = physical_cores()
    if count > 1:
        set_cpu_devices(count)
    backend = jax.default_backend()
    if backend == "cpu":
        shown = f"{count} CPU device(s), one a physical core"
    else:  # a GPU or TPU host: every accelerator
        count = len(jax.devices())
        shown = f"{count} {backend} device(s)"
    bad = [n for n in sizes if n % count]
    if bad:
        parser.error(f"--num-envs {bad[0]} is not divisible by {option} all ({shown})")
    print(f"parallax bench: {option} all: {shown}", file=sys.stderr)
    return count


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `parallax bench` (routed here by `parallax._cli`).

    Args:
        argv: the arguments after `bench` (None: `sys.argv[1:]`).

    Returns:
        0 on success, 2 when the env or the competitor cannot be built.

    Example:
        >>> from parallax._bench import main
        >>> main(["GridWorld-v0", "--num-envs", "4", "--steps", "4", "--repeats", "1",
        ...       "--json", "--no-progress"])  # doctest: +ELLIPSIS
        {"env": "GridWorld-v0", "num_envs": 4, ...}
        0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    given = argv if argv is not None else sys.argv[1:]
    sizes = list(args.num_envs)
    if args.scaling and not any(a == "--num-envs" or a.startswith("--num-envs=") for a in given):
        sizes = list(SCALING_SIZES)
    if args.plot is not None and not args.scaling:
        parser.error("--plot needs --scaling")
    plot_path = args.plot or f"bench_scaling_{args.env_id.replace('/', '_')}.png"
    if args.scaling:
        folder = os.path.dirname(os.path.abspath(plot_path))
        if not os.path.isdir(folder):
            parser.error(f"--plot {plot_path!r}: the directory {folder!r} does not exist")
    if args.cpu_threads is not None:
        try:
            set_cpu_threads(args.cpu_threads)
        except RuntimeError as error:
            print(f"parallax bench: error: {error}", file=sys.stderr)
            return 2
    try:
        devices = _use_devices(parser, args, sizes)
    except RuntimeError as error:
        print(f"parallax bench: error: {error}", file=sys.stderr)
        return 2
    results = []
    with _x64(args.dtype == "float64"):
        for n in sizes:
            try:
                result = benchmark(
                    args.env_id,
                    n,
                    steps=args.steps,
                    repeats=args.repeats,
                    autoreset=args.autoreset,
                    max_episode_steps=args.max_episode_steps,
                    compare=args.compare,
                    seed=args.seed,
                    env_kwargs=dict(args.env_kwarg),
                    parallax_rl_python=args.parallax_rl_python,
                    progress=not args.no_progress,
                    competitor_steps=args.competitor_steps,
                    competitor_envs=args.competitor_envs,
                    devices=devices,
                    single_device=devices > 1,
                )
            except (KeyError, ValueError, TypeError, ImportError, RuntimeError) as error:
                message = error.args[0] if isinstance(error, KeyError) and error.args else error
                print(f"parallax bench: error: {message}", file=sys.stderr)
                return 2
            results.append(result)
            if not args.json:  # one row as each batch size finishes, the header first
                lines = format_table([result]).splitlines()
                print("\n".join(lines if len(results) == 1 else lines[1:]), flush=True)
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results))
    if args.scaling:
        try:
            written = plot_scaling(results, plot_path)
        except ImportError as error:
            print(f"parallax bench: error: {error}", file=sys.stderr)
            return 2
        print(f"scaling plot: {written}", file=sys.stderr if args.json else sys.stdout)
    return 0
