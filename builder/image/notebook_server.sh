#!/bin/bash
# /usr/local/bin/start-notebook.sh, the notebook image's CMD (docker-stacks' start-notebook.py as a shell script):
# JupyterLab through start.sh (the user, the hooks), on 0.0.0.0:${JUPYTER_PORT}, under ${JUPYTER_BASE_URL} when
# set, with ${NOTEBOOK_ARGS} split as a shell splits words (quotes kept together) and this script's arguments
# after them. The token: JUPYTER_TOKEN (jupyter-server reads it itself), else one jupyter makes and prints in the
# log's URL. RESTARTABLE=yes starts the server again whenever it exits (docker-stacks' run-one-constantly).
set -euo pipefail

if [ "${_START_SH_EXECUTED:-}" != 1 ]; then # first start.sh (the user, the hooks), then this script again
    exec /usr/local/bin/start.sh "$0" "$@"
fi

split_words() {
    python -c 'import os, shlex, sys; sys.stdout.write("".join(w + "\0" for w in shlex.split(os.environ["NOTEBOOK_ARGS"])))'
}

command=(jupyter lab --ip=0.0.0.0 "--port=${JUPYTER_PORT:-8888}" --no-browser)
if [ "$(id -u)" = 0 ]; then # only when NB_UID=0 asked for root (start.sh drops to the user otherwise)
    command+=(--allow-root)
fi
if [ -n "${JUPYTER_BASE_URL:-}" ]; then
    command+=("--ServerApp.base_url=${JUPYTER_BASE_URL}")
fi
if [ -n "${NOTEBOOK_ARGS:-}" ]; then
    mapfile -d '' -t words < <(split_words)
    if ! wait "$!"; then
        echo "start-notebook.sh: NOTEBOOK_ARGS does not split into words (an unclosed quote?): ${NOTEBOOK_ARGS}" >&2
        exit 2
    fi
    command+=("${words[@]}")
fi
command+=("$@")

echo "start-notebook.sh: ${command[*]}" >&2
if [ "${RESTARTABLE:-}" != yes ]; then
    exec "${command[@]}"
fi

stopping=0
server=""
trap 'stopping=1; if [ -n "${server}" ]; then kill -TERM "${server}" 2>/dev/null || true; fi' TERM INT
while :; do
    "${command[@]}" &
    server=$!
    wait "${server}" || true # a signal ends this wait early: the trap has asked the server to stop
    wait "${server}" 2>/dev/null || true
    if [ "${stopping}" = 1 ]; then
        exit 0
    fi
    echo "start-notebook.sh: the server exited; RESTARTABLE=yes: starting it again" >&2
    sleep 1
done
