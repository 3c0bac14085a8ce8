"""`parallax check ENV`: run the battery on a project directory, a registered env id or a
`module:factory` path, and write the validation report.

Prints a line per check as it ends (a progress bar on stderr when it is a terminal), then a
table of every check and precision, then (when every check of the full battery passed) the
throughput of the reference and of the batched env, and a final verdict line. Writes the
JSON validation report (schema `parallax-validation-report/1`): each check's verdict and
seconds, the throughput, the environment (versions, backend, devices) and the sha256 of the
env's and reference's source files, which `parallax.testing.require_fresh_report` compares
with the current files. A check that fails with a diverging trajectory (`determinism`, the
differential test, ...) also writes a trajectory file that `parallax replay FILE` re-runs.
Exits with 0 when every check passed or was skipped, 1 otherwise, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any, TextIO

import jax

from .._cli import DefaultsHelpFormatter
from ._battery import BATTERY_CHECKS, Outcome, run_battery
from ._replay import failure_note
from ._report import REPORT_SCHEMA, environment_info, source_files, source_hashes
from ._targets import Target, default_report_path, load_target

__all__ = ["main"]

_STATUS = {"pass": "PASS", "fail": "FAIL", "skip": "skip", "error": "ERROR"}


def _report_problem(path: str) -> str | None:
    """Why the JSON report cannot be written to `path`, or None if it can."""
    if os.path.isdir(path):
        return "it is a directory"
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"the directory {parent!r} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"the directory {parent!r} is not writable"
    return None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="parallax check",
        description="Run the Parallax validation battery on an environment.",
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument(
        "env",
        help="a project directory (parallax new), a registered env id (GridWorld-v0) or "
        "module:factory",
    )
    p.add_argument("--steps", type=int, default=16, metavar="T", help="steps per rollout")
    p.add_argument(
        "--batch-size", type=int, default=8, metavar="N", help="batch size of batch_independence"
    )
    p.add_argument(
        "--x64",
        choices=("off", "on", "both"),
        default="both",
        help="run with jax_enable_x64 off, on, or both",
    )
    p.add_argument(
        "--report",
        default=None,
        metavar="PATH",
        help="JSON validation report path (default: DIR/validation_report.json for a "
        "project directory, else parallax-check-<id>.json in the current directory)",
    )
    p.add_argument(
        "--reference",
        default=None,
        metavar="MODULE:FACTORY",
        help="module:factory of a reference implementation (a project's reference.py is "
        "found by itself)",
    )
    p.add_argument(
        "--checks",
        default=",".join(BATTERY_CHECKS),
        metavar="LIST",
        help=f"comma-separated subset of {', '.join(BATTERY_CHECKS)} (default: all)",
    )
    p.add_argument(
        "--deterministic", action="store_true", help="the env uses no randomness (e.g. Race-v0)"
    )
    p.add_argument(
        "--marl-steps",
        type=int,
        default=None,
        metavar="T",
        help="steps of the multi-agent rules (default: --steps)",
    )
    p.add_argument(
        "--no-disable-jit",
        action="store_true",
        help="run the eager rollouts op by op instead of under jax.disable_jit() (brax, mjx)",
    )
    p.add_argument(
        "--throughput",
        choices=("auto", "on", "off"),
        default="auto",
        help="measure steps/s after the checks: auto = only when the full battery ran and "
        "passed; on = whenever every selected check passed",
    )
    p.add_argument(
        "--throughput-envs",
        default="1024,8192",
        metavar="LIST",
        help="comma-separated batch sizes of the batched throughput",
    )
    p.add_argument(
        "--throughput-steps",
        type=int,
        default=100,
        metavar="T",
        help="steps per timed call (the reference runs 10x as many)",
    )
    p.add_argument(
        "--throughput-repeats", type=int, default=3, metavar="R", help="timed calls per size"
    )
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (one is drawn on stderr only when it is a terminal)",
    )
    return p


class _Progress:
    """A line on stdout per finished check and, if `bar`, a progress bar on stderr below.

    The bar is tqdm's when tqdm is installed, else a plain one.
    """

    def __init__(self, total: int, *, bar: bool, out: TextIO, err: TextIO) -> None:
        self.total, self.done, self.out, self.err = total, 0, out, err
        self.tqdm: Any = None
        self.plain = False
        if bar:
            try:
                from tqdm import tqdm
            except ImportError:
                self.plain = True
            else:
                self.tqdm = tqdm(total=total, file=err, leave=False, unit="check")

    def start(self, label: str) -> None:
        """Show `label` (the check now running) on the bar."""
        if self.tqdm is not None:
            self.tqdm.set_description_str(label)
        elif self.plain:
            filled = 20 * self.done // max(self.total, 1)
            bar = "#" * filled + "-" * (20 - filled)
            self.err.write(f"\r\033[K[{bar}] {self.done}/{self.total} {label}")
            self.err.flush()

    def line(self, text: str) -> None:
        """Print a finished check's line above the bar and advance the bar."""
        self.done += 1
        if self.tqdm is not None:
            self.tqdm.write(text, file=self.out)
            self.tqdm.update()
            return
        if self.plain:
            self.err.write("\r\033[K")
            self.err.flush()
        print(text, file=self.out, flush=True)

    def close(self) -> None:
        """Remove the bar."""
        if self.tqdm is not None:
            self.tqdm.close()
        elif self.plain:
            self.err.write("\r\033[K")
            self.err.flush()


def _outcome_line(mode: str, o: Outcome, width: int) -> str:
    return f"{mode}  {o.check:<{width}}  {_STATUS[o.status]:<5}  {o.seconds:6.2f}s"


def _table(rows: list[tuple[str, dict[str, Outcome]]], modes: list[str]) -> str:
    width = max(len("check"), *(len(name) for name, _ in rows))
    head = f"{'check':<{width}}  " + "  ".join(f"{m:<14}" for m in modes)
    lines = [head, "-" * len(head)]
    for name, by_mode in rows:
        cells = []
        for m in modes:
            o = by_mode.get(m)
            cells.append(
                f"{'-':<14}" if o is None else f"{_STATUS[o.status] + f' {o.seconds:.2f}s':<14}"
            )
        lines.append(f"{name:<{width}}  " + "  ".join(cells))
    return "\n".join(lines)


def _sizes(text: str) -> list[int] | None:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        return None
    return sizes if sizes and all(n >= 1 for n in sizes) else None


def _newest_json(directory: str) -> str | None:
    files = glob.glob(os.path.join(directory, "*.json"))
    return max(files, key=os.path.getmtime) if files else None


def _failure_trajectory(
    target: Target,
    o: Outcome,
    mode: str,
    steps: int,
    dump_dir: str,
    report_path: str,
) -> str | None:
    """Write the trajectory of a failed check next to the report; its path, or None."""
    from ._replay import write_failure_trajectory

    stem = os.path.splitext(report_path)[0]
    note = f"parallax check {target.spec}: {o.check} failed ({mode})"
    try:
        mismatch = None
        if o.check == "matches_reference":
            dump = _newest_json(dump_dir)
            if dump is None:
                return None
            mismatch = f"{stem}.{o.check}.{mode}.mismatch.json"
            shutil.move(dump, mismatch)  # the check's own dump outlives the temporary dir
            o.message = o.message.replace(dump, mismatch)
        return write_failure_trajectory(
            o.check,
            target.env_factory,
            stem,
            mode=mode,
            num_steps=steps,
            env_spec=target.spec,
            note=note,
            mismatch=mismatch,
        )
    except Exception as error:  # the env is broken already; say so, keep the report
        print(
            f"parallax check: could not write a trajectory for {o.check}: {error}", file=sys.stderr
        )
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run `parallax check`; returns the exit code (0 iff every check passed or skipped)."""
    parser = _parser()
    args = parser.parse_args(argv)
    checks = [c.strip() for c in args.checks.split(",") if c.strip()]
    unknown = [c for c in checks if c not in BATTERY_CHECKS]
    if unknown or not checks:
        parser.error(f"--checks: unknown {unknown}; choose from {','.join(BATTERY_CHECKS)}")
    if args.steps < 1:
        parser.error(f"--steps must be a positive int, got {args.steps}")
    if args.batch_size < 2:
        parser.error(f"--batch-size must be an int >= 2, got {args.batch_size}")
    if args.marl_steps is not None and args.marl_steps < 1:
        parser.error(f"--marl-steps must be a positive int, got {args.marl_steps}")
    sizes = _sizes(args.throughput_envs)
    if sizes is None:
        parser.error(
            f"--throughput-envs must be a comma-separated list of positive ints, got "
            f"{args.throughput_envs!r}"
        )
    for name in ("throughput_steps", "throughput_repeats"):
        if getattr(args, name) < 1:
            parser.error(
                f"--{name.replace('_', '-')} must be a positive int, got {getattr(args, name)}"
            )
    report_path = args.report or default_report_path(args.env)
    problem = _report_problem(report_path)
    if problem:
        parser.error(f"--report {report_path!r}: {problem}")
    try:
        target = load_target(args.env)
        reference_factory = (
            load_target(args.reference).env_factory if args.reference else target.reference_factory
        )
    except (ImportError, AttributeError, ValueError, TypeError, SyntaxError) as error:
        print(f"parallax check: cannot load {args.env!r}: {error}", file=sys.stderr)
        return 2
    env_factory = target.env_factory
    options: dict[str, Any] = {"deterministic": args.deterministic}
    if args.marl_steps is not None:
        options["marl_num_steps"] = args.marl_steps
    if args.no_disable_jit:
        options["disable_jit"] = False
    modes = {"off": ["f32"], "on": ["x64"], "both": ["f32", "x64"]}[args.x64]

    print(f"parallax check {args.env}  ({args.steps} steps, batch {args.batch_size})", flush=True)
    width = max(len(c) for c in checks)
    progress = _Progress(
        len(checks) * len(modes),
        bar=not args.no_progress and sys.stderr.isatty(),
        out=sys.stdout,
        err=sys.stderr,
    )
    started = time.perf_counter()
    results: dict[str, list[Outcome]] = {}
    dump_dir = tempfile.mkdtemp(prefix="parallax-check-")
    trajectories: dict[tuple[str, str], str] = {}
    try:
        for mode in modes:

            def report(o: Outcome, mode: str = mode) -> None:
                if o.status == "fail":
                    written = _failure_trajectory(
                        target, o, mode, args.steps, dump_dir, report_path
                    )
                    if written is not None:
                        trajectories[(o.check, mode)] = written
                        o.message += "\n" + failure_note(written, target.spec)
                progress.line(_outcome_line(mode, o, width))
                following = progress.done % len(checks)  # the next check of this mode
                if following:
                    progress.start(f"{mode} {checks[following]}")

            progress.start(f"{mode} {checks[0]}")
            with jax.enable_x64(mode == "x64"):
                results[mode] = run_battery(
                    env_factory,
                    reference_factory=reference_factory,
                    num_steps=args.steps,
                    batch_size=args.batch_size,
                    checks=checks,
                    options=options,
                    reference_options={"dump_path": dump_dir},
                    on_outcome=report,
                )
    finally:
        progress.close()
        shutil.rmtree(dump_dir, ignore_errors=True)
    elapsed = time.perf_counter() - started

    rows = [(name, {m: results[m][i] for m in modes}) for i, name in enumerate(checks)]
    failed = [
        (name, m, o)
        for name, by_mode in rows
        for m, o in by_mode.items()
        if o.status in ("fail", "error")
    ]
    overall = "FAIL" if failed else "PASS"
    print()
    print(_table(rows, modes))
    for name, mode, o in failed:
        print(f"\n[{name} / {mode}] {_STATUS[o.status]}:\n{o.message}")
    skipped = {
        (name, o.message) for name, by_mode in rows for o in by_mode.values() if o.status == "skip"
    }
    for name, message in sorted(skipped):
        print(f"\n[{name}] skipped: {message}")

    throughput: dict[str, Any]
    full = set(checks) >= set(BATTERY_CHECKS)
    if failed:
        throughput = {"measured": False, "reason": "a correctness check failed"}
    elif args.throughput == "off":
        throughput = {"measured": False, "reason": "--throughput off"}
    elif args.throughput == "auto" and not full:
        throughput = {"measured": False, "reason": "only a subset of the checks ran (--checks)"}
    else:
        throughput = _throughput(target, reference_factory, sizes, args)

    sources = _sources(target, reference_factory)
    payload = {
        "schema": REPORT_SCHEMA,
        "env": target.spec,
        "overall": overall,
        "eligible_for_training": overall == "PASS",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seconds": round(elapsed, 3),
        "options": {
            "steps": args.steps,
            "batch_size": args.batch_size,
            "x64": args.x64,
            "reference": args.reference,
            "checks": checks,
            "deterministic": args.deterministic,
            "marl_steps": args.marl_steps,
            "disable_jit": not args.no_disable_jit,
        },
        "environment": environment_info(),
        "versions": {},
        "results": [
            {
                "precision": m,
                **o.as_dict(),
                **(
                    {"trajectory": trajectories[(o.check, m)]}
                    if (o.check, m) in trajectories
                    else {}
                ),
            }
            for m in modes
            for o in results[m]
        ],
        "throughput": throughput,
        "sources": sources,
    }
    info: dict[str, Any] = payload["environment"]  # type: ignore[assignment]
    payload["versions"] = {k: info[k] for k in ("python", "jax", "parallax") if k in info}
    try:
        with open(report_path, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=1, default=str)
    except OSError as error:
        print(f"parallax check: cannot write --report {report_path!r}: {error}", file=sys.stderr)
        return 2
    verdict = (
        "PASS (eligible for training)"
        if overall == "PASS"
        else f"FAIL ({len(failed)} failed; not eligible for training)"
    )
    print(f"\noverall: {verdict}  ({elapsed:.1f}s)   report: {report_path}")
    return 0 if overall == "PASS" else 1


def _sources(target: Target, reference_factory: Any) -> dict[str, str]:
    """sha256 of the files defining the env (its factory, class, wrapped envs) and reference."""
    objects: list[Any] = [target.env_factory]
    with contextlib.suppress(Exception):  # the battery already reported a crashing factory
        objects.append(target.env_factory())
    if reference_factory is not None:
        objects.append(reference_factory)
        with contextlib.suppress(Exception):
            objects.append(reference_factory())
    if target.kind == "id":
        objects = objects[1:]  # the lambda wrapping make() lives in parallax itself
    return source_hashes(source_files(*objects))


def _throughput(
    target: Target, reference_factory: Any, sizes: list[int], args: argparse.Namespace
) -> dict[str, Any]:
    from ._throughput import measure_throughput

    print("\nthroughput (f32):", flush=True)
    try:
        result = measure_throughput(
            target.env_factory,
            reference_factory,
            env_id=target.spec if target.kind == "id" else None,
            sizes=sizes,
            steps=args.throughput_steps,
            repeats=args.throughput_repeats,
            reference_steps=10 * args.throughput_steps,
        )
    except Exception as error:  # a measurement failure is not a correctness failure
        print(f"  not measured: {type(error).__name__}: {error}")
        return {"measured": False, "reason": f"{type(error).__name__}: {error}"}
    reference = result["reference"]
    if reference is not None:
        print(f"  reference        {reference['steps_per_second']:>14,.0f} steps/s")
    for row in result["batched"]:
        ratio = result["speedup"].get(str(row["num_envs"]))
        extra = f"   {ratio:,.1f}x the reference" if ratio is not None else ""
        label = f"batched n={row['num_envs']}"
        print(f"  {label:<16} {row['steps_per_second']:>14,.0f} steps/s{extra}")
    return {"measured": True, **result}


if __name__ == "__main__":
    sys.exit(main())
