"""An XPolicyLab policy directory as the twin uses it: its `deploy.yml`, its `deploy.py` and its `model.py`.

XPolicyLab imports a policy as the package `XPolicyLab.policy.<NAME>` (RoboDojo's eval client imports
`.deploy` in the simulator process, the policy server imports `.model`). `PolicyDir.load` does the same when the
directory sits in an XPolicyLab checkout (`<XPolicyLab>/policy/<NAME>`, with `setup_policy_server.py` two levels
up): it puts the benchmark root and the XPolicyLab root on `sys.path`, as RoboDojo's `PYTHONPATH` does. Any other
directory is imported as a private package named after its path, so relative imports inside the policy work;
absolute `XPolicyLab.*` imports then need an installed XPolicyLab, as they would upstream.

`merge_overrides` is XPolicyLab's `setup_policy_server.py` rule for `--overrides` (`k=v ...` or `--k v ...`, values
through `ast.literal_eval` with a fallback to the string), so a model sees the `model_cfg` it would see there.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

import yaml

__all__ = ["PolicyDir", "PolicyDirError", "merge_overrides", "parse_override_value", "robodojo_overrides"]

DEPLOY_YML = "deploy.yml"
SERVER_SCRIPT = "setup_eval_policy_server.sh"


class PolicyDirError(ValueError):
    """A directory that is not a usable XPolicyLab policy directory; the message says what is missing."""


def parse_override_value(text: str) -> Any:
    """XPolicyLab's override value rule: `ast.literal_eval`, else the string itself (`true` stays "true")."""
    try:
        return ast.literal_eval(text)
    except Exception:  # noqa: BLE001 - exactly upstream's fallback: anything unparsable is a string
        return text


def merge_overrides(base: Mapping[str, Any], tokens: Sequence[str]) -> dict[str, Any]:
    """`base` with XPolicyLab-style overrides applied: all `k=v` words, or `--k v` pairs (ValueError otherwise)."""
    cfg = dict(base)
    words = list(tokens)
    if not words:
        return cfg
    if all("=" in t and not t.startswith("-") for t in words):
        for t in words:
            key, value = t.split("=", 1)
            if not key:
                raise ValueError(f"override {t!r} has no key")
            cfg[key] = parse_override_value(value)
        return cfg
    if len(words) % 2 != 0:
        raise ValueError(f"--overrides expects key value pairs, got: {words}")
    for key, value in zip(words[0::2], words[1::2], strict=True):
        cfg[key.lstrip("-")] = parse_override_value(value)
    return cfg


def robodojo_overrides(
    *,
    port: int,
    task: str,
    seed: int,
    policy_name: str,
    ckpt_name: str,
    action_type: str,
    env_cfg_type: str = "arx_x5",
    bench_name: str = "RoboDojo",
    host: str = "localhost",
) -> list[str]:
    """The nine `k=v` overrides XPolicyLab's `setup_eval_policy_server.sh` passes, in its order."""
    return [
        f"port={port}",
        f"host={host}",
        f"bench_name={bench_name}",
        f"task_name={task}",
        f"ckpt_name={ckpt_name}",
        f"env_cfg_type={env_cfg_type}",
        f"seed={seed}",
        f"policy_name={policy_name}",
        f"action_type={action_type}",
    ]


def _xpolicylab_root(path: Path) -> Path | None:
    """The XPolicyLab checkout holding `path` as `<root>/policy/<NAME>`, if it is one (named `XPolicyLab`)."""
    parent = path.parent
    root = parent.parent
    if parent.name == "policy" and root.name == "XPolicyLab" and (root / "setup_policy_server.py").is_file():
        return root
    return None


@dataclass(frozen=True)
class PolicyDir:
    """A loaded policy directory: where it is, its name (the folder name, as XPolicyLab uses it), its deploy.yml."""

    path: Path
    name: str
    deploy_cfg: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def load(cls, path: Path | str) -> PolicyDir:
        """Check the directory and read its deploy.yml; raises PolicyDirError naming what is wrong."""
        p = Path(path).expanduser().resolve()
        if not p.is_dir():
            raise PolicyDirError(f"policy directory not found: {p}")
        name = p.name
        if not name.isidentifier():
            raise PolicyDirError(f"{p}: the folder name {name!r} is not a Python identifier (XPolicyLab imports it)")
        yml = p / DEPLOY_YML
        if not yml.is_file():
            raise PolicyDirError(f"{p}: no {DEPLOY_YML} (every XPolicyLab policy has one)")
        try:
            data = yaml.safe_load(yml.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise PolicyDirError(f"{yml}: not valid YAML: {exc}") from exc
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise PolicyDirError(f"{yml}: expected a mapping at the top level, got {type(data).__name__}")
        return cls(path=p, name=name, deploy_cfg=MappingProxyType(dict(data)))

    # ------------------------------------------------------------------------------------------------- facts

    @property
    def eval_batch(self) -> bool:
        """RoboDojo's reading of `eval_batch` (`bool(deploy_yml.get("eval_batch", False))`, so only YAML false,
        null, 0 or an empty value mean one env)."""
        return bool(self.deploy_cfg.get("eval_batch", False))

    @property
    def protocol(self) -> str:
        return str(self.deploy_cfg.get("protocol") or "ws")

    @property
    def server_script(self) -> Path | None:
        """`setup_eval_policy_server.sh`, when the directory has one."""
        script = self.path / SERVER_SCRIPT
        return script if script.is_file() else None

    @property
    def xpolicylab_root(self) -> Path | None:
        """The XPolicyLab checkout this directory is installed in (`<root>/policy/<NAME>`), else None."""
        return _xpolicylab_root(self.path)

    def model_cfg(self, overrides: Sequence[str] = ()) -> dict[str, Any]:
        """deploy.yml merged with XPolicyLab-style overrides (what `Model(model_cfg)` receives)."""
        return merge_overrides(self.deploy_cfg, overrides)

    # ----------------------------------------------------------------------------------------------- imports

    def package(self) -> str:
        """Import the policy as a package and return its name (`__init__.py` runs, as it does upstream)."""
        root = self.xpolicylab_root
        if root is not None:
            for entry in (str(root.parent), str(root)):  # RoboDojo: PYTHONPATH=<root>:<root>/XPolicyLab
                if entry not in sys.path:
                    sys.path.insert(0, entry)
            pkg = f"XPolicyLab.policy.{self.name}"
            module = importlib.import_module(pkg)
            found = [Path(p).resolve() for p in getattr(module, "__path__", [])]
            if self.path not in found:
                raise PolicyDirError(
                    f"{pkg} imports from {[str(p) for p in found]}, not from {self.path}: another XPolicyLab is first"
                )
            return pkg
        digest = hashlib.sha256(str(self.path).encode()).hexdigest()[:10]
        pkg = f"_pyrua_policy_{self.name}_{digest}"
        if pkg in sys.modules:
            return pkg
        init = self.path / "__init__.py"
        if init.is_file():
            spec = importlib.util.spec_from_file_location(pkg, init, submodule_search_locations=[str(self.path)])
            if spec is None or spec.loader is None:
                raise PolicyDirError(f"cannot import {init}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[pkg] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(pkg, None)
                raise
        else:
            module = types.ModuleType(pkg)
            module.__path__ = [str(self.path)]
            module.__file__ = None
            sys.modules[pkg] = module
        return pkg

    def import_module(self, name: str) -> ModuleType:
        """Import `<policy>.<name>` (e.g. "deploy", "model"); PolicyDirError if the file is missing."""
        if not (self.path / f"{name}.py").is_file() and not (self.path / name / "__init__.py").is_file():
            raise PolicyDirError(f"{self.path}: no {name}.py")
        return importlib.import_module(f"{self.package()}.{name}")

    def deploy_function(self, batch: bool) -> Any:
        """`eval_one_episode` (or `eval_one_episode_batch`) from the policy's deploy.py, as RoboDojo looks it up."""
        module = self.import_module("deploy")
        fname = "eval_one_episode_batch" if batch else "eval_one_episode"
        fn = getattr(module, fname, None)
        if not callable(fn):
            raise PolicyDirError(f"{self.path / 'deploy.py'} does not define {fname} (RoboDojo calls it)")
        return fn

    def model_class(self) -> Any:
        """The `Model` class of the policy's model.py (what XPolicyLab's policy server instantiates)."""
        module = self.import_module("model")
        cls = getattr(module, "Model", None)
        if cls is None:
            raise PolicyDirError(f"{self.path / 'model.py'} does not define Model (XPolicyLab instantiates it)")
        return cls
