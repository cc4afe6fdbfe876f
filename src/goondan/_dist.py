"""Names of our distribution on PyPI and of the entry point group packages declare (README.md#packages).

The import package is ``goondan`` and the command ``gdn``, but the distribution is ``goondan-runtime``:
the name ``goondan`` on PyPI belongs to another project. Everything that reads our own metadata or
prints an install command takes the name from here; this module imports nothing, so ``gdn --version``
stays as fast as ``gdn --help``.
"""

DIST_NAME = "goondan-runtime"
PACKAGES_ENTRY_POINT_GROUP = "goondan.packages"


def install_command(extra: str | None = None) -> str:
    """``pip install 'goondan-runtime[extra]'``: the line error suggestions and docs show."""
    return f"pip install '{DIST_NAME}[{extra}]'" if extra else f"pip install {DIST_NAME}"
