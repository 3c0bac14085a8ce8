"""Declarative RNG slot tables: which random decision uses which slot number.

Holds:

- ``Slot``: one row (number, name, when it is used, what the index means,
  distribution).
- ``SlotTable``: a validated collection of slots; ``TABLE.NAME`` gives the
  slot number, ``TABLE.to_markdown()`` renders the table for a spec or docs.

An environment's spec declares its table once; both the readable reference
and the batched implementation then write ``TABLE.GUST`` instead of a bare
number, and the docs render ``TABLE.to_markdown()``.
"""

from __future__ import annotations

import dataclasses
import keyword
from collections.abc import Iterator
from typing import Any

_U32_MAX = 2**32 - 1


@dataclasses.dataclass(frozen=True)
class Slot:
    """One random decision of an environment.

    Attributes:
      number: the slot number passed to the draws, in ``[0, 2**32 - 1]``.
      name: a Python identifier, conventionally UPPER_CASE (``"GUST"``).
      used_at: when the draw happens (``"reset (step 0)"``, ``"every step t"``).
      index_meaning: what the index counts (``"0"``, ``"berry k"``).
      distribution: the draw, as text (``"bernoulli(GUST_P)"``).

    Example:
      >>> Slot(5, "GUST", "every step t", "0", "bernoulli(GUST_P)").number
      5
    """

    number: int
    name: str
    used_at: str
    index_meaning: str
    distribution: str

    def __post_init__(self) -> None:
        if isinstance(self.number, bool) or not isinstance(self.number, int):
            raise TypeError(
                f"Slot.number must be an int, got {type(self.number).__name__} {self.number!r}"
            )
        if not 0 <= self.number <= _U32_MAX:
            raise ValueError(f"Slot.number must be in [0, 2**32 - 1], got {self.number}")
        if (
            not isinstance(self.name, str)
            or not self.name.isidentifier()
            or keyword.iskeyword(self.name)
        ):
            raise ValueError(f"Slot.name must be a Python identifier, got {self.name!r}")
        if self.name.startswith("_"):
            raise ValueError(f"Slot.name must not start with '_', got {self.name!r}")
        for field in ("used_at", "index_meaning", "distribution"):
            value = getattr(self, field)
            if not isinstance(value, str):
                raise TypeError(f"Slot.{field} must be a str, got {type(value).__name__} {value!r}")
            if "|" in value or "\n" in value:
                raise ValueError(f"Slot.{field} must not contain '|' or a newline, got {value!r}")


class SlotTable:
    """A validated table of :class:`Slot` rows with name-based lookup.

    Slot numbers and names must be unique, and names must not shadow the
    table's own attributes. ``table.NAME`` is the slot number (an ``int``),
    ``table["NAME"]`` the :class:`Slot`.

    Args:
      *slots: the rows, in the order to render them.

    Raises:
      TypeError: if a row is not a :class:`Slot`.
      ValueError: on a duplicate number or name, or a reserved name.

    Example:
      >>> TABLE = SlotTable(
      ...     Slot(0, "AGENT_X", "reset (step 0)", "0", "randint(G)"),
      ...     Slot(5, "GUST", "every step t", "0", "bernoulli(GUST_P)"),
      ... )
      >>> TABLE.GUST
      5
      >>> TABLE["AGENT_X"].distribution
      'randint(G)'
      >>> print(TABLE.to_markdown().splitlines()[2])
      | 0    | AGENT_X | reset (step 0) | 0     | randint(G)        |
    """

    _RESERVED = frozenset({"slots", "names", "numbers", "to_markdown", "by_number"})

    def __init__(self, *slots: Any) -> None:
        by_name: dict[str, Slot] = {}
        by_number: dict[int, Slot] = {}
        for s in slots:
            if not isinstance(s, Slot):
                raise TypeError(f"SlotTable rows must be Slot, got {type(s).__name__} {s!r}")
            if s.name in self._RESERVED:
                raise ValueError(f"slot name {s.name!r} is reserved by SlotTable; choose another")
            if s.name in by_name:
                raise ValueError(
                    f"duplicate slot name {s.name!r} (numbers {by_name[s.name].number} and {s.number})"
                )
            if s.number in by_number:
                raise ValueError(
                    f"duplicate slot number {s.number} (names {by_number[s.number].name!r} and {s.name!r})"
                )
            by_name[s.name] = s
            by_number[s.number] = s
        self._slots: tuple[Slot, ...] = tuple(slots)
        self._by_name = by_name
        self._by_number = by_number

    @property
    def slots(self) -> tuple[Slot, ...]:
        """All rows, in declaration order."""
        return self._slots

    @property
    def names(self) -> tuple[str, ...]:
        """Slot names, in declaration order."""
        return tuple(s.name for s in self._slots)

    @property
    def numbers(self) -> tuple[int, ...]:
        """Slot numbers, in declaration order."""
        return tuple(s.number for s in self._slots)

    def by_number(self, number: int) -> Slot:
        """The slot with this number.

        Raises:
          KeyError: if no slot has ``number``.
        """
        try:
            return self._by_number[number]
        except KeyError:
            raise KeyError(
                f"no slot numbered {number}; numbers are {sorted(self._by_number)}"
            ) from None

    def __getattr__(self, name: str) -> int:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._by_name[name].number
        except KeyError:
            raise AttributeError(
                f"no slot named {name!r}; names are {list(self._by_name)}"
            ) from None

    def __getitem__(self, name: str) -> Slot:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no slot named {name!r}; names are {list(self._by_name)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[Slot]:
        return iter(self._slots)

    def __len__(self) -> int:
        return len(self._slots)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, SlotTable) and self._slots == other._slots

    def __hash__(self) -> int:
        return hash(self._slots)

    def __repr__(self) -> str:
        rows = ", ".join(f"{s.name}={s.number}" for s in self._slots)
        return f"SlotTable({rows})"

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._by_name))

    def to_markdown(self) -> str:
        """Render the table as GitHub Markdown: slot, name, used at, index, distribution.

        Returns:
          the table text (header, separator, one line per slot), columns
          padded to equal width, no trailing newline.
        """
        header = ("slot", "name", "used at", "index", "distribution")
        rows = [
            (str(s.number), s.name, s.used_at, s.index_meaning, s.distribution) for s in self._slots
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

        def line(cells: tuple[str, ...]) -> str:
            return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

        sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
        return "\n".join([line(header), sep, *(line(r) for r in rows)])
