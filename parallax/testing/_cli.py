"""`parallax check ENV`: run the battery on a registered env id or a `module:factory` path.

Prints one row per check and precision, writes a JSON report, and exits with 0 when every
check passed or was skipped, 1 otherwise (2 for a usage error).
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax

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
        raise ValueError(_unknown(spec) + ", and not a module:factory path")
    return _load_factory(spec)


def _default_report(spec: str) -> str:
    return "parallax-check-" + re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_") + ".json"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="parallax check",
        description="Run the Parallax validation battery on an environment.",
    )
    p.add_argument("env", help="a registered env id (GridWorld-v0) or module:factory")
    p.add_argument("--steps", type=int, default=16, help="steps per rollout (default 16)")
    p.add_argument(
        "--batch-size", type=int, default=8, help="batch size of batch_independence (default 8)"
    )
    p.add_argument(
        "--x64",
        choices=("off", "on", "both"),
        default="both",
        help="run with jax_enable_x64 off, on, or both (default both)",
    )
    p.add_argument(
        "--report", default=None, help="JSON report path (default parallax-check-<id>.json)"
    )
    p.add_argument("--reference", default=None, help="module:factory of a reference implementation")
    p.add_argument(
        "--checks",
        default=",".join(BATTERY_CHECKS),
        help=f"comma-separated subset of {','.join(BATTERY_CHECKS)}",
    )
    p.add_argument(
        "--deterministic", action="store_true", help="the env uses no randomness (e.g. Race-v0)"
    )
    p.add_argument(
        "--marl-steps",
        type=int,
        default=None,
        help="steps of the multi-agent rules (default: --steps)",
    )
    p.add_argument(
        "--no-disable-jit",
        action="store_true",
        help="run the eager rollouts op by op instead of under jax.disable_jit() (brax, mjx)",
    )
    return p


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

    started = time.perf_counter()
    results: dict[str, list[Outcome]] = {}
    for mode in modes:
        with jax.enable_x64(mode == "x64"):
            results[mode] = run_battery(
                env_factory,
                reference_factory=reference_factory,
                num_steps=args.steps,
                batch_size=args.batch_size,
                checks=checks,
                options=options,
            )
    elapsed = time.perf_counter() - started

    rows = [(name, {m: results[m][i] for m in modes}) for i, name in enumerate(checks)]
    failed = [
        (name, m, o)
        for name, by_mode in rows
        for m, o in by_mode.items()
        if o.status in ("fail", "error")
    ]
    overall = "FAIL" if failed else "PASS"
    print(f"parallax check {args.env}  ({args.steps} steps, batch {args.batch_size})")
    print(_table(rows, modes))
    for name, mode, o in failed:
        print(f"\n[{name} / {mode}] {_STATUS[o.status]}:\n{o.message}")
    skipped = {
        (name, o.message) for name, by_mode in rows for o in by_mode.values() if o.status == "skip"
    }
    for name, message in sorted(skipped):
        print(f"\n[{name}] skipped: {message}")

    report_path = args.report or _default_report(args.env)
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
    with open(report_path, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, indent=1, default=str)
    print(f"\noverall: {overall}  ({elapsed:.1f}s)   report: {report_path}")
    return 0 if overall == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
