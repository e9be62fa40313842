#!/bin/bash
# Start the PyRUA_Dojo policy server (XPolicyLab's setup_policy_server.py with this folder's deploy.yml).
#
# usage: bash setup_eval_policy_server.sh <bench_name> <task_name> <ckpt_name> <env_cfg_type> <action_type> \
#            <seed> <policy_gpu_id> <policy_conda_env> <policy_server_port> [policy_server_host=localhost] [--dry-run]
#
# The arguments are XPolicyLab's, in its order (RoboDojo's run_policy_eval.sh / run_policy_server.sh pass them).
# <policy_conda_env>: a conda env name, `uv`, a virtualenv path or `current` (see pyrua_lib.sh). Without conda
# on PATH the server runs with the current Python. PYRUA_OVERRIDES="key=value ..." adds deploy.yml overrides
# (for example PYRUA_OVERRIDES="planner=scripted"). PYRUA_DRY_RUN=1 or --dry-run prints the commands only.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=pyrua_lib.sh
source "${SCRIPT_DIR}/pyrua_lib.sh"
pyrua_take_flags "$@"
set -- "${PYRUA_ARGS[@]+"${PYRUA_ARGS[@]}"}"

if [[ $# -lt 9 || $# -gt 10 ]]; then
    echo "usage: bash setup_eval_policy_server.sh <bench_name> <task_name> <ckpt_name> <env_cfg_type> <action_type> <seed> <policy_gpu_id> <policy_conda_env> <policy_server_port> [policy_server_host] [--dry-run]" >&2
    exit 2
fi

pyrua_leading_args "$@"
policy_gpu_id=${7}
policy_conda_env=${8}
policy_server_port=${9}
policy_server_host=${10:-"localhost"}

pyrua_xpolicylab_paths

echo "[SERVER] policy=${policy_name}, task=${task_name}, policy_server_port=${policy_server_port}"

pyrua_resolve_env "${policy_conda_env}"

if [[ "${action_type}" != "joint" ]]; then
    pyrua_log "action_type=${action_type}: the agent acts in joint space (pass --action-type joint to robodojo.sh)"
fi
depth_on="$(pyrua_yaml_get "${yaml_file}" depth false)"
if [[ "${depth_on}" == "true" ]]; then
    pyrua_log "depth: true (the env client must run with env_cfg $(pyrua_depth_env_cfg); setup_eval_env_client.sh switches to it)"
fi

overrides=(
    port="${policy_server_port}"
    host="${policy_server_host}"
    bench_name="${bench_name}"
    task_name="${task_name}"
    ckpt_name="${ckpt_name}"
    env_cfg_type="${env_cfg_type}"
    seed="${seed}"
    policy_name="${policy_name}"
    action_type="${action_type}"
)
if [[ -n "${PYRUA_OVERRIDES:-}" ]]; then
    read -r -a extra <<< "${PYRUA_OVERRIDES}"
    for item in "${extra[@]}"; do
        if [[ "${item}" != *=* || "${item}" == -* || "${item}" == =* ]]; then
            pyrua_die "PYRUA_OVERRIDES takes key=value words, got '${item}'"
        fi
        overrides+=("${item}")
    done
fi

pyrua_activate "${policy_conda_env}"

py=python
[[ "${PYRUA_ENV_KIND}" == "current" ]] && py="$(pyrua_python)"
runner=(env PYTHONWARNINGS=ignore::UserWarning CUDA_VISIBLE_DEVICES="${policy_gpu_id}")
if [[ "${PYRUA_ENV_KIND}" != "conda" ]]; then
    # As XPolicyLab's uv policies do: XPolicyLab importable from the benchmark root even without pip install -e.
    runner+=(PYTHONPATH="${BENCH_ROOT}${PYTHONPATH:+:${PYTHONPATH}}")
fi

pyrua_exec "${runner[@]}" \
    "${py}" "${XPL_ROOT}/setup_policy_server.py" \
        --config_path "${yaml_file}" \
        --overrides "${overrides[@]}"
