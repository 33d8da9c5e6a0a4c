"""The notebook image's contract (docker-stacks' base-notebook, where its users rely on it): the user, its home, the
port, the scripts copied into the image and its HEALTHCHECK. The template lays these out (templates/partials/
notebook.j2); the scripts themselves are builder/image/notebook_*.{sh,py} (docs/render.md, The notebook image)."""

from __future__ import annotations

from typing import Any

NB_USER = "jovyan"
NB_UID = 1000
NB_GID = 100  # `users`, as in docker-stacks: a caller's `--user UID:100` shares the home and the venv's folders
HOME = f"/home/{NB_USER}"
WORK = f"{HOME}/work"
JUPYTER_PORT = 8888
BIN = "/usr/local/bin"
HOOKS = (f"{BIN}/start-notebook.d", f"{BIN}/before-notebook.d")  # sourced / run by start.sh, in this order
# (the name in the build context, the file in builder/image/, where the image has it)
SCRIPTS = (
    ("notebook/start.sh", "notebook_start.sh", f"{BIN}/start.sh"),
    ("notebook/start-notebook.sh", "notebook_server.sh", f"{BIN}/start-notebook.sh"),
    ("notebook/notebook-healthcheck.py", "notebook_health.py", f"{BIN}/notebook-healthcheck.py"),
)
# Healthy within the docker tier's 20 s: a check every 3 s; failures in the first 20 s do not count.
HEALTHCHECK = "--interval=3s --timeout=2s --start-period=20s --retries=3"


def notebook_context() -> dict[str, Any]:
    """What the notebook stage lays out."""
    return {
        "user": NB_USER,
        "uid": NB_UID,
        "gid": NB_GID,
        "home": HOME,
        "work": WORK,
        "port": JUPYTER_PORT,
        "hooks": list(HOOKS),
        "scripts": [(context, target) for context, _, target in SCRIPTS],
        "healthcheck": HEALTHCHECK,
        "healthcheck_script": SCRIPTS[2][2],
    }
