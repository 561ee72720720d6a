"""The wheel's run-time requirements, completed at build time (a scikit-build-core metadata
provider): the extension links the C++ ABI of the torch it is compiled against, so the wheel
requires exactly that torch, the same version its import checks (kvbridge_torch/__init__.py).
A range would let pip install a torch the import then refuses."""

from __future__ import annotations

from typing import Any


def dynamic_metadata(settings: dict[str, Any], project: dict[str, Any]) -> dict[str, Any]:
    import torch  # the torch this build compiles against (built with --no-build-isolation)

    return {"dependencies": [*settings.get("requires", []), f"torch=={torch.__version__}"]}
