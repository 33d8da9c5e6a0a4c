"""A fake Docker engine at torchyard's one seam (builder.engine.Engine), and a fake registry reader.

FakeEngine records every call in order (`calls`), keeps the images it "built" and the tags it applied,
and has one knob per fault the pipeline must survive: a failing or interrupted build, a smoke suite
with a failed check, an image whose contents disagree with its tag, an extension without code for an
architecture, a rejected push. The smoke suite's report is written the way the real suite writes it:
smoke.json and junit.xml into the host directory mounted at /torchyard-out.

FakeRegistry answers `Registry.labels` (and so `Registry.holds`) from a dict; an engine given one records
what it pushes there, so "build again, nothing pushed" can be tested without a registry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

import builder.engine
import builder.engine.images
import builder.engine.probe
from builder.core.errors import BuildError, PushError
from builder.core.kinds import Platform
from builder.core.versions import minor_str
from builder.engine import BuildRequest, EngineInfo, ImageInfo, Isolation, Mount, RegistryAuth, RunResult, build_command
from builder.oci.client import Manifest
from builder.pipeline.plan import Plan
from builder.pipeline.registry import Registry
from builder.pipeline.suite import OUT
from builder.smoke.expect import cudnn_number

BUILD_LINES = (
    "#1 [internal] load build definition from Dockerfile",
    "#7 [runtime 3/5] RUN pip install torch",
    "#7 DONE 12.3s",
)


@dataclass(frozen=True)
class Call:
    """One call on the engine: the operation and its main arguments as strings."""

    op: str  # info | build | inspect | tag | untag | push | pull | run | history | save
    args: tuple[str, ...] = ()
    mounts: tuple[Mount, ...] = ()
    gpus: str | None = None
    auth: RegistryAuth | None = None


@dataclass
class Contents:
    """What a built target holds: the labels its Dockerfile stage sets and what the smoke suite reads."""

    labels: dict[str, str]
    observed: dict[str, Any]


def contents_of(plan: Plan) -> dict[str, Contents]:
    """The contents each target of `plan` really has when everything went right, by target name."""
    c = plan.combination
    v = c.variant
    observed: dict[str, Any] = {
        "torch": c.local_version,
        "cuda": minor_str(v.cuda) if v.cuda else None,
        "cudnn": cudnn_number(str(v.cudnn)) if v.cudnn else None,
        "python": c.python,
        "os": c.os.name,
    }
    return {t.flavor.value: Contents(dict(t.labels), dict(observed)) for t in plan.targets}


class FakeRegistry(Registry):
    """`labels(ref)` from a dict of ref -> labels; `error` makes every look-up raise it."""

    def __init__(self, refs: Mapping[str, Mapping[str, str]] | None = None, error: Exception | None = None) -> None:
        super().__init__(None)
        self.refs: dict[str, dict[str, str]] = {ref: dict(labels) for ref, labels in (refs or {}).items()}
        self.error = error
        self.asked: list[str] = []
        self.images: dict[str, tuple[str, str]] = {}  # ref -> (platform, manifest digest), what was pushed
        self.indexes: dict[str, tuple[dict[str, str], str]] = {}  # ref -> ({platform: digest}, content hash)
        self.written: list[str] = []  # refs an index was written under, in order
        # ref -> the platforms of the index under it (buildx pushes one even for one platform): the labels of
        # another platform are refused, as the real client's are
        self.index_platforms: dict[str, set[str]] = {}
        self.retagged: list[str] = []  # refs an alias was moved to registry-side (retag), in order
        self.retag_error: Exception | None = None
        self.push_checks: list[str] = []  # repositories check_push was asked about
        self.push_refusal: Exception | None = None  # check_push raises it (a read-only registry)
        self.sizes: dict[str, dict[str, int]] = {}  # ref -> {layer digest: compressed size}; none: not known
        self.reads: list[str] = []  # refs whose manifest was read, in order

    def labels(self, ref: str, platform: str = "linux/amd64", *, top: Manifest | None = None) -> dict[str, str] | None:
        self.asked.append(ref)
        if self.error is not None:
            raise self.error
        if ref in self.index_platforms and platform not in self.index_platforms[ref]:
            raise PushError(f"the registry holds no {platform} image under this tag")
        found = self.refs.get(ref)
        return None if found is None else dict(found)

    def index_content(self, ref: str) -> str | None:
        self.asked.append(ref)
        found = self.indexes.get(ref)
        return None if found is None else found[1]

    def platform_digest(self, ref: str, platform: str) -> str | None:
        self.asked.append(ref)
        found = self.images.get(ref)
        return found[1] if found is not None and found[0] == platform else None

    def read(self, ref: str) -> Manifest | None:
        """What was pushed under ref as a manifest: its digest, the layers of `sizes` (none known: none), and as
        its bytes the ref it was read from, so that put can copy what the fake knows of it."""
        self.reads.append(ref)
        found = self._image(ref)
        if found is None:
            return None
        layers = [{"digest": d, "size": s} for d, s in self.sizes.get(ref, {}).items()]
        return Manifest("application/vnd.oci.image.manifest.v1+json", found[1], ref.encode(), {"layers": layers})

    def put(self, ref: str, manifest: Manifest) -> str:
        """As retag from the ref the manifest was read from (`retag_error` makes it raise)."""
        return self.retag(manifest.raw.decode(), ref)[0]

    def check_push(self, repo: str) -> None:
        self.push_checks.append(repo)
        if self.push_refusal is not None:
            raise self.push_refusal

    def retag(self, source: str, target: str) -> tuple[str, bool]:
        """As the real client: the target gets the source's manifest (digest, labels); nothing moves when it has
        it already; `retag_error` makes every move raise it."""
        if self.retag_error is not None:
            raise self.retag_error
        found = self._image(source)
        if found is None:
            raise PushError(f"{source} is not in the registry")
        if self._image(target) == found:
            return found[1], False
        self.refs[target] = dict(self.refs[source])
        self.images[target] = found
        if source in self.sizes:
            self.sizes[target] = dict(self.sizes[source])
        self.retagged.append(target)
        return found[1], True

    def _image(self, ref: str) -> tuple[str, str] | None:
        """What was pushed under ref, or for a ref given as labels only, a digest of its labels."""
        if ref in self.images:
            return self.images[ref]
        if ref not in self.refs:
            return None
        return "linux/amd64", "sha256:" + hashlib.sha256(
            json.dumps(self.refs[ref], sort_keys=True).encode()
        ).hexdigest()

    def put_index(self, ref: str, members: dict[str, str], content_hash: str) -> str:
        self.indexes[ref] = (dict(members), content_hash)
        self.written.append(ref)
        return "sha256:" + hashlib.sha256(json.dumps([members, content_hash], sort_keys=True).encode()).hexdigest()


@dataclass
class FakeEngine:
    contents: dict[str, Contents]  # by target name (runtime, devel)
    registry: FakeRegistry | None = None  # receives what is pushed
    buildx: bool = False
    client: str = "/usr/bin/docker"

    # -- fault knobs --------------------------------------------------------------------------------------
    info_error: Exception | None = None  # the engine check fails (daemon down, too old ...)
    fail_build: BaseException | None = None  # raised by build() (BuildError, Interrupted, KeyboardInterrupt)
    fail_build_target: str | None = None  # only for this --target (None: any)
    smoke_failures: dict[str, str] = field(default_factory=dict)  # check name -> message: the suite fails
    observed_overrides: dict[str, Any] = field(default_factory=dict)  # what the image "really" contains
    label_overrides: dict[str, str] = field(default_factory=dict)  # labels the built image really has
    by_platform: dict[str, dict[str, Contents]] = field(default_factory=dict)  # platform -> contents (several plans)
    smoke_fail_platform: str | None = None  # the smoke suite fails only in images of this platform
    built_platform: str | None = None  # the platform the engine really builds (None: the one asked for)
    machine: str | None = None  # what platform.machine() says inside the image (None: the image's platform's)
    native: str = "linux/amd64"  # the engine's own platform (others run emulated)
    no_python: bool = False  # `python` is not on the image's PATH (only python3)
    cubins: tuple[str, ...] = ("sm_89",)  # architectures cuobjdump finds in extension libraries
    scripted: dict[str, RunResult] = field(default_factory=dict)  # program basename -> its result (not smoke)
    fail_run: BaseException | None = None  # raised by run() (e.g. KeyboardInterrupt during the smoke suite)
    fail_push: Exception | None = None  # raised by push()
    missing_archs: tuple[str, ...] = ()  # a `--only arch. --arch X` run fails for these X (no code for them)
    on_build: Callable[[list[str]], None] | None = None  # called with the argv while the build "runs"

    # -- state --------------------------------------------------------------------------------------------
    calls: list[Call] = field(default_factory=list)
    images: dict[str, ImageInfo] = field(default_factory=dict)  # by id
    tags: dict[str, str] = field(default_factory=dict)  # ref -> image id
    built_target: dict[str, str] = field(default_factory=dict)  # image id -> target name
    files: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (image id, path) -> content

    def ops(self) -> list[str]:
        return [c.op for c in self.calls]

    def of(self, op: str) -> list[Call]:
        return [c for c in self.calls if c.op == op]

    def pushed(self) -> list[str]:
        return [c.args[0] for c in self.of("push")]

    # -- the Engine protocol ------------------------------------------------------------------------------
    def info(self) -> EngineInfo:
        self.calls.append(Call("info"))
        if self.info_error is not None:
            raise self.info_error
        return EngineInfo("28.1.1" if self.buildx else "20.10.24", "1.41", self.client, self.buildx, self.native)

    def build(self, request: BuildRequest, on_line: Callable[[str], None]) -> str:
        argv = build_command(request)
        self.calls.append(Call("build", tuple(argv)))
        target = request.target
        for line in BUILD_LINES:
            on_line(line)
        if self.on_build is not None:
            self.on_build(argv)
        if self.fail_build is not None and self.fail_build_target in (None, target):
            raise self.fail_build
        contents = self.by_platform.get(request.platform or "", self.contents)
        labels = dict(contents[target].labels) | dict(request.labels) | self.label_overrides
        image_id = "sha256:" + hashlib.sha256("\0".join(argv).encode()).hexdigest()
        platform = self.built_platform or request.platform or self.native
        self.images[image_id] = ImageInfo(
            id=image_id, labels=labels, tags=(), digests=(), size=1 << 30, platform=platform
        )
        self.built_target[image_id] = target
        return image_id

    def inspect(self, ref: str) -> ImageInfo | None:
        self.calls.append(Call("inspect", (ref,)))
        found = self.images.get(self.tags.get(ref, ref))
        if found is None or found.tags:
            return found
        return replace(found, tags=tuple(r for r, i in self.tags.items() if i == found.id))  # the engine's own view

    def tag(self, image_id: str, ref: str) -> None:
        self.calls.append(Call("tag", (image_id, ref)))
        assert image_id in self.images, f"tag {ref}: no image {image_id}"
        self.tags[ref] = image_id

    def untag(self, ref: str) -> None:
        self.calls.append(Call("untag", (ref,)))
        self.tags.pop(ref, None)
        if ref in self.images and ref not in self.tags.values():  # by id, an image no tag names: removed
            del self.images[ref]

    def push(self, ref: str, auth: RegistryAuth | None, on_line: Callable[[str], None]) -> str:
        self.calls.append(Call("push", (ref,), auth=auth))
        if self.fail_push is not None:
            raise self.fail_push
        image = self.images[self.tags[ref]]
        digest = "sha256:" + hashlib.sha256(image.id.encode()).hexdigest()
        if self.registry is not None:
            self.registry.refs[ref] = dict(image.labels)
            self.registry.images[ref] = (image.platform, digest)
        on_line("Pushed")
        return digest

    def pull(self, ref: str, auth: RegistryAuth | None) -> ImageInfo:
        self.calls.append(Call("pull", (ref,), auth=auth))
        assert self.registry is not None and ref in self.registry.refs, f"pull {ref}: not in the registry"
        image_id = "sha256:" + hashlib.sha256(f"pulled {ref}".encode()).hexdigest()
        image = ImageInfo(id=image_id, labels=dict(self.registry.refs[ref]), tags=(ref,), digests=(), size=1 << 30)
        self.images[image_id] = image
        self.tags[ref] = image_id
        return image

    def run(
        self,
        image: str,
        command: list[str],
        *,
        mounts: tuple[Mount, ...] = (),
        gpus: str | None = None,
        timeout: float = 1800,
        user: str | None = None,
        isolation: Isolation | None = None,
    ) -> RunResult:
        self.calls.append(Call("run", (image, *command), mounts=mounts, gpus=gpus))
        if self.fail_run is not None:
            raise self.fail_run
        if self.no_python and command[0] == "python":
            return RunResult(127, 'exec: "python": executable file not found in $PATH')
        out = [m for m in mounts if m.target == OUT]
        if out:
            return self._smoke(image, command, Path(out[0].source), gpus)
        if Path(command[0]).name in self.scripted:
            return self.scripted[Path(command[0]).name]
        if command[:2] == ["python", "-c"]:
            names = command[3:]
            return RunResult(0, json.dumps({n: [f"/opt/venv/lib/python3.11/site-packages/{n}/_C.so"] for n in names}))
        if command[0].endswith("/cuobjdump"):
            lines = [f"ELF file    {i + 1}: _C.{i + 1}.{arch}.cubin" for i, arch in enumerate(self.cubins)]
            return RunResult(0, "\n".join(lines) + "\n")
        return RunResult(0, "")

    def history(self, ref: str) -> list[str]:
        self.calls.append(Call("history", (ref,)))
        return []

    def save(self, ref: str, path: Path) -> None:
        self.calls.append(Call("save", (ref, str(path))))
        path.write_bytes(b"")

    def labelled(self, label: str) -> list[ImageInfo]:
        self.calls.append(Call("labelled", (label,)))
        if self.info_error is not None:
            raise self.info_error
        tagged = {image_id: tuple(ref for ref, i in self.tags.items() if i == image_id) for image_id in self.images}
        found = [(key, info) for key, info in self.images.items() if label in info.labels]
        return [replace(info, tags=info.tags or tagged[key]) for key, info in found]

    def read_file(self, image: str, path: str, limit: int = 1 << 20) -> bytes | None:
        self.calls.append(Call("read_file", (image, path)))
        return self.files.get((self.tags.get(image, image), path))

    # -- the smoke suite, as builder/smoke writes its report ----------------------------------------------
    def _smoke(self, image: str, command: list[str], out: Path, gpus: str | None) -> RunResult:
        image_id = self.tags.get(image, image)
        if image_id not in self.built_target:
            raise BuildError(f"fake engine: the smoke suite ran in {image}, which it did not build")
        contents = self.by_platform.get(self.images[image_id].platform, self.contents)
        observed = contents[self.built_target[image_id]].observed | self.observed_overrides
        gpu = "passed" if gpus not in (None, "none") else "skipped"
        checks = [{"name": "version.torch", "status": "passed", "message": str(observed["torch"])}]
        checks.append({"name": "gpu.devices", "status": gpu, "message": "no GPU" if gpu == "skipped" else "1 GPU"})
        checks += [{"name": name, "status": "failed", "message": why} for name, why in self.smoke_failures.items()]
        if self.smoke_fail_platform == self.images[image_id].platform:
            checks.append({"name": "train.cpu", "status": "failed", "message": "loss went 2.3 -> 2.3 in 16 steps"})
        arch = command[command.index("--arch") + 1] if "--arch" in command else None
        if arch in self.missing_archs and "arch." in command:
            checks.append({"name": "arch.torch", "status": "failed", "message": f"libtorch_cuda.so has no {arch} code"})
        summary = {s: sum(c["status"] == s for c in checks) for s in ("passed", "failed", "skipped")}
        platform = Platform(self.images[image_id].platform)
        machine = self.machine or platform.machine
        report = {
            "suite": "torchyard-smoke",
            "schema": 1,
            "machine": machine,
            "small": "--small" in command,
            "summary": summary,
            "observed": observed,
            "checks": checks,
        }
        (out / _in_out(command, "--json")).write_text(json.dumps(report))
        (out / _in_out(command, "--junit")).write_text(f'<testsuite name="torchyard-smoke" tests="{len(checks)}"/>\n')
        return RunResult(1 if summary["failed"] else 0, f"{summary['passed']} passed, {summary['failed']} failed")


def _in_out(command: list[str], flag: str) -> str:
    """The file name a --json / --junit argument gives inside the mounted /torchyard-out."""
    path = command[command.index(flag) + 1]
    assert path.startswith(OUT + "/"), f"{flag} {path} is not in {OUT}"
    return path.removeprefix(OUT + "/")


def wall_off_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing in a unit test may reach the Docker engine or start a docker process."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a unit test reached the real Docker engine")

    monkeypatch.setattr(builder.engine.DockerEngine, "_sdk", refuse)
    monkeypatch.setattr(builder.engine.images, "run_command", refuse)
