#!/bin/bash
# Same-machine evaluation: start the policy server, wait for its port, run the env client, stop the server.
#
# usage: bash eval.sh <bench_name> <task_name> <ckpt_name> <env_cfg_type> <action_type> <seed> \
#            <policy_gpu_id> <env_gpu_id> <policy_conda_env> <eval_env_conda_env> [--dry-run]
#
# XPolicyLab's arguments, in its order. RoboDojo's `scripts/robodojo.sh eval --policy-dir <this folder>` runs the
# same two setup scripts through its run_policy_eval.sh. Environments: a conda env name, `uv`, a virtualenv
# path or `current` (see pyrua_lib.sh). PYRUA_DRY_RUN=1 or --dry-run prints every command (including those of
# the two setup scripts) and starts nothing; PYRUA_PORT fixes the port instead of picking a free one.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=pyrua_lib.sh
source "${SCRIPT_DIR}/pyrua_lib.sh"
pyrua_take_flags "$@"
set -- "${PYRUA_ARGS[@]+"${PYRUA_ARGS[@]}"}"

if [[ $# -ne 10 ]]; then
    echo "usage: bash eval.sh <bench_name> <task_name> <ckpt_name> <env_cfg_type> <action_type> <seed> <policy_gpu_id> <env_gpu_id> <policy_conda_env> <eval_env_conda_env> [--dry-run]" >&2
    exit 2
fi

pyrua_leading_args "$@"
policy_gpu_id=${7}
env_gpu_id=${8}
policy_conda_env=${9}
eval_env_conda_env=${10}

pyrua_xpolicylab_paths

SERVER_SCRIPT="${SCRIPT_DIR}/setup_eval_policy_server.sh"
CLIENT_SCRIPT="${SCRIPT_DIR}/setup_eval_env_client.sh"

if [[ -n "${PYRUA_PORT:-}" ]]; then
    policy_server_port="${PYRUA_PORT}"
elif [[ -f "${UTILS_DIR}/get_free_port.sh" ]]; then
    policy_server_port=$(bash "${UTILS_DIR}/get_free_port.sh")
else
    policy_server_port=$("$(pyrua_python)" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
fi
policy_server_ip="localhost"

additional_info="ckpt_name=${ckpt_name},action_type=${action_type}"

server_args=(
    "${bench_name}" "${task_name}" "${ckpt_name}" "${env_cfg_type}" "${action_type}" "${seed}"
    "${policy_gpu_id}" "${policy_conda_env}" "${policy_server_port}"
)
client_args=(
    "${bench_name}" "${task_name}" "${ckpt_name}" "${env_cfg_type}" "${action_type}" "${seed}"
    "${env_gpu_id}" "${eval_env_conda_env}" "${additional_info}" "${policy_server_port}" "${policy_server_ip}"
)

if pyrua_dry; then
    echo "[MAIN] dry run: server ${SERVER_SCRIPT}, client ${CLIENT_SCRIPT}, port ${policy_server_port}"
    pyrua_show bash "${SERVER_SCRIPT}" "${server_args[@]}"
    bash "${SERVER_SCRIPT}" "${server_args[@]}"
    pyrua_show bash "${UTILS_DIR}/wait_for_policy_server.sh" "${policy_server_ip}" "${policy_server_port}" '$SERVER_PID' "Policy server" 1200
    pyrua_show bash "${CLIENT_SCRIPT}" "${client_args[@]}"
    bash "${CLIENT_SCRIPT}" "${client_args[@]}"
    exit 0
fi

cleanup() {
    if [[ -n "${SERVER_PID:-}" ]]; then
        echo "[MAIN] kill server ${SERVER_PID}"
        kill "${SERVER_PID}" 2>/dev/null || true
    fi
}
trap cleanup EXIT

echo "[MAIN] start server, policy_server_port=${policy_server_port}"
bash "${SERVER_SCRIPT}" "${server_args[@]}" &
SERVER_PID=$!

bash "${UTILS_DIR}/wait_for_policy_server.sh" "${policy_server_ip}" "${policy_server_port}" "${SERVER_PID}" "Policy server" 1200

echo "[MAIN] start client, server=${policy_server_ip}:${policy_server_port}"
bash "${CLIENT_SCRIPT}" "${client_args[@]}"

echo "[MAIN] eval finished"
