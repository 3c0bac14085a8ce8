"""`CheckReport`: what a passing check verified, returned by every `check_*` function."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["CheckReport"]


@dataclass
class CheckReport:
    """The record of a passing check.

    Attributes:
        check: the check's name (`"check_env"`, `"check_marl_env"`, ...).
        passed: the sub-checks that ran and passed, in order.
        notes: facts worth knowing (e.g. how often a rule was exercised).
        stats: numbers the check measured (steps, instances, traces, ...).
    """

    check: str
    passed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    def merge(self, other: CheckReport) -> None:
        """Append another report's sub-checks and notes (prefixed by its name)."""
        self.passed.extend(f"{other.check}/{name}" for name in other.passed)
        self.notes.extend(f"{other.check}: {note}" for note in other.notes)
        self.stats.update({f"{other.check}.{k}": v for k, v in other.stats.items()})

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return {
            "check": self.check,
            "passed": list(self.passed),
            "notes": list(self.notes),
            "stats": dict(self.stats),
        }
