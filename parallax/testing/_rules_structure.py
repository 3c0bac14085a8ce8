"""The `"structure"` group of `check_env`.

- `structure`: `lax.cond` and `jnp.where` between a reset state and a step state work and
  keep the tree structure, shapes and dtypes (`check_env/structure`; the step-by-step
  structure comparison runs inside the test driver's eager rollout).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ._errors import CheckError
from ._rollout import Driver, Schedule
from ._trees import structure_difference

__all__ = ["structure"]

_OWNER = "check_env"


def structure(driver: Driver, sched: Schedule) -> None:
    """`lax.cond` and `jnp.where` between a reset state and a step state (traced, not run)."""
    restart0 = sched.restart[0]
    prepared0 = jax.tree.map(lambda x: x[0], sched.prepared)

    def reset_and_step() -> tuple[Any, Any]:
        s0 = driver.first_reset(sched.first)
        _, _, s1 = driver.transition(restart0, prepared0, s0)
        return s0, s1

    def cond_fn(pred: Any) -> Any:
        s0, s1 = reset_and_step()
        return jax.lax.cond(pred, lambda: s0, lambda: s1)

    def where_fn(pred: Any) -> Any:
        s0, s1 = reset_and_step()
        return jax.tree.map(lambda x, y: jnp.where(pred, x, y), s0, s1)

    s0, s1 = jax.eval_shape(reset_and_step)
    for label, fn in (
        ("lax.cond(pred, reset state, step state)", cond_fn),
        ("jnp.where(pred, reset state, step state)", where_fn),
    ):
        try:
            out = jax.eval_shape(fn, jnp.bool_(True))
        except (TypeError, ValueError) as error:
            first = str(error).strip().splitlines()[0]
            diff = structure_difference(s0, s1)
            raise CheckError(
                f"{_OWNER}/structure",
                f"{label} failed: the reset and step states cannot be combined ({first})",
                step=1,
                field=diff[0] if diff else None,
                expected=f"{diff[1]} (as after reset)" if diff else None,
                got=diff[2] if diff else None,
            ) from error
        diff = structure_difference(s1, out)
        if diff is not None:
            raise CheckError(
                f"{_OWNER}/structure",
                f"{label} changed the tree structure, shape or dtype",
                step=1,
                field=diff[0],
                expected=diff[1],
                got=diff[2],
            )
