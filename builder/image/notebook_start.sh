#!/bin/bash
# /usr/local/bin/start.sh of torchyard's notebook image (templates/partials/notebook.j2; docs/render.md, The
# notebook image). docker-stacks' contract (images/docker-stacks-foundation/start.sh), without sudo or conda:
#   start.sh [COMMAND ARGS...]   (no command: bash)
# Sources the hooks in /usr/local/bin/start-notebook.d (as the user the container started as). Started as root, it
# refits the user to NB_USER / NB_UID / NB_GID (and NB_GROUP), gives them the home, runs the hooks in
# /usr/local/bin/before-notebook.d as root and runs the command as that user (setpriv, util-linux). Started as
# another user (`--user UID:GID`), it runs those hooks and the command as that user, with HOME=/home/jovyan (group
# users: writable with GID 100) even when the UID has no passwd entry.
set -euo pipefail

HOOKS_FIRST=/usr/local/bin/start-notebook.d
HOOKS_BEFORE=/usr/local/bin/before-notebook.d
IMAGE_USER=jovyan
IMAGE_HOME=/home/jovyan

log() {
    echo "start.sh: $*" >&2
}

# Sources each *.sh of the folder and runs each other executable in it, in name order. A failing hook is logged,
# not fatal (as docker-stacks' run-hooks.sh); a hook may export variables for the command.
run_hooks() {
    local folder="$1" hook status
    [ -d "${folder}" ] || return 0
    for hook in "${folder}"/*; do
        [ -e "${hook}" ] || continue
        status=0
        case "${hook}" in
        *.sh)
            log "sourcing ${hook} as uid $(id -u) gid $(id -g)"
            set +eu # a hook is written for docker-stacks' `set -e` shell, not for -u
            # shellcheck disable=SC1090
            source "${hook}"
            status=$?
            set -eu
            ;;
        *)
            if [ -x "${hook}" ]; then
                log "running ${hook} as uid $(id -u) gid $(id -g)"
                "${hook}" || status=$?
            else
                log "ignoring ${hook}: not executable"
            fi
            ;;
        esac
        if [ "${status}" -ne 0 ]; then
            log "${hook} failed (exit ${status}); going on"
        fi
    done
}

# Started as root: the image's user becomes NB_USER with NB_UID and NB_GID (docker-stacks' refit: the user is
# created again, so no file under a mounted folder is chowned behind the caller's back).
refit_user() {
    if [ "${NB_USER}" != "${IMAGE_USER}" ] && id "${IMAGE_USER}" >/dev/null 2>&1 && ! id "${NB_USER}" >/dev/null 2>&1; then
        log "renaming ${IMAGE_USER} to ${NB_USER} (home /home/${NB_USER})"
        usermod --login "${NB_USER}" --home "/home/${NB_USER}" "${IMAGE_USER}"
        if [ ! -e "/home/${NB_USER}" ]; then
            ln -s "${IMAGE_HOME}" "/home/${NB_USER}"
        fi
    fi
    if ! id "${NB_USER}" >/dev/null 2>&1; then
        log "neither ${IMAGE_USER} nor ${NB_USER} exists: was the container restarted with another NB_USER?"
        exit 1
    fi
    if [ "${NB_UID}" = "$(id -u "${NB_USER}")" ] && [ "${NB_GID}" = "$(id -g "${NB_USER}")" ]; then
        return 0
    fi
    log "setting ${NB_USER}'s UID:GID to ${NB_UID}:${NB_GID}"
    if ! getent group "${NB_GID}" >/dev/null; then
        groupadd --gid "${NB_GID}" "${NB_GROUP:-${NB_USER}}"
    fi
    userdel "${NB_USER}"
    useradd --no-log-init --no-create-home --home-dir "/home/${NB_USER}" --shell /bin/bash \
        --uid "${NB_UID}" --gid "${NB_GID}" --groups 100 "${NB_USER}"
    give_home
}

# The home and what the image put in it go to the user; a mounted work folder is left as it is (CHOWN_HOME=yes
# and CHOWN_HOME_OPTS=-R chown the whole home, CHOWN_EXTRA a comma-separated list, as in docker-stacks).
give_home() {
    local home="${IMAGE_HOME}" entry
    chown "${NB_UID}:${NB_GID}" "${home}"
    for entry in "${home}"/.[!.]*; do
        [ -e "${entry}" ] || continue
        mountpoint -q "${entry}" || chown -R -h "${NB_UID}:${NB_GID}" "${entry}"
    done
    if [ -d "${home}/work" ] && ! mountpoint -q "${home}/work"; then
        chown "${NB_UID}:${NB_GID}" "${home}/work"
    fi
}

chown_requested() {
    local extra folder
    if [ "${CHOWN_HOME:-}" = 1 ] || [ "${CHOWN_HOME:-}" = yes ]; then
        log "chown ${CHOWN_HOME_OPTS:-} ${NB_UID}:${NB_GID} /home/${NB_USER}"
        # shellcheck disable=SC2086  # the options are words, as in docker-stacks
        chown ${CHOWN_HOME_OPTS:-} "${NB_UID}:${NB_GID}" "/home/${NB_USER}/"
    fi
    if [ -n "${CHOWN_EXTRA:-}" ]; then
        IFS=',' read -r -a extra <<<"${CHOWN_EXTRA}"
        for folder in "${extra[@]}"; do
            log "chown ${CHOWN_EXTRA_OPTS:-} ${NB_UID}:${NB_GID} ${folder}"
            # shellcheck disable=SC2086
            chown ${CHOWN_EXTRA_OPTS:-} "${NB_UID}:${NB_GID}" "${folder}"
        done
    fi
}

as_root() {
    if [ "${NB_UID}" = 0 ]; then # root asked for (torchyard run --notebook from a root shell): no refit
        chown_requested
        run_hooks "${HOOKS_BEFORE}"
        log "NB_UID=0: running as root: $*"
        exec "$@"
    fi
    refit_user
    chown_requested
    run_hooks "${HOOKS_BEFORE}"
    export HOME="/home/${NB_USER}" USER="${NB_USER}" LOGNAME="${NB_USER}"
    log "running as ${NB_USER} (${NB_UID}:${NB_GID}): $*"
    exec setpriv --reuid="${NB_UID}" --regid="${NB_GID}" --init-groups -- "$@"
}

as_user() {
    if ! whoami >/dev/null 2>&1; then
        log "uid $(id -u) has no passwd entry: USER=${NB_USER}, HOME=${HOME:-${IMAGE_HOME}}"
        export USER="${NB_USER}" LOGNAME="${NB_USER}" HOME="${HOME:-${IMAGE_HOME}}"
    fi
    if [ "${NB_UID}" != "$(id -u)" ] && [ "${NB_UID}" != "1000" ]; then
        log "NB_UID=${NB_UID} is not applied: the container must start as root (--user root) to change the user"
    fi
    if [ ! -w "${HOME:-${IMAGE_HOME}}" ]; then
        log "no write access to ${HOME:-${IMAGE_HOME}}: start with group users (--user $(id -u):100 or --group-add users)"
    fi
    run_hooks "${HOOKS_BEFORE}"
    exec "$@"
}

if [ $# -eq 0 ]; then
    set -- bash
fi
if [ "${_START_SH_EXECUTED:-}" = 1 ]; then # start.sh run by a command start.sh started: nothing to do twice
    exec "$@"
fi
export _START_SH_EXECUTED=1
NB_USER="${NB_USER:-${IMAGE_USER}}"
NB_UID="${NB_UID:-1000}"
NB_GID="${NB_GID:-100}"

run_hooks "${HOOKS_FIRST}"
if [ "$(id -u)" = 0 ]; then
    as_root "$@"
else
    as_user "$@"
fi
