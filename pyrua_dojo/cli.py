"""The `pyrua-dojo` command line.

Each subcommand is registered by a small function below that imports its implementation lazily, so
`pyrua-dojo --help` stays fast and a command only pulls in what it needs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from pyrua_dojo.evaluate.run_options import (
    PLANNERS,
    SEG_NOISE_LEVELS,
    STATION_MODES,
    add_run_arguments,
    add_twin_conditions,
)

Handler = Callable[[argparse.Namespace], int]


def _add_bench(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="benchmarks that print their figures")
    kinds = bench.add_subparsers(dest="bench", required=True)

    ik = kinds.add_parser("ik", help="X5 inverse kinematics: solve time, success rate, residuals")
    ik.add_argument("--samples", type=int, default=2000, help="targets per arm and IK mode")
    ik.add_argument("--seed", type=int, default=0)

    def run_ik(args: argparse.Namespace) -> int:
        from pyrua_dojo.benchmarks.ik import main as bench_ik

        return bench_ik(samples=args.samples, seed=args.seed)

    ik.set_defaults(func=run_ik)

    loc = kinds.add_parser("locate", help="locate accuracy vs the twin's true poses: head, head+wrist, depth")
    loc.add_argument("--layouts", type=int, default=50, help="layouts, alternating stack_blocks / general_pickup")
    loc.add_argument("--seed", type=int, default=0)
    loc.add_argument("--wrist-objects", type=int, default=1, help="objects per layout measured after look_at")
    loc.add_argument("--seg-noise", "--noise", dest="noise", default="realistic",
                     choices=[*SEG_NOISE_LEVELS, "dilate2", "erode2", "all"],
                     help="twin mask noise: a SAM 3 level (default realistic; none = the oracle), masks grown / "
                     "shrunk by 2 px, or all of them")
    loc.add_argument("--station", default="unknown", choices=STATION_MODES,
                     help="unknown (default): each layout's true station drawn around the agent's; exact")
    loc.add_argument("--calibrate", action="store_true", help="calibrate each layout's drawn station first")
    loc.add_argument("--sweep", action="store_true", help="errors against every noise level and station spread")

    loc.add_argument("--scenarios", type=int, default=5,
                     help="layouts per constructed scene (stacks, held, hidden, cups, round objects; 0: none)")
    loc.add_argument("--scenario-seed", type=int, default=4, help="seed of the constructed scenes' layouts")
    loc.add_argument("--scenario-names", default=None,
                     help="only these constructed scenes (comma-separated, e.g. 'cup upright,cup upside down')")
    loc.add_argument("--scenario-noise", default="none", choices=[*SEG_NOISE_LEVELS, "dilate2", "erode2"],
                     help="mask noise of the constructed scenes (default none: the oracle, which their targets assume)")
    loc.add_argument("--scenario-station", default="exact", choices=STATION_MODES,
                     help="station of the constructed scenes (default exact; unknown: drawn per layout, as in trials)")

    def run_locate(args: argparse.Namespace) -> int:
        from pyrua_dojo.benchmarks.locate import main as bench_locate
        from pyrua_dojo.benchmarks.locate_scenes import main as bench_scenes

        if args.calibrate and args.station != "unknown":
            print("bench locate: --calibrate needs --station unknown", file=sys.stderr)
            return 2
        status = bench_locate(layouts=args.layouts, seed=args.seed, wrist_objects=args.wrist_objects, noise=args.noise,
                              station=args.station, calibrated=args.calibrate, sweep=args.sweep)
        names = [n.strip() for n in args.scenario_names.split(",")] if args.scenario_names else None
        scenes = (bench_scenes(args.scenarios, args.scenario_seed, names, args.scenario_noise, args.scenario_station)
                  if args.scenarios > 0 else 0)
        return max(status, scenes)

    loc.set_defaults(func=run_locate)

    twin = kinds.add_parser("twin", help="MuJoCo twin: a 550-step stack_blocks episode and 3-camera render times")
    twin.add_argument("--seed", type=int, default=0)
    twin.add_argument("--layout", type=int, default=None, help="layout id (default: 2 for stack_blocks, 0 with --all-tasks)")
    twin.add_argument("--obs-every", type=int, default=20, help="one observation every N steps")
    twin.add_argument("--all-tasks", action="store_true", help="every twin task: full-length episode and render time")
    twin.add_argument("--tasks", default=None, help="with --all-tasks: only these (comma-separated)")

    def run_twin(args: argparse.Namespace) -> int:
        from pyrua_dojo.benchmarks.twin import main as bench_twin
        from pyrua_dojo.benchmarks.twin import main_all as bench_twin_all

        if args.all_tasks:
            tasks = None if args.tasks is None else [t.strip() for t in args.tasks.split(",") if t.strip()]
            layout = 0 if args.layout is None else args.layout
            return bench_twin_all(seed=args.seed, layout_id=layout, obs_every=args.obs_every, tasks=tasks)
        layout = 2 if args.layout is None else args.layout
        return bench_twin(seed=args.seed, layout_id=layout, obs_every=args.obs_every)

    twin.set_defaults(func=run_twin)

    programs = kinds.add_parser("programs", help="reference programs (scripted planner) on the twin: success, steps")
    programs.add_argument("--tasks", default="stack_blocks,general_pickup,stack_blocks_by_language,align_blocks")
    programs.add_argument("--layouts", type=int, default=50, help="layouts per task")
    programs.add_argument("--seed", type=int, default=0)
    programs.add_argument("--run-root", default=None, help="keep the run directories here (default: a temp dir)")
    add_twin_conditions(programs)
    programs.add_argument("--calibrate", action="store_true",
                          help="calibrate each layout's drawn station first; the agent runs with that file")
    programs.add_argument("--sweep", action="store_true",
                          help="success per task against every noise level and station spread (ignores the above)")

    def run_programs(args: argparse.Namespace) -> int:
        from pyrua_dojo.benchmarks.programs import Conditions
        from pyrua_dojo.benchmarks.programs import main as bench_programs

        tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
        try:
            conditions = Conditions(args.seg_noise, args.station, calibrated=args.calibrate)
        except ValueError as exc:
            print(f"bench programs: {exc}", file=sys.stderr)
            return 2
        return bench_programs(tasks, args.layouts, args.seed, args.run_root, conditions, sweep=args.sweep)

    programs.set_defaults(func=run_programs)

    grip = kinds.add_parser("gripper", help="gripper value against object width; the 84 mm cup against the opening")
    grip.add_argument("--part", choices=["widths", "cup", "all"], default="all")

    def run_gripper(args: argparse.Namespace) -> int:
        from pyrua_dojo.benchmarks.gripper import main as bench_gripper

        return bench_gripper(("widths", "cup") if args.part == "all" else (args.part,))

    grip.set_defaults(func=run_gripper)

    wire = kinds.add_parser("wire", help="websocket protocol: frame codec and localhost INFER round trips")
    wire.add_argument("--requests", type=int, default=50, help="timed repetitions per figure")
    wire.add_argument("--seed", type=int, default=0)
    wire.add_argument("--depth", action="store_true", help="add float32 depth and camera matrices")

    def run_wire(args: argparse.Namespace) -> int:
        from pyrua_dojo.benchmarks.wire import main as bench_wire

        return bench_wire(requests=args.requests, seed=args.seed, depth=args.depth)

    wire.set_defaults(func=run_wire)

    seg = kinds.add_parser("seg", help="segmentation service: RLE codec and HTTP round trip (twin backend)")
    seg.add_argument("--requests", type=int, default=40, help="requests per prompt count")
    seg.add_argument("--seed", type=int, default=0)

    def run_seg(args: argparse.Namespace) -> int:
        from pyrua_dojo.benchmarks.seg import main as bench_seg

        return bench_seg(requests=args.requests, seed=args.seed)

    seg.set_defaults(func=run_seg)

    noise = kinds.add_parser("seg-noise", help="what each twin mask noise level does: misses, boundary px, false pos.")
    noise.add_argument("--layouts", type=int, default=6, help="layouts, alternating stack_blocks / general_pickup")
    noise.add_argument("--seed", type=int, default=4)
    noise.add_argument("--draws", type=int, default=8, help="backend seeds per request (independent draws)")

    def run_noise(args: argparse.Namespace) -> int:
        from pyrua_dojo.benchmarks.seg_noise import main as bench_noise

        return bench_noise(layouts=args.layouts, seed=args.seed, draws=args.draws)

    noise.set_defaults(func=run_noise)

    client = kinds.add_parser("client", help="twin client: per-step cost of the wire and the env against a bare loop")
    client.add_argument("--layout", type=int, default=0, help="general_pickup layout id")

    def run_client(args: argparse.Namespace) -> int:
        from pyrua_dojo.benchmarks.client import main as bench_client

        return bench_client(layout=args.layout)

    client.set_defaults(func=run_client)

    cells = kinds.add_parser("cells", help="cell executor: round trip, guarded attribute cost, interruption")
    cells.add_argument("--cells", type=int, default=200, help="trivial cells timed for the round trip")
    cells.add_argument("--executors", type=int, default=20, help="executors run concurrently in threads")

    def run_cells(args: argparse.Namespace) -> int:
        from pyrua_dojo.benchmarks.cells import main as bench_cells
        from pyrua_dojo.benchmarks.kernel import main as bench_kernel

        print("in-process executor (runs inside each kernel):")
        bench_cells(cells=args.cells, executors=args.executors)
        print("kernel executor (what episodes use):")
        return bench_kernel(cells=args.cells, executors=args.executors)

    cells.set_defaults(func=run_cells)


def _add_serve_sam3(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve-sam3", help="serve SAM 3 (CUDA, local weights) behind the segmentation HTTP contract")
    p.add_argument("--checkpoint", required=True, help="local sam3.pt (never downloaded)")
    p.add_argument("--bpe", required=True, help="local bpe_simple_vocab_16e6.txt.gz")
    p.add_argument("--device", default="cuda", help="cuda or cuda:N")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--processor-threshold", type=float, default=0.05, help="fixed low model threshold")
    p.add_argument("--no-hash", action="store_true", help="skip the checkpoint sha256 (saves a few seconds)")
    p.add_argument("--no-warmup", action="store_true")

    def run(args: argparse.Namespace) -> int:
        from pyrua_dojo.seg_service.serve import serve_sam3

        return serve_sam3(
            args.checkpoint,
            args.bpe,
            device=args.device,
            host=args.host,
            port=args.port,
            processor_threshold=args.processor_threshold,
            hash_checkpoint=not args.no_hash,
            warmup=not args.no_warmup,
        )

    p.set_defaults(func=run)


def _add_summarize(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("summarize", help="RoboDojo's summary (per task, dimension, Average) of a results tree")
    p.add_argument("dir", help="results root (eval_result/RoboDojo), or a directory holding it")
    p.add_argument("--json", metavar="F", help="also write every number as JSON")
    p.add_argument("--csv", metavar="F", help="also write a long-format CSV")
    p.add_argument("--md", metavar="F", help="also write the markdown (what RoboDojo writes to _summary.md)")

    def run(args: argparse.Namespace) -> int:
        from pyrua_dojo.evaluate.summarize import run_cli

        return run_cli(args.dir, json_path=args.json, csv_path=args.csv, md_path=args.md)

    p.set_defaults(func=run)


def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="paired comparison of two runs by (task, seed, layout); refuses mismatches")
    p.add_argument("a", help="results tree A (the baseline)")
    p.add_argument("b", help="results tree B; deltas are B - A")
    p.add_argument("--policy-a", metavar="POLICY[/CONFIG]", help="which run of A, when it holds several")
    p.add_argument("--policy-b", metavar="POLICY[/CONFIG]", help="which run of B, when it holds several")
    p.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap resamples")
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--seed", type=int, default=0, help="bootstrap RNG seed")
    p.add_argument("--json", metavar="F", help="also write every number as JSON")
    p.add_argument("--md", metavar="F", help="also write the markdown")

    def run(args: argparse.Namespace) -> int:
        from pyrua_dojo.evaluate.compare import run_cli

        return run_cli(
            args.a,
            args.b,
            policy_a=args.policy_a,
            policy_b=args.policy_b,
            bootstrap=args.bootstrap,
            confidence=args.confidence,
            seed=args.seed,
            json_path=args.json,
            md_path=args.md,
        )

    p.set_defaults(func=run)


def _add_prompt(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prompt", help="print the assembled prompt of a task and its size")
    p.add_argument("--task", required=True, help="RoboDojo task name (e.g. stack_blocks)")
    p.add_argument("--depth", action="store_true", help="the depth variant (measuring notes for depth images)")
    p.add_argument("--instruction", help="the instruction to put on the card (default: the catalogue's text)")
    p.add_argument("--step-limit", type=int, help="override the catalogue's step limit")
    p.add_argument("--size-only", action="store_true", help="print only the sizes")
    p.add_argument("--judging-card", action=argparse.BooleanOptionalAction, default=True,
                   help="the card says what RoboDojo's success check accepts (default: on)")

    def run(args: argparse.Namespace) -> int:
        from pyrua_dojo.runtime.prompt.command import run_cli

        return run_cli(
            args.task,
            depth=args.depth,
            instruction=args.instruction,
            step_limit=args.step_limit,
            size_only=args.size_only,
            judging_card=args.judging_card,
        )

    p.set_defaults(func=run)


def _add_view(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("view", help="a static HTML page of one episode's run directory (cells, images, LLM usage)")
    p.add_argument("run_dir", help="an episode's run directory (the one holding result.json and turns.jsonl)")
    p.add_argument("--out", metavar="FILE", help="where to write the page (default: RUN_DIR/view.html)")
    p.add_argument("--link", action="store_true", help="link images by relative path instead of embedding them")

    def run(args: argparse.Namespace) -> int:
        from pyrua_dojo.evaluate.viewer import run_cli

        return run_cli(args.run_dir, out=args.out, link=args.link)

    p.set_defaults(func=run)


def _add_plugin(sub: argparse._SubParsersAction) -> None:
    plugin = sub.add_parser("plugin", help="the XPolicyLab plugin: install it, build the submission archive")
    kinds = plugin.add_subparsers(dest="plugin", required=True)

    inst = kinds.add_parser("install", help="put the plugin at XPOLICYLAB/policy/PyRUA_Dojo")
    inst.add_argument("--xpolicylab", required=True, metavar="DIR", help="an XPolicyLab checkout")
    inst.add_argument("--link", action="store_true", help="symlink to the packaged directory instead of copying")
    inst.add_argument("--force", action="store_true", help="replace a different existing one (kept aside)")
    inst.add_argument("--depth-cfg", action="store_true", help="also install the depth env config into DIR/../env_cfg")

    def run_install(args: argparse.Namespace) -> int:
        from submission.commands import run_install as install

        return install(args.xpolicylab, link=args.link, force=args.force, depth_cfg=args.depth_cfg)

    inst.set_defaults(func=run_install)

    pack = kinds.add_parser("package", help="build pyrua-dojo-plugin-<version>.tar.gz (plugin, wheel, manifest)")
    pack.add_argument("--out", default="dist", metavar="DIR", help="output directory (default: dist)")
    pack.add_argument("--no-wheel", action="store_true", help="do not build the pyrua-dojo wheel")
    pack.add_argument("--force", action="store_true", help="replace an existing archive of the same version")

    def run_package(args: argparse.Namespace) -> int:
        from submission.commands import run_package as package

        return package(args.out, wheel=not args.no_wheel, force=args.force)

    pack.set_defaults(func=run_package)

    ver = kinds.add_parser("verify", help="check an archive's files against its MANIFEST.json")
    ver.add_argument("archive")

    def run_verify(args: argparse.Namespace) -> int:
        from submission.commands import run_verify as verify

        return verify(args.archive)

    ver.set_defaults(func=run_verify)

    path = kinds.add_parser("path", help="print where the packaged plugin directory is")

    def run_path(args: argparse.Namespace) -> int:
        from submission.commands import run_path as show

        return show()

    path.set_defaults(func=run_path)


def _twin_client_options(p: argparse.ArgumentParser, *, policy_dir_required: bool) -> None:
    """Options shared by `twin client`, `twin eval`: what to run and how RoboDojo's eval client would run it."""
    p.add_argument("--task", required=True, help="a twin task (e.g. stack_blocks)")
    p.add_argument("--seed", type=int, default=0, help="RoboDojo layout seed (default 0)")
    p.add_argument("--layouts", default="all",
                   help="layout ids: all (default; RoboDojo's EVAL_NUM caps it), 7, 0-9 or 0,3,5-7")
    p.add_argument("--policy-dir", required=policy_dir_required, metavar="DIR",
                   help="an XPolicyLab policy directory: its deploy.py drives the env (else XPolicyLab's reference loop)")
    p.add_argument("--policy-name", help="the results' policy segment (default: the policy directory's name)")
    p.add_argument("--ckpt", default="twin", help="ckpt_name in the results path (default: twin)")
    p.add_argument("--action-type", choices=("joint", "ee"), default="joint",
                   help="action_type in the results path and for the server (robodojo.sh defaults to ee)")
    p.add_argument("--env-cfg", help="env_cfg_type for the server (default arx_x5, arx_x5_depth with --depth); "
                   "the results' config_name stays arx_x5")
    p.add_argument("--results", default="eval_result", metavar="DIR", help="results go to DIR/RoboDojo/<task>/...")
    p.add_argument("--run-id", help="the run id (default: now, YYYY-mm-dd_HH-MM-SS); reusing one resumes it")
    p.add_argument("--videos", action="store_true", help="one mp4 per camera per episode (RoboDojo's names)")
    p.add_argument("--depth", action="store_true", help="observations with depth and camera matrices")
    p.add_argument("--num-envs", type=int, default=10, help="parallel envs when the policy has eval_batch: true")
    p.add_argument("--eval-batch", choices=("true", "false"),
                   help="override deploy.yml's eval_batch (default: deploy.yml; false without a policy directory)")
    p.add_argument("--on-error", choices=("book", "skip"), default="book",
                   help="an episode the policy broke: book it as failed (default) or leave it out as RoboDojo does")
    p.add_argument("--dispatch", choices=("infer", "call"), default="infer",
                   help="websocket client behaviour: XPolicyLab 7198143 (infer, default) or newer (call)")
    p.add_argument("--request-timeout", type=float, default=120.0, help="seconds per request (XPolicyLab: 120)")
    p.add_argument("--connect-timeout", type=float, default=30.0, help="seconds per connection attempt")
    p.add_argument("--connect-attempts", type=int, default=10, help="connection attempts (XPolicyLab: 10)")
    p.add_argument("--connect-retry-delay", type=float, default=5.0, help="seconds between attempts (XPolicyLab: 5)")


def _add_twin(sub: argparse._SubParsersAction) -> None:
    twin = sub.add_parser("twin", help="the MuJoCo twin as RoboDojo's simulator client for any XPolicyLab policy")
    kinds = twin.add_subparsers(dest="twin", required=True)

    client = kinds.add_parser("client", help="run a task's layouts against a running policy server")
    client.add_argument("--url", required=True, help="the policy server, ws://HOST:PORT")
    _twin_client_options(client, policy_dir_required=False)

    def run_client(args: argparse.Namespace) -> int:
        from pyrua_dojo.harness.commands import client_main

        return client_main(args)

    client.set_defaults(func=run_client)

    gal = kinds.add_parser("gallery", help="one contact sheet PNG of every twin task's first head-camera image")
    gal.add_argument("--out", default="twin_gallery.png", help="PNG path (default: twin_gallery.png)")
    gal.add_argument("--task", action="append", help="only these tasks (repeatable; default: all)")
    gal.add_argument("--seed", type=int, default=0)
    gal.add_argument("--layout", type=int, default=0)

    def run_gallery(args: argparse.Namespace) -> int:
        from pyrua_dojo.twin.gallery import main as gallery_main

        return gallery_main(args.out, args.task, args.seed, args.layout)

    gal.set_defaults(func=run_gallery)

    ev = kinds.add_parser("eval", help="start a policy directory's server as RoboDojo does, run the client, stop it")
    _twin_client_options(ev, policy_dir_required=True)
    ev.add_argument("--server-mode", choices=("auto", "script", "python"), default="auto",
                    help="script: the policy's setup_eval_policy_server.sh; python: pyrua-dojo's stand-in for "
                    "XPolicyLab's setup_policy_server.py; auto: script with conda in an XPolicyLab checkout")
    ev.add_argument("--policy-env", help="the conda env argument of the server script (default: the active one)")
    ev.add_argument("--policy-gpu", default="0", help="CUDA_VISIBLE_DEVICES for the server (default 0)")
    ev.add_argument("--override", action="append", metavar="KEY=VALUE",
                    help="extra deploy.yml override for the server (repeatable)")
    ev.add_argument("--server-timeout", type=float, default=600.0, help="seconds to wait for the port (RoboDojo: 600)")
    ev.add_argument("--twin-segmentation", action="store_true",
                    help="serve the twin's masks as a segmentation service and pass segmentation_url=<it> (our agent)")

    def run_eval(args: argparse.Namespace) -> int:
        from pyrua_dojo.harness.commands import eval_main

        return eval_main(args)

    ev.set_defaults(func=run_eval)


def _add_play(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("play", help="one twin episode of our agent through the wire protocol; prints its run directory")
    p.add_argument("--task", required=True, help="a twin task (e.g. stack_blocks)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layout", type=int, default=0)
    add_run_arguments(p, planners=(*PLANNERS, "console"), judging_card_default=None,
                      relay_help="relay: the LLM is whoever answers `pyrua-dojo relay show/reply` (the command is "
                      "printed); console: you, at this terminal")
    p.add_argument("--results", default="eval_result", metavar="DIR", help="results go to DIR/RoboDojo/<task>/...")
    p.add_argument("--run-root", metavar="DIR", help="where the agent writes run directories (default: a temp dir)")

    def run(args: argparse.Namespace) -> int:
        from pyrua_dojo.evaluate.play import run_cli

        return run_cli(args)

    p.set_defaults(func=run)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="the main job on the twin: a scripted stack_blocks episode through the wire")
    p.add_argument("--task", default="stack_blocks")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layout", type=int, default=0)
    p.add_argument("--out", default="runs/demo", metavar="DIR", help="results and the agent's run directory")
    # The demo shows the machinery at work, so it runs under the conditions its reference program was written for;
    # figures that estimate RoboDojo (play, eval, bench) default to realistic masks and an unknown station.
    p.add_argument("--seg-noise", default="none", choices=SEG_NOISE_LEVELS,
                   help="twin mask noise (default none: the oracle; realistic estimates RoboDojo)")
    p.add_argument("--station", default="exact", choices=STATION_MODES,
                   help="exact (default): the station the agent assumes; unknown: one drawn around it")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from pyrua_dojo.evaluate.play import PlayOptions, conditions_line, play

        out = Path(args.out)
        options = PlayOptions(task=args.task, seed=args.seed, layout=args.layout, planner="scripted",
                              segmentation="twin", seg_noise=args.seg_noise, station=args.station,
                              results=out / "eval_result", run_root=out / "runs")
        print(f"demo: {conditions_line(options.segmentation, options.seg_noise, options.station)}", flush=True)
        result = play(options)
        verdict = "SUCCESS" if result.success else f"FAILED ({result.error or result.failure})"
        print(f"demo: {args.task} seed {args.seed} layout {args.layout}: {verdict}, score {result.score:.2f}, "
              f"{result.steps}/{result.step_limit} steps")
        print(f"  run directory: {result.agent_dir}")
        print(f"  RoboDojo result: {result.result_path}")
        if result.agent_dir is not None:
            print(f"  view it: pyrua-dojo view {result.agent_dir}")
        return 0 if result.error is None else 1

    p.set_defaults(func=run)


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="plots of a results tree (dimensions vs anchors, tokens, calls, steps, failures)")
    p.add_argument("dir", help="results root (eval_result/RoboDojo), or a directory holding it")
    p.add_argument("--out", metavar="DIR2", help="where to write the PNGs and report.html (default: <root>/../report)")
    p.add_argument("--link", action="store_true", help="link the PNGs from the page instead of embedding them")

    def run(args: argparse.Namespace) -> int:
        from pyrua_dojo.evaluate.report import run_cli

        return run_cli(args.dir, out=args.out, link=args.link)

    p.set_defaults(func=run)


def _add_calibrate(sub: argparse._SubParsersAction) -> None:
    cal = sub.add_parser("calibrate", help="calibration: fit a recorded run, or calibrate the twin end to end")
    kinds = cal.add_subparsers(dest="calibrate", required=True)

    fit = kinds.add_parser("fit", help="fit a recorded calibration run (planner: calibrate) and write the file")
    fit.add_argument("run_dir", metavar="RUN_DIR", help="the run directory holding calibration.jsonl")
    fit.add_argument("--out", required=True, metavar="FILE", help="the calibration YAML to write")
    fit.add_argument("--station", metavar="FILE", help="calibration file whose chain to fit on (default: packaged)")
    fit.add_argument("--json", metavar="F", help="also write the fit's numbers as JSON")

    def run_fit(args: argparse.Namespace) -> int:
        from pyrua_dojo.evaluate.twin_calibration import run_fit_cli

        return run_fit_cli(args.run_dir, args.out, station_file=args.station, json_path=args.json)

    fit.set_defaults(func=run_fit)

    twin = kinds.add_parser("twin", help="run the calibration routine on the twin (camera matrices on), fit, write")
    twin.add_argument("--out", metavar="FILE", help="the calibration YAML (default: calibration.yml in the run dir)")
    twin.add_argument("--run-root", default="runs", metavar="DIR", help="where the run directory goes")
    twin.add_argument("--task", default="stack_blocks", help="twin task hosting the run (default: stack_blocks)")
    twin.add_argument("--seed", type=int, default=0)
    twin.add_argument("--layout", type=int, default=0)
    twin.add_argument("--truth", metavar="FILE", help="calibration file the twin simulates as its true station")
    twin.add_argument("--perturb", action="store_true", help="twin truth: wrist mounts moved 1.5 cm and turned 4 deg")
    twin.add_argument("--perturb-seed", type=int, default=0)
    twin.add_argument("--agent-calibration", metavar="FILE", help="calibration file the agent starts from")

    def run_twin(args: argparse.Namespace) -> int:
        from pyrua_dojo.evaluate.twin_calibration import run_twin_cli

        return run_twin_cli(args.out, run_root=args.run_root, task=args.task, seed=args.seed, layout=args.layout,
                            truth_file=args.truth, perturb=args.perturb, perturb_seed=args.perturb_seed,
                            agent_calibration=args.agent_calibration)

    twin.set_defaults(func=run_twin)


def _add_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="twin episodes at scale: parallel workers, resumable, sharded; RoboDojo's results")
    p.add_argument("--tasks", required=True, metavar="T1,T2", help="twin tasks, comma-separated")
    p.add_argument("--seeds", default="0", metavar="0,1,2", help="layout seeds, comma-separated (default 0)")
    p.add_argument("--episodes", type=int, metavar="N", help="layouts 0..N-1 per task and seed (default: all)")
    p.add_argument("--layouts", metavar="IDS", help="these layout ids per task and seed instead: 7, 0-9 or 0,3,5-7")
    p.add_argument("--workers", type=int, default=1, metavar="K", help="episodes run in parallel (processes)")
    p.add_argument("--shard", metavar="i/n", help="run only shard i of n (needs --run-id; merge with 'merge')")
    p.add_argument("--out", default="eval_result", metavar="DIR", help="results go to DIR/RoboDojo/<task>/...")
    p.add_argument("--run-id", help="the run to write or resume (default: the latest of this configuration)")
    p.add_argument("--new-run", action="store_true", help="start a new run instead of resuming the latest")
    add_run_arguments(p, planners=PLANNERS, judging_card_default=True,
                      relay_help="relay: each episode's LLM is whoever answers its relay (`relay show` commands are "
                      "printed)")
    p.add_argument("--ckpt-name", help="the ckpt_name of RoboDojo's result path (default: model or planner)")

    def run(args: argparse.Namespace) -> int:
        from pyrua_dojo.evaluate.eval_command import run_cli

        return run_cli(args)

    p.set_defaults(func=run)


def _add_merge(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("merge", help="join results trees (eval shards from several machines) by path")
    p.add_argument("sources", nargs="+", help="results trees to merge (each a results root or a directory holding one)")
    p.add_argument("--out", required=True, metavar="DIR", help="the merged tree (DIR/RoboDojo/...); created if missing")

    def run(args: argparse.Namespace) -> int:
        from pyrua_dojo.evaluate.merge import run_cli

        return run_cli(args.sources, args.out)

    p.set_defaults(func=run)


def _add_relay(sub: argparse._SubParsersAction) -> None:
    from pyrua_dojo.relay.commands import add_parser

    add_parser(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pyrua-dojo", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_bench(sub)
    _add_summarize(sub)
    _add_compare(sub)
    _add_serve_sam3(sub)
    _add_prompt(sub)
    _add_view(sub)
    _add_plugin(sub)
    _add_twin(sub)
    _add_play(sub)
    _add_demo(sub)
    _add_report(sub)
    _add_eval(sub)
    _add_merge(sub)
    _add_calibrate(sub)
    _add_relay(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.func
    return int(handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
