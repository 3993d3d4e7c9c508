"""Type stubs of the package: the native module's names and its `__all__`, re-exported
(`__init__.py` does the same at run time)."""

from ._native import *
from ._native import __all__ as __all__
