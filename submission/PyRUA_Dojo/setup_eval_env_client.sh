#!/bin/bash
# Start the environment client (RoboDojo's simulator, or XPolicyLab's debug env) against a running server.
#
# usage: bash setup_eval_env_client.sh <bench_name> <task_name> <ckpt_name> <env_cfg_type> <action_type> <seed> \
#            <env_gpu_id> <eval_env_conda_env> <additional_info> <policy_server_port> [policy_server_ip=localhost] \
#            [--dry-run]
#
# The arguments are XPolicyLab's, in its order. EVAL_ENV_TYPE selects the env as in XPolicyLab: unset or sim
# (RoboDojo + Isaac Sim), debug (XPolicyLab's debug_env_client.py, no simulator), real / real_world.
# With a conda env name and conda on PATH this hands over to XPolicyLab's utils/setup_env_client.sh exactly as
# XPolicyLab's demo policy does; otherwise (`uv`, a virtualenv path, `current`, or no conda) it runs the same
# final command itself with that environment. deploy.yml `depth: true` switches env_cfg_type to the depth env
# config (PYRUA_DEPTH_ENV_CFG, default arx_x5_depth) and stops with the install steps if RoboDojo lacks it.
# PYRUA_DRY_RUN=1 or --dry-run prints the commands only.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=pyrua_lib.sh
source "${SCRIPT_DIR}/pyrua_lib.sh"
pyrua_take_flags "$@"
set -- "${PYRUA_ARGS[@]+"${PYRUA_ARGS[@]}"}"

if [[ $# -lt 10 || $# -gt 11 ]]; then
    echo "usage: bash setup_eval_env_client.sh <bench_name> <task_name> <ckpt_name> <env_cfg_type> <action_type> <seed> <env_gpu_id> <eval_env_conda_env> <additional_info> <policy_server_port> [policy_server_ip] [--dry-run]" >&2
    exit 2
fi

pyrua_leading_args "$@"
env_gpu_id=${7}
eval_env_conda_env=${8}
additional_info=${9}
policy_server_port=${10}
policy_server_ip=${11:-"localhost"}

pyrua_xpolicylab_paths

echo "[CLIENT] policy=${policy_name}, task=${task_name}, server=${policy_server_ip}:${policy_server_port}"

pyrua_resolve_env "${eval_env_conda_env}"

depth_on="$(pyrua_yaml_get "${yaml_file}" depth false)"
if [[ "${depth_on}" == "true" ]]; then
    depth_cfg="$(pyrua_depth_env_cfg)"
    if [[ "${env_cfg_type}" != "${depth_cfg}" ]]; then
        pyrua_log "depth: true -> env_cfg_type ${env_cfg_type} replaced by ${depth_cfg}"
        env_cfg_type="${depth_cfg}"
    fi
    depth_yml="${BENCH_ROOT}/env_cfg/${depth_cfg}.yml"
    if [[ ! -f "${depth_yml}" ]]; then
        pyrua_depth_steps "${BENCH_ROOT}" "${depth_cfg}"
        pyrua_die "depth env config not found: ${depth_yml}"
    fi
    depth_flag="$(pyrua_yaml_get "${depth_yml}" observation.vision.depth false)"
    if [[ "${depth_flag}" != "true" ]]; then
        pyrua_depth_steps "${BENCH_ROOT}" "${depth_cfg}"
        pyrua_die "${depth_yml} does not turn observation.vision.depth on"
    fi
fi

if [[ "${PYRUA_ENV_KIND}" == "conda" ]]; then
    pyrua_exec bash "${UTILS_DIR}/setup_env_client.sh" \
        "${UTILS_DIR}" \
        "${yaml_file}" \
        "${eval_env_conda_env}" \
        "${policy_server_port}" \
        "${bench_name}" \
        "${task_name}" \
        "${env_cfg_type}" \
        "${policy_name}" \
        "${additional_info}" \
        "${BENCH_ROOT}" \
        "${seed}" \
        "${env_gpu_id}" \
        "${policy_server_ip}"
    exit 0
fi

# No conda: the same dispatch as XPolicyLab's utils/setup_env_client.sh, in the resolved environment.
case "${EVAL_ENV_TYPE:-}" in
    ""|sim) eval_env_mode=sim ;;
    debug) eval_env_mode=debug ;;
    real|real_world) eval_env_mode=real_world ;;
    *) pyrua_die "Unknown EVAL_ENV_TYPE: '${EVAL_ENV_TYPE}' (expected: sim, debug, real)" ;;
esac
echo "[CLIENT] EVAL_ENV_TYPE=${EVAL_ENV_TYPE:-(default sim)} -> ${eval_env_mode}"
eval_batch="$(pyrua_yaml_get "${yaml_file}" eval_batch false)"
protocol="$(pyrua_yaml_get "${yaml_file}" protocol ws)"

pyrua_activate "${eval_env_conda_env}"
py=python
[[ "${PYRUA_ENV_KIND}" == "current" ]] && py="$(pyrua_python)"

case "${eval_env_mode}" in
    debug)
        pyrua_exec env PYTHONPATH="${XPL_ROOT}:${BENCH_ROOT}${PYTHONPATH:+:${PYTHONPATH}}" \
            "${py}" "${XPL_ROOT}/debug_env_client.py" \
                --bench_name "${bench_name}" \
                --task_name "${task_name}" \
                --env_cfg_type "${env_cfg_type}" \
                --policy_name "${policy_name}" \
                --protocol "${protocol}" \
                --host "${policy_server_ip}" \
                --port "${policy_server_port}" \
                --eval_batch "${eval_batch}"
        ;;
    sim)
        pyrua_exec bash "${BENCH_ROOT}/scripts/eval_policy.sh" \
            --bench_name "${bench_name}" \
            --task_name "${task_name}" \
            --env_cfg_type "${env_cfg_type}" \
            --policy_name "${policy_name}" \
            --host "${policy_server_ip}" \
            --port "${policy_server_port}" \
            --protocol "${protocol}" \
            --eval_batch "${eval_batch}" \
            --root_dir "${BENCH_ROOT}" \
            --device_id "${env_gpu_id}" \
            --additional_info "${additional_info}" \
            --seed "${seed}"
        ;;
    real_world)
        pyrua_die "EVAL_ENV_TYPE=real needs XPolicyLab's conda-based real env client (not in open-source RoboDojo)"
        ;;
esac
