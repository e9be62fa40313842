"""Server side of the PyRUA_Dojo plugin: XPolicyLab's policy server imports `Model` from here.

The agent itself lives in the installed `pyrua_dojo` package (run `install.sh` in the policy environment);
this file only re-exports its XPolicyLab Model so the plugin directory stays small.
"""

from __future__ import annotations

try:
    from pyrua_dojo.plugin.model import Model
except ModuleNotFoundError as exc:  # only the package itself missing gets the install hint
    if exc.name not in ("pyrua_dojo", "pyrua_dojo.plugin", "pyrua_dojo.plugin.model"):
        raise
    raise ModuleNotFoundError(
        "PyRUA_Dojo needs the pyrua-dojo package in the policy server's Python environment: "
        "run `bash install.sh` from this directory with that environment active "
        f"(import failed: {exc})",
        name=exc.name,
    ) from exc

__all__ = ["Model"]
