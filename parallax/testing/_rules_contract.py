"""The `"contract"` group of `check_env`: one function per rule, named by its error name.

Each `<rule>` function raises `CheckError("check_env/<rule>")` on a breach; `check_contract`
runs them in order on the eager rollout of an `EnvSession`:

- `info`: `info` is a dict.
- `dtypes`: reward, flags and `step_count` have the contract's dtypes and shapes (the
  error names the field: `check_env/reward`, `/termination`, `/truncation`, `/step_count`).
- `reset`: a freshly reset state is not done and its `step_count` is 0.
- `observation_in_space`, `action_in_space`: every observation and action is in its space.
- `reward`: the reward is finite.
- `step_count`: `step_count` grows by exactly 1 per step (an auto-reset may restart it).
- `action_mask`: a boolean action mask allows at least one action.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from ._compare import batch_index, check_in_space
from ._errors import CheckError
from ._report import CheckReport
from ._rollout import EnvKind, Rollout, action_mask_of, observation_of, reward_of
from ._trees import flatten

__all__ = [
    "action_in_space",
    "action_mask",
    "check_contract",
    "dtypes",
    "info",
    "observation_in_space",
    "reset",
    "reward",
    "step_count",
]

_OWNER = "check_env"


def check_contract(env: Any, kind: EnvKind, roll: Rollout, report: CheckReport) -> None:
    """Run the contract rules in order on the eager rollout `roll`, appending to `report`."""
    states = roll.states
    info(states)
    dtypes(env, kind, states)
    report.passed.append("dtypes")
    reset(kind, states)
    report.passed.append("reset")
    observation_in_space(env, kind, roll)
    report.passed.append("observation_in_space")
    action_in_space(env, kind, roll)
    report.passed.append("action_in_space")
    reward(kind, states)
    report.passed.append("reward")
    report.passed.append("flags")
    step_count(kind, roll)
    report.passed.append("step_count")
    if action_mask(kind, states):
        report.passed.append("action_mask")
    term = np.asarray(states.termination)
    trunc = np.asarray(states.truncation)
    report.stats["steps"] = int(jnp.shape(states.termination)[0]) - 1
    report.stats["episodes_ended"] = int((term[1:] | trunc[1:]).sum())


def info(states: Any) -> None:
    """`info` is a dict, on every state (the structure check made it the same dict everywhere)."""
    if not isinstance(states.info, dict):
        raise CheckError(
            f"{_OWNER}/info",
            "`info` must be a dict (with the same keys on every reset and step)",
            step=0,
            field="info",
            expected="dict",
            got=type(states.info).__name__,
        )


def _reward_field(kind: EnvKind) -> str:
    return "agents.reward" if kind.marl else "reward"


def dtypes(env: Any, kind: EnvKind, states: Any) -> None:
    """Reward, flags and `step_count` have the contract's dtypes and per-step shapes."""
    num_agents = int(getattr(env, "num_agents", 0) or 0)
    batch = kind.batch_shape

    def check_leaf(
        field: str, value: Any, allowed: tuple[Any, ...], shape: tuple[int, ...]
    ) -> None:
        arr_dtype = jnp.result_type(value)
        per_step_shape = tuple(jnp.shape(value))[1:]
        if arr_dtype not in allowed or per_step_shape != shape:
            names = " or ".join(str(np.dtype(d)) for d in allowed)
            raise CheckError(
                f"{_OWNER}/{field.split('.')[-1] if field != 'agents.reward' else 'reward'}",
                f"`{field}` must be {names} with shape {shape}"
                + (" (one value per env of the batch)" if kind.vector else ""),
                step=0,
                field=field,
                expected=f"{names}{list(shape)}",
                got=f"{np.dtype(arr_dtype)}{list(per_step_shape)}",
            )

    reward_shape = (*batch, num_agents) if kind.marl and num_agents else batch
    if kind.marl and not num_agents:
        reward_shape = (*batch, *jnp.shape(states.agents.active)[1 + len(batch) :])
    check_leaf(_reward_field(kind), reward_of(states), (jnp.float32, jnp.float64), reward_shape)
    check_leaf("termination", states.termination, (jnp.bool_,), batch)
    check_leaf("truncation", states.truncation, (jnp.bool_,), batch)
    check_leaf("step_count", states.step_count, (jnp.int32,), batch)


def reset(kind: EnvKind, states: Any) -> None:
    """A freshly reset state is not done, and its `step_count` is 0 (`check_env/step_count`)."""
    term = np.asarray(states.termination)
    trunc = np.asarray(states.truncation)
    count = np.asarray(states.step_count)
    for name, flags in (("termination", term), ("truncation", trunc)):
        if flags[0].any():
            env_i = int(np.argwhere(np.atleast_1d(flags[0]))[0][0]) if kind.vector else None
            raise CheckError(
                f"{_OWNER}/reset",
                "a freshly reset state must not be done",
                step=0,
                env_index=env_i,
                field=name,
                expected=False,
                got=True,
            )
    if (count[0] != 0).any():
        env_i = int(np.argwhere(np.atleast_1d(count[0] != 0))[0][0]) if kind.vector else None
        got = count[0][env_i] if env_i is not None else count[0]
        raise CheckError(
            f"{_OWNER}/step_count",
            "`step_count` must be 0 after reset",
            step=0,
            env_index=env_i,
            field="step_count",
            expected=0,
            got=got,
        )


def observation_in_space(env: Any, kind: EnvKind, roll: Rollout) -> None:
    """Observations in the observation space: after reset, every step, every driver reset."""
    obs_field = "agents.observation" if kind.marl else "observation"
    check_in_space(
        f"{_OWNER}/observation_in_space",
        env.observation_space,
        observation_of(roll.states),
        kind,
        obs_field,
        lambda t: (
            f"the observation at step {t} is not in observation_space"
            + (" (the reset state)" if t == 0 else "")
        ),
        0,
    )
    check_in_space(
        f"{_OWNER}/observation_in_space",
        env.observation_space,
        observation_of(roll.pre),
        kind,
        obs_field,
        lambda t: (
            f"the observation of the state passed to step {t + 1} (reset by the test "
            "driver after the previous episode ended) is not in observation_space"
        ),
        1,
    )


def action_in_space(env: Any, kind: EnvKind, roll: Rollout) -> None:
    """Sampled actions belong to the action space (tests the space and the policy)."""
    check_in_space(
        f"{_OWNER}/action_in_space",
        env.action_space,
        roll.actions,
        kind,
        "action",
        lambda t: f"the action of step {t + 1} (from the policy) is not in action_space",
        1,
    )


def reward(kind: EnvKind, states: Any) -> None:
    """The reward is finite."""
    value = np.asarray(reward_of(states))
    finite = np.isfinite(value)
    if not finite.all():
        index = tuple(int(i) for i in np.argwhere(~finite)[0])
        lead = 1 + int(kind.vector)
        raise CheckError(
            f"{_OWNER}/reward",
            "the reward must be finite",
            step=index[0],
            env_index=batch_index(index, kind),
            field=_reward_field(kind)
            + (f"[{', '.join(map(str, index[lead:]))}]" if index[lead:] else ""),
            expected="a finite float",
            got=value[index],
        )


def step_count(kind: EnvKind, roll: Rollout) -> None:
    """`step_count` increments by one each step (an auto-reset restarts it at 0)."""
    states, pre = roll.states, roll.pre
    term = np.asarray(states.termination)
    trunc = np.asarray(states.truncation)
    count = np.asarray(states.step_count)
    pre_count = np.asarray(pre.step_count)
    pre_done = np.asarray(pre.termination) | np.asarray(pre.truncation)
    stepped = count[1:]
    expected = pre_count + 1
    ok = stepped == expected
    if kind.autoreset:
        restarted = (stepped == 0) & ((term[1:] | trunc[1:]) | pre_done)
        ok |= restarted
    if not ok.all():
        index = tuple(int(i) for i in np.argwhere(~ok)[0])
        raise CheckError(
            f"{_OWNER}/step_count",
            "`step_count` must increase by exactly 1 on every step (TimeLimit relies on it)"
            + (
                "; an auto-reset may restart it at 0 when an episode ends" if kind.autoreset else ""
            ),
            step=index[0] + 1,
            env_index=batch_index(index, kind),
            field="step_count",
            expected=expected[index],
            got=stepped[index],
        )


def action_mask(kind: EnvKind, states: Any) -> bool:
    """Action masks are boolean, with at least one legal action per slot.

    Returns whether the states carry a mask (the rule ran).
    """
    masks = action_mask_of(states)
    if masks is None:
        return False
    for path, leaf in flatten(masks).items():
        field = ("agents.action_mask" if kind.marl else "action_mask") + (
            "" if path == "<root>" else f".{path}"
        )
        arr = np.asarray(leaf)
        if arr.dtype != np.bool_:
            raise CheckError(
                f"{_OWNER}/action_mask",
                "an action mask must be a bool array",
                step=0,
                field=field,
                expected="bool",
                got=str(arr.dtype),
            )
        none_legal = ~arr.any(axis=-1)
        if none_legal.any():
            index = tuple(int(i) for i in np.argwhere(none_legal)[0])
            lead = 1 + int(kind.vector)
            slot = index[lead:]
            raise CheckError(
                f"{_OWNER}/action_mask",
                "every action mask must allow at least one action"
                + (f" (agent slot {slot[0]})" if kind.marl and slot else ""),
                step=index[0],
                env_index=batch_index(index, kind),
                field=field + (f"[{', '.join(map(str, slot))}]" if slot else ""),
                expected="at least one True",
                got=arr[index],
            )
    return True
