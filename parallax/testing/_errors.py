"""The failure types of the battery.

- `CheckError`: an `AssertionError` that says which check failed, at which step, in which
  environment of a batch, in which field, and what was expected versus what came out.
- `ReferenceMismatch`: a `CheckError` from `check_matches_reference`, carrying the path of
  the file where both trajectories were written.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CheckError", "ReferenceMismatch", "format_value"]

_MAX_CHARS = 400


def format_value(value: Any) -> str:
    """A short, readable rendering of a value for an error message (arrays with dtype)."""
    if isinstance(value, str):
        return value
    if isinstance(value, np.ndarray | np.generic):
        arr = np.asarray(value)
        with np.printoptions(precision=9, threshold=16, edgeitems=3, linewidth=_MAX_CHARS):
            text = np.array2string(arr, separator=", ") if arr.ndim else repr(arr.item())
        shape = "" if arr.ndim == 0 else f" shape={arr.shape}"
        text = f"{text} ({arr.dtype}{shape})"
    else:
        text = repr(value)
    return text if len(text) <= _MAX_CHARS else text[: _MAX_CHARS - 3] + "..."


class CheckError(AssertionError):
    """A check of `parallax.testing` failed; the message is written for a human.

    Attributes:
        check: the check that failed, e.g. `"check_env/reward"`.
        step: the step where it failed (0 is the state returned by `reset`, k the state
            returned by the k-th call to `step`), or None when no step applies.
        field: the dotted path of the state field (e.g. `"observation"`, `"info.cash"`,
            `"agents.reward"`), or None.
        env_index: the index of the environment inside a batch, or None.
        expected: what the check expected (a value or a description), or None.
        got: what the environment produced, or None.
    """

    def __init__(
        self,
        check: str,
        message: str,
        *,
        step: int | None = None,
        field: str | None = None,
        env_index: int | None = None,
        expected: Any = None,
        got: Any = None,
        hint: str | None = None,
    ) -> None:
        self.check = check
        self.step = step
        self.field = field
        self.env_index = env_index
        self.expected = expected
        self.got = got
        self.hint = hint
        self.detail = message
        where = []
        if step is not None:
            where.append("at reset (step 0)" if step == 0 else f"at step {step}")
        if env_index is not None:
            where.append(f"env {env_index} of the batch")
        if field is not None:
            where.append(f"field `{field}`")
        text = f"{check} failed" + (" " + ", ".join(where) if where else "") + f": {message}"
        if expected is not None or got is not None:
            text += f"\n  expected: {format_value(expected)}\n  got:      {format_value(got)}"
        if hint:
            text += f"\n  hint: {hint}"
        super().__init__(text)


class ReferenceMismatch(CheckError):
    """`check_matches_reference` found a divergence; both trajectories are in `dump_path`.

    Attributes:
        dump_path: the JSON file holding the actions and both trajectories, or None when
            writing it failed (the message then says why).
        episode: the episode (0-based) in which the divergence happened.
    """

    def __init__(
        self,
        message: str,
        *,
        step: int,
        field: str,
        expected: Any,
        got: Any,
        episode: int,
        dump_path: str | None,
        hint: str | None = None,
    ) -> None:
        self.dump_path = dump_path
        self.episode = episode
        super().__init__(
            "check_matches_reference",
            message,
            step=step,
            field=field,
            expected=expected,
            got=got,
            hint=hint,
        )
