"""The auto-reset check: the env under a batch-level auto-reset keeps what the learner needs.

- `auto_reset`: runs the env under Parallax's same-step auto-reset and compares every step
  with the same step taken without it, inside `jax.jit`:
  - an env that does not auto-reset is checked as `VmapAutoResetWrapper(TimeLimit(env,
    max_steps), num_envs)` (a vector env as `AutoResetWrapper(TimeLimit(env, max_steps))`),
    so that episodes end within the run;
  - an env that is already an `AutoResetWrapper` (same-step), or a `VmapWrapper` of one, is
    checked as it is (a single env under a `VmapWrapper` of `num_envs`), against the same
    stack without the auto-reset layer.

  Rules (error names `auto_reset/<rule>`):
  - `final_observation`: `info["final_observation"]` is the observation the step produced
    (the terminal one where the episode ended).
  - `outcome_kept`: reward, `termination` and `truncation` are those of the finishing step.
  - `fresh_reset`: where an episode ended, `env_state`, observation and `step_count` are
    those of `reset(key=next_episode_key(finished key))`; elsewhere those of the step.

  For the user's own batch-level auto-reset (an env with `autoreset_mode` other than
  `"off"` whose outer layer is not an `AutoResetWrapper`), the reference step is not
  available; the check then verifies that every env whose episode ended restarts with
  `step_count` 0 and carries `info["final_observation"]` shaped like the observation.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import jax
import numpy as np

from .._wrappers.autoreset import (
    FINAL_INFO,
    FINAL_OBSERVATION,
    AutoResetWrapper,
    VmapAutoResetWrapper,
    next_episode_key,
    reset_uses_previous,
)
from .._wrappers.time_limit import TimeLimit
from .._wrappers.vmap import VmapWrapper
from ._errors import CheckError
from ._report import CheckReport
from ._rollout import Driver, EnvKind, Policy, make_policy, observation_of, reward_of
from ._trees import describe_leaf, flatten, to_numpy

__all__ = ["auto_reset"]

_OWNER = "auto_reset"


def _strip(state: Any) -> Any:
    info = {k: v for k, v in state.info.items() if k not in (FINAL_OBSERVATION, FINAL_INFO)}
    return dataclasses.replace(state, info=info)


def _compare(
    rule: str, message: str, got: Any, want: Any, mask: np.ndarray | None, hint: str
) -> None:
    """Raise at the first `(step, env)` where `got` and `want` differ (bitwise, NaN == NaN)."""
    flat_got, flat_want = flatten(got), flatten(want)
    first = None
    for path, leaf in flat_want.items():
        w, g = to_numpy(leaf), to_numpy(flat_got[path])
        equal = w == g
        if w.dtype.kind in "fc":
            equal |= np.isnan(w) & np.isnan(g)
        per = equal.reshape((*equal.shape[:2], -1)).all(axis=-1)
        if mask is not None:
            per |= ~mask
        bad = np.argwhere(~per)
        if bad.size:
            t, i = (int(x) for x in bad[0])
            if first is None or (t, i) < first[:2]:
                first = (t, i, path, w[t, i], g[t, i])
    if first is not None:
        t, i, path, w, g = first
        raise CheckError(
            f"{_OWNER}/{rule}",
            message,
            step=t + 1,
            env_index=i,
            field=path,
            expected=w,
            got=g,
            hint=hint,
        )


def _same_step(env: Any) -> bool:
    return isinstance(env, AutoResetWrapper) and env.mode == "same-step"


def _stack(env: Any, kind: EnvKind, num_envs: int, max_steps: int) -> tuple[Any, Any | None]:
    """`(auto-resetting env, reference env below the auto-reset or None)`."""
    if kind.autoreset:
        if _same_step(env):
            if kind.vector:
                return env, env.env
            return VmapWrapper(env, num_envs), VmapWrapper(env.env, num_envs)
        inner: Any = getattr(env, "env", None)
        if isinstance(env, VmapWrapper) and _same_step(inner):
            return env, VmapWrapper(inner.env, int(env.num_envs))
        return env, None
    if kind.vector:
        wrapped = AutoResetWrapper(TimeLimit(env, max_steps))
        return wrapped, wrapped.env
    vec = VmapAutoResetWrapper(TimeLimit(env, max_steps), num_envs)
    return vec, vec.env


def _reference(ref: Any, pre: Any, action: Any) -> tuple[Any, Any]:
    """The stack below the auto-reset on the auto-reset's inputs: its step, and the reset the
    next episode must start from (computed for every env; compared where one ended)."""
    stepped = ref.step(_strip(pre), action)
    fresh = ref.reset(key=jax.vmap(next_episode_key)(stepped.key))
    return stepped, fresh


def auto_reset(
    env: Any,
    kind: EnvKind,
    policy: Policy | None,
    key: Any,
    *,
    num_envs: int = 4,
    num_steps: int = 16,
    max_steps: int = 3,
) -> CheckReport:
    """Check `env` under a batch-level same-step auto-reset (see the module docstring)."""
    if kind.autoreset and getattr(env, "autoreset_mode", "same-step") == "next-step":
        report = CheckReport(_OWNER)
        report.notes.append("next-step auto-reset: the same-step rules do not apply")
        return report
    wrapped, ref = _stack(env, kind, num_envs, max_steps)
    n = int(wrapped.num_envs)
    wkind = EnvKind(marl=kind.marl, vector=True, num_envs=n, autoreset=True)
    impl = jax.random.key_impl(key)
    driver = Driver(wrapped, wkind, make_policy(env, policy, impl), _OWNER, impl)
    k_env, k_policy = jax.random.split(jax.random.fold_in(key, 0xA7))
    sched = driver.schedule(driver.instance_keys(k_env), driver.instance_keys(k_policy), num_steps)

    # the reference runs in the rollout's own loop body: one program to compile, not two
    also = None if ref is None else partial(_reference, ref)

    def run(schedule: Any) -> tuple[Any, Any, Any]:
        roll, expected = driver.scan_with(schedule, also)
        return roll, jax.tree.map(lambda x: x[1:], roll.states), expected  # after each step

    roll, after, expected = jax.jit(run)(sched)
    report = CheckReport(_OWNER)
    if ref is None:
        _own_autoreset(after, roll.pre)
        report.passed.extend(["restart", "final_observation"])
        report.notes.append("the env's own auto-reset: checked restarts and final_observation")
        return report

    stepped, fresh = expected
    done = np.asarray(stepped.termination) | np.asarray(stepped.truncation)
    report.stats["episodes_ended"] = int(done.sum())
    if not done.any():  # only possible for an env that auto-resets itself: coverage note
        report.notes.append(
            f"no episode ended in {num_steps} steps of {n} envs, so the auto-reset was not "
            "exercised; run more steps"
        )
    _compare(
        "final_observation",
        'info["final_observation"] is not the observation the step produced (the terminal '
        "observation where the episode ended)",
        after.info[FINAL_OBSERVATION],
        observation_of(stepped),
        None,
        "the auto-reset must keep the terminal observation before replacing the state",
    )
    report.passed.append("final_observation")
    _compare(
        "outcome_kept",
        "the reward and flags of the step that ended an episode must be kept on the reset state",
        (reward_of(after), after.termination, after.truncation),
        (reward_of(stepped), stepped.termination, stepped.truncation),
        None,
        "copy reward, termination and truncation of the finishing step onto the new state",
    )
    report.passed.append("outcome_kept")
    if reset_uses_previous(ref):  # its reset reads the finished state: check the restart only
        _restarted(after, done)
        report.notes.append("reset_uses_previous: checked step_count restarts, not the state")
    else:
        mask_done = done
        _compare(
            "fresh_reset",
            "where an episode ended, the state is not the fresh reset "
            "`reset(key=next_episode_key(finished key))`",
            (after.env_state, observation_of(after), after.step_count),
            (fresh.env_state, observation_of(fresh), fresh.step_count),
            mask_done,
            "the next episode must start from a reset with a new key, not continue the old one",
        )
        _compare(
            "fresh_reset",
            "where no episode ended, the auto-reset changed the stepped state",
            (after.env_state, observation_of(after), after.step_count),
            (stepped.env_state, observation_of(stepped), stepped.step_count),
            ~mask_done,
            "only the envs whose episode ended may be reset",
        )
    report.passed.append("fresh_reset")
    return report


def _restarted(after: Any, done: np.ndarray) -> None:
    count = np.asarray(after.step_count)
    bad = np.argwhere(done & (count != 0))
    if bad.size:
        t, i = (int(x) for x in bad[0])
        raise CheckError(
            f"{_OWNER}/fresh_reset",
            "an env whose episode ended was not restarted (step_count must be 0 after an "
            "auto-reset)",
            step=t + 1,
            env_index=i,
            field="step_count",
            expected=0,
            got=count[t, i],
        )


def _own_autoreset(after: Any, pre: Any) -> None:
    """The weaker rules for a user's own batch auto-reset (no reference step available)."""
    info = after.info
    if not isinstance(info, dict) or FINAL_OBSERVATION not in info:
        raise CheckError(
            f"{_OWNER}/final_observation",
            f'an auto-resetting env must keep the terminal observation in info["{FINAL_OBSERVATION}"]',
            step=1,
            field=f"info.{FINAL_OBSERVATION}",
            expected="present from reset on",
            got="missing",
        )
    got = flatten(info[FINAL_OBSERVATION])
    want = flatten(observation_of(after))
    for path, leaf in want.items():
        if path not in got or describe_leaf(got[path]) != describe_leaf(leaf):
            raise CheckError(
                f"{_OWNER}/final_observation",
                'info["final_observation"] must have the structure, shape and dtype of the '
                "observation",
                step=1,
                field=f"info.{FINAL_OBSERVATION}.{path}",
                expected=describe_leaf(leaf),
                got=describe_leaf(got[path]) if path in got else "no such field",
            )
    count, pre_count = np.asarray(after.step_count), np.asarray(pre.step_count)
    restarted = count != pre_count + 1
    bad = np.argwhere(restarted & (count != 0))
    if bad.size:
        t, i = (int(x) for x in bad[0])
        raise CheckError(
            f"{_OWNER}/fresh_reset",
            "step_count neither grew by 1 nor restarted at 0",
            step=t + 1,
            env_index=i,
            field="step_count",
            expected=f"{pre_count[t, i] + 1} or 0",
            got=count[t, i],
        )
