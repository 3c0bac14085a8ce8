"""`parallax check ENV`: run the battery on a registered env id or a `module:factory` path.

Prints a line per check as it ends (a progress bar on stderr when it is a terminal), then a
table of every check and precision, and writes a JSON report; exits with 0 when every check
passed or was skipped, 1 otherwise, 2 for a usage error (found before any check runs).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import jax

from .._cli import DefaultsHelpFormatter
from ._battery import BATTERY_CHECKS, Outcome, run_battery

__all__ = ["main"]

_STATUS = {"pass": "PASS", "fail": "FAIL", "skip": "skip", "error": "ERROR"}


def _load_factory(spec: str) -> Callable[[], Any]:
    """`module:attr` -> the attribute (a class or a function), imported."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError(f"expected 'module:factory', got {spec!r}")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{spec!r} is not callable")
    return obj  # type: ignore[no-any-return]


def _env_factory(spec: str) -> Callable[[], Any]:
    from .._registry import _NAMESPACES, _REGISTRY, _unknown, make

    namespace, slash, _ = spec.partition("/")
    if spec in _REGISTRY or (slash and namespace in _NAMESPACES):
        return lambda: make(spec)
    if ":" not in spec:
        raise ValueError(f"not a module:factory path, and {_unknown(spec)}")
    return _load_factory(spec)


def _default_report(spec: str) -> str:
    return "parallax-check-" + re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_") + ".json"


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
    p.add_argument("env", help="a registered env id (GridWorld-v0) or module:factory")
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
        help="JSON report path (default: parallax-check-<id>.json in the current directory)",
    )
    p.add_argument(
        "--reference",
        default=None,
        metavar="MODULE:FACTORY",
        help="module:factory of a reference implementation",
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
    report_path = args.report or _default_report(args.env)
    problem = _report_problem(report_path)
    if problem:
        parser.error(f"--report {report_path!r}: {problem}")
    try:
        env_factory = _env_factory(args.env)
        reference_factory = _load_factory(args.reference) if args.reference else None
    except (ImportError, AttributeError, ValueError, TypeError) as error:
        print(f"parallax check: cannot load {args.env!r}: {error}", file=sys.stderr)
        return 2
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
    try:
        for mode in modes:

            def report(o: Outcome, mode: str = mode) -> None:
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
                    on_outcome=report,
                )
    finally:
        progress.close()
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

    payload = {
        "env": args.env,
        "overall": overall,
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
        "versions": {"python": platform.python_version(), "jax": jax.__version__},
        "results": [{"precision": m, **o.as_dict()} for m in modes for o in results[m]],
    }
    try:
        import parallax

        payload["versions"]["parallax"] = parallax.__version__
    except (ImportError, AttributeError):  # pragma: no cover - running from a broken install
        pass
    try:
        with open(report_path, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=1, default=str)
    except OSError as error:
        print(f"parallax check: cannot write --report {report_path!r}: {error}", file=sys.stderr)
        return 2
    print(f"\noverall: {overall}  ({elapsed:.1f}s)   report: {report_path}")
    return 0 if overall == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
