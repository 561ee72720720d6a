"""The wheel's run-time requirements, completed at build time (a scikit-build-core metadata
provider): built in nanobind's split mode (KVBRIDGE_NANOBIND_SPLIT=1, pyproject.toml), the
extension carries no copy of nanobind's own code and imports it from the nanobind-backend
package, one build per CPython version, so the wheel requires it; the ordinary build needs
nothing more."""

from __future__ import annotations

import os
from typing import Any

# The backend release whose interface the split build compiles against: nanobind 3.1's.
BACKEND = "nanobind-backend>=1.0,<2"


def split() -> bool:
    return os.environ.get("KVBRIDGE_NANOBIND_SPLIT", "").lower() in {"1", "true", "on", "yes"}


def dynamic_metadata(settings: dict[str, Any], project: dict[str, Any]) -> dict[str, Any]:
    return {"dependencies": [*settings.get("requires", []), *([BACKEND] if split() else [])]}
