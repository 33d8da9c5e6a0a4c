"""What the rendered images promise: the NVIDIA runtime contract, which strategies and targets exist, tags,
labels, the in-image manifest, and the `torchyard render` command itself.

Expected values are facts (compat-facts.md, the NVIDIA image tags, the CLI contract), written out here.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version
from render_kit import (
    addone,
    admits,
    arch,
    base_of,
    env_of,
    instructions,
    labels_of,
    matrix,
    plan,
    reported_cuda,
    stages,
)

from builder.cli.main import main
from builder.core.errors import RenderError
from builder.core.kinds import Flavor, Installer, Strategy
from builder.render.layers import layer_plan
from builder.render.nvidia import select_image
from builder.resolve.query import RawQuery, parse_query
from builder.resolve.resolver import lookup

CU130 = "torch2.14.1-cu130-py3.11-debian12"
CU130_DEFAULT = "torch2.14.1-cu130-py3.13-debian13"  # what --torch 2.14.1 alone chooses
CU124 = "torch2.5.1-cu124-py3.11-debian12"
CU124_UBUNTU = "torch2.5.1-cu124-py3.10-ubuntu22.04"
CU118_UBUNTU = "torch2.0.1-cu118-py3.10-ubuntu22.04"
CPU = "torch2.14.1-cpu-py3.11-debian12"
# The ten brands of the 11.5.2 ... 12.4.x images' exceptions (compat-facts §5c).
ALL_BRANDS = (
    "tesla",
    "unknown",
    "nvidia",
    "nvidiartx",
    "geforce",
    "geforcertx",
    "quadro",
    "quadrortx",
    "titan",
    "titanrtx",
)
NO_DEVEL_12_4 = (
    "devel with --strategy wheels needs nvcc from PyPI, which NVIDIA publishes for CUDA 13 only "
    "(CUDA 12.4 wheels carry no nvcc); use --strategy cuda-base or --target runtime"
)


def _require(ident: str, strategy: Strategy = Strategy.WHEELS) -> str:
    p = plan(ident, strategy)
    values = {
        env_of(p.dockerfile, stage)["NVIDIA_REQUIRE_CUDA"]
        for stage in ("runtime", "devel")
        if stage in stages(p.dockerfile)
    }
    values |= {str(t.manifest.nvidia_require_cuda) for t in p.targets}
    assert len(values) == 1, values  # runtime, devel and the manifests agree
    return values.pop()


# --- NVIDIA_REQUIRE_CUDA ---------------------------------------------------------------------------------


def test_cuda12_wheels_require_what_minor_version_compatibility_needs() -> None:
    # Any driver reporting CUDA 12.0 runs a 12.x runtime (floor 525.60.13, the 12.0 GA driver itself).
    assert _require(CU124) == "cuda>=12.0"
    # NVIDIA's 12.4 images ask for cuda>=12.4 and refuse a GeForce on 535; torch's cu124 wheels run there.
    assert admits("cuda>=12.0", "535.183.01", reported_cuda("535.183.01"))
    assert not admits("cuda>=12.0", "520.61.05", reported_cuda("520.61.05"))


def test_cuda11_wheels_add_the_floor_as_a_semver_driver_clause() -> None:
    # The 11.0 GA driver (450.36.06) reports 11.0 but is below the 11.x floor 450.80.02, hence driver>=;
    # written without leading zeros, since the container toolkit parses semver.
    requirement = _require(CU118_UBUNTU)
    assert requirement == "cuda>=11.0,driver>=450.80.2"
    assert admits(requirement, "450.80.02", (11, 0))
    assert not admits(requirement, "450.36.06", (11, 0))


def test_cuda13_wheels_require_cuda_13() -> None:
    assert _require(CU130) == "cuda>=13.0"
    assert admits("cuda>=13.0", "580.65.06", reported_cuda("580.65.06"))
    assert not admits("cuda>=13.0", "575.64.03", reported_cuda("575.64.03"))


def test_cuda_base_keeps_the_brand_exceptions_of_the_12_4_1_image() -> None:
    # nvidia/cuda:12.4.1 bundles cuda-compat for the 470, 525 and 535 branches, for all ten brands.
    exceptions = [f"brand={b},driver>={n},driver<{n + 1}" for n in (470, 525, 535) for b in ALL_BRANDS]
    requirement = _require(CU124_UBUNTU, Strategy.CUDA_BASE)
    assert requirement == " ".join(["cuda>=12.0", *exceptions])
    assert admits(requirement, "470.256.02", reported_cuda("470.256.02"), brand="tesla")
    assert not admits(_require(CU124), "470.256.02", reported_cuda("470.256.02"), brand="tesla")


def test_cuda_base_11_8_keeps_the_470_exception() -> None:
    exceptions = [f"brand={b},driver>=470,driver<471" for b in ALL_BRANDS]
    assert _require(CU118_UBUNTU, Strategy.CUDA_BASE) == " ".join(["cuda>=11.0,driver>=450.80.2", *exceptions])


def test_cpu_images_carry_no_nvidia_contract() -> None:
    p = plan(CPU)
    assert "NVIDIA_" not in p.dockerfile
    assert {t.manifest.nvidia_require_cuda for t in p.targets} == {None}


# --- strategies and targets ------------------------------------------------------------------------------


def test_cuda_base_is_refused_for_a_cuda_minor_without_images_naming_those_recorded() -> None:
    with pytest.raises(RenderError) as exc:
        select_image(matrix(), Version("13.2"), "ubuntu22.04")
    message = str(exc.value)
    assert message.startswith("no nvidia/cuda image recorded for CUDA 13.2 (recorded: 11.0, 11.1, ")
    assert message.endswith(", 12.9, 13.0, 13.1); use --strategy wheels")
    with pytest.raises(RenderError, match=r"^no nvidia/cuda image recorded for CUDA 13\.2 "):
        plan("torch2.15.0-cu132-py3.12-ubuntu24.04", Strategy.CUDA_BASE)


def test_cuda_base_is_refused_on_debian_naming_the_published_tags() -> None:
    # NVIDIA publishes no Debian images; 12.4.0 and 12.4.1 exist for Ubuntu 20.04 and 22.04.
    with pytest.raises(RenderError) as exc:
        plan(CU124, Strategy.CUDA_BASE)
    assert str(exc.value) == (
        "no nvidia/cuda image for CUDA 12.4 on debian12 (published: 12.4.0: ubuntu20.04, ubuntu22.04; "
        "12.4.1: ubuntu20.04, ubuntu22.04); pick one of those with --os, or use --strategy wheels"
    )


def test_cuda_base_runtime_is_the_base_image_and_devel_the_cudnn_devel_image() -> None:
    p = plan(CU124_UBUNTU, Strategy.CUDA_BASE)
    assert p.base_images == ("nvidia/cuda:12.4.1-base-ubuntu22.04", "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04")
    assert base_of(p.dockerfile, "runtime") == "venv"
    assert base_of(p.dockerfile, "venv") == "os"
    assert base_of(p.dockerfile, "devel") == "toolchain"
    assert env_of(p.dockerfile, "devel")["CUDA_HOME"] == "/usr/local/cuda"
    assert p.target(Flavor.DEVEL).manifest.base_image == "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04"
    assert p.target(Flavor.RUNTIME).manifest.base_image == "nvidia/cuda:12.4.1-base-ubuntu22.04"


def test_wheels_devel_for_cuda12_is_unavailable_with_its_reason() -> None:
    p = plan(CU124)
    assert p.unavailable == ((Flavor.DEVEL, NO_DEVEL_12_4),)
    # onnxruntime-gpu 1.23.2 (CUDA 12); the notebook's pins take Python 3.11
    assert [t.flavor for t in p.targets] == [Flavor.RUNTIME, Flavor.INFERENCE, Flavor.NOTEBOOK]
    assert stages(p.dockerfile) == [
        "os-files", "os", "uv", "build", "manifests", "venv", "runtime", "inference", "notebook"
    ]  # fmt: skip
    pip = ["os-files", "os", "build", "manifests", "venv", "runtime", "inference", "notebook"]
    assert stages(plan(CU124, installer=Installer.PIP).dockerfile) == pip
    with pytest.raises(RenderError) as exc:
        p.target(Flavor.DEVEL)
    assert str(exc.value) == f"devel is not available for {CU124}: {NO_DEVEL_12_4}"
    with pytest.raises(RenderError, match=r"^--extension needs the devel toolchain: devel with --strategy wheels"):
        plan(CU124, extensions=(addone(),))


def test_wheels_devel_for_cuda13_takes_nvcc_from_pypi_for_the_chosen_archs() -> None:
    p = plan(CU130, archs=(arch("sm_89"), arch("sm_120")))
    devel = env_of(p.dockerfile, "devel")
    toolchain = env_of(p.dockerfile, "toolchain")
    home = "/opt/venv/lib/python3.11/site-packages/nvidia/cu13"
    assert devel["CUDA_HOME"] == home
    assert devel["PATH"].split(":")[:2] == ["/opt/venv/bin", f"{home}/bin"]
    assert (toolchain["TORCH_CUDA_ARCH_LIST"], toolchain["CMAKE_CUDA_ARCHITECTURES"]) == ("8.9;12.0", "89;120")
    assert "'cuda-toolkit[nvcc,cudart,cccl,crt,nvvm]==13.0.3'" in p.dockerfile  # the wheel's own cuda-toolkit pin
    runtime = env_of(p.dockerfile, "runtime")
    assert "CUDA_HOME" not in runtime and "/cu13/bin" not in runtime["PATH"]


def test_runtime_has_no_compilers_and_only_the_venv_from_the_build_stage() -> None:
    p = plan(CU130, extensions=(addone(),))
    runtime = [args for keyword, args in instructions(p.dockerfile, "runtime") if keyword != "LABEL"]
    venv = [args for keyword, args in instructions(p.dockerfile, "venv")]
    assert not any("g++" in a or "ninja" in a or "cuda-toolkit" in a for a in runtime + venv)
    assert base_of(p.dockerfile, "runtime") == "venv"
    # from the build stage: the venv's layer trees, one COPY each, and /opt/torchyard (constraints); nothing else
    layers = [f"--from=build /layers/{i:02d}/ /" for i in range(len(layer_plan(p.combination).slots()))]
    copied = [args for keyword, args in instructions(p.dockerfile, "venv") if keyword == "COPY"]
    assert copied == [*layers, "--from=build /opt/torchyard /opt/torchyard"]
    assert any("--no-cache-dir --no-deps --no-index /tmp/wheels/*.whl" in a for a in runtime)


def test_devel_shares_the_runtime_layers_with_the_wheels_strategy() -> None:
    # devel = toolchain = venv + compilers: pushing or pulling both images moves the venv only once.
    p = plan(CU130)
    assert base_of(p.dockerfile, "toolchain") == "venv"
    assert base_of(p.dockerfile, "devel") == "toolchain"


def test_python_images_need_no_apt_in_the_build_stage() -> None:
    p = plan("torch2.14.1-cu130-py3.13-debian12")
    assert not any("apt-get" in args for _, args in instructions(p.dockerfile, "build"))
    assert p.base_images == ("python:3.13-slim-bookworm",)


def test_a_user_is_created_with_uid_1000_after_freeing_it() -> None:
    # Ubuntu 24.04 images ship user `ubuntu` with uid and gid 1000: it must make way.
    p = plan("torch2.14.1-cu130-py3.12-ubuntu24.04", user="torch")
    run = next(args for keyword, args in instructions(p.dockerfile, "os") if "useradd" in args)
    assert run.index("userdel") < run.index("groupadd --gid 1000 torch") < run.index("useradd")
    for stage in ("runtime", "devel"):
        assert ("USER", "1000:1000") in instructions(p.dockerfile, stage)
    assert ("USER", "1000:100") in instructions(p.dockerfile, "notebook")  # jovyan takes uid 1000 there
    default = plan("torch2.14.1-cu130-py3.12-ubuntu24.04").dockerfile
    for stage in ("os", "runtime", "devel", "inference"):  # root; the notebook stage has its own user
        assert not any(keyword == "USER" or "useradd" in args for keyword, args in instructions(default, stage))


# --- tags ------------------------------------------------------------------------------------------------


def _tags(
    ident: str, flavor: Flavor = Flavor.RUNTIME, strategy: Strategy = Strategy.WHEELS, **kw: object
) -> tuple[str, ...]:
    return plan(ident, strategy, **kw).target(flavor).tags.all()


def test_tags_name_every_version_and_move_an_alias_across_patches() -> None:
    assert _tags(CU130) == ("2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime", "2.14-cuda13.0-py3.11-debian12-runtime")
    assert _tags(CU130_DEFAULT) == ("2.14.1-cuda13.0-cudnn9-py3.13-debian13-runtime", "2.14-cuda13.0-runtime")
    assert _tags(CU130, Flavor.DEVEL, archs=(arch("sm_89"),)) == (
        "2.14.1-cuda13.0-cudnn9-py3.11-debian12-devel-sm89",
        "2.14-cuda13.0-py3.11-debian12-devel-sm89",
    )
    assert _tags(CPU) == ("2.14.1-cpu-py3.11-debian12-runtime", "2.14-cpu-py3.11-debian12-runtime")
    assert _tags(CU118_UBUNTU, Flavor.DEVEL, Strategy.CUDA_BASE) == (
        "2.0.1-cuda11.8-cudnn8-py3.10-ubuntu22.04-devel-cuda-base",
        "2.0-cuda11.8-py3.10-ubuntu22.04-devel-cuda-base",
    )


def test_latest_is_only_the_newest_torch_pypi_default_on_the_default_platform() -> None:
    newest = max(matrix().torch, key=lambda t: t.version)
    first = matrix().os[0]
    assert (first.name, first.system_python) == ("debian13", "3.13")
    ident = f"torch{newest.version}-{newest.pypi_default}-py3.13-debian13"
    for flavor in Flavor:
        assert f"latest-{flavor.value}" in _tags(ident, flavor)
    assert not any(
        t.startswith("latest") for t in _tags(f"torch{newest.version}-{newest.pypi_default}-py3.12-debian13")
    )
    assert not any(t.startswith("latest") for t in _tags(f"torch{newest.version}-cpu-py3.13-debian13"))
    assert not any(t.startswith("latest") for t in _tags(CU130))  # an older release


# --- labels and the manifest -----------------------------------------------------------------------------


def test_labels_carry_every_version_of_the_combination() -> None:
    p = plan(CU130, archs=(arch("sm_89"),), labels=(("org.example.team", "vision"),))
    release = next(t for t in matrix().torch if str(t.version) == "2.14.1")
    variant = release.variant("cu130")
    assert variant is not None
    for flavor in Flavor:
        labels = labels_of(p.dockerfile, flavor.value)
        assert labels == dict(p.target(flavor).labels)
        assert labels["org.opencontainers.image.version"] == "2.14.1+cu130"
        assert labels["org.opencontainers.image.title"] == f"torchyard 2.14.1+cu130 {flavor.value}"
        ours = {k.removeprefix("io.torchyard."): v for k, v in labels.items() if k.startswith("io.torchyard.")}
        assert ours == {
            "version": "0.1.0",
            "combination": CU130,
            "torch": "2.14.1+cu130",
            "torchvision": str(release.torchvision),
            "torchaudio": str(release.torchaudio),
            "cuda": "13.0",
            "cudnn": str(variant.cudnn),
            "nccl": str(variant.nccl),
            "python": "3.11",
            "os": "debian12",
            "arch-list": "sm_89",
            "extensions": "none",
            "min-driver": "580.65.06",
            "strategy": "wheels",
            "flavor": flavor.value,
            "layers": layer_plan(p.combination).label(),
        } | (
            # ORT's CUDA provider links libcurand: cuda-toolkit[curand] at torch 2.14.1+cu130's pin, 13.0.3
            {"inference": "onnx==1.23.2 onnxscript==0.7.2 cuda-toolkit[curand]==13.0.3 onnxruntime-gpu==1.31.1"}
            if flavor is Flavor.INFERENCE
            else {"notebook": "jupyterlab==4.6.6 ipykernel==7.4.0 ipywidgets==8.1.9"}
            if flavor is Flavor.NOTEBOOK
            else {}
        )
        assert labels["org.example.team"] == "vision"


def test_cpu_labels_say_none_for_the_gpu_stack() -> None:
    labels = labels_of(plan(CPU).dockerfile, "runtime")
    for key in ("cuda", "cudnn", "nccl", "arch-list", "min-driver"):
        assert labels[f"io.torchyard.{key}"] == "none"


def test_build_labels_hash_the_dockerfile_and_everything_the_build_reads() -> None:
    a = plan(CU130, requirements="scipy>=1.10\n")
    b = plan(CU130, requirements="scipy>=1.11\n")
    assert a.build_labels()["io.torchyard.dockerfile-sha256"] == hashlib.sha256(a.dockerfile.encode()).hexdigest()
    assert a.dockerfile == b.dockerfile
    assert a.content_hash != b.content_hash  # the requirements file is part of the build, not of the Dockerfile


def test_the_manifest_is_copied_into_each_image() -> None:
    p = plan(CU130, archs=(arch("sm_89"),), extensions=(addone(),))
    files = dict(p.context_files)
    for flavor in Flavor:
        manifest = json.loads(files[f"manifest-{flavor.value}.json"])
        assert manifest == p.target(flavor).manifest.to_dict()
        assert list(manifest)[:3] == ["schema", "torchyard", "id"]  # the key order images always had
        # through the manifests stage, which fills in the packages the build found in each venv layer
        manifest_copy = (
            f"--from=manifests /opt/torchyard/manifests/manifest-{flavor.value}.json /etc/torchyard/manifest.json"
        )
        assert ("COPY", manifest_copy) in instructions(p.dockerfile, flavor.value)
        assert {k: manifest[k] for k in ("id", "flavor", "strategy", "torch", "cuda", "python", "os")} == {
            "id": CU130,
            "flavor": flavor.value,
            "strategy": "wheels",
            "torch": "2.14.1+cu130",
            "cuda": "13.0",
            "python": "3.11",
            "os": "debian12",
        }
        assert manifest["arch_list"] == ["sm_89"]
        assert manifest["min_driver"] == "580.65.06"
        assert manifest["nvidia_require_cuda"] == "cuda>=13.0"
        assert manifest["base_image"] == "debian:bookworm-slim"
        assert manifest["extensions"] == ["addone"]
        assert manifest["immutable_tag"] == p.target(flavor).tags.immutable


# --- the command -----------------------------------------------------------------------------------------


@pytest.fixture
def render(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("TORCHYARD_DEBUG", raising=False)
    monkeypatch.delenv("TORCHYARD_MATRIX", raising=False)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(["render", "--no-host-settings", *args])
        out, err = capsys.readouterr()
        assert isinstance(exc.value.code, int)
        return exc.value.code, out, err

    return run


def _valid_count(**flags: str) -> int:
    return len(lookup(matrix(), parse_query(matrix(), RawQuery(**flags))).valid)  # type: ignore[arg-type]


def test_partial_flags_render_the_best_combination_and_say_which(render: Any, tmp_path: Path) -> None:
    out = tmp_path / "ctx"
    code, printed, err = render("--torch", "2.14.1", "-o", str(out))
    assert (code, err) == (0, "")  # --target runtime: nothing to say about TensorRT
    data = json.loads((out / "plan.json").read_text())
    runtime = data["targets"]["runtime"]
    assert printed == (
        f"chose {CU130_DEFAULT} (the best of {_valid_count(torch='2.14.1')} valid combinations)\n"
        f"wrote {out}/Dockerfile, plan.json and the build context\n"
        "\n# runtime\n"
        f"DOCKER_BUILDKIT=1 docker build --progress=plain --target runtime -f {out}/Dockerfile --platform linux/amd64 "
        f"--label io.torchyard.content-hash={data['content_hash']} "
        f"--label io.torchyard.dockerfile-sha256={data['dockerfile_sha256']} "
        f"-t torchyard:2.14.1-cuda13.0-cudnn9-py3.13-debian13-runtime -t torchyard:2.14-cuda13.0-runtime {out}\n"
    )
    assert runtime["tags"] == [
        "torchyard:2.14.1-cuda13.0-cudnn9-py3.13-debian13-runtime",
        "torchyard:2.14-cuda13.0-runtime",
    ]
    assert (out / "Dockerfile").read_text() == plan(CU130_DEFAULT).dockerfile
    assert {p.name for p in out.iterdir()} == {
        ".dockerignore",
        ".torchyard-written",
        ".torchyard.lock",
        "Dockerfile",
        "plan.json",
        "constraints.txt",
        "manifest-runtime.json",
        "manifest-devel.json",
        "manifest-inference.json",
        "manifest-notebook.json",
        "contract-runtime.json",
        "contract-devel.json",
        "contract-inference.json",
        "contract-notebook.json",
        "notebook",
        "smoke",
        "venv-layers.json",
        "venv_layers.py",
        "pip_guard.py",
        "uv_fetch.py",
        "os_delta.sh",
        "inventory.py",
    }
    assert (out / "constraints.txt").read_text() == "torch==2.14.1\ntorchvision==0.29.1\ntorchaudio==2.11.1\n"


def test_json_prints_the_plan_it_writes(render: Any, tmp_path: Path) -> None:
    code, printed, _ = render(
        "--torch", "2.5.1", "--os", "ubuntu22.04", "--strategy", "cuda-base", "--json", "-o", str(tmp_path)
    )
    assert code == 0
    data = json.loads(printed)
    assert data == json.loads((tmp_path / "plan.json").read_text())
    assert data["id"] == CU124_UBUNTU
    assert data["base_images"] == ["nvidia/cuda:12.4.1-base-ubuntu22.04", "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04"]
    assert set(data["targets"]) == {"runtime", "devel", "inference"}
    assert data["unavailable"] == {
        "notebook": "ipykernel 7.4.0 requires Python >=3.11 (https://pypi.org/project/ipykernel/7.4.0/), not 3.10"
    }


def test_an_unavailable_devel_target_exits_2_with_one_line(render: Any, tmp_path: Path) -> None:
    out = tmp_path / "never"
    code, printed, err = render(
        "--torch", "2.5.1", "--os", "debian12", "--python", "3.11", "--target", "devel", "-o", str(out)
    )
    assert (code, printed) == (2, "")
    assert err == f"torchyard: error: devel is not available for {CU124}: {NO_DEVEL_12_4}\n"
    assert not out.exists()


def test_a_runtime_render_mentions_the_missing_devel(render: Any, tmp_path: Path) -> None:
    code, printed, _ = render("--torch", "2.5.1", "--os", "debian12", "--python", "3.11", "-o", str(tmp_path))
    assert code == 0
    assert f"devel: not available: {NO_DEVEL_12_4}\n" in printed


def test_additions_sit_on_top_of_the_venv_copy_in_their_own_layer() -> None:
    # Adding or changing --pip must not invalidate the 5.8 GB COPY of the torch venv (bench/publish_bench.py).
    p = plan(CU130, extra_pip=("six==1.16.0",))
    assert not any("six" in args for _, args in instructions(p.dockerfile, "build"))
    for dockerfile, stage in (
        (p.dockerfile, "venv"),
        (plan(CU124_UBUNTU, Strategy.CUDA_BASE, extra_pip=("six==1.16.0",)).dockerfile, "toolchain"),
    ):
        steps = instructions(dockerfile, stage)
        copies = [i for i, (keyword, args) in enumerate(steps) if keyword == "COPY" and "--from=build /layers/" in args]
        install = [i for i, (keyword, args) in enumerate(steps) if keyword == "RUN" and "'six==1.16.0'" in args]
        assert copies and len(install) == 1 and max(copies) < install[0], stage


@pytest.mark.parametrize(
    ("ident", "strategy"), [(CU130, Strategy.WHEELS), (CU124_UBUNTU, Strategy.CUDA_BASE)], ids=["wheels", "cuda-base"]
)
def test_a_refresh_token_reruns_the_os_package_steps_and_changes_only_the_content_hash(
    ident: str, strategy: Strategy
) -> None:
    base, fresh = plan(ident, strategy), plan(ident, strategy, refresh="2026-W48")
    assert fresh.dockerfile == base.dockerfile
    assert fresh.content_hash != base.content_hash != plan(ident, strategy, refresh="2026-W49").content_hash
    assert dict(fresh.build_args)["OS_REFRESH"] == "2026-W48" and "OS_REFRESH" not in dict(base.build_args)
    assert fresh.build_labels()["io.torchyard.refresh"] == "2026-W48"
    assert "io.torchyard.refresh" not in base.build_labels()
    assert [t.tags for t in fresh.targets] == [t.tags for t in base.targets], "same versions, same tags"
    # the upgrade is the last step of venv (and of a toolchain from an outside image), after the venv copy,
    # so the os and build stages and the copied venv stay cached and a refresh re-pushes one layer
    refreshed = []
    for stage in stages(base.dockerfile):
        steps = instructions(base.dockerfile, stage)
        upgrade = [i for i, (k, a) in enumerate(steps) if k == "RUN" and "apt-get upgrade" in a]
        if not upgrade:
            assert ("ARG", 'OS_REFRESH=""') not in steps, stage
            continue
        refreshed.append(stage)
        assert steps[upgrade[0] - 1] == ("ARG", 'OS_REFRESH=""')
        assert 'if [ -z "${OS_REFRESH}" ]; then exit 0; fi' in steps[upgrade[0]][1]
        copies = [i for i, (k, a) in enumerate(steps) if k == "COPY" and "--from=build /layers/" in a]
        assert copies and max(copies) < upgrade[0], stage
    assert refreshed == (["venv"] if strategy is Strategy.WHEELS else ["venv", "toolchain"])


@pytest.mark.parametrize("token", ["a b", "x;y", "-lead", "$(id)", "w" * 65])
def test_a_bad_refresh_token_is_one_line(token: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["render", "--torch", "2.14.1", "--refresh", token, "-o", str(tmp_path)])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        f"torchyard: error: --refresh / $TORCHYARD_REFRESH {token!r}: expected a short token of letters, digits, "
        "'.', '_', '-' (e.g. 2026-W48)\n"
    )


@pytest.mark.parametrize(
    ("ident", "compilers"),
    [
        (CU130, ["g++", "python3-dev"]),  # the OS's own Python: its headers come from python3-dev
        ("torch2.14.1-cu130-py3.13-debian12", ["g++"]),  # python:3.13-slim carries Python.h
        (CPU, ["g++", "python3-dev"]),  # Inductor's CPU kernels need them whether or not there is a GPU
        ("torch1.13.1-cu117-py3.10-debian12", []),  # no torch.compile before 2.0: no compiler at run time
    ],
)
def test_runtime_images_carry_what_torch_compile_needs_at_run_time(ident: str, compilers: list[str]) -> None:
    runtime_os = plan(ident).dockerfile.split(" AS os-files\n", 1)[1].split("\nFROM ", 1)[0]  # the os stage copies it
    assert [p for p in ("g++", "python3-dev") if f"      {p} \\" in runtime_os] == compilers
