#!/bin/bash
# Helpers shared by the PyRUA_Dojo scripts (sourced, never run on its own).
#
# Environments: every script takes XPolicyLab's "<..._conda_env>" argument and resolves it with
# pyrua_resolve_env:
#   current | - | none | ""   the Python already on PATH (no activation)
#   uv                        the uv virtualenv at $PYRUA_UV_ENV (default: <this folder>/.venv), made by
#                             `bash install.sh --env uv`
#   a path (has a / or ~)     a virtualenv (<path>/bin/activate) or a uv project (<path>/.venv/bin/activate);
#                             a relative path is taken from this folder, as XPolicyLab's uv policies do
#   anything else             a conda environment name; when conda is not on PATH the script says so and
#                             uses the current Python instead
# Dry run: PYRUA_DRY_RUN=1 or --dry-run anywhere in the arguments: each command that would run is printed
# on a line starting with "+ " (shell-quoted, so it can be pasted) and nothing is started.

PYRUA_DRY_RUN="${PYRUA_DRY_RUN:-0}"
PYRUA_ARGS=()

# pyrua_take_flags "$@": drop --dry-run from the arguments (result in PYRUA_ARGS) and set PYRUA_DRY_RUN.
pyrua_take_flags() {
    PYRUA_ARGS=()
    local a
    for a in "$@"; do
        if [[ "${a}" == "--dry-run" ]]; then
            PYRUA_DRY_RUN=1
        else
            PYRUA_ARGS+=("${a}")
        fi
    done
    if [[ "${PYRUA_DRY_RUN}" != "0" && "${PYRUA_DRY_RUN}" != "" ]]; then
        PYRUA_DRY_RUN=1
    else
        PYRUA_DRY_RUN=0
    fi
    export PYRUA_DRY_RUN
}

# pyrua_leading_args "$@": XPolicyLab's six leading arguments, the same in every script, as bench_name, task_name,
# ckpt_name, env_cfg_type, action_type and seed.
pyrua_leading_args() {
    bench_name=${1}
    task_name=${2}
    ckpt_name=${3}
    env_cfg_type=${4}
    action_type=${5}
    seed=${6}
}

# pyrua_xpolicylab_paths: the XPolicyLab checkout around this policy folder (SCRIPT_DIR = <XPL_ROOT>/policy/<name>):
# XPL_ROOT, BENCH_ROOT (its parent), UTILS_DIR, policy_name and the policy's yaml_file (deploy.yml).
pyrua_xpolicylab_paths() {
    XPL_ROOT="$(cd "${SCRIPT_DIR}/../.." && pwd)"
    BENCH_ROOT="$(cd "${XPL_ROOT}/.." && pwd)"
    UTILS_DIR="${XPL_ROOT}/utils"
    policy_name="$(basename "${SCRIPT_DIR}")"
    yaml_file="${XPL_ROOT}/policy/${policy_name}/deploy.yml"
}

pyrua_dry() { [[ "${PYRUA_DRY_RUN}" == "1" ]]; }

pyrua_log() { echo "[PyRUA_Dojo] $*" >&2; }

pyrua_die() {
    echo "[PyRUA_Dojo][ERROR] $*" >&2
    exit 2
}

# pyrua_show CMD...: print one command, shell-quoted, after "+ ".
pyrua_show() {
    printf '+'
    printf ' %q' "$@"
    printf '\n'
}

# pyrua_run CMD...: run it, or print it in a dry run.
pyrua_run() {
    if pyrua_dry; then
        pyrua_show "$@"
    else
        "$@"
    fi
}

# pyrua_exec CMD...: replace this shell with it, or print it in a dry run and return.
pyrua_exec() {
    if pyrua_dry; then
        pyrua_show "$@"
        return 0
    fi
    exec "$@"
}

# pyrua_python: the interpreter for small helper snippets (needs PyYAML, as XPolicyLab's scripts do).
pyrua_python() {
    if [[ -n "${PYRUA_PYTHON:-}" ]]; then
        echo "${PYRUA_PYTHON}"
    elif command -v python >/dev/null 2>&1; then
        echo python
    else
        echo python3
    fi
}

# pyrua_yaml_get FILE DOTTED.KEY DEFAULT: print a value from a YAML file (booleans as true/false), with the
# resolved virtualenv's Python when it has PyYAML (PYRUA_HELPER_PY), else pyrua_python.
pyrua_yaml_get() {
    local py="${PYRUA_HELPER_PY:-$(pyrua_python)}"
    if ! "${py}" -c "import yaml" >/dev/null 2>&1; then
        echo "[PyRUA_Dojo][ERROR] ${py} cannot import yaml (PyYAML) to read $1: install it there, or point PYRUA_PYTHON at a Python that has it" >&2
        return 2
    fi
    "${py}" - "$1" "$2" "$3" <<'PY'
import sys
import yaml

path, dotted, default = sys.argv[1], sys.argv[2], sys.argv[3]
with open(path, encoding="utf-8") as f:
    node = yaml.safe_load(f) or {}
for key in dotted.split("."):
    node = node.get(key) if isinstance(node, dict) else None
    if node is None:
        break
if node is None:
    print(default)
elif isinstance(node, bool):
    print(str(node).lower())
else:
    print(node)
PY
}

# pyrua_resolve_env ENV: sets PYRUA_ENV_KIND (conda | venv | current) and PYRUA_ENV_PATH (venv only).
pyrua_resolve_env() {
    local env="$1"
    PYRUA_ENV_KIND=""
    PYRUA_ENV_PATH=""
    case "${env}" in
        ""|-|current|none)
            PYRUA_ENV_KIND=current
            ;;
        uv)
            PYRUA_ENV_KIND=venv
            PYRUA_ENV_PATH="${PYRUA_UV_ENV:-${SCRIPT_DIR}/.venv}"
            if [[ ! -f "${PYRUA_ENV_PATH}/bin/activate" ]]; then
                pyrua_die "uv environment not found: ${PYRUA_ENV_PATH} (create it with: bash ${SCRIPT_DIR}/install.sh --env uv)"
            fi
            ;;
        */*|"~"*|.*)
            local path="${env/#\~/${HOME}}"
            [[ "${path}" == /* ]] || path="${SCRIPT_DIR}/${path}"
            if [[ -f "${path}/bin/activate" ]]; then
                PYRUA_ENV_PATH="$(cd "${path}" && pwd)"
            elif [[ -f "${path}/.venv/bin/activate" ]]; then
                PYRUA_ENV_PATH="$(cd "${path}/.venv" && pwd)"
            else
                pyrua_die "not a virtualenv (no bin/activate) nor a uv project (no .venv/bin/activate): ${path}"
            fi
            PYRUA_ENV_KIND=venv
            ;;
        *)
            if command -v conda >/dev/null 2>&1; then
                PYRUA_ENV_KIND=conda
            else
                pyrua_log "conda is not on PATH: using the current Python for environment '${env}'"
                PYRUA_ENV_KIND=current
            fi
            ;;
    esac
    PYRUA_HELPER_PY=""
    if [[ "${PYRUA_ENV_KIND}" == "venv" ]] && "${PYRUA_ENV_PATH}/bin/python" -c "import yaml" >/dev/null 2>&1; then
        PYRUA_HELPER_PY="${PYRUA_ENV_PATH}/bin/python"
    fi
}

# pyrua_activate ENV: activate what pyrua_resolve_env found (printed instead in a dry run).
pyrua_activate() {
    local env="$1"
    case "${PYRUA_ENV_KIND}" in
        conda)
            if pyrua_dry; then
                echo '+ source "$(conda info --base)/etc/profile.d/conda.sh"'
                pyrua_show conda activate "${env}"
            else
                # shellcheck disable=SC1091
                source "$(conda info --base)/etc/profile.d/conda.sh"
                conda activate "${env}"
            fi
            ;;
        venv)
            if pyrua_dry; then
                pyrua_show source "${PYRUA_ENV_PATH}/bin/activate"
            else
                # shellcheck disable=SC1091
                source "${PYRUA_ENV_PATH}/bin/activate"
            fi
            ;;
        current)
            ;;
        *)
            pyrua_die "internal: pyrua_resolve_env was not called"
            ;;
    esac
}

# pyrua_depth_env_cfg: the env_cfg that carries depth (PYRUA_DEPTH_ENV_CFG, default arx_x5_depth).
pyrua_depth_env_cfg() { echo "${PYRUA_DEPTH_ENV_CFG:-arx_x5_depth}"; }

pyrua_depth_steps() {
    local bench_root="$1" name="$2"
    cat >&2 <<EOF
[PyRUA_Dojo] deploy.yml has depth: true, so RoboDojo must run with an env config that sends depth and camera
[PyRUA_Dojo] matrices: ${bench_root}/env_cfg/${name}.yml (observation.vision.depth: true). Install it with
[PyRUA_Dojo]     pyrua-dojo plugin install --xpolicylab ${bench_root}/XPolicyLab --depth-cfg
[PyRUA_Dojo] or copy env_cfg/arx_x5_depth.yml and env_cfg/camera/camera_config_depth.yml from the plugin
[PyRUA_Dojo] package's depth/ folder into ${bench_root}/env_cfg/ (see README.md, "Depth"). To use an env
[PyRUA_Dojo] config of another name (for example arx_x5 edited in place), set PYRUA_DEPTH_ENV_CFG=<name>.
[PyRUA_Dojo] Or set depth: false in deploy.yml.
EOF
}
