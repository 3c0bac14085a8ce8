"""The `"recompilation"` group of `check_env`.

- `recompilation`: `jax.jit(env.step)` is traced once over five same-shaped calls and XLA
  compiles nothing on later steps (`check_env/recompilation`); on failure the field whose
  type changed is named.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ._errors import CheckError
from ._report import CheckReport
from ._rollout import Driver, Schedule
from ._trees import describe_leaf, flatten

__all__ = ["recompilation"]

_OWNER = "check_env"


class _CompileCounter:
    """Counts XLA backend compilations while active (a `jax.monitoring` listener)."""

    _EVENT = "/jax/core/compile/backend_compile_duration"

    def __init__(self) -> None:
        self.count = 0

    def _listen(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        if event == self._EVENT:
            self.count += 1

    def __enter__(self) -> _CompileCounter:
        jax.monitoring.register_event_duration_secs_listener(self._listen)
        return self

    def __exit__(self, *exc: object) -> None:
        jax.monitoring.unregister_event_duration_listener(self._listen)


def _aval_change(a: Any, b: Any) -> tuple[str, str, str] | None:
    fa, fb = flatten(a), flatten(b)
    for path, leaf in fa.items():
        if path not in fb:
            return path, describe_leaf(leaf), "no such field"
        da, db = describe_leaf(leaf), describe_leaf(fb[path])
        if da != db:
            return path, da, db
    for path in fb:
        if path not in fa:
            return path, "no such field", describe_leaf(fb[path])
    return None


def recompilation(
    driver: Driver,
    step_j: Any,
    traces: dict[str, int],
    sched: Schedule,
    disable_jit: bool,
    report: CheckReport,
) -> None:
    """`step_j = jax.jit(env.step)` is traced once over five calls; nothing compiles later."""
    calls = min(5, int(np.shape(sched.restart)[0]))
    with jax.disable_jit(disable_jit):
        state = driver.first_reset(sched.first)  # keeps reset's exact types, weak ones included
    traced_before = traces["step"]
    inputs = [state]
    compiles = _CompileCounter()
    for t in range(calls):
        prepared = jax.tree.map(lambda x, t=t: x[t], sched.prepared)
        with jax.disable_jit(disable_jit):  # the inputs, outside the counted region
            pre = driver.restart(sched.restart[t], state, eager=True)
            action = driver.act(prepared, pre)
        if t == 0:
            state = jax.block_until_ready(step_j(pre, action))
        else:
            with compiles:
                state = jax.block_until_ready(step_j(pre, action))
        inputs.append(state)
    # the first call may reuse a trace made earlier (same input types): count it as one
    traces_now = max(traces["step"] - traced_before, 0) + int(traced_before > 0)
    if traces_now > 1:
        change = None
        for i in range(len(inputs) - 1):
            change = _aval_change(inputs[i], inputs[i + 1])
            if change is not None:
                break
        field, before, after = change if change else (None, None, None)
        weak = before is not None and after is not None and "~" in (before + after)
        hint = (
            "`~` marks a weakly typed value (e.g. a Python float such as `reward=0.0` in "
            "reset); return the same concrete dtype from reset and step (jnp.float32(0.0))"
            if weak
            else "reset and step must return identical types; a Python-side value that "
            "changes between calls also forces a retrace"
        )
        raise CheckError(
            f"{_OWNER}/recompilation",
            f"jax.jit(env.step) was traced {traces_now} times for {len(inputs) - 1} calls "
            "with inputs of unchanged shapes; it must be traced once",
            step=2,
            field=field,
            expected=f"{before} (the type at the previous step)" if before else None,
            got=after,
            hint=hint,
        )
    if compiles.count:
        raise CheckError(
            f"{_OWNER}/recompilation",
            f"XLA compiled {compiles.count} program(s) while later steps ran through the "
            "already-compiled jax.jit(env.step)",
            step=2,
            expected="0 compilations",
            got=f"{compiles.count} compilations",
            hint="something inside step calls jax.jit on a new function, or keeps state",
        )
    report.stats["step_traces"] = traces_now
    report.passed.append("recompilation")
