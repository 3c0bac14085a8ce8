"""Where this version of Parallax comes from, and the pip command that installs it.

The name `parallax-rl` on PyPI holds an older, unrelated 0.4.0 release, so a bare
`pip install parallax-rl` does not install this package. Every install hint the package
prints (a missing optional dependency, say) names the source repository instead. Its
address is read from the installed distribution's metadata (`[project.urls] Source` in
`pyproject.toml`); `SOURCE_URL` is the fallback for a source tree that is not installed, and
a test keeps the two equal.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from importlib import metadata

__all__ = ["SOURCE_URL", "install_command", "source_url"]

DISTRIBUTION = "parallax-rl"
SOURCE_URL = "https://github.com/parallax-rl/parallax"


@cache
def source_url() -> str:
    """The source repository's address, from the installed metadata when there is one."""
    try:
        entries = metadata.metadata(DISTRIBUTION).get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return SOURCE_URL
    for entry in entries:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "source" and url.strip():
            return url.strip()
    return SOURCE_URL


def install_command(extras: Iterable[str] = ()) -> str:
    """The pip command that installs this version of Parallax with `extras`.

    Example:
        >>> from parallax._project import install_command
        >>> install_command(["gymnax"])
        'pip install "parallax-rl[gymnax] @ git+https://github.com/parallax-rl/parallax"'
        >>> install_command()
        'pip install "parallax-rl @ git+https://github.com/parallax-rl/parallax"'
    """
    names = ",".join(extras)
    requirement = f"{DISTRIBUTION}[{names}]" if names else DISTRIBUTION
    return f'pip install "{requirement} @ git+{source_url()}"'
