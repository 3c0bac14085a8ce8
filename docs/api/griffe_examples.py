"""A griffe extension for the API reference: read Parallax docstrings as Google sections.

Parallax docstrings follow the Google style with two habits that griffe's Google parser
does not know, and this extension rewrites them before a docstring is parsed:

- `Example:` (singular, as the style guide writes it), optionally with a title in
  parentheses (`Example (a NumPy reference):`), becomes an `Examples:` section, so its
  `>>>` lines render as highlighted `pycon` code instead of nested block quotes;
- an argument entry that documents several parameters at once (`step, slot, index: ...`)
  becomes one entry per parameter with the shared description, so each parameter gets its
  row and griffe still checks every name against the signature;
- in a function that takes `**kwargs`, argument entries that name keyword arguments it
  forwards (`state`, `done` of a wrapper's `reset`) move to a `Keyword Args:` section,
  where the Google style puts them;
- reStructuredText roles (``:func:`bits` ``) become plain code spans, and a paragraph that
  ends with `::` before an indented literal block ends with `:` (Markdown shows the block
  as code by its indentation).

It is loaded by `mkdocs.yml` (`extensions:` of the python handler) and is not a page.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(?P<indent>\s*)Examples?(?:\s*\((?P<title>[^)]*)\))?:\s*$")
_ARGS = re.compile(
    r"^(?P<indent>\s*)(Args|Arguments|Params|Parameters|Keyword Args|Keyword Arguments|"
    r"Other Parameters):\s*$"
)
_IDENTIFIER = re.compile(r"^\*{0,2}[A-Za-z_][A-Za-z_0-9]*$")
_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|obj|exc|const):`~?([^`]+)`")
_LITERAL = re.compile(r"(?<=\S)::[ \t]*$", re.MULTILINE)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _split_grouped(
    lines: list[str], start: int, section_indent: int, signature: set[str] | None
) -> tuple[list[str], int]:
    """Rewrite the argument entries from `start` until the section ends.

    With a `signature` (the parameter names of a function that takes `**kwargs`), entries
    naming other parameters move to a `Keyword Args:` section after this one.
    """
    entries: list[tuple[str | None, list[str]]] = []  # (name or None, lines)
    item_indent: int | None = None
    i = start
    while i < len(lines):
        line = lines[i]
        if line.strip() and _indent(line) <= section_indent:
            break  # the section ended
        if not line.strip():
            entries.append((None, [line]))
            i += 1
            continue
        if item_indent is None:
            item_indent = _indent(line)
        if _indent(line) != item_indent:
            entries.append((None, [line]))  # a stray continuation line
            i += 1
            continue
        # An entry; its names may run over several lines that end with a comma.
        entry = line.strip()
        j = i
        while ":" not in entry and entry.endswith(",") and j + 1 < len(lines):
            j += 1
            entry = f"{entry} {lines[j].strip()}"
        continuation: list[str] = []
        k = j + 1
        while k < len(lines) and (not lines[k].strip() or _indent(lines[k]) > item_indent):
            continuation.append(lines[k])
            k += 1
        blank_tail = 0
        while continuation and not continuation[-1].strip():
            continuation.pop()  # blank lines stay after the entry, not inside it
            blank_tail += 1
        names, colon, description = entry.partition(":")
        parts = [p.strip() for p in names.split(",")]
        pad = " " * item_indent
        if colon and all(_IDENTIFIER.match(p) for p in parts):
            for name in parts:
                name_only = name.split(" ")[0].lstrip("*")
                entries.append((name_only, [f"{pad}{name}:{description}", *continuation]))
        else:
            entries.append((None, [*lines[i : j + 1], *continuation]))
        entries.extend((None, [""]) for _ in range(blank_tail))
        i = k
    keyword = [e for e in entries if signature is not None and e[0] and e[0] not in signature]
    out = [line for e in entries if e not in keyword for line in e[1]]
    if keyword:
        while out and not out[-1].strip():
            out.pop()
        out.append("")  # griffe needs a blank line before a section heading
        out.append(f"{' ' * section_indent}Keyword Args:")
        out.extend(line for e in keyword for line in e[1])
        out.append("")
    return out, i


def _kwargs_signature(obj: Any) -> set[str] | None:
    """The parameter names of `obj` when it takes `**kwargs`, else None."""
    try:
        parameters = list(obj.parameters)
    except Exception:  # not a function, or griffe cannot tell
        return None
    if not any(str(p.kind.value) == "variadic keyword" for p in parameters):
        return None
    return {p.name for p in parameters}


def normalise(text: str, signature: set[str] | None = None) -> str:
    """The docstring `text` with the two rewrites above applied."""
    text = _LITERAL.sub(":", _ROLE.sub(r"`\1`", text))
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        example = _EXAMPLE.match(line)
        if example:
            indent = example["indent"]
            out.append(f"{indent}Examples:")
            if example["title"]:
                title = example["title"].strip()
                out.append(f"{indent}    {title[:1].upper()}{title[1:]}:")
                out.append("")
            i += 1
            continue
        args = _ARGS.match(line)
        if args:
            out.append(line)
            body, i = _split_grouped(lines, i + 1, len(args["indent"]), signature)
            out.extend(body)
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


class ExampleSections(griffe.Extension):
    """Apply `normalise` to every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        docstring = obj.docstring
        if docstring is not None:
            docstring.value = normalise(docstring.value, _kwargs_signature(obj))
