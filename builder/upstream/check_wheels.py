"""Check wheel claims against the indexes: the release exists and is not yanked, a wheel for every Python
and platform claimed (under the platform tag claimed), no Python the matrix leaves out, and the pins of
every claimed wheel's METADATA (read by range requests) equal what the matrix records."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from builder.core.errors import UpstreamError
from builder.net.http import Http
from builder.upstream.claims import Pin, WheelClaim
from builder.upstream.index import IndexFormatError, ProjectPage, read_project
from builder.upstream.lazywheel import WheelError, read_metadata
from builder.upstream.report import Finding, Status
from builder.upstream.wheels import (
    Metadata,
    Wheel,
    by_version,
    exact,
    for_python,
    installable,
    parse_metadata,
    pin_text,
    pins,
    same_spec,
)

PageResult = ProjectPage | None | str  # the page, no such project, or why it could not be read
_CUDA_DEPENDENCY = re.compile(r"nvidia-.*|cuda-toolkit")


@dataclass
class _Checked:
    claim: WheelClaim
    findings: list[Finding] = field(default_factory=list)
    reads: list[tuple[str, Wheel]] = field(default_factory=list)  # (python, wheel) whose METADATA to read

    def add(self, status: Status, check: str, claim: str, upstream: str, where: str | None = None) -> None:
        c = self.claim
        self.findings.append(Finding(c.kind, status, c.subject, check, claim, upstream, where or c.where))


def check_wheels(http: Http, claims: list[WheelClaim]) -> list[Finding]:
    keys = sorted({(c.index_url, c.project) for c in claims})
    pages = dict(zip(keys, http.map(lambda key: _page(http, *key), keys), strict=True))
    parsed = {key: by_version(page.files, key[1]) for key, page in pages.items() if isinstance(page, ProjectPage)}
    checked = [_releases(c, pages[c.index_url, c.project], parsed.get((c.index_url, c.project), {})) for c in claims]
    urls = sorted({w.file.url for item in checked for _, w in item.reads})
    metadata = dict(zip(urls, http.map(lambda url: _metadata(http, url), urls), strict=True))
    for item in checked:
        _pins(item, metadata)
    return [f for item in checked for f in item.findings]


def _page(http: Http, index_url: str, project: str) -> PageResult:
    try:
        return read_project(http, index_url, project)
    except UpstreamError as exc:
        return str(exc)
    except IndexFormatError as exc:
        return f"cannot read the index: {exc}"


def _metadata(http: Http, url: str) -> Metadata | str:
    try:
        return parse_metadata(read_metadata(http, url))
    except UpstreamError as exc:
        return str(exc)
    except (WheelError, ValueError) as exc:
        return f"cannot read METADATA: {exc}"


# --- the release and its wheels ------------------------------------------------------------------------------


def _releases(claim: WheelClaim, page: PageResult, versions: dict[Version, list[Wheel]]) -> _Checked:
    item = _Checked(claim)
    release = f"{claim.project} {claim.version}"
    if isinstance(page, str):
        item.add(Status.UNREACHABLE, "release", release, page)
        return item
    if page is None:
        item.add(Status.MISSING, "release", release, f"{claim.index_url} has no project {claim.project}")
        return item
    found = versions.get(claim.version, [])
    if not found:
        nearest = ", ".join(_nearest(versions, claim.version))
        item.add(Status.MISSING, "release", release, f"{page.url} lists no {release} wheels (nearest: {nearest})")
        return item
    if all(w.file.yanked for w in found):
        reasons = sorted({w.file.yanked_reason or "no reason given" for w in found})
        item.add(
            Status.YANKED, "release", release, f"every {release} file on {page.url} is yanked: {'; '.join(reasons)}"
        )
        return item
    item.add(Status.OK, "release", release, f"{len(found)} wheels on {page.url}")
    _python_wheels(item, found, page)
    if claim.complete:
        _unlisted_pythons(item, found)
    return item


def _python_wheels(item: _Checked, found: list[Wheel], page: ProjectPage) -> None:
    claim, ok = item.claim, []
    for python in claim.pythons:
        wheel = _wheel_for(claim, found, python)
        what = f"cp{python.replace('.', '')} wheel for {claim.platform}" + (
            f" ({claim.platform_tag})" if claim.platform_tag else ""
        )
        if wheel is None:
            renamed = for_python(found, python, claim.platform) if claim.platform_tag else []
            if renamed:
                tags = ", ".join(sorted(renamed[0].platforms))
                item.add(Status.RENAMED, f"Python {python} wheel", what, f"{renamed[0].file.filename} is tagged {tags}")
            else:
                item.add(Status.MISSING, f"Python {python} wheel", what, f"no such wheel on {page.url}")
        elif wheel.file.yanked:
            reason = wheel.file.yanked_reason or "no reason given"
            item.add(Status.YANKED, f"Python {python} wheel", what, f"{wheel.file.filename} is yanked: {reason}")
        else:
            ok.append(python)
            if claim.pins or claim.requires_python is not None:
                item.reads.append((python, wheel))
    if ok:
        tag = f" {claim.platform_tag}" if claim.platform_tag else ""
        item.add(Status.OK, "wheels", ", ".join(ok), f"{len(ok)} wheels{tag} for {claim.platform} on {page.url}")


def _wheel_for(claim: WheelClaim, found: list[Wheel], python: str) -> Wheel | None:
    if claim.platform_tag is not None:
        return exact(found, python, claim.platform_tag)
    if claim.glibc is None:
        return None
    return installable(found, python, claim.platform, claim.glibc)


def _unlisted_pythons(item: _Checked, found: list[Wheel]) -> None:
    claim = item.claim
    upstream = set()
    for wheel in found:
        for tag in wheel.tags:
            match = re.fullmatch(r"cp(\d)(\d+)", tag.interpreter)
            if match and tag.abi == tag.interpreter and tag.platform == claim.platform_tag:
                upstream.add(f"{match[1]}.{match[2]}")
    extra = sorted(upstream - set(claim.pythons), key=lambda p: tuple(int(x) for x in p.split(".")))
    if extra:
        names = ", ".join(f"cp{p.replace('.', '')}" for p in extra)
        item.add(
            Status.DIFFERENT,
            "Python list",
            f"python = {list(claim.pythons)}",
            f"{claim.platform_tag} wheels also exist for {names} (the list claims to be complete)",
        )


def _nearest(versions: dict[Version, list[Wheel]], version: Version) -> list[str]:
    same_local = [v for v in versions if v.local == version.local]
    ranked = sorted(same_local or versions, key=lambda v: (abs(_number(v) - _number(version)), v))
    return [str(v) for v in ranked[:3]] or ["none"]


def _number(version: Version) -> float:
    parts = (*version.release, 0, 0)
    return parts[0] * 1e6 + parts[1] * 1e3 + parts[2]


# --- pins --------------------------------------------------------------------------------------------------


def _pins(item: _Checked, metadata: dict[str, Metadata | str]) -> None:
    claim = item.claim
    outcomes: dict[tuple[str, Status, str, str], list[str]] = defaultdict(list)
    for python, wheel in item.reads:
        meta = metadata[wheel.file.url]
        if isinstance(meta, str):
            outcomes["METADATA", Status.UNREACHABLE, "pins readable", meta].append(wheel.file.filename)
            continue
        wanted = re.compile("|".join([_CUDA_DEPENDENCY.pattern, *(p.names for p in claim.pins)]))
        applying = pins(meta, python, claim.platform, wanted)
        cuda = any(_CUDA_DEPENDENCY.fullmatch(n) for n in applying)
        if claim.kind == "torch" and claim.pins and not cuda:
            text = "the wheel declares no CUDA dependencies (libraries bundled): pins cannot be read"
            outcomes["pins", Status.UNCHECKED, "-", text].append(wheel.file.filename)
            continue
        for pin in claim.pins:
            status, upstream = _compare(pin, applying, cuda)
            if status is not None:
                outcomes[f"{pin.what} pin", status, _expected(pin), upstream].append(wheel.file.filename)
        if claim.requires_python is not None and not _python_admitted(python, meta):
            upstream = f"Requires-Python: {meta.requires_python} refuses Python {python}"
            key = ("Requires-Python", Status.DIFFERENT, str(claim.requires_python), upstream)
            outcomes[key].append(wheel.file.filename)
    for (check, status, expected, upstream), files in outcomes.items():
        where = next((p.where for p in claim.pins if f"{p.what} pin" == check), None)
        more = f" and {len(files) - 1} more wheels" if len(files) > 1 else ""
        evidence = f"{upstream} (read from {files[0]} METADATA{more})"
        item.add(status, check, expected, evidence, where)


def _compare(pin: Pin, applying: dict[str, Requirement], cuda: bool) -> tuple[Status | None, str]:
    found = {name: req for name, req in applying.items() if re.fullmatch(pin.names, name)}
    texts = ", ".join(sorted(pin_text(r) for r in found.values()))
    if pin.expected is None:
        return (Status.UNRECORDED, texts) if found else (None, "")
    if pin.universe:
        return _accepts(pin, found)
    if not found:
        if cuda:  # other CUDA packages are pinned, this one is not: the wheel carries it (NCCL in torch 1.13)
            return Status.UNCHECKED, f"no {pin.what} package among the wheel's requirements (bundled?)"
        return Status.DIFFERENT, f"no requirement matching {pin.names}"
    same = all(same_spec(r.specifier, pin.expected) for r in found.values())
    return (Status.OK if same else Status.DIFFERENT), texts


def _accepts(pin: Pin, found: dict[str, Requirement]) -> tuple[Status, str]:
    """A companion's torch requirement, compared on the matrix's torch releases."""
    assert pin.expected is not None
    upstream = SpecifierSet(",".join(str(r.specifier) for r in found.values()))
    text = ", ".join(sorted(pin_text(r) for r in found.values())) or f"no {pin.what} (any accepted)"
    refused = [v for v in pin.universe if v in pin.expected and v not in upstream]
    if refused:
        return Status.DIFFERENT, f"{text}: refuses torch {_few(refused)}, which the matrix accepts"
    more = [v for v in pin.universe if v not in pin.expected and v in upstream]
    if more:
        return Status.UNRECORDED, f"{text}: also accepts torch {_few(more)}"
    return Status.OK, text


def _few(versions: list[Version]) -> str:
    shown = ", ".join(map(str, versions[:4]))
    return shown + (f" and {len(versions) - 4} more" if len(versions) > 4 else "")


def _expected(pin: Pin) -> str:
    return f"{pin.what} {pin.expected}" if pin.expected is not None else f"{pin.what}: not recorded"


def _python_admitted(python: str, meta: Metadata) -> bool:
    """The matrix's own Python range for a companion may be narrower than the wheel's Requires-Python (it
    leaves out Pythons without wheels); drift is a claimed Python that the wheel refuses."""
    return meta.requires_python is None or Version(f"{python}.0") in meta.requires_python
