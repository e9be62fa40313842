"""The `pyrua-dojo twin client` and `twin eval` commands: arguments to `ClientSettings`, errors to exit statuses.

The parsers live in `pyrua_dojo/cli.py` (so `--help` stays fast); these handlers run the commands. Exit status 0
when the run completed (episodes may have failed: see `_result.json` and `_errors.json`), 1 when it could not run
(no connection, the server did not start), 2 for bad arguments or a bad policy directory.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pyrua_dojo.harness.result_files import ResultFileError
from pyrua_dojo.harness.eval_client import ClientReport, ClientSettings, TwinEvalClient, parse_layouts
from pyrua_dojo.harness.policydir import PolicyDirError
from pyrua_dojo.twin.tasks import get_twin_task

__all__ = ["client_main", "eval_main", "settings_from_args"]


def _layouts(spec: str, episodes_per_seed: int) -> tuple[int, ...]:
    """`--layouts`; with "all", RoboDojo's EVAL_NUM (a count, or "native") caps the episodes as main.py does."""
    ids = parse_layouts(spec, episodes_per_seed)
    cap = os.environ.get("EVAL_NUM", "").strip()
    if spec.strip().lower() == "all" and cap and cap.lower() != "native":
        try:
            n = int(cap)
        except ValueError:
            raise ValueError(f"EVAL_NUM must be a number or native, got {cap!r}") from None
        if n < 1:
            raise ValueError(f"EVAL_NUM must be >= 1, got {n}")
        ids = ids[:n]
    return ids


def settings_from_args(args: argparse.Namespace, *, url: str) -> ClientSettings:
    """ClientSettings from the shared client options (ValueError on bad values)."""
    task = get_twin_task(args.task)
    eval_batch = None if getattr(args, "eval_batch", None) is None else args.eval_batch == "true"
    return ClientSettings(
        url=url,
        task=task.name,
        seed=args.seed,
        layouts=_layouts(args.layouts, task.episodes_per_seed),
        policy_dir=Path(args.policy_dir) if getattr(args, "policy_dir", None) else None,
        policy_name=args.policy_name,
        ckpt_name=args.ckpt,
        action_type=args.action_type,
        env_cfg=args.env_cfg or ("arx_x5_depth" if args.depth else "arx_x5"),
        results=Path(args.results),
        run_id=args.run_id,
        videos=args.videos,
        depth=args.depth,
        eval_batch=eval_batch,
        num_envs=args.num_envs,
        on_error=args.on_error,
        dispatch=args.dispatch,
        request_timeout_s=args.request_timeout,
        connect_timeout_s=args.connect_timeout,
        max_connect_attempts=args.connect_attempts,
        connect_retry_delay_s=args.connect_retry_delay,
    )


def _fail(prefix: str, exc: BaseException, status: int) -> int:
    print(f"{prefix}: {exc}", file=sys.stderr)
    return status


def client_main(args: argparse.Namespace) -> int:
    """`twin client`: run against a policy server that is already up."""
    try:
        settings = settings_from_args(args, url=args.url)
        client = TwinEvalClient(settings)
    except (ValueError, PolicyDirError, ImportError) as exc:
        return _fail("twin client", exc, 2)
    try:
        report = client.run()
    except (ConnectionError, OSError, ResultFileError) as exc:
        return _fail("twin client", exc, 1)
    _summary(report)
    return 0


def eval_main(args: argparse.Namespace) -> int:
    """`twin eval`: start the policy's server, run the client, stop the server."""
    from pyrua_dojo.harness.twin_eval import PolicyServerError, run_twin_eval

    try:
        settings = settings_from_args(args, url="ws://localhost:0")
    except (ValueError, PolicyDirError) as exc:
        return _fail("twin eval", exc, 2)
    try:
        report = run_twin_eval(
            settings,
            mode=args.server_mode,
            policy_gpu=args.policy_gpu,
            policy_env=args.policy_env,
            extra_overrides=args.override or (),
            server_timeout_s=args.server_timeout,
            twin_segmentation=args.twin_segmentation,
        )
    except ResultFileError as exc:
        return _fail("twin eval", exc, 1)
    except (ValueError, PolicyDirError, ImportError) as exc:
        return _fail("twin eval", exc, 2)
    except (PolicyServerError, ConnectionError, OSError) as exc:
        return _fail("twin eval", exc, 1)
    _summary(report)
    return 0


def _summary(report: ClientReport) -> None:
    booked = report.booked
    score = sum(e.score for e in booked) / len(booked) * 100 if booked else 0.0
    print(
        f"{report.location.task} seed {report.location.seed}: SR {report.successes}/{len(booked)}, score {score:.1f}"
        f"; {report.result_path}"
    )
