"""The experiment of issue 21 item 1, for bench/cold_bench.py --in-place: a rendered runtime Dockerfile rewritten to
install the venv's layers where they live (one `uv pip install --no-deps` per layer, most shared first, FROM the os
stage) instead of copying the build stage's trees.

The exact versions come from a manifest a build of the same combination filled (/etc/torchyard/manifest.json: the
packages of each layer), standing in for the lock item 1 asks for (torchyard renders none yet: no hashes here).
Each layer's RUN keeps the content-only rule as the build stage does: the new sources get mtime 0, compileall
writes timestamp pycs with PYTHONHASHSEED=0 (the pycs of earlier layers are up to date and stay where they are),
then everything the RUN wrote or touched (files, and directories whose entries changed) gets mtime 0. Whether the
digests really come out the same twice is not checked by this experiment (it builds once).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

SCRIPT = "inplace_layer.sh"
LAYER_SCRIPT = """set -eu
export UV_CACHE_DIR=/root/.cache/uv UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1
if [ -s /run/secrets/cacert ]; then export SSL_CERT_FILE=/run/secrets/cacert; fi
site=$(echo /opt/venv/lib/python3*/site-packages)
if [ "$#" -gt 0 ]; then uv pip install --no-deps --python /opt/venv/bin/python "$@"; fi
find /opt/venv -newermt @1 -name '*.py' -exec touch -h -d @0 {} +
PYTHONHASHSEED=0 /opt/venv/bin/python -m compileall -q -j 0 --invalidation-mode timestamp "$site" || true
find /opt/venv -newermt @1 -exec touch -h -d @0 {} +
"""


def _run(cache_id: str, packages: list[str]) -> str:
    quoted = " ".join(f"'{p}'" for p in packages)
    return (
        f"RUN --mount=type=cache,id={cache_id},target=/root/.cache/uv,sharing=locked \\\n"
        "    --mount=type=bind,from=uv,source=/opt/uv/bin/uv,target=/usr/local/bin/uv \\\n"
        f"    --mount=type=bind,source={SCRIPT},target=/tmp/{SCRIPT} \\\n"
        "    --mount=type=secret,id=cacert \\\n"
        f"    bash /tmp/{SCRIPT} {quoted}".rstrip()
    )


def venv_stage(manifest: dict[str, object], cache_id: str) -> str:
    layers = manifest["layers"]
    assert isinstance(layers, list)
    lines = ["FROM os AS venv", 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]', "COPY constraints.txt /opt/torchyard/"]
    lines.append(
        "RUN --mount=type=bind,from=uv,source=/opt/uv/bin/uv,target=/usr/local/bin/uv \\\n"
        "    uv venv --python /usr/bin/python3 /opt/venv && find /opt/venv -exec touch -h -d @0 {} +"
    )
    for layer in layers[1:]:  # 00 is the venv itself
        packages = [str(p) for p in layer.get("packages") or []]
        lines.append(_run(cache_id, packages) if packages else "RUN true")
    lines.append(
        "RUN --mount=type=bind,source=pip_guard.py,target=/tmp/pip_guard.py \\\n"
        "    /opt/venv/bin/python /tmp/pip_guard.py constrain /opt/venv /opt/torchyard"
    )
    return "\n".join(lines) + "\n"


def rewrite(context: Path, manifest_file: Path) -> None:
    """The context's Dockerfile with the in-place venv stage, the filled manifest and no build/manifests stages."""
    dockerfile = (context / "Dockerfile").read_text(encoding="utf-8")
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    cache_id = re.search(r"type=cache,id=(uv-[^,\s]+)", dockerfile)
    assert cache_id, "no uv cache mount in the rendered Dockerfile (--installer uv only)"
    stages = re.split(r"(?m)^(?=# ---- )", dockerfile)
    # devel and inference are not this experiment's
    keep = ("# ---- os-files:", "# ---- os:", "# ---- uv:", "# ---- runtime:")
    kept = [s for s in stages if not s.startswith("# ---- ") or s.startswith(keep)]
    index = next(i for i, s in enumerate(kept) if s.startswith("# ---- runtime:"))
    venv = "# ---- venv: installed in place (bench/inplace_variant.py) ----\n" + venv_stage(manifest, cache_id[1])
    kept.insert(index, venv + "\n")
    text = "".join(kept).replace(
        "COPY --from=manifests /opt/torchyard/manifests/manifest-runtime.json /etc/torchyard/manifest.json",
        "COPY manifest-filled.json /etc/torchyard/manifest.json",
    )
    (context / "Dockerfile").write_text(text, encoding="utf-8")
    (context / "manifest-filled.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    (context / SCRIPT).write_text(LAYER_SCRIPT, encoding="utf-8")
