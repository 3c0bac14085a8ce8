"""`parallax new NAME`: write the skeleton of a validated environment project.

- `new_project(name, directory=".")`: write `NAME/` with `spec.md`, `reference.py`,
  `env.py`, `tests/conftest.py`, `tests/test_battery.py` and a `README.md`; the example
  game it holds passes the battery as written.
- `main(argv)`: the command line (`parallax new NAME [--dir D]`).

The templates are text in `parallax/_scaffold/_templates.py` (a module, so they ship in the
wheel with no package-data configuration).
"""

from __future__ import annotations

import argparse
import keyword
import os
import re
import sys
from collections.abc import Sequence

from ._templates import TEMPLATES

__all__ = ["main", "new_project", "validate_name"]

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def validate_name(name: object) -> str:
    """`name` if it can name a project (and its Python class), else a `ValueError`."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or keyword.iskeyword(name):
        raise ValueError(
            f"parallax new: NAME must start with a letter and hold only letters, digits and "
            f"underscores (at most 64 characters, not a Python keyword), got {name!r}"
        )
    return name


def class_name(name: str) -> str:
    """`my_env` -> `MyEnv`, `walk` -> `Walk`: the env's class name."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


def new_project(name: str, directory: str | os.PathLike[str] = ".") -> str:
    """Write the skeleton of project `name` into `directory/name`.

    Args:
        name: the project name: a letter, then letters, digits, underscores.
        directory: the parent directory (created if missing).

    Returns:
        The project directory's path.

    Raises:
        ValueError: an invalid name.
        FileExistsError: `directory/name` exists and is not an empty directory.

    Example:
        >>> import os, tempfile
        >>> from parallax.testing import new_project
        >>> root = new_project("walk", tempfile.mkdtemp())
        >>> sorted(os.listdir(root))
        ['README.md', 'env.py', 'reference.py', 'spec.md', 'tests']
    """
    validate_name(name)
    root = os.path.join(os.fspath(directory), name)
    if os.path.exists(root) and (not os.path.isdir(root) or os.listdir(root)):
        what = "a directory that is not empty" if os.path.isdir(root) else "a file"
        raise FileExistsError(
            f"parallax new: {root!r} is {what}; choose another NAME or --dir, or remove it"
        )
    cls = class_name(name)
    for relative, template in TEMPLATES.items():
        path = os.path.join(root, *relative.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        text = template.replace("__CLASS__", cls).replace("__NAME__", name)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    """`parallax new NAME [--dir D]`; exit 0 on success, 2 on a usage error."""
    from .._cli import DefaultsHelpFormatter

    p = argparse.ArgumentParser(
        prog="parallax new",
        description="Write the skeleton of an environment project: spec.md, a readable NumPy "
        "reference, the JAX env, and tests that run the validation battery. The example game "
        "it holds passes the battery as written; replace it with yours.",
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument("name", help="the project name (letters, digits, underscores)")
    p.add_argument("--dir", default=".", metavar="D", help="the parent directory")
    args = p.parse_args(argv)
    try:
        root = new_project(args.name, args.dir)
    except (ValueError, FileExistsError) as error:
        p.error(str(error))
    except OSError as error:
        print(f"parallax new: cannot write the project: {error}", file=sys.stderr)
        return 2
    print(f"wrote {root}/: " + ", ".join(sorted(TEMPLATES)))
    print("next: fill in spec.md, reference.py, env.py, then")
    print(f"  python -m pytest {os.path.join(root, 'tests')}")
    print(f"  parallax check {root}")
    return 0
