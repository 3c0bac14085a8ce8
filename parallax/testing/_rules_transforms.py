"""The `"transforms"` group of `check_env`: one function per rule.

- `jit`: the rollout with `jax.jit(env.step)` in a Python loop equals the eager rollout.
- `vmap`: instance 0 of `jax.jit(jax.vmap(lax.scan))` over the session's keys equals it.
- `scan`: `jax.jit(lax.scan)` alone equals it (run only when `vmap` fails, to tell the two
  apart).

All three compare under the session's float tolerance.
"""

from __future__ import annotations

import jax

from ._compare import compare_rollouts
from ._errors import CheckError
from ._report import CheckReport
from ._session import EnvSession
from ._tolerance import Tolerance

__all__ = ["check_transforms", "jit", "scan", "vmap"]

_OWNER = "check_env"


def check_transforms(session: EnvSession, tolerance: Tolerance, report: CheckReport) -> None:
    """Run `jit`, then `vmap` (and `scan` when `vmap` fails), appending to `report`."""
    session.eager(), session.vroll()  # both rollouts first, as every transform needs them
    jit(session, tolerance)
    try:
        vmap(session, tolerance)
    except CheckError:
        scan(session, tolerance)
        raise
    report.passed.extend(["jit", "scan", "vmap"])


def jit(session: EnvSession, tolerance: Tolerance) -> None:
    """The rollout with `jax.jit(env.step)` equals the eager rollout."""
    eager = session.eager()
    jitted = session.driver.eager(
        session.sched, step_fn=session.step_j(), disable_jit=session.disable_jit
    )
    compare_rollouts(
        f"{_OWNER}/jit",
        jitted,
        eager,
        tolerance,
        session.kind,
        "the rollout with jax.jit(env.step) differs from the eager rollout",
        hint="Python-side state, or Python control flow on values, behaves differently "
        "when traced; keep reset/step pure",
    )


def vmap(session: EnvSession, tolerance: Tolerance) -> None:
    """Instance 0 of the `jax.jit(jax.vmap(lax.scan))` rollout equals the eager rollout."""
    eager, vroll = session.eager(), session.vroll()
    compare_rollouts(
        f"{_OWNER}/vmap",
        vroll.select(0, axis=0),
        eager,
        tolerance,
        session.kind,
        "instance 0 of the jax.jit(jax.vmap(lax.scan)) rollout differs from the eager rollout",
    )


def scan(session: EnvSession, tolerance: Tolerance) -> None:
    """The `jax.jit(lax.scan)` rollout equals the eager rollout."""
    scanned = jax.jit(session.driver.scan)(session.sched).host()
    compare_rollouts(
        f"{_OWNER}/scan",
        scanned,
        session.eager(),
        tolerance,
        session.kind,
        "the jax.jit(lax.scan) rollout differs from the eager rollout",
    )
