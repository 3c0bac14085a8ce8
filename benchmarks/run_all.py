"""Run every benchmark in one go, collect the results, draw the plots (`make bench`).

Each benchmark script runs in its own process (sequentially; the machine is small), with the
moderate sizes in `JOBS`. Its JSON output (or, for a script without one, its printed
output) is collected into `docs/assets/benchmarks.json` together with a description of the
machine and the exact command of each job, and the plots are drawn from it into
`docs/assets/perf_*.png`:

- `perf_scaling.png`: env steps/s against N (log-log), the four finance envs and sekai's
  native vector envs;
- `perf_compile.png`: compile time of the rollout against N;
- `perf_memory.png`: state size, XLA's buffers of the compiled rollout, and peak RSS
  against N;
- `perf_roofline.png`: the finance envs on this machine's roofline.

    python benchmarks/run_all.py                      # everything (about an hour on 2 cores)
    python benchmarks/run_all.py --only scaling roofline --merge
    python benchmarks/run_all.py --plots-only         # redraw from benchmarks.json

A job whose script is missing or fails is recorded with its error; the others still run.
`--compare parallax-rl` runs when `$PARALLAX_RL_PYTHON` names the interpreter of a separate
virtual environment with parallax-rl 0.4.0 installed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "docs" / "assets"
RESULTS = ASSETS / "benchmarks.json"
PY = sys.executable
BENCH = [PY, "-m", "parallax._cli", "bench"]

# name -> command; "{out}" is replaced by the path where the script writes its JSON (jobs
# without it print JSON or text, which is kept as it is)
JOBS: dict[str, list[str]] = {
    "finance_vs_sekai": [
        PY,
        "benchmarks/finance_vs_sekai.py",
        "--num-envs",
        "16",
        "1024",
        "4096",
        "16384",
        "--steps",
        "1000",
        "--sekai-steps",
        "200",
        "--min-seconds",
        "1.0",
        "--json",
        "{out}",
    ],
    "gymnax_vs_raw": [
        *BENCH,
        "gymnax/CartPole-v1",
        "--num-envs",
        "16",
        "1024",
        "4096",
        "16384",
        "--steps",
        "200",
        "--repeats",
        "11",
        "--max-episode-steps",
        "500",
        "--compare",
        "gymnax",
        "--json",
        "--no-progress",
    ],
    # the targets, measured with more interleaved repeats: >= 30x sekai native at N = 1024
    # (and 4096), with XLA's default CPU pool and with one thread (`set_cpu_threads(1)`)
    **{
        f"target{suffix}_{env_id}": [
            *BENCH,
            env_id,
            "--num-envs",
            "1024",
            "4096",
            *threads,
            "--steps",
            "1000",
            "--repeats",
            "11",
            "--compare",
            "sekai",
            "--env-kwarg",
            kwarg,
            "--json",
            "--no-progress",
        ]
        for env_id, kwarg in (
            ("Trading-v0", "episode_length=50"),
            ("Portfolio-v0", "episode_length=50"),
            ("MarketMaking-v0", "n_steps=50"),
            ("OptimalExecution-v0", "n_steps=25"),
        )
        for suffix, threads in (("", []), ("_1thread", ["--cpu-threads", "1"]))
    },
    # LimitOrderBook-v0 against sekai's env in a Python loop (it has no native vector env),
    # with the background flow's events/s (lob_speed.py, the measurement of `parallax bench
    # LimitOrderBook-v0 --compare sekai`)
    "lob_speed": [PY, "benchmarks/lob_speed.py", "--num-envs", "1024", "--json", "{out}"],
    # the same with the CPU as two devices of 512 envs each (jax.shard_map, one a core)
    "lob_speed_2devices": [
        PY,
        "benchmarks/lob_speed.py",
        "--num-envs",
        "1024",
        "--cpu-devices",
        "2",
        "--json",
        "{out}",
    ],
    # the book alone: process_messages against JAX-LOB's book on the same message streams
    # (B = 1, 64, 1024 books x 500 messages; lob_messages_speed.py, _jaxlob.py)
    "lob_messages_speed": [
        PY,
        "benchmarks/lob_messages_speed.py",
        "--rounds",
        "3",
        "--json",
        "{out}",
    ],
    # why our rollouts vary from call to call: XLA's CPU pool hands them between threads
    "thread_handoffs": [
        PY,
        "benchmarks/thread_handoffs.py",
        "--num-envs",
        "1024",
        "4096",
        "--json",
        "{out}",
    ],
    "parallax_rl": [
        *BENCH,
        "gymnax/CartPole-v1",
        "--num-envs",
        "1024",
        "4096",
        "--steps",
        "200",
        "--max-episode-steps",
        "500",
        "--compare",
        "parallax-rl",
        "--json",
        "--no-progress",
    ],
    "adapters_overhead": [PY, "benchmarks/adapters_overhead.py", "--json", "{out}"],
    "reset_cost": [
        PY,
        "benchmarks/reset_cost.py",
        "--num-envs",
        "1024",
        "--steps",
        "200",
        "--json",
        "{out}",
    ],
    "autoreset_compositions": [
        PY,
        "benchmarks/autoreset_compositions.py",
        "--json",
        "{out}",
    ],
    "rng_speed": [PY, "benchmarks/rng_speed.py", "--num-envs", "4096", "--json", "{out}"],
    "rng_quality": [PY, "benchmarks/rng_quality.py", "--log2n", "20"],
    "ppo_learning": [PY, "benchmarks/ppo_learning.py", "--seeds", "1"],
    "roofline": [PY, "benchmarks/roofline.py", "--num-envs", "4096", "--json", "{out}"],
    "scaling": [PY, "benchmarks/scaling.py", "--json", "{out}"],
    "profile_step": [PY, "benchmarks/profile_step.py", "--json", "{out}"],
    "autoreset_probes": [
        PY,
        "benchmarks/roofline.py",
        "--probes-only",
        "--num-envs",
        "1024",
        "--ids",
        "Trading-v0",
        "Portfolio-v0",
        "MarketMaking-v0",
        "OptimalExecution-v0",
        "gymnax/CartPole-v1",
        "--json",
        "{out}",
    ],
    "autoreset_probes_cartpole_16384": [
        PY,
        "benchmarks/roofline.py",
        "--probes-only",
        "--num-envs",
        "16384",
        "--ids",
        "gymnax/CartPole-v1",
        "--json",
        "{out}",
    ],
}


def machine() -> dict[str, Any]:
    """CPU model, core count, memory, OS, Python and JAX versions, load average."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memory_gib"] = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    try:
        import jax

        info["jax"] = jax.__version__
        info["backend"] = jax.default_backend()
        info["devices"] = [str(d) for d in jax.devices()]
    except Exception as error:  # a broken JAX install must not stop the report
        info["jax"] = f"unavailable: {error}"
    if hasattr(os, "getloadavg"):
        info["load_average"] = list(os.getloadavg())
    try:  # which code was measured: the commit, and the files that differed from it
        git = ["git", "-C", str(ROOT)]
        info["commit"] = subprocess.run(
            [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            [*git, "status", "--porcelain", "parallax"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        info["uncommitted_parallax_files"] = sorted(line[3:] for line in status)
    except (OSError, subprocess.CalledProcessError):
        pass
    return info


def run_job(name: str, command: list[str], timeout: float) -> dict[str, Any]:
    """Run one benchmark; its JSON result, or its printed output, and how long it took."""
    script = next((c for c in command if c.endswith(".py")), None)
    if script is not None and not (ROOT / script).exists():
        return {"status": "missing", "error": f"{script} does not exist yet"}
    if name == "parallax_rl" and not os.environ.get("PARALLAX_RL_PYTHON"):
        return {"status": "skipped", "error": "PARALLAX_RL_PYTHON is not set"}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{name}.json"
        argv = [str(out) if c == "{out}" else c for c in command]
        shown = " ".join("OUT.json" if c == "{out}" else c for c in command).replace(PY, "python")
        load = os.getloadavg() if hasattr(os, "getloadavg") else None
        t0 = time.perf_counter()
        try:
            done = subprocess.run(
                argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "command": shown, "error": f"over {timeout:.0f} s"}
        record: dict[str, Any] = {
            "command": shown,
            "seconds": time.perf_counter() - t0,
            "load_average_before": load,
            "returncode": done.returncode,
        }
        if out.exists():
            record["result"] = json.loads(out.read_text())
        else:
            try:
                record["result"] = json.loads(done.stdout)
            except json.JSONDecodeError:
                record["output"] = done.stdout[-20_000:]
        record["status"] = "ok" if done.returncode == 0 else "failed"
        if done.returncode != 0:
            record["error"] = done.stderr[-4_000:]
        return record


# -- plots ----------------------------------------------------------------------------------
def _scaling_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    job = results.get("jobs", {}).get("scaling", {})
    rows: list[dict[str, Any]] = job.get("result", {}).get("rows", [])
    return rows


def plot(results: dict[str, Any], assets: Path = ASSETS) -> list[Path]:
    """Draw the `perf_*.png` plots from collected results; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    rows = _scaling_rows(results)
    envs = sorted({r["env"] for r in rows})
    colors = dict(zip(envs, plt.rcParams["axes.prop_cycle"].by_key()["color"]))

    def series(env: str, key: str) -> tuple[list[int], list[float]]:
        pts = sorted((r["num_envs"], r[key]) for r in rows if r["env"] == env and r.get(key))
        return [p[0] for p in pts], [p[1] for p in pts]

    if rows:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for env in envs:
            ax.plot(*series(env, "steps_per_second"), "o-", color=colors[env], label=env)
            xs, ys = series(env, "competitor_steps_per_second")
            if xs:
                ax.plot(xs, ys, "s--", color=colors[env], alpha=0.6, label=f"sekai {env}")
        ax.set(xscale="log", yscale="log", xlabel="num_envs N", ylabel="env steps / s")
        ax.set_title("Finance envs: parallax (solid) vs sekai native (dashed)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        written.append(_save(fig, assets / "perf_scaling.png"))

        fig, ax = plt.subplots(figsize=(7, 4))
        for env in envs:
            ax.plot(*series(env, "compile_seconds"), "o-", color=colors[env], label=env)
        ax.set(xscale="log", xlabel="num_envs N", ylabel="compile time of the rollout (s)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        written.append(_save(fig, assets / "perf_compile.png"))

        fig, ax = plt.subplots(figsize=(7, 4.5))
        for env in envs:
            xs, ys = series(env, "state_bytes")
            ax.plot(xs, ys, "o-", color=colors[env], label=f"{env} state")
            pts = sorted(
                (r["num_envs"], sum(r["program_bytes"].values()))
                for r in rows
                if r["env"] == env and r.get("program_bytes")
            )
            if pts:
                ax.plot(*zip(*pts), "^:", color=colors[env], label=f"{env} XLA buffers")
        rss = sorted((r["num_envs"], r["peak_rss_bytes"]) for r in rows)
        if rss:
            ax.plot(*zip(*rss), "k.", alpha=0.5, label="peak RSS (process, cumulative)")
        ax.set(xscale="log", yscale="log", xlabel="num_envs N", ylabel="bytes")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
        fig.tight_layout()
        written.append(_save(fig, assets / "perf_memory.png"))

    roof = results.get("jobs", {}).get("roofline", {}).get("result")
    if roof:
        peaks = roof["peaks"]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        intensity = [2.0**k for k in range(-6, 8)]
        bw, fma = peaks["bandwidth_bytes_per_s"], peaks["fma_flops_per_s"]
        ax.plot(intensity, [min(bw * i, fma) for i in intensity], "k-", label="roofline")
        for row in roof["rows"]:
            work = row["work_per_env_step"]
            x = work["flops"] / max(work["bytes_accessed"], 1.0)
            y = row["measured_steps_per_s"] * work["flops"]
            ax.plot([x], [y], "o", label=f"{row['env']} ({100 * row['fraction_of_roofline']:.1f}%)")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="arithmetic intensity (XLA elementwise ops / byte)",
            ylabel="elementwise ops / s",
        )
        ax.set_title(f"Finance envs at N={roof['rows'][0]['num_envs']} on this machine's roofline")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        written.append(_save(fig, assets / "perf_roofline.png"))
    return written


# -- markdown tables (for docs/performance.md) ----------------------------------------------
def _rate(x: float | None) -> str:
    if x is None:
        return "-"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f}"


def _result(results: dict[str, Any], name: str) -> Any:
    return results.get("jobs", {}).get(name, {}).get("result")


def tables(results: dict[str, Any]) -> str:
    """Markdown tables of the collected results (ratios first), for the Performance page."""
    out: list[str] = []
    fin = _result(results, "finance_vs_sekai")
    if fin:
        out += [
            "| env | N | parallax steps/s | sekai native | **x native** | sekai sync | **x sync** |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in fin["rows"]:
            native, sync = r.get("sekai_native", {}), r.get("sekai_sync", {})
            out.append(
                f"| {r['id']} | {r['num_envs']} | {_rate(r['parallax']['steps_per_s'])} "
                f"| {_rate(native.get('steps_per_s'))} | **{r.get('ratio_vs_native', 0):.1f}x** "
                f"| {_rate(sync.get('steps_per_s'))} | "
                + (f"**{r['ratio_vs_sync']:.0f}x** |" if "ratio_vs_sync" in r else "- |")
            )
        out.append("")
    rows = _scaling_rows(results)
    if rows:
        ns = sorted({r["num_envs"] for r in rows})
        out += ["| env | " + " | ".join(f"N={n}" for n in ns) + " |"]
        out += ["|---|" + "---:|" * len(ns)]
        for env in sorted({r["env"] for r in rows}):
            by_n = {r["num_envs"]: r for r in rows if r["env"] == env}
            cells = [
                f"{by_n[n]['ratio']:.1f}x ({_rate(by_n[n]['steps_per_second'])})"
                if n in by_n and "ratio" in by_n[n]
                else "-"
                for n in ns
            ]
            out.append(f"| {env} | " + " | ".join(cells) + " |")
        out.append("")
    for job, title in (("gymnax_vs_raw", "raw gymnax vmap"), ("parallax_rl", "parallax-rl 0.4.0")):
        res = _result(results, job)
        if res:
            res = res if isinstance(res, list) else [res]
            out += [
                f"| N | our stack steps/s | {title} steps/s | **ratio** | runs (ours / theirs) |",
                "|---:|---:|---:|---:|---|",
            ]
            for r in res:
                spread = (
                    f"{_rate(r['steps_per_second_min'])}..{_rate(r['steps_per_second_max'])} / "
                    f"{_rate(r.get('competitor_steps_per_second_min'))}.."
                    f"{_rate(r.get('competitor_steps_per_second_max'))}"
                )
                ratio = f"**{r['ratio']:.2f}x**" if "ratio" in r else "error"
                out.append(
                    f"| {r['num_envs']} | {_rate(r['steps_per_second'])} "
                    f"| {_rate(r.get('competitor_steps_per_second'))} | {ratio} | {spread} |"
                )
            out.append("")
    lobs = [_result(results, name) for name in ("lob_speed", "lob_speed_2devices")]
    if any(lobs):
        out += [
            "| LimitOrderBook-v0, N | devices | parallax steps/s | sekai loop steps/s | **ratio** "
            "| events/s (ours) | events/s (sekai) | events / env step |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for lob in lobs:
            if not lob:
                continue
            r = lob["result"]
            out.append(
                f"| {r['num_envs']} | {r.get('devices', 1)} | {_rate(r['steps_per_second'])} "
                f"| {_rate(r.get('competitor_steps_per_second'))} | **{r.get('ratio', 0):.2f}x** "
                f"| {_rate(r.get('events_per_second'))} "
                f"| {_rate(r.get('competitor_events_per_second'))} "
                f"| {r.get('events_per_step', 0):.1f} |"
            )
        out.append("")
    reset = _result(results, "reset_cost")
    if reset:
        out += [
            f"Reset/step cost ratio of the env: {reset['reset_over_step_cost']:.0f}x "
            f"(N={reset['num_envs']}, {reset['steps']} steps)",
            "",
            "| variant | steps/s | **vs naive** | compile s |",
            "|---|---:|---:|---:|",
        ]
        runs = reset["runs"]
        for label, (sps, comp) in runs.items():
            ref_label = "naive, all end together" if "together" in label else "naive"
            out.append(
                f"| {label} | {_rate(sps)} | **{sps / runs[ref_label][0]:.1f}x** | {comp:.1f} |"
            )
        out.append("")
    rng_speed = _result(results, "rng_speed")
    if rng_speed:
        out += ["| method | normals/s |", "|---|---:|"]
        for name, rate in rng_speed["normals_per_second"].items():
            out.append(f"| {name} | {_rate(rate)} |")
        out += [
            f"| **ratio parallax.rng / jax.random** | **{rng_speed['ratio']:.2f}x** |",
            "",
        ]
    roof = _result(results, "roofline")
    if roof:
        pk = roof["peaks"]
        out += [
            f"Machine: bandwidth {pk['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s, elementwise FMA "
            f"{pk['fma_flops_per_s'] / 1e9:.1f} Gop/s, exp {pk['exp_per_s'] / 1e9:.2f} G/s, "
            f"matmul {pk['matmul_flops_per_s'] / 1e9:.1f} GFLOP/s.",
            "",
            "| env (N) | steps/s | ops / step | transc. / step | bytes / step | state B/env "
            "| fixed us/step | bound | roofline steps/s | **fraction** |",
            "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|",
        ]
        for r in roof["rows"]:
            w = r["work_per_env_step"]
            out.append(
                f"| {r['env']} ({r['num_envs']}) | {_rate(r['measured_steps_per_s'])} "
                f"| {w['flops']:.0f} | {w['transcendentals']:.1f} | {w['bytes_accessed']:.0f} "
                f"| {r['state_bytes_per_env']:.0f} | {1e6 * r['fixed_step_seconds']:.0f} "
                f"| {r['bound']} | {_rate(r['roofline_steps_per_s'])} "
                f"| **{100 * r['fraction_of_roofline']:.1f}%** |"
            )
        out.append("")
    return "\n".join(out)


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(JOBS), help="run only these jobs")
    parser.add_argument("--skip", nargs="+", choices=sorted(JOBS), default=[], help="skip these")
    parser.add_argument("--merge", action="store_true", help="keep other jobs' old results")
    parser.add_argument("--plots-only", action="store_true", help="redraw from the JSON")
    parser.add_argument(
        "--tables", action="store_true", help="print markdown tables from the JSON and stop"
    )
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per job")
    parser.add_argument("--out", default=str(RESULTS), help="where the collected JSON goes")
    args = parser.parse_args(argv)
    out = Path(args.out)
    keep = args.merge or args.plots_only or args.tables
    old = json.loads(out.read_text()) if out.exists() and keep else {}
    if args.tables:
        print(tables(old))
        return 0
    if args.plots_only:
        for path in plot(old, out.parent):
            print(f"wrote {path}")
        return 0
    # with --merge, other top-level entries (earlier runs kept for comparison) stay
    results: dict[str, Any] = {k: v for k, v in old.items() if k not in ("machine", "jobs")}
    results.update(machine=machine(), jobs=dict(old.get("jobs", {})))
    if args.merge and "machine" in old:
        results["previous_machine"] = old["machine"]
    names = [n for n in (args.only or JOBS) if n not in args.skip]
    failed = 0
    for name in names:
        print(f"[run_all] {name} ...", flush=True)
        record = run_job(name, JOBS[name], args.timeout)
        results["jobs"][name] = record
        failed += record["status"] in ("failed", "timeout")
        print(
            f"[run_all] {name}: {record['status']}"
            + (f" in {record['seconds']:.0f} s" if "seconds" in record else "")
            + (f" ({record['error'].strip().splitlines()[-1]})" if record.get("error") else ""),
            flush=True,
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1))  # after each job: partial results survive
    results["machine"]["load_average_after"] = (
        list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    )
    out.write_text(json.dumps(results, indent=1))
    print(f"wrote {out}")
    for path in plot(results, out.parent):
        print(f"wrote {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
