"""The one locator (builder/host/locate.py): images found by what they hold, not by a tag string. The rule when
several fit (docs/host.md): the chosen combination's image (plain, then -sm, then -x; newest built first) in the
local engine, else in the team's repository (one tags list, the configs of the combination's tags), else the newest
local torch image that runs here, else nowhere. Each judged by the GPU code it carries, on recorded machines."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from host_kit import DOCKER_WITH_TOOLKIT, RTX4090_535, RunEngine, holding, machine
from matrix_kit import real

from builder.core.errors import PushError, TorchyardError
from builder.engine import ImageInfo
from builder.host import locate as locate_module
from builder.host.doctor import Diagnosis, diagnose, judge_here
from builder.host.locate import (
    LOOKUP_TIMEOUT,
    Location,
    ProjectWanted,
    Wanted,
    Where,
    locate,
    locate_project,
    location_json,
    registry_of,
    where_lines,
)
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.oci.refs import RepoRef
from builder.pipeline.project_plan import PROJECT_LABEL
from builder.resolve.query import RawQuery
from builder.resolve.verdict import Answer

M = real()
RTX4090_580 = RTX4090_535.replace("535.104.05", "580.65.06")
T4_535 = "0, Tesla T4, 7.5, 15360, 535.104.05, Disabled\n"
CU132 = "torch2.15.0-cu132-py3.13-debian13"
PLAIN = "2.15.0-cuda13.2-cudnn9-py3.13-debian13-runtime"
REPO = "127.0.0.1:5000/team/torch"
BUILD = (
    f"torchyard build --torch 2.15.0 --variant cu132 --python 3.13 --os debian13 --platform linux/amd64 --repo {REPO}"
)
SIZE = "not measured"
WANTED = Wanted(CU132, PLAIN, "linux/amd64", BUILD, SIZE)


def on(smi: str | None, driver: str | None = None) -> Any:
    system = machine(smi, driver=driver) if smi else machine(None, toolkit=False)
    return probe(M, system)


def doctor(smi: str | None, driver: str | None, engine: RunEngine, repo: str = "torchyard", **wish: Any) -> Diagnosis:
    system = machine(smi, driver=driver) if smi else machine(None, toolkit=False)
    runtime = read_runtime(system, lambda: DOCKER_WITH_TOOLKIT)
    return diagnose(M, probe(M, system), runtime, RawQuery(**wish), repo, engine)


def engine_of(*images: ImageInfo) -> RunEngine:
    return RunEngine(images={info.tags[0]: info for info in images})


def test_an_arch_build_of_the_chosen_combination_is_the_image_doctor_names_on_an_rtx_4090_and_580() -> None:
    ref = f"torchyard:{PLAIN}-sm89"
    d = doctor(RTX4090_580, "580.65.06", engine_of(holding(ref, CU132, arch_list="sm_89")))
    assert d.recommended is not None and d.recommended.result.combo.id == CU132
    assert d.location is not None
    assert (d.location.where, d.location.reference, d.location.chosen) == (Where.LOCAL, ref, True)
    assert d.image == ref
    assert d.run == f'docker run --rm -it --gpus all --ipc=host -v "$PWD":/workspace -w /workspace {ref} python'
    assert where_lines(d.location) == [f"in the local engine ({ref})"]


def test_on_a_t4_with_535_the_cuda_13_image_is_not_named_and_the_one_that_runs_is() -> None:
    ref = f"torchyard:{PLAIN}-sm89"
    d = doctor(T4_535, "535.104.05", engine_of(holding(ref, CU132, arch_list="sm_89")))
    assert d.recommended is not None
    assert d.recommended.result.combo.variant.cuda is not None and d.recommended.result.combo.variant.cuda.major == 12
    assert d.location is not None and d.location.where is Where.NOWHERE
    assert d.image is None and d.run is None
    assert d.recommended.image == "torchyard:2.14.1-cuda12.6-cudnn9-py3.13-debian13-runtime"


def test_the_plain_image_comes_first_then_the_arch_build_then_additions_and_the_newest_of_each() -> None:
    judge = judge_here(M, on(RTX4090_580, "580.65.06"))
    older, newer = "2026-11-01T10:00:00.123456789Z", "2026-12-01T10:00:00Z"
    images = [
        holding(f"torchyard:{PLAIN}-x1234abcd", CU132, created=newer),
        holding(f"torchyard:{PLAIN}-sm89", CU132, arch_list="sm_89", created=older),
        holding(f"torchyard:{PLAIN}-sm90", CU132, arch_list="sm_90", created=newer),
        holding(f"torchyard:{PLAIN}", CU132, created=older),
    ]
    found = [locate(WANTED, judge, local=images[:n], repo=None).reference for n in (1, 2, 3, 4)]
    assert found == [f"torchyard:{PLAIN}-x1234abcd", f"torchyard:{PLAIN}-sm89", f"torchyard:{PLAIN}-sm90",
                     f"torchyard:{PLAIN}"]  # fmt: skip


def test_an_image_whose_extensions_lack_this_gpu_s_code_is_passed_over() -> None:
    judge = judge_here(M, on(RTX4090_580, "580.65.06"))
    # sm_90 code does not run on an sm_89 GPU (sm_80 code would: same major, lower minor)
    other_gpu = holding(f"torchyard:{PLAIN}-sm90-x1234abcd", CU132, arch_list="sm_90", extensions="addone")
    assert judge(other_gpu.tags[0], other_gpu.labels, "linux/amd64", None) is Answer.WILL_NOT_RUN
    assert locate(WANTED, judge, local=[other_gpu], repo=None).where is Where.NOWHERE
    ours = holding(f"torchyard:{PLAIN}-sm89-x1234abcd", CU132, arch_list="sm_89", extensions="addone")
    assert locate(WANTED, judge, local=[other_gpu, ours], repo=None).reference == ours.tags[0]


def test_another_platform_or_flavor_or_an_untagged_image_is_not_the_chosen_one() -> None:
    judge = judge_here(M, on(RTX4090_580, "580.65.06"))
    arm = holding(f"torchyard:{PLAIN}-arm64", CU132, platform="linux/arm64")
    devel = holding(f"torchyard:{PLAIN.replace('runtime', 'devel')}", CU132, flavor="devel")
    untagged = holding(f"torchyard:{PLAIN}", CU132)
    untagged = ImageInfo(untagged.id, untagged.labels, ("<none>:<none>",), (), 1)
    found = locate(WANTED, judge, local=[arm, untagged], repo=None)
    assert found.where is Where.NOWHERE
    other = locate(WANTED, judge, local=[devel], repo=None)  # a devel image runs here: found, not the chosen one
    assert (other.where, other.chosen, other.reference) == (Where.LOCAL, False, devel.tags[0])


def test_a_project_s_image_is_never_taken_for_its_base() -> None:
    judge = judge_here(M, on(RTX4090_580, "580.65.06"))
    base = holding(f"torchyard:{PLAIN}", CU132)
    project = holding(f"torchyard/my-model:{PLAIN}-p0123456789ab", CU132)
    project = ImageInfo(project.id, project.labels | {PROJECT_LABEL: "my-model"}, project.tags, (), 1)
    assert locate(WANTED, judge, local=[project], repo=None).where is Where.NOWHERE
    assert locate(WANTED, judge, local=[project, base], repo=None).reference == base.tags[0]
    assert locate_module.PROJECT_LABEL == PROJECT_LABEL  # the label the build gives it


def mine(ref: str, combination: str = CU132, name: str = "my-model", **kw: Any) -> ImageInfo:
    """A project's image: the base's labels (as the project stage inherits them) and the project's name."""
    info = holding(ref, combination, **kw)
    return replace(info, labels=info.labels | {PROJECT_LABEL: name})


def test_a_project_s_image_is_found_by_its_name_and_the_combination_newest_first() -> None:
    judge = judge_here(M, on(RTX4090_580, "580.65.06"))
    wanted = ProjectWanted("my-model", CU132, "linux/amd64")
    newest = mine(f"torchyard/my-model:{PLAIN}-p2", created="2026-12-03T10:00:00Z")
    images = [
        holding(f"torchyard:{PLAIN}", CU132, created="2026-12-04T10:00:00Z"),  # the base: not the project's
        mine(f"torchyard/my-model:{PLAIN}-p1", created="2026-12-01T10:00:00Z"),
        newest,
        mine("torchyard/other:x", name="other", created="2026-12-04T10:00:00Z"),
        mine("torchyard/my-model:old", "torch2.14.1-cu126-py3.13-debian13", created="2026-12-04T10:00:00Z"),
        mine("torchyard/my-model:devel", flavor="devel", created="2026-12-04T10:00:00Z"),
        mine("torchyard/my-model:arm", platform="linux/arm64", created="2026-12-04T10:00:00Z"),
        mine("torchyard/my-model:sm90", arch_list="sm_90", extensions="addone", created="2026-12-04T10:00:00Z"),
    ]
    found = locate_project(wanted, judge, images)
    assert found is not None
    assert (found.where, found.reference, found.holds, found.answer) == (
        Where.LOCAL,
        newest.tags[0],
        CU132,
        Answer.RUNS,
    )
    assert locate_project(wanted, judge, images[:1]) is None  # only the base: not built yet
    untagged = replace(newest, tags=("torchyard/my-model:<none>",))
    assert locate_project(wanted, judge, [untagged]) is None


def test_the_team_s_name_is_preferred_for_the_same_image() -> None:
    judge = judge_here(M, on(RTX4090_580, "580.65.06"))
    both = holding(f"torchyard:{PLAIN}", CU132)
    both = ImageInfo(both.id, both.labels, (f"torchyard:{PLAIN}", f"{REPO}:{PLAIN}"), (), 1)
    assert locate(WANTED, judge, local=[both], repo=REPO).reference == f"{REPO}:{PLAIN}"
    assert locate(WANTED, judge, local=[both], repo=None).reference == f"torchyard:{PLAIN}"


# --- a machine without a GPU: RUNS ON CPU ----------------------------------------------------------------------


def test_without_a_gpu_the_newest_local_torch_image_runs_on_the_cpu_and_is_said_not_to_be_the_recommended() -> None:
    cuda = holding(f"torchyard:{PLAIN}-sm89", CU132, arch_list="sm_89")
    with_ext = holding(f"torchyard:{PLAIN}-sm89-x1234abcd", CU132, arch_list="sm_89", extensions="addone",
                       created="2026-12-03T10:00:00Z")  # fmt: skip
    d = doctor(None, None, engine_of(cuda, with_ext))
    assert d.recommended is not None and d.recommended.result.combo.variant.name == "cpu"
    loc = d.location
    assert loc is not None
    assert (loc.where, loc.reference, loc.chosen, loc.holds, loc.answer) == (
        Where.LOCAL, cuda.tags[0], False, CU132, Answer.RUNS_ON_CPU
    )  # fmt: skip
    assert d.image == cuda.tags[0]
    assert d.run == f'docker run --rm -it --ipc=host -v "$PWD":/workspace -w /workspace {cuda.tags[0]} python'
    assert where_lines(loc)[0] == (
        f"in the local engine: {cuda.tags[0]}, not the recommended image (it holds {CU132}), it runs on this "
        "machine's CPU; the recommended one: build it with its `build` line"
    )
    assert location_json(loc) | {"notes": []} == {
        "where": "local engine", "reference": cuda.tags[0], "recommended": False, "holds": CU132,
        "verdict": "runs-cpu", "notes": [], "size": loc.size,
    }  # fmt: skip


def test_without_a_gpu_an_image_with_cuda_extensions_only_is_nowhere() -> None:
    with_ext = holding(f"torchyard:{PLAIN}-sm89-x1234abcd", CU132, arch_list="sm_89", extensions="addone")
    d = doctor(None, None, engine_of(with_ext))
    assert d.location is not None and d.location.where is Where.NOWHERE
    assert d.run is None


# --- the team's repository -------------------------------------------------------------------------------------


class Registry:
    """The registry client as the locator asks it: a tags list, then each tag's config (or an error)."""

    def __init__(self, configs: dict[str, dict[str, Any]], error: TorchyardError | None = None) -> None:
        self.configs, self.error = configs, error
        self.asked: list[str] = []

    def tags(self, repo: RepoRef) -> list[str]:
        self.asked.append("tags")
        if self.error is not None:
            raise self.error
        return [
            *self.configs,
            "latest-runtime",
            f"{PLAIN}-zstd",
            f"{PLAIN}-arm64",
            "2.14.1-cpu-py3.11-debian12-runtime",
        ]

    def image(self, repo: RepoRef, tag: str, platform: str) -> tuple[object, dict[str, Any]] | None:
        self.asked.append(tag)
        if tag not in self.configs:
            return None
        return object(), self.configs[tag]


def config(info: ImageInfo) -> dict[str, Any]:
    return {"architecture": "amd64", "os": "linux", "config": {"Labels": info.labels, "Env": []}}


def test_in_the_repository_only_the_combination_s_tags_are_read_in_the_order_of_the_rule() -> None:
    judge = judge_here(M, on(RTX4090_580, "580.65.06"))
    sm89 = holding("x", CU132, arch_list="sm_89", extensions="addone")
    sm90 = holding("x", CU132, arch_list="sm_90", extensions="addone")
    client = Registry({f"{PLAIN}-sm90-xaaaa0000": config(sm90), f"{PLAIN}-sm89-xaaaa0000": config(sm89)})
    found = locate(WANTED, judge, local=[], repo=REPO, client=client)  # type: ignore[arg-type]
    assert (found.where, found.reference, found.chosen) == (Where.REPOSITORY, f"{REPO}:{PLAIN}-sm89-xaaaa0000", True)
    assert client.asked == ["tags", f"{PLAIN}-sm89-xaaaa0000"]
    client = Registry({f"{PLAIN}-sm90-xaaaa0000": config(sm90)})
    passed_over = locate(WANTED, judge, local=[], repo=REPO, client=client)  # type: ignore[arg-type]
    assert passed_over.where is Where.NOWHERE
    assert passed_over.notes == (
        f"{REPO}:{PLAIN} is not in the repository (1 tag(s) of it hold images that do not run here)",
    )
    assert where_lines(found)[0] == f"in the team's repository ({found.reference}): docker pull {found.reference}"


def test_a_repository_without_the_image_or_out_of_reach_is_a_note_and_a_local_image_still_counts() -> None:
    judge = judge_here(M, on(None))
    local = holding(f"torchyard:{PLAIN}", CU132)
    cpu = Wanted("torch2.15.0-cpu-py3.11-debian12", "2.15.0-cpu-py3.11-debian12-runtime", "linux/amd64", "b", SIZE)
    unreachable = Registry({}, PushError("registry 127.0.0.1:5000 is unreachable: refused"))
    found = locate(cpu, judge, local=[local], repo=REPO, client=unreachable)  # type: ignore[arg-type]
    assert (found.where, found.reference, found.chosen) == (Where.LOCAL, local.tags[0], False)
    assert found.notes == (
        f"the registry of {REPO} is not reachable (registry 127.0.0.1:5000 is unreachable: refused)",
    )
    empty = locate(cpu, judge, local=None, repo=REPO, client=Registry({}))  # type: ignore[arg-type]
    notes = (
        "the local engine could not be asked (no Docker engine)",
        f"{REPO}:2.15.0-cpu-py3.11-debian12-runtime is not in the repository",
    )
    assert empty == Location(Where.NOWHERE, None, notes, "b", SIZE)


def test_the_default_client_answers_at_once_or_not_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []

    class Client(Registry):
        def __init__(self, http: Any) -> None:
            super().__init__({})
            made.append(http.policy)

    monkeypatch.setattr(locate_module, "Distribution", Client)
    locate(WANTED, judge_here(M, on(None)), local=[], repo=REPO)
    [policy] = made
    assert (policy.timeout, policy.retries, policy.connect_retries) == (LOOKUP_TIMEOUT, 0, 0) == (1.0, 0, 0)


@pytest.mark.parametrize(
    ("repo", "registry"),
    [
        ("ghcr.io/acme/x", True), ("127.0.0.1:5000/team/x", True), ("localhost:5000/x", True),
        ("localhost/team/x", True), ("torchyard", False), ("team/x", False), ("team/v1.2/x", False),
        ("ghcr.io", False), ("localhost", False), (None, False),
    ],
)  # fmt: skip
def test_only_a_repository_whose_first_part_is_a_host_names_a_registry(repo: str | None, registry: bool) -> None:
    assert registry_of(repo) == (repo if registry else None)


def test_the_nowhere_line_says_to_build_first_with_the_size() -> None:
    nowhere = Location(Where.NOWHERE, None, ("a note",), BUILD, SIZE)
    assert where_lines(nowhere) == [f"nowhere yet: build it first (its `build` line); expected size {SIZE}", "a note"]
    assert location_json(nowhere) == {"where": "nowhere", "reference": None, "recommended": None, "holds": None,
                                      "verdict": None, "notes": ["a note"], "size": SIZE}  # fmt: skip


def test_among_other_images_the_newest_torch_comes_first_then_the_newest_built() -> None:
    judge = judge_here(M, on(None))
    cpu = Wanted("torch2.15.0-cpu-py3.11-debian12", "2.15.0-cpu-py3.11-debian12-runtime", "linux/amd64", "b", SIZE)
    old_torch_new_build = holding("torchyard:old", "torch2.14.1-cu126-py3.11-debian12", created="2026-12-03T00:00:00Z")
    new_torch = holding("torchyard:new", CU132, created="2026-11-01T00:00:00Z")
    devel = holding("torchyard:devel", CU132, flavor="devel", created="2026-12-04T00:00:00Z")
    found = locate(cpu, judge, local=[old_torch_new_build, devel, new_torch], repo=None)
    assert (found.reference, found.chosen) == ("torchyard:new", False)
    assert locate(cpu, judge, local=[old_torch_new_build, devel], repo=None).reference == "torchyard:old"
