"""The optional libraries the views need, and the error that names the extra providing them."""

from __future__ import annotations

import importlib
from types import ModuleType

EXTRA = "notebook"


class MissingExtra(ImportError):
    """An optional library of the notebook extra is not installed."""


def require(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtra(
            f"{module} is needed for this view and is not installed: "
            f"pip install 'workbench[{EXTRA}]' ({err})"
        ) from None
