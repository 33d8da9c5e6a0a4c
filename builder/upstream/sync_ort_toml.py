"""A `matrix sync --onnxruntime` proposal as matrix.toml text: the [[onnxruntime]] entry with where each fact was
read, its [onnxruntime.<platform>] GPU code tables (builder/upstream/wheel_code.py's code_table), the
[sources.ort-wheel-<digits>-<platform>] each table cites, and their places in the file (a package's releases stay
oldest first)."""

from __future__ import annotations

import textwrap

from packaging.version import Version

from builder.core.errors import MatrixError
from builder.upstream.sync_ort import OrtProposal, PlatformCode
from builder.upstream.sync_toml import after_sources, blocks, quote, toml_list
from builder.upstream.wheel_code import LibraryCode, code_table

PACKAGE_SOURCES = {
    "onnxruntime-gpu": (
        "PyPI onnxruntime-gpu: wheel files (python and platform tags) per release, and each wheel's METADATA "
        "Requires-Dist (the cuda and cudnn extras)",
        "https://pypi.org/project/onnxruntime-gpu/#history",
    ),
    "onnxruntime": (
        "PyPI onnxruntime (CPU): wheel files (python and platform tags) per release",
        "https://pypi.org/project/onnxruntime/#history",
    ),
}


def code_source(p: OrtProposal, c: PlatformCode) -> str:
    return f"ort-wheel-{str(p.version).replace('.', '')}-{c.platform.arch}"


def ort_text(p: OrtProposal) -> str:
    """The entry with its GPU code tables, as it goes into the file."""
    said = [f"matrix sync: {p.page} (the Pythons and platforms of its Linux wheels)."]
    if p.majors is not None:
        said.append(f"CUDA and cuDNN majors: {p.majors.evidence}.")
    said += [f"Not recorded: the GPU code of its {c.platform.arch} wheels: {c.why}." for c in p.code if c.code is None]
    lines = [f"# {line}" for text in said for line in _wrap(text)]
    lines += ["[[onnxruntime]]", f"package = {quote(p.package)}", f"version = {quote(str(p.version))}"]
    if p.majors is not None:
        lines += [f"cuda_major = {p.majors.cuda}", f"cudnn_major = {p.majors.cudnn}"]
    lines += [f"python = {toml_list(list(p.python))}", f"platforms = {toml_list([x.arch for x in p.platforms])}"]
    lines += [f"note = {quote('; '.join(p.notes))}"] if p.notes else []
    source = f"pypi-{p.package}"
    lines.append(f"source = {toml_list([source]) if p.majors is not None else quote(source)}")
    tables = [code_table(c.code, "onnxruntime", c.platform.arch, code_source(p, c)) for c in p.code if c.code]
    return "\n".join([*lines, "", *tables]).rstrip("\n") + "\n"


def source_texts(p: OrtProposal, have: set[str]) -> list[str]:
    """The [sources.*] the entry cites that the file lacks: the package's page, each wheel read."""
    found = []
    if f"pypi-{p.package}" not in have:
        title, url = PACKAGE_SOURCES[p.package]
        found.append(_source(f"pypi-{p.package}", title, url))
    for c in p.code:
        if c.code is not None and code_source(p, c) not in have:
            found.append(_source(code_source(p, c), _code_title(c.code), c.wheel.url))
    return found


def kept_sources(p: OrtProposal, have: set[str]) -> list[str]:
    """The wheel sources the file already has under the ids the tables cite: kept as they are, for a person to
    compare with what was read."""
    return [code_source(p, c) for c in p.code if c.code is not None and code_source(p, c) in have]


def _code_title(code: LibraryCode) -> str:
    sass = " ".join(f"sm_{a.replace('.', '')}" for a in code.sass)
    ptx = " ".join(f"compute_{a.replace('.', '')}" for a in code.ptx)
    return (
        f"Read from the wheel {code.wheel} (sha256 {code.sha256}): the fat binary of {code.member} holds SASS "
        f"{sass or 'none'}; {f'PTX {ptx}' if ptx else 'no PTX'}; it links {' '.join(code.needed) or 'nothing'}. "
        "One wheel of the release read, by matrix sync (builder/upstream/wheel_code.py); its other cpXY wheels carry "
        "providers of their own, not read"
    )


def _source(sid: str, title: str, url: str) -> str:
    return f'[sources.{sid}]\ntitle = {quote(title)}\nurl = {quote(url)}\nconfidence = "verified"\n'


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, 110, break_long_words=False, break_on_hyphens=False)


# --- into the file -----------------------------------------------------------------------------------------


def insert_ort(text: str, p: OrtProposal, have: set[str]) -> str:
    lines = text.splitlines(keepends=True)
    at = _position(lines, p.package, p.version)
    lines[at:at] = ["\n", *ort_text(p).splitlines(keepends=True)]
    sources = source_texts(p, have)
    if sources:
        place = after_sources(lines)
        lines[place:place] = [f"\n{block}" for block in sources]
    return "".join(lines)


def _position(lines: list[str], package: str, version: Version) -> int:
    """After the package's newest older release (and its tables), else before its oldest, else after the last
    [[onnxruntime]] entry."""
    entries = blocks(lines, "onnxruntime")
    if not entries:
        raise MatrixError("the matrix has no [[onnxruntime]] entries to place the new one beside")
    same = [b for b in entries if b.keys.get("package") == package]
    older = [b for b in same if Version(b.keys["version"]) < version]
    if older:
        return older[-1].end
    if same:
        at = same[0].start
        while at > 0 and lines[at - 1].startswith("#") and not lines[at - 1].startswith("# ---"):
            at -= 1
        return at - 1 if at > 0 and not lines[at - 1].strip() else at
    return entries[-1].end
