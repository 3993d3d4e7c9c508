"""What the integrations share: importing the package they build on, with an error that
says how to install it."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, package: str, version: str) -> ModuleType:
    """Imports `module` (of the PyPI package `package`), or raises an ImportError naming
    the pip command that installs the supported version.

    >>> require("json", "json", "1").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"rlm_registry.integrations.{package} needs the `{package}` package, version "
            f"{version}: pip install 'rlm-registry[{package}]' (or pip install '{package}=={version}')"
        ) from error
