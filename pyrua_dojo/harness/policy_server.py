"""Serve an XPolicyLab policy directory without XPolicyLab: `python -m pyrua_dojo.harness.policy_server`.

The direct-Python stand-in for XPolicyLab's `setup_policy_server.py`, with its arguments: `--config_path
<dir>/deploy.yml` (the policy directory is the file's folder), `--protocol`, `--host`, `--port`, `--overrides ...`
(last; `k=v` words or `--k v` pairs, values through `ast.literal_eval`). It builds `model_cfg` the same way,
instantiates the directory's `model.Model(model_cfg)` before the port opens, and serves it with our
XPolicyLab-compatible `PolicyServer` (ws only: RoboDojo accepts nothing else) until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyrua_dojo.harness.policydir import PolicyDir, PolicyDirError, merge_overrides

__all__ = ["build_model_cfg", "main", "serve_policy_dir"]


def build_model_cfg(
    deploy_cfg: Mapping[str, Any],
    overrides: Sequence[str],
    *,
    protocol: str | None = None,
    host: str | None = None,
    port: int | None = None,
) -> dict[str, Any]:
    """XPolicyLab's merge: deploy.yml, the overrides, then explicit --protocol/--host/--port; host and port required."""
    cfg = merge_overrides(deploy_cfg, overrides)
    if protocol is not None:
        cfg["protocol"] = protocol
    else:
        cfg.setdefault("protocol", "ws")
    if host is not None:
        cfg["host"] = host
    if port is not None:
        cfg["port"] = port
    for key in ("host", "port"):
        value = cfg.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ValueError(f"{key} must be specified in config or overrides")
    return cfg


def serve_policy_dir(policy: PolicyDir, model_cfg: Mapping[str, Any]) -> int:
    """Instantiate the policy's Model and serve it in the foreground; returns an exit status."""
    from pyrua_dojo.wire import PolicyServer

    if str(model_cfg.get("protocol", "ws")) != "ws":
        print(f"policy_server: protocol {model_cfg.get('protocol')!r} is not supported (only ws)", file=sys.stderr)
        return 2
    try:
        port = int(model_cfg["port"])
    except (TypeError, ValueError):
        print(f"policy_server: port must be an integer, got {model_cfg['port']!r}", file=sys.stderr)
        return 2
    model = policy.model_class()(dict(model_cfg))
    server = PolicyServer(model, host=str(model_cfg.get("host", "0.0.0.0")), port=port, name=f"{policy.name}_server")
    print(f"policy_server: {policy.name} on ws://{server.host}:{port}", flush=True)
    try:
        server.run()
    finally:
        close = getattr(model, "close", None)
        if callable(close):
            close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pyrua_dojo.harness.policy_server", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--config_path", "--config-path", dest="config_path", required=True, help="<policy dir>/deploy.yml"
    )
    parser.add_argument("--protocol", choices=("legacy_tcp", "ws"))
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument("--overrides", nargs=argparse.REMAINDER, default=[], help="k=v ... or --k v ... (last)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config_path = Path(args.config_path)
    try:
        policy = PolicyDir.load(config_path.parent)
        if config_path.resolve() != policy.path / "deploy.yml":
            import yaml

            deploy_cfg = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
        else:
            deploy_cfg = dict(policy.deploy_cfg)
        cfg = build_model_cfg(deploy_cfg, args.overrides, protocol=args.protocol, host=args.host, port=args.port)
    except (PolicyDirError, ValueError, OSError) as exc:
        print(f"policy_server: {exc}", file=sys.stderr)
        return 2
    return serve_policy_dir(policy, cfg)


if __name__ == "__main__":
    sys.exit(main())
