"""`require_fresh_report`: refuse to train on an env whose validation report is stale.

- `require_fresh_report(path_or_env, strict=True)`: the parsed report when it exists,
  passed, and still describes the current source files; else raises `StaleReportError`
  (`strict=True`) or warns with a `StaleReportWarning` and returns what it could read.
- `find_report(path_or_env)`: where the report of a path, project, id or env lives.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

from ._report import REPORT_SCHEMA, source_files, source_hashes
from ._targets import PROJECT_REPORT, default_report_path, is_project

__all__ = ["StaleReportError", "StaleReportWarning", "find_report", "require_fresh_report"]


class StaleReportError(RuntimeError):
    """The validation report is missing, failing, or older than the source it describes."""


class StaleReportWarning(UserWarning):
    """`require_fresh_report(..., strict=False)`: the report is missing, failing or stale."""


def find_report(path_or_env: Any) -> str:
    """The report file of `path_or_env`.

    - a `.json` path or an existing file: itself;
    - a project directory (`parallax new`): `DIR/validation_report.json`;
    - any other directory: `DIR/validation_report.json`;
    - an env id or `module:factory` string: `parallax check`'s default for it,
      `parallax-check-<id>.json` in the current directory, else `validation_report.json`;
    - an env object: `validation_report.json` in the current directory.
    """
    if isinstance(path_or_env, os.PathLike | str):
        text = os.fspath(path_or_env)
        if os.path.isfile(text) or text.endswith(".json"):
            return text
        if os.path.isdir(text):
            return os.path.join(text, PROJECT_REPORT)
        default = default_report_path(text)
        return default if os.path.isfile(default) else PROJECT_REPORT
    return PROJECT_REPORT


def _problem(path_or_env: Any, path: str) -> tuple[str | None, dict[str, Any] | None]:
    """(why the report cannot be trusted or None, the parsed report or None)."""
    if not os.path.isfile(path):
        target = os.fspath(path_or_env) if isinstance(path_or_env, os.PathLike | str) else "ENV"
        how = f"`parallax check {target}`" if is_project(target) else "`parallax check`"
        return f"no validation report at {path!r}: run {how} first", None
    try:
        with open(path, encoding="utf-8") as fh:
            report = json.load(fh)
    except (OSError, json.JSONDecodeError) as error:
        return f"the validation report {path!r} cannot be read: {error}", None
    if not isinstance(report, dict) or "overall" not in report:
        return f"{path!r} is not a validation report (schema {REPORT_SCHEMA})", None
    if report["overall"] != "PASS":
        failed = sorted(
            {
                f"{r.get('check')} ({r.get('precision')})"
                for r in report.get("results", [])
                if r.get("status") in ("fail", "error")
            }
        )
        return (
            f"the validation report {path!r} is failing ({', '.join(failed) or 'overall FAIL'}): "
            "fix the env and run `parallax check` again",
            report,
        )
    recorded = report.get("sources")
    if not recorded:
        return (
            f"the validation report {path!r} records no source hashes, so it cannot be matched "
            "to the current code: run `parallax check` again",
            report,
        )
    stale = []
    for file, digest in recorded.items():
        if not os.path.isfile(file):
            stale.append(f"{file} (missing)")
        elif source_hashes([file])[file] != digest:
            stale.append(file)
    if not isinstance(path_or_env, os.PathLike | str):
        for file in source_files(path_or_env):
            if file not in recorded:
                stale.append(f"{file} (not covered by the report)")
    if stale:
        return (
            f"the validation report {path!r} is older than the source it describes (changed "
            f"since it was written: {', '.join(stale)}): run `parallax check` again",
            report,
        )
    return None, report


def require_fresh_report(path_or_env: Any, strict: bool = True) -> dict[str, Any] | None:
    """Check that a validation report exists, passed, and matches the current source.

    `parallax check` writes the report with the sha256 of every source file of the env and
    its reference. The report is fresh when its verdict is PASS and every one of those
    files still has the recorded hash (and, for an env object, the files defining it are
    among them).

    Args:
        path_or_env: the report file, a project directory (`parallax new`), an env spec
            (`GridWorld-v0`, `module:factory`), or an env object (the report is then
            `validation_report.json` in the current directory).
        strict: raise (True) or warn (False) when the report cannot be trusted.

    Returns:
        The parsed report (a dict); with `strict=False`, whatever could be read, or None.

    Raises:
        StaleReportError: `strict=True` and the report is missing, failing or stale.

    Example:
        >>> import pytest
        >>> from parallax.testing import StaleReportError, require_fresh_report
        >>> with pytest.raises(StaleReportError, match="no validation report"):
        ...     require_fresh_report("/nonexistent/validation_report.json")
    """
    path = find_report(path_or_env)
    problem, report = _problem(path_or_env, path)
    if problem is not None:
        if strict:
            raise StaleReportError(problem)
        warnings.warn(problem, StaleReportWarning, stacklevel=2)
    return report
