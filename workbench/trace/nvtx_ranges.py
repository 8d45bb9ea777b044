"""NVTX ranges in domain `workbench`, emitted alongside recorded spans when nvtx imports.

When the package is missing (or tracing is off) a stand-in with `available = False` takes
its place and every call is a no-op, so instrumented code never checks.
"""

from __future__ import annotations

from typing import Any

DOMAIN = "workbench"


class NoNvtx:
    available = False

    def push(self, message: str) -> None:
        pass

    def pop(self) -> None:
        pass


class Nvtx:
    available = True

    def __init__(self, module: Any) -> None:
        self._domain = module.get_domain(DOMAIN)
        self._attributes: dict[str, Any] = {}
        self._module = module

    def push(self, message: str) -> None:
        # Attributes are built once per distinct message: building them is the costly part.
        attributes = self._attributes.get(message)
        if attributes is None:
            attributes = self._domain.get_event_attributes(message=message)
            self._attributes[message] = attributes
        self._domain.push_range(attributes)

    def pop(self) -> None:
        self._domain.pop_range()


def load_nvtx(wanted: bool = True) -> Nvtx | NoNvtx:
    if not wanted:
        return NoNvtx()
    try:
        import nvtx
    except ImportError:
        return NoNvtx()
    try:
        return Nvtx(nvtx)
    except Exception:  # an nvtx build that cannot create a domain: run without ranges
        return NoNvtx()
