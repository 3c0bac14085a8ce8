"""One short run for a lent GPU (or TPU): env steps/s, compile time and memory against N,
PPO's training speed, and the machine, written as one JSON file and one PNG plot.

What it measures, in this order, all within `--budget-s` seconds (default 300; the whole
script stays under 6 minutes on one GPU):

1. the machine (before anything is compiled): JAX's devices, backend and device kind, the
   device memory limit where the backend reports it, the CPU model and the flags of
   interest (`/proc/cpuinfo`: avx2, avx512f, amx_tile, amx_bf16, amx_int8), CPU count and
   affinity, host memory, jax/jaxlib versions and the load average at the start;
2. PPO (`parallax.train.make_train`) on OptimalExecution-v0, its preset with a fixed
   number of updates: compile time, then one warm-up call and timed calls of the whole
   jitted training; env steps of training (rollouts and updates) per second;
3. for each env (`Trading-v0`, `Portfolio-v0`, `MarketMaking-v0`, `OptimalExecution-v0`,
   `gymnax/CartPole-v1`, `LimitOrderBook-v0`) and each N = 2^10, 2^11, ..., 2^max-log2
   (ascending): one `parallax.bench.benchmark` call, the measurement of `parallax bench`
   (a donated, AOT-compiled `lax.scan` of random actions over `make_vec(id, N)` with
   auto-reset; about 2^19 env steps a timed call, see `scaling.steps_for`), median of
   `--repeats` timed calls after a warm-up call. An env stops at the first N that runs out
   of memory (XLA's RESOURCE_EXHAUSTED, a MemoryError, any error that says so) or whose
   predicted time (its compile, reset and calls, scaled from the N before) would not fit
   in its share of the time left; that N gets a row with `error` set. Each env's share is
   the time left divided by the envs still to run, so an env that finishes early leaves
   its time to the next (the order book, slowest to compile, runs last).

The finance envs use the benchmarks' short episodes (`_common.ENV_KWARGS`), so resets
happen inside the timed calls; the order book its defaults. `--quick` is a smoke run, not
a benchmark: one size, N = 2^4 (`--max-log2 K` adds more), 8 steps a call, the small book
of `lob_speed.py --quick`, 3 PPO updates of 16 envs, and XLA compiling at optimisation
level 0 (added to `XLA_FLAGS` when JAX has not started). Compiling is most of such a run
(13 programs, the order book's two the slowest): about 35 s on a 2-core CPU, and about
15 s more for each size more. The JSON is rewritten after every row, so a run cut short keeps
what it measured. A measurement under way cannot be interrupted, so a watchdog thread ends
the run at `--hard-limit-s` (default `--budget-s` + 30 s: an env's first row has nothing to
predict its time from) with exit status 3, after recording that row as cut off and writing
the JSON and the plot. Exit status 1 when some measurement failed for another reason than
memory or time (the JSON still written), 0 otherwise.

    python benchmarks/device_check.py --out results/device.json   # + results/device.png
    python benchmarks/device_check.py --quick --out /tmp/x.json   # N = 2^4: a smoke run

The JSON (`schema` 1), top-level keys:

- `schema` (int), `created` (UTC, ISO 8601), `quick` (bool), `wall_s` (the whole run),
  `args` (`budget_s`, `hard_limit_s`, `min_log2`, `max_log2`, `repeats`, `envs`);
- `machine`: `backend`, `device_kind`, `device_count`, `devices` (their `str`),
  `platform_version` (or null), `memory_limit_bytes` (device 0's `bytes_limit`, null where
  `memory_stats()` is None, as on the CPU), `cpu_model`, `cpu_flags` ({flag: bool}, null
  without `/proc/cpuinfo`), `cpu_count`, `cpu_affinity`, `host_memory_bytes`, `python`,
  `platform`, `jax_version`, `jaxlib_version`, `cpu_threads` (`PJRT_NPROC` or null),
  `compilation_cache` (JAX's persistent cache folder, or null: compile times are then
  real compiles), `xla_flags` (`XLA_FLAGS` or null), `load_average_start`,
  `load_average_end` (1, 5, 15 min, or null);
- `ppo`: `env`, `num_envs`, `num_steps`, `num_updates`, `update_epochs`,
  `num_minibatches`, `env_steps` (per training call), `compile_s`, `seconds` (the timed
  calls), `steps_per_s` (env steps of training per second, median), `updates_per_s`,
  `peak_bytes`, `error` (null, or why there is no figure; the numbers are then null);
- `envs`: {id: [row, ...]} in ascending N, each row: `num_envs`, `steps` (scan length),
  `steps_per_s` (median), `steps_per_s_min`, `steps_per_s_max`, `compile_s` (trace, lower
  and compile the rollout: what a first call costs beyond one run), `reset_s` (the jitted
  reset's first call, compile included), `state_bytes`, `program_bytes` (XLA's
  arguments + outputs + temporaries of the rollout, or null), `peak_bytes` (device 0's
  `peak_bytes_in_use` after the row: the process's peak so far, which N ascending makes the
  largest run's; null where the backend has no memory statistics), `episodes_ended`, and
  `error`: null, or a string starting `out of memory:`, `time budget:` or `failed:` (the
  env's last row; its numbers are then null);
- `plot`: the PNG's path (steps/s and compile time against N, one line an env);
- `stopped`: null, or why the watchdog ended the run (`--hard-limit-s`).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import ENV_KWARGS
from lob_speed import QUICK_ENV_KWARGS as LOB_QUICK_ENV_KWARGS
from scaling import steps_for

SCHEMA = 1
ENVS = (*ENV_KWARGS, "gymnax/CartPole-v1", "LimitOrderBook-v0")
FLAGS = ("avx2", "avx512f", "amx_tile", "amx_bf16", "amx_int8")
PPO_ENV = "OptimalExecution-v0"
FIRST_ROW_S = 10.0  # an env's first row is not started with less time than this left
GRACE_S = 30.0  # the watchdog ends the run this long after --budget-s (a row under way)
_exit = os._exit  # how the watchdog leaves: at once, whatever the main thread is doing
# the whole measurement, at the device and at the smoke-run sizes
FULL = {"min_log2": 10, "max_log2": 20, "repeats": 3}
QUICK = {"min_log2": 4, "max_log2": 4, "repeats": 3, "steps": 8}
# --quick compiles at XLA's lowest optimisation level: compiling is most of a smoke run
QUICK_XLA_FLAG = "--xla_backend_optimization_level=0"
PPO_FULL = {"num_envs": 2048, "updates": 8, "timed_calls": 2}
PPO_QUICK = {
    "num_envs": 16,
    "updates": 3,
    "timed_calls": 2,
    "update_epochs": 2,
    "num_minibatches": 2,
}


# -- the machine ----------------------------------------------------------------------------
def _load_average() -> list[float] | None:
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def _cpuinfo() -> tuple[str | None, dict[str, bool] | None]:
    """The CPU model and the flags of interest, from /proc/cpuinfo (None where absent)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return (platform.processor() or None), None
    model, flags = None, set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    return model or platform.processor() or None, {flag: flag in flags for flag in FLAGS}


def _host_memory() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _memory_stats() -> dict[str, Any] | None:
    import jax

    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:  # backends without statistics raise or return None
        return None
    return dict(stats) if stats else None


def _peak_bytes() -> int | None:
    stats = _memory_stats()
    return (
        None
        if stats is None or "peak_bytes_in_use" not in stats
        else int(stats["peak_bytes_in_use"])
    )


def machine(load_start: list[float] | None) -> dict[str, Any]:
    """The `machine` block (without `load_average_end`)."""
    import jax
    import jaxlib

    import parallax

    devices = jax.devices()
    try:
        platform_version = str(devices[0].client.platform_version)
    except Exception:
        platform_version = None
    stats = _memory_stats()
    model, flags = _cpuinfo()
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    return {
        "backend": jax.default_backend(),
        "device_kind": devices[0].device_kind,
        "device_count": len(devices),
        "devices": [str(d) for d in devices],
        "platform_version": platform_version,
        "memory_limit_bytes": None if stats is None else stats.get("bytes_limit"),
        "cpu_model": model,
        "cpu_flags": flags,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "host_memory_bytes": _host_memory(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "cpu_threads": parallax.cpu_threads(),
        "compilation_cache": jax.config.jax_compilation_cache_dir or None,
        "xla_flags": os.environ.get("XLA_FLAGS") or None,
        "load_average_start": load_start,
    }


# -- errors ---------------------------------------------------------------------------------
def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def out_of_memory(error: BaseException) -> bool:
    """Whether `error` says the device (or the host) ran out of memory."""
    if isinstance(error, MemoryError):
        return True
    text = str(error).lower()
    return any(
        s in text
        for s in ("resource_exhausted", "resource exhausted", "out of memory", "failed to allocate")
    )


def _error_row(num_envs: int, steps: int, error: str) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(ROW_KEYS)
    row.update(num_envs=num_envs, steps=steps, error=error)
    return row


ROW_KEYS = (
    "num_envs",
    "steps",
    "steps_per_s",
    "steps_per_s_min",
    "steps_per_s_max",
    "compile_s",
    "reset_s",
    "state_bytes",
    "program_bytes",
    "peak_bytes",
    "episodes_ended",
    "error",
)


# -- PPO ------------------------------------------------------------------------------------
def measure_ppo(quick: bool) -> dict[str, Any]:
    """PPO's training speed on `PPO_ENV`: compile, a warm-up call, then timed calls."""
    sizes = dict(PPO_QUICK if quick else PPO_FULL)
    out: dict[str, Any] = {"env": PPO_ENV, "error": None}
    try:
        import jax

        from parallax import train

        num_envs, updates, calls = (
            sizes.pop("num_envs"),
            sizes.pop("updates"),
            sizes.pop("timed_calls"),
        )
        base = train.preset(PPO_ENV)
        config = train.preset(
            PPO_ENV, num_envs=num_envs, total_steps=num_envs * base.num_steps * updates, **sizes
        )
        env_steps = config.num_updates * config.num_envs * config.num_steps
        out.update(
            num_envs=config.num_envs,
            num_steps=config.num_steps,
            num_updates=config.num_updates,
            update_epochs=config.update_epochs,
            num_minibatches=config.num_minibatches,
            env_steps=env_steps,
        )
        t0 = time.perf_counter()
        compiled = jax.jit(train.make_train(config)).lower(jax.random.key(0)).compile()
        out["compile_s"] = time.perf_counter() - t0
        jax.block_until_ready(compiled(jax.random.key(1)))  # warm-up
        seconds = []
        for i in range(calls):
            t0 = time.perf_counter()
            jax.block_until_ready(compiled(jax.random.key(2 + i)))
            seconds.append(time.perf_counter() - t0)
        median = statistics.median(seconds)
        out.update(
            seconds=seconds,
            steps_per_s=env_steps / median,
            updates_per_s=config.num_updates / median,
            peak_bytes=_peak_bytes(),
        )
    except Exception as error:  # no optax, or a failure: say so, keep the rest of the run
        kind = "out of memory" if out_of_memory(error) else "failed"
        out.update(error=f"{kind}: {_first_line(error)}", steps_per_s=None, compile_s=None)
    return out


# -- the envs -------------------------------------------------------------------------------
def env_kwargs(env_id: str, quick: bool) -> dict[str, Any]:
    if env_id == "LimitOrderBook-v0":
        return dict(LOB_QUICK_ENV_KWARGS) if quick else {}
    return dict(ENV_KWARGS.get(env_id, {}))


def predicted_seconds(last: dict[str, Any], num_envs: int, steps: int, repeats: int) -> float:
    """The time a row at (`num_envs`, `steps`) should take, from the row before (`last`):
    compile and reset as before (with a margin), the calls scaled by their env steps."""
    call = last["num_envs"] * last["steps"] / last["steps_per_s"]
    work = num_envs * steps / (last["num_envs"] * last["steps"])
    return 1.5 * (last["compile_s"] + last["reset_s"]) + (1 + repeats) * call * max(1.0, work)


def measure_env(
    env_id: str,
    sizes: list[int],
    *,
    repeats: int,
    quick_steps: int | None,
    quick: bool,
    deadline: float,
    on_row: Any = None,
    on_start: Any = None,
) -> list[dict[str, Any]]:
    """The rows of one env, N ascending, until `sizes` end, memory runs out, or the next
    row's predicted time passes `deadline` (a `time.perf_counter()` value). `on_row(rows)`
    is called after each row, `on_start(num_envs, steps, rows)` before each measurement."""
    import jax

    from parallax.bench import benchmark

    rows: list[dict[str, Any]] = []
    last: dict[str, Any] | None = None
    for n in sizes:
        steps = quick_steps if quick_steps is not None else steps_for(n)
        left = deadline - time.perf_counter()
        if last is not None:
            need = predicted_seconds(last, n, steps, repeats)
            if need > left:
                rows.append(
                    _error_row(
                        n, steps, f"time budget: predicted {need:.1f} s, {max(left, 0):.1f} s left"
                    )
                )
                break
        elif left < FIRST_ROW_S:  # nothing to predict from: a first row needs some time
            rows.append(
                _error_row(n, steps, f"time budget: {max(left, 0):.1f} s left for a first row")
            )
            break
        if on_start is not None:
            on_start(n, steps, rows)
        try:
            r = benchmark(
                env_id,
                n,
                steps=steps,
                repeats=repeats,
                env_kwargs=env_kwargs(env_id, quick),
                progress=False,
            )
        except Exception as error:
            kind = "out of memory" if out_of_memory(error) else "failed"
            rows.append(_error_row(n, steps, f"{kind}: {_first_line(error)}"))
            break
        finally:
            gc.collect()
        program = r.get("program_bytes") or {}
        keys = ("argument_bytes", "output_bytes", "temp_bytes")
        row = {
            "num_envs": n,
            "steps": steps,
            "steps_per_s": r["steps_per_second"],
            "steps_per_s_min": r["steps_per_second_min"],
            "steps_per_s_max": r["steps_per_second_max"],
            "compile_s": r["compile_seconds"],
            "reset_s": r["reset_seconds"],
            "state_bytes": r["state_bytes"],
            "program_bytes": sum(program[k] for k in keys)
            if all(k in program for k in keys)
            else None,
            "peak_bytes": (r.get("device_memory") or {}).get("peak_bytes_in_use"),
            "episodes_ended": r["episodes_ended"],
            "error": None,
        }
        rows.append(row)
        last = row
        if on_row is not None:
            on_row(rows)
        print(
            f"{env_id:<20} N=2^{int(math.log2(n)):<2} {row['steps_per_s']:>14,.0f} steps/s  "
            f"compile {row['compile_s']:5.1f} s  peak "
            + ("-" if row["peak_bytes"] is None else f"{row['peak_bytes'] / 2**20:,.0f} MiB"),
            flush=True,
        )
    jax.clear_caches()  # this env's programs are done with
    return rows


# -- the plot -------------------------------------------------------------------------------
def plot(report: dict[str, Any], path: Path) -> None:
    """Steps/s and compile time against N, one line an env (stopped envs say where and why)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    m = report["machine"]
    fig, (rate_ax, compile_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    for env_id, rows in report["envs"].items():
        done = [r for r in rows if r["error"] is None]
        stop = next((r for r in rows if r["error"] is not None), None)
        label = env_id
        if stop is not None:
            label += f" (stopped at N={stop['num_envs']}: {stop['error'].split(':')[0]})"
        if not done:
            rate_ax.plot([], [], label=label)
            continue
        n = [r["num_envs"] for r in done]
        (line,) = rate_ax.plot(n, [r["steps_per_s"] for r in done], "o-", label=label)
        rate_ax.fill_between(
            n,
            [r["steps_per_s_min"] for r in done],
            [r["steps_per_s_max"] for r in done],
            color=line.get_color(),
            alpha=0.2,
        )
        compile_ax.plot(n, [r["compile_s"] for r in done], "o-", color=line.get_color())
    rate_ax.set(xlabel="num_envs N", ylabel="env steps / s (median)")
    compile_ax.set(xlabel="num_envs N", ylabel="compile time of the rollout (s)")
    measured = any(r["error"] is None for rows in report["envs"].values() for r in rows)
    for ax in (rate_ax, compile_ax):
        if measured:  # (a log axis needs a positive value)
            ax.set_xscale("log", base=2)
            ax.grid(True, which="both", alpha=0.3)
        else:
            ax.text(0.5, 0.5, "no measurement", ha="center", transform=ax.transAxes)
    if measured:
        rate_ax.set_yscale("log")
    rate_ax.legend(fontsize=7)
    ppo = report["ppo"]
    ppo_text = (
        f"PPO ({ppo['env']}, {ppo.get('num_envs')} envs): {ppo['steps_per_s']:,.0f} env steps/s"
        if ppo.get("steps_per_s")
        else f"PPO: {ppo.get('error')}"
    )
    title = f"device check: {m['device_kind']} ({m['backend']}, {m['device_count']} device(s))"
    if report["quick"]:
        title += ", --quick smoke run (not a benchmark)"
    fig.suptitle(f"{title}\n{ppo_text}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- the run --------------------------------------------------------------------------------
def _quick_compiles() -> None:
    """Add `QUICK_XLA_FLAG` to `XLA_FLAGS`, unless JAX has started (it then reads nothing)
    or the flags already choose a level."""
    from parallax._cpu import _backends_initialized

    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags and not _backends_initialized():
        os.environ["XLA_FLAGS"] = f"{flags} {QUICK_XLA_FLAG}".strip()


def main(argv: list[str] | None = None) -> int:
    load_start = _load_average()  # before JAX starts
    started = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: N = 2^4, 8 steps a call, 3 PPO updates, XLA at -O0",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="the JSON to write; the plot goes next to it, with .png (default: "
        "benchmarks/results/device_check.json; with --quick, device_check_quick.json in the "
        "system's temporary folder, so that a smoke run never replaces a result)",
    )
    parser.add_argument(
        "--max-log2", type=int, default=None, help="largest N = 2^K (default 20; --quick 4)"
    )
    parser.add_argument(
        "--min-log2", type=int, default=None, help="smallest N = 2^K (default 10; --quick 4)"
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=300.0,
        help="seconds for the whole measurement (PPO and every env); an env stops at the first N "
        "whose predicted time does not fit in its share of what is left",
    )
    parser.add_argument(
        "--hard-limit-s",
        type=float,
        default=None,
        help=f"a watchdog: at this many seconds the run ends (exit status 3), the row under way "
        f"recorded as cut off, the JSON and plot written (default: --budget-s + {GRACE_S:.0f})",
    )
    parser.add_argument("--repeats", type=int, default=None, help="timed calls a row (default 3)")
    parser.add_argument("--envs", nargs="+", default=list(ENVS), help="env ids, in this order")
    parser.add_argument("--no-ppo", action="store_true", help="skip the PPO measurement")
    args = parser.parse_args(argv)
    preset = QUICK if args.quick else FULL
    if args.quick:
        _quick_compiles()
    low = preset["min_log2"] if args.min_log2 is None else args.min_log2
    high = preset["max_log2"] if args.max_log2 is None else args.max_log2
    repeats = preset["repeats"] if args.repeats is None else args.repeats
    if not 0 <= low <= high <= 30:
        parser.error(f"need 0 <= --min-log2 ({low}) <= --max-log2 ({high}) <= 30")
    hard_limit = args.budget_s + GRACE_S if args.hard_limit_s is None else args.hard_limit_s
    if repeats < 1 or args.budget_s <= 0 or hard_limit <= 0:
        parser.error("--repeats, --budget-s and --hard-limit-s must be positive")
    if args.out is not None:
        out = Path(args.out)
    elif args.quick:
        out = Path(tempfile.gettempdir()) / "device_check_quick.json"
    else:
        out = Path(__file__).resolve().parent / "results" / "device_check.json"
    if not out.parent.is_dir():
        out.parent.mkdir(parents=True, exist_ok=True)
    png = out.with_suffix(".png")
    deadline = started + args.budget_s

    report: dict[str, Any] = {
        "schema": SCHEMA,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "wall_s": None,
        "args": {
            "budget_s": args.budget_s,
            "hard_limit_s": hard_limit,
            "min_log2": low,
            "max_log2": high,
            "repeats": repeats,
            "envs": list(args.envs),
        },
        "machine": machine(load_start),
        "ppo": None,
        "envs": {},
        "plot": str(png),
        "stopped": None,
    }

    def write() -> None:
        report["wall_s"] = time.perf_counter() - started
        report["machine"]["load_average_end"] = _load_average()
        out.write_text(json.dumps(report, indent=1))

    underway: dict[str, Any] = {}  # what the run is measuring, for the watchdog

    def expire() -> None:
        # the measurement under way cannot be interrupted: record it, write, and leave
        now = dict(underway)
        cut = f"time budget: cut off by the watchdog at {hard_limit:.0f} s"
        if "env" in now:
            rows = [*now["rows"], _error_row(now["num_envs"], now["steps"], cut)]
            report["envs"][now["env"]] = rows
        elif now.get("ppo"):
            report["ppo"] = {"env": PPO_ENV, "steps_per_s": None, "compile_s": None, "error": cut}
        report["stopped"] = f"the watchdog ended the run at {hard_limit:.0f} s (--hard-limit-s)"
        try:
            write()
            plot(report, png)
        finally:
            print(f"{report['stopped']}; wrote {out}", file=sys.stderr, flush=True)
            _exit(3)

    watchdog = threading.Timer(max(0.0, started + hard_limit - time.perf_counter()), expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        m = report["machine"]
        print(f"{m['device_kind']} ({m['backend']} x{m['device_count']}), jax {m['jax_version']}; "
              f"CPU {m['cpu_model']}; load {load_start}", flush=True)  # fmt: skip
        if args.no_ppo:
            report["ppo"] = {
                "env": PPO_ENV,
                "steps_per_s": None,
                "compile_s": None,
                "error": "skipped: --no-ppo",
            }
        else:
            underway.update(ppo=True)
            report["ppo"] = measure_ppo(args.quick)
            underway.clear()
            ppo = report["ppo"]
            if ppo["error"] is None:
                print(f"PPO {PPO_ENV} N={ppo['num_envs']}: {ppo['steps_per_s']:,.0f} env steps/s, "
                      f"compile {ppo['compile_s']:.1f} s", flush=True)  # fmt: skip
            else:
                print(f"PPO: {ppo['error']}", flush=True)
        write()
        sizes = [2**k for k in range(low, high + 1)]
        for i, env_id in enumerate(args.envs):
            now = time.perf_counter()
            share = now + (deadline - now) / (len(args.envs) - i)

            def keep(rows: list[dict[str, Any]], env_id: str = env_id) -> None:
                report["envs"][env_id] = rows
                write()

            def start(n: int, steps: int, rows: list[dict[str, Any]], env_id: str = env_id) -> None:
                underway.clear()
                underway.update(env=env_id, num_envs=n, steps=steps, rows=list(rows))

            rows = measure_env(
                env_id,
                sizes,
                repeats=repeats,
                quick_steps=QUICK["steps"] if args.quick else None,
                quick=args.quick,
                deadline=share,
                on_row=keep,
                on_start=start,
            )
            underway.clear()
            if rows and rows[-1]["error"] is not None:
                print(f"{env_id:<20} N={rows[-1]['num_envs']}: {rows[-1]['error']}", flush=True)
            keep(rows)
        watchdog.cancel()
        plot(report, png)
        write()
        print(f"wrote {out} and {png} in {report['wall_s']:.0f} s", flush=True)
        failed = [
            env_id
            for env_id, rows in report["envs"].items()
            if any((r["error"] or "").startswith("failed") for r in rows)
        ]
        if (report["ppo"]["error"] or "").startswith("failed"):
            failed.append("ppo")
        if failed:
            print(f"failed: {', '.join(failed)} (see `error` in the JSON)", file=sys.stderr)
        return 1 if failed else 0
    finally:  # (an error, or a test calling main: no watchdog left behind)
        watchdog.cancel()


if __name__ == "__main__":
    raise SystemExit(main())
