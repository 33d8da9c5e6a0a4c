"""Split a finished virtual environment into layer trees whose digests depend on their files only.

Runs in the build stage with the venv's own interpreter, in the same RUN as the install (a rename inside one
overlay layer is free; a rename of a file an earlier layer holds copies it):

    python venv_layers.py split PLAN OUT      the venv -> OUT/00/<venv>/..., OUT/01/..., and the map OUT/layers.json
    python venv_layers.py manifest MAP DIR    fill the layers of every DIR/manifest-*.json with MAP's packages
    python venv_layers.py uv-env PIP_CONF     a pip.conf's indexes as `export UV_...=...` lines for uv

PLAN (written by torchyard, builder/render/layers.py) lists the groups in image order, each with its number
of slots (one layer each) and how it selects distributions:

    dist     the installed distributions whose normalised name matches `match`, and (closure) what they pin exactly
    pins     what the distribution `of` pins (== or ~=), and what those pin exactly
    rest     every other distribution
    unowned  the files no distribution's RECORD lists: interpreter links, pyvenv.cfg, activate scripts

dist groups choose first, then pins, then rest, whatever their place in the image. A group's members, sorted by
name, take one slot each while they fit; beyond that they are cut into as many contiguous runs as there are
slots, the largest run as small as it can be. The bytecode is compiled first (timestamp pycs of sources whose
mtime is 0), then every file and directory gets owner 0:0 and mtime 0: a layer's digest is a function of the
files in it, so two builds that install the same cuDNN wheel make the same cuDNN layer, whenever they run and
whatever else they install.

Standard library only, Python 3.8 and later: it runs with the Python of the image being built.
"""

from __future__ import annotations

import configparser
import csv
import email.parser
import json
import os
import re
import shlex
import subprocess
import sys
from typing import Any, Callable

SCHEMA = 1
_NAME = re.compile(r"[-_.]+")
_REQUIREMENT = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[[^\]]*\])?\s*\(?(?P<spec>[^;()]*)\)?\s*(?:;.*)?$"
)
EXACT = ("===", "==")
PINNED = ("===", "==", "~=")
PRECEDENCE = ("dist", "pins", "rest")  # the order in which groups choose their members


class Dist:
    """One installed distribution: its name, version, requirements and the files its RECORD lists."""

    def __init__(self, name: str, version: str, requires: list[str], files: list[str]) -> None:
        self.name = canonical(name)
        self.version = version
        self.requires = requires
        self.files = files

    def size(self) -> int:
        return sum(os.lstat(path).st_size for path in self.files if os.path.lexists(path))


def canonical(name: str) -> str:
    return _NAME.sub("-", name).lower()


def pinned_name(requirement: str, operators: tuple[str, ...]) -> str | None:
    """The name a requirement pins with one of `operators` (one clause: `==1.2.3`, `==13.1.*`, `~=3.8.0`)."""
    found = _REQUIREMENT.match(requirement)
    if not found:
        return None
    clauses = [c.strip() for c in found.group("spec").split(",") if c.strip()]
    if len(clauses) != 1:
        return None
    # a clause that starts with one of `operators` uses it: no other operator starts with "==", "===" or "~="
    return canonical(found.group("name")) if clauses[0].startswith(operators) else None


def site_packages(venv: str) -> str:
    lib = os.path.join(venv, "lib")
    found = [os.path.join(lib, d, "site-packages") for d in sorted(os.listdir(lib)) if d.startswith("python")]
    if len(found) != 1 or not os.path.isdir(found[0]):
        raise SystemExit(f"venv_layers: expected one {lib}/python*/site-packages, found {found}")
    return found[0]


def read_dists(site: str) -> dict[str, Dist]:
    dists: dict[str, Dist] = {}
    for entry in sorted(os.listdir(site)):
        if not entry.endswith(".dist-info"):
            continue
        info = os.path.join(site, entry)
        with open(os.path.join(info, "METADATA"), encoding="utf-8", errors="replace") as handle:
            meta = email.parser.Parser().parsestr(handle.read(), headersonly=True)
        requires = [str(r) for r in meta.get_all("Requires-Dist") or []]
        dist = Dist(str(meta["Name"]), str(meta["Version"]), requires, _record(site, info))
        dists.setdefault(dist.name, dist)
    return dists


def _record(site: str, info: str) -> list[str]:
    """The files of a distribution: its RECORD (paths relative to site-packages), the whole .dist-info
    directory, and the bytecode of its modules."""
    files: list[str] = []
    record = os.path.join(info, "RECORD")
    if os.path.exists(record):
        with open(record, encoding="utf-8", newline="") as handle:
            for row in csv.reader(handle):
                if row and row[0]:
                    files.append(os.path.normpath(os.path.join(site, row[0])))
    for root, _, names in os.walk(info):
        files += [os.path.join(root, name) for name in names]
    return _with_bytecode(list(dict.fromkeys(files)))


def _with_bytecode(files: list[str]) -> list[str]:
    caches: dict[str, list[str]] = {}
    extra: list[str] = []
    for path in files:
        if not path.endswith(".py"):
            continue
        folder, stem = os.path.split(path[:-3])
        cache = os.path.join(folder, "__pycache__")
        if cache not in caches:
            caches[cache] = sorted(os.listdir(cache)) if os.path.isdir(cache) else []
        extra += [os.path.join(cache, n) for n in caches[cache] if n.startswith(stem + ".") and n.endswith(".pyc")]
    return files + extra


def closure(dists: dict[str, Dist], roots: list[str], operators: tuple[str, ...], taken: set[str]) -> list[str]:
    """The roots and what they pin exactly, transitively (installed and not taken by an earlier group)."""
    members: list[str] = []
    todo = [r for r in roots if r in dists and r not in taken]
    while todo:
        name = todo.pop(0)
        if name in members:
            continue
        members.append(name)
        for requirement in dists[name].requires:
            pinned = pinned_name(requirement, operators)
            if pinned and pinned in dists and pinned not in taken and pinned not in members:
                todo.append(pinned)
    return sorted(members)


def choose(plan: dict[str, Any], dists: dict[str, Dist]) -> dict[str, list[str]]:
    """Group name -> its member distributions."""
    taken: set[str] = set()
    chosen: dict[str, list[str]] = {}
    for kind in PRECEDENCE:
        for group in (g for g in plan["groups"] if g["select"] == kind):
            members = _select(group, dists, taken)
            chosen[group["name"]] = members
            taken.update(members)
    return chosen


def _select(group: dict[str, Any], dists: dict[str, Dist], taken: set[str]) -> list[str]:
    if group["select"] == "dist":
        pattern = re.compile(group["match"])
        roots = [name for name in dists if pattern.fullmatch(name)]
        return closure(dists, roots, EXACT, taken) if group.get("closure", True) else sorted(set(roots) - taken)
    if group["select"] == "pins":
        owner = dists.get(canonical(group["of"]))
        pins = [pinned_name(r, PINNED) for r in owner.requires] if owner else []
        roots = [name for name in pins if name and name != canonical(group["of"])]
        return closure(dists, roots, EXACT, taken)
    return sorted(set(dists) - taken)


def layout(members: list[tuple[str, int]], slots: int) -> list[list[str]]:
    """Members (name, size) in name order over `slots` layers: one each while they fit, else contiguous runs
    with the largest as small as it can be (ties: the earliest cut)."""
    if len(members) <= slots:
        return [[name] for name, _ in members] + [[] for _ in range(slots - len(members))]
    prefix = [0]
    for _, size in members:
        prefix.append(prefix[-1] + size)
    count = len(members)
    best = [[float("inf")] * (slots + 1) for _ in range(count + 1)]
    cut = [[0] * (slots + 1) for _ in range(count + 1)]
    best[0][0] = 0
    for parts in range(1, slots + 1):
        for end in range(1, count + 1):
            for start in range(parts - 1, end):
                cost = max(best[start][parts - 1], prefix[end] - prefix[start])
                if cost < best[end][parts]:
                    best[end][parts], cut[end][parts] = cost, start
    runs: list[list[str]] = []
    end = count
    for parts in range(slots, 0, -1):
        start = cut[end][parts]
        runs.insert(0, [name for name, _ in members[start:end]])
        end = start
    return runs


def slot_names(plan: dict[str, Any]) -> list[tuple[str, str]]:
    """(slot name, group name) in image order: `cudnn`, or `cuda-runtime.1` .. `.4` for a group of four."""
    names: list[tuple[str, str]] = []
    for group in plan["groups"]:
        count = int(group["slots"])
        names += [(group["name"] if count == 1 else f"{group['name']}.{i + 1}", group["name"]) for i in range(count)]
    return names


def compile_bytecode(site: str) -> None:
    """Timestamp pycs of sources whose mtime is 0 (deterministic; valid for as long as the sources are)."""
    for root, _, names in os.walk(site):
        for name in names:
            if name.endswith(".py"):
                os.utime(os.path.join(root, name), (0, 0), follow_symlinks=False)
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    env["PYTHONHASHSEED"] = "0"  # frozenset constants are marshalled in hash order
    argv = [sys.executable, "-m", "compileall", "-f", "-qq", "-j", "0", "--invalidation-mode", "timestamp", site]
    subprocess.run(argv, env=env, check=False)  # as pip: a module that does not compile stays source only


def _make_parents(folder: str, out: str) -> None:
    """`folder` (an absolute path) under `out`, each new directory with the mode of the one it mirrors."""
    missing: list[str] = []
    while not os.path.isdir(out + folder):
        missing.insert(0, folder)
        folder = os.path.dirname(folder)
    for path in missing:
        os.mkdir(out + path)
        os.chmod(out + path, os.stat(path).st_mode & 0o7777 if os.path.isdir(path) else 0o755)


def move(path: str, out: str) -> bool:
    if not os.path.lexists(path) or (os.path.isdir(path) and not os.path.islink(path)):
        return False
    _make_parents(os.path.dirname(path), out)
    os.rename(path, out + path)
    return True


def normalise(root: str) -> None:
    for folder, dirs, names in os.walk(root, topdown=False):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = os.path.join(folder, name)
            os.lchown(path, 0, 0)
            os.utime(path, (0, 0), follow_symlinks=False)
        os.lchown(folder, 0, 0)
        os.utime(folder, (0, 0))


def split(plan: dict[str, Any], out: str, compile_step: Callable[[str], None] = compile_bytecode) -> dict[str, Any]:
    venv = os.path.abspath(plan["venv"])
    site = site_packages(venv)
    empty = [d for d, subdirs, names in os.walk(venv) if not subdirs and not names]
    compile_step(site)
    dists = read_dists(site)
    for dist in dists.values():  # a RECORD may name files outside the venv: they are not the venv's to move
        dist.files = [path for path in dist.files if path.startswith(venv + os.sep)]
    chosen = choose(plan, dists)
    slots: dict[str, list[list[str]]] = {}
    for group in plan["groups"]:
        sized = [(name, dists[name].size()) for name in chosen.get(group["name"], [])]
        slots[group["name"]] = layout(sized, int(group["slots"]))
    layers: list[dict[str, Any]] = []
    unowned = ""
    for index, (slot, group_name) in enumerate(slot_names(plan)):
        root = os.path.join(out, f"{index:02d}")
        os.makedirs(root)
        group = next(g for g in plan["groups"] if g["name"] == group_name)
        members = slots[group_name].pop(0) if group["select"] != "unowned" else []
        unowned = root if group["select"] == "unowned" else unowned
        moved = [path for name in members for path in dists[name].files if move(path, root)]
        packages = [f"{dists[name].name}=={dists[name].version}" for name in members]
        layers.append({"name": slot, "group": group_name, "packages": packages, "files": len(moved)})
    _unowned(venv, empty, unowned or os.path.join(out, "00"), layers)
    for index, layer in enumerate(layers):
        root = os.path.join(out, f"{index:02d}")
        layer["bytes"] = sum(os.lstat(os.path.join(f, n)).st_size for f, _, ns in os.walk(root) for n in ns)
        normalise(root)
    return {"schema": SCHEMA, "venv": venv, "layers": layers}


def _unowned(venv: str, empty: list[str], root: str, layers: list[dict[str, Any]]) -> None:
    """What no RECORD lists goes to the unowned group's layer; so do the directories that were empty to begin
    with (a venv's include/), but not the ones the moves emptied."""
    count = 0
    for folder, dirs, names in os.walk(venv):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            count += move(os.path.join(folder, name), root)
    for folder in empty:
        _make_parents(folder, root)
    index = int(os.path.basename(root))
    layers[index]["files"] += count


def fill_manifests(layer_map: dict[str, Any], folder: str) -> list[str]:
    """Each manifest-*.json in `folder` with the packages the build found in each of its layers."""
    packages = {layer["name"]: layer["packages"] for layer in layer_map["layers"]}
    written = []
    for name in sorted(os.listdir(folder)):
        if not (name.startswith("manifest-") and name.endswith(".json")):
            continue
        path = os.path.join(folder, name)
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
        for layer in manifest.get("layers") or []:
            if layer["name"] not in packages:
                raise SystemExit(f"venv_layers: {name} names a layer {layer['name']!r} the build did not make")
            layer["packages"] = packages[layer["name"]]
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(manifest, indent=2) + "\n")
        written.append(path)
    return written


def uv_env(pip_conf: str) -> str:
    """pip.conf's index-url, extra-index-url, find-links and trusted-host as uv's variables (it reads no
    pip.conf); quoted for `eval`."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(pip_conf, encoding="utf-8")
    lines = []
    index = parser.get("global", "index-url", fallback="").strip()
    if index:
        lines.append(f"export UV_DEFAULT_INDEX={shlex.quote(index)}")
    # uv's lists: UV_INDEX and UV_INSECURE_HOST space-separated, UV_FIND_LINKS comma-separated
    for key, variable, sep in (("extra-index-url", "UV_INDEX", " "), ("find-links", "UV_FIND_LINKS", ","),
                               ("trusted-host", "UV_INSECURE_HOST", " ")):  # fmt: skip
        value = sep.join(parser.get("global", key, fallback="").split())
        if value:
            lines.append(f"export {variable}={shlex.quote(value)}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "split":
        with open(argv[1], encoding="utf-8") as handle:
            plan = json.load(handle)
        layer_map = split(plan, argv[2])
        with open(os.path.join(argv[2], "layers.json"), "w", encoding="utf-8") as handle:
            handle.write(json.dumps(layer_map, indent=2) + "\n")
        for layer in layer_map["layers"]:
            print(f"layer {layer['name']}: {layer['bytes'] / 1e6:.1f} MB, {', '.join(layer['packages']) or '-'}")
        return 0
    if len(argv) == 3 and argv[0] == "manifest":
        with open(argv[1], encoding="utf-8") as handle:
            fill_manifests(json.load(handle), argv[2])
        return 0
    if len(argv) == 2 and argv[0] == "uv-env":
        print(uv_env(argv[1]))
        return 0
    print("usage: venv_layers.py split PLAN OUT | manifest MAP DIR | uv-env PIP_CONF", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
