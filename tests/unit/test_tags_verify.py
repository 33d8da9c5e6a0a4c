"""Tags (builder/render/tags.py) and the checks that hold a built image to them (builder/pipeline/verify.py).

Tags are computed from the plan; the tag check recomputes the immutable tag from what the smoke suite
read inside the image; the label check compares the image's labels with the plan's; the extension
check reads cuobjdump's listing. Combinations come from the real matrix.toml.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_engine import FakeEngine, contents_of
from render_kit import addone, arch, combination, matrix, options, plan, valid_combinations

from builder.core.archs import Arch
from builder.core.errors import BuildError
from builder.core.kinds import Flavor, Platform, Strategy
from builder.core.versions import minor_str
from builder.engine import ImageInfo, RunResult
from builder.pipeline.plan import CONTENT_LABEL
from builder.pipeline.verify import check_extension_code, check_labels, check_tag, observed_tag
from builder.render.options import Extension
from builder.render.tags import ImageTags, default_os_python, extras_id, image_tags
from builder.smoke.expect import cudnn_number
from builder.smoke.manifest import Observed

R, D = Flavor.RUNTIME, Flavor.DEVEL
W, CB = Strategy.WHEELS, Strategy.CUDA_BASE
SM89, SM90A = arch("sm_89"), arch("sm_90a")


def tags(
    ident: str, flavor: Flavor = R, strategy: Strategy = W, archs: tuple[Arch, ...] = (), x: str | None = None
) -> ImageTags:
    return image_tags(matrix(), combination(ident), flavor, strategy, archs, x)


# --- immutable tags and aliases ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ident", "flavor", "strategy", "archs", "expected"),
    [
        ("torch2.14.1-cu130-py3.11-debian12", R, W, (), "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"),
        ("torch2.14.1-cu130-py3.11-debian12", D, W, (), "2.14.1-cuda13.0-cudnn9-py3.11-debian12-devel"),
        ("torch2.14.1-cu130-py3.11-debian12", R, W, (SM89,), "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime-sm89"),
        (
            "torch2.14.1-cu130-py3.11-debian12",
            D,
            W,
            (SM89, SM90A),
            "2.14.1-cuda13.0-cudnn9-py3.11-debian12-devel-sm89-sm90a",
        ),
        (
            "torch2.14.1-cu130-py3.12-ubuntu24.04",
            R,
            CB,
            (),
            "2.14.1-cuda13.0-cudnn9-py3.12-ubuntu24.04-runtime-cuda-base",
        ),
        (
            "torch2.14.1-cu130-py3.12-ubuntu24.04",
            D,
            CB,
            (SM89,),
            "2.14.1-cuda13.0-cudnn9-py3.12-ubuntu24.04-devel-cuda-base-sm89",
        ),
        ("torch2.0.1-cu118-py3.11-debian12", R, W, (), "2.0.1-cuda11.8-cudnn8-py3.11-debian12-runtime"),
        ("torch2.15.0-cpu-py3.11-debian12", R, W, (), "2.15.0-cpu-py3.11-debian12-runtime"),
    ],
)
def test_immutable_tag(ident: str, flavor: Flavor, strategy: Strategy, archs: tuple[Arch, ...], expected: str) -> None:
    assert tags(ident, flavor, strategy, archs).immutable == expected


def test_the_default_platform_is_the_first_os_with_its_own_python() -> None:
    assert default_os_python(matrix()) == ("debian13", "3.13")


def test_alias_names_the_platform_only_off_the_default() -> None:
    assert tags("torch2.14.1-cu130-py3.13-debian13").aliases == ("2.14-cuda13.0-runtime",)
    assert tags("torch2.14.1-cu130-py3.11-debian12").aliases == ("2.14-cuda13.0-py3.11-debian12-runtime",)
    assert tags("torch2.14.1-cu130-py3.12-debian12").aliases == ("2.14-cuda13.0-py3.12-debian12-runtime",)
    assert tags("torch2.14.1-cu130-py3.12-ubuntu24.04", D, CB, (SM89,)).aliases == (
        "2.14-cuda13.0-py3.12-ubuntu24.04-devel-cuda-base-sm89",
    )
    assert tags("torch2.15.0-cpu-py3.12-debian12").aliases == ("2.15-cpu-py3.12-debian12-runtime",)


def test_latest_is_only_the_newest_torchs_pypi_default_on_the_default_platform() -> None:
    m = matrix()
    newest = max(m.torch, key=lambda t: t.version)
    ident = f"torch{newest.version}-{newest.pypi_default}-py3.13-debian13"
    cuda = minor_str(combination(ident).variant.cuda)  # type: ignore[arg-type]
    minor = f"{newest.version.major}.{newest.version.minor}"
    assert tags(ident).aliases == (f"{minor}-cuda{cuda}-runtime", "latest-runtime")
    assert tags(ident, D, W, (SM89,)).aliases[-1] == "latest-devel-sm89"
    assert tags(ident, x="0aba8bab").aliases[-1] == "latest-runtime-x0aba8bab"
    with_latest = [c.id for c in valid_combinations() if any(a.startswith("latest") for a in tags(c.id).aliases)]
    assert with_latest == [ident]


def test_a_minor_alias_stays_on_the_newest_patch() -> None:
    # 2.5.1 is the newest 2.5 release: an older patch built later must not take its alias back.
    assert tags("torch2.5.1-cu124-py3.11-debian12").aliases == ("2.5-cuda12.4-py3.11-debian12-runtime",)
    assert tags("torch2.5.0-cu124-py3.11-debian12").aliases == ()
    assert tags("torch2.14.0-cu130-py3.11-debian12").aliases == ()


def test_every_minor_alias_names_exactly_one_torch_release() -> None:
    owners: dict[str, set[str]] = {}
    for c in valid_combinations():
        for alias in tags(c.id).aliases:
            owners.setdefault(alias, set()).add(str(c.torch.version))
    assert {alias: found for alias, found in owners.items() if len(found) > 1} == {}


# --- the id of user additions (-x<id>) ------------------------------------------------------------------------


def test_no_additions_no_id_and_network_settings_are_not_additions(tmp_path: Any) -> None:
    from render_kit import no_host_network

    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n")
    assert extras_id(options()) is None
    network = no_host_network(ca_bundle=str(ca), pip_index_url="https://u:p@pypi.corp.example/simple")
    assert extras_id(options(network=network)) is None


def test_the_id_is_stable_across_runs_and_order() -> None:
    # Pinned: a change here re-tags every image built with additions; make it on purpose.
    assert extras_id(options(extra_pip=("numpy<2",))) == "0aba8bab"
    assert extras_id(options(extensions=(addone(),))) == "87ade0f8"
    assert extras_id(options(extra_pip=("numpy<2", "scipy"))) == extras_id(options(extra_pip=("scipy", "numpy<2")))


def test_a_path_extension_is_named_not_located() -> None:
    elsewhere = Extension(name="addone", kind="path", spec="/somewhere/else/addone")
    assert extras_id(options(extensions=(elsewhere,))) == extras_id(options(extensions=(addone(),)))


ADDITIONS: list[dict[str, Any]] = [
    {"extra_pip": ("numpy<2",)},
    {"extra_pip": ("numpy<1.27",)},
    {"requirements": "scipy==1.14.1\n"},
    {"user": "app"},
    {"labels": (("team", "ml"),)},
    {"extensions": (addone(),)},
    {"extensions": (Extension(name="flash-attn", kind="pip", spec="flash-attn==2.7.4"),)},
    {"extensions": (Extension(name="flash-attn", kind="pip", spec="flash-attn==2.7.3"),)},
]


def test_each_addition_has_its_own_id() -> None:
    ids = [extras_id(options(**added)) for added in ADDITIONS]
    assert all(i is not None and len(i) == 8 and int(i, 16) >= 0 for i in ids)
    assert len(set(ids)) == len(ADDITIONS)


def test_the_plan_carries_the_id_into_every_tag() -> None:
    p = plan("torch2.14.1-cu130-py3.11-debian12", archs=(SM89,), extensions=(addone(),))
    assert [t.tags.all() for t in p.targets] == [
        (
            "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime-sm89-x87ade0f8",
            "2.14-cuda13.0-py3.11-debian12-runtime-sm89-x87ade0f8",
        ),
        (
            "2.14.1-cuda13.0-cudnn9-py3.11-debian12-devel-sm89-x87ade0f8",
            "2.14-cuda13.0-py3.11-debian12-devel-sm89-x87ade0f8",
        ),
        (
            "2.14.1-cuda13.0-cudnn9-py3.11-debian12-inference-sm89-x87ade0f8",
            "2.14-cuda13.0-py3.11-debian12-inference-sm89-x87ade0f8",
        ),
        (
            "2.14.1-cuda13.0-cudnn9-py3.11-debian12-notebook-sm89-x87ade0f8",
            "2.14-cuda13.0-py3.11-debian12-notebook-sm89-x87ade0f8",
        ),
    ]


# --- the tag as the image's contents say it ----------------------------------------------------------------


def seen(**observed: Any) -> dict[str, Any]:
    return {"torch": "2.14.1+cu130", "cuda": "13.0", "cudnn": 91300, "python": "3.11", "os": "debian12"} | observed


@pytest.mark.parametrize(
    ("observed", "expected"),
    [
        (seen(), "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"),
        (seen(cudnn=92400), "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"),
        (seen(cudnn=90100), "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"),
        (seen(torch="2.0.1+cu118", cuda="11.8", cudnn=8700), "2.0.1-cuda11.8-cudnn8-py3.11-debian12-runtime"),
        (seen(torch="1.13.1+cu117", cuda="11.7", cudnn=8500), "1.13.1-cuda11.7-cudnn8-py3.11-debian12-runtime"),
        (seen(cudnn=None), "2.14.1-cuda13.0-py3.11-debian12-runtime"),  # no cuDNN: never matches a plan
        (seen(torch="2.15.0+cpu", cuda=None, cudnn=None), "2.15.0-cpu-py3.11-debian12-runtime"),
        (seen(torch="2.15.0", cuda=None, cudnn=None), "2.15.0-cpu-py3.11-debian12-runtime"),
        (seen(torch="2.5.1+rocm6.2", cuda=None, cudnn=None), "2.5.1-unknown-rocm6.2-py3.11-debian12-runtime"),
        (seen(python="3.12", os="ubuntu24.04"), "2.14.1-cuda13.0-cudnn9-py3.12-ubuntu24.04-runtime"),
        ({}, "?-cpu-py?-?-runtime"),
    ],
)
def test_observed_tag(observed: dict[str, Any], expected: str) -> None:
    assert observed_tag(Observed.from_dict(observed), R, W, ()) == expected


def test_observed_tag_carries_flavor_strategy_archs_and_extras() -> None:
    assert observed_tag(Observed.from_dict(seen()), D, CB, (SM89, SM90A), "0aba8bab") == (
        "2.14.1-cuda13.0-cudnn9-py3.11-debian12-devel-cuda-base-sm89-sm90a-x0aba8bab"
    )


def test_every_valid_combination_matches_its_own_contents() -> None:
    m = matrix()
    for c in (*valid_combinations(), *valid_combinations(Platform.ARM64)):
        v = c.variant
        observed = {
            "torch": c.local_version,
            "cuda": minor_str(v.cuda) if v.cuda else None,
            "cudnn": cudnn_number(str(v.cudnn)) if v.cudnn else None,
            "python": c.python,
            "os": c.os.name,
        }
        for flavor in Flavor:
            assert (
                observed_tag(Observed.from_dict(observed), flavor, W, (SM89,), "x1", machine=c.platform.machine)
                == image_tags(m, c, flavor, W, (SM89,), "x1").immutable
            )


def test_check_tag_names_both_tags() -> None:
    p = plan("torch2.14.1-cu130-py3.11-debian12")
    observed = contents_of(p)["runtime"].observed
    check_tag(p, p.target(R), Observed.from_dict(observed), "x86_64")
    with pytest.raises(BuildError) as raised:
        check_tag(p, p.target(R), Observed.from_dict(observed | {"torch": "2.13.0+cu130"}), "x86_64")
    assert str(raised.value) == (
        "the tag 2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime does not describe the image: its contents say "
        "2.13.0-cuda13.0-cudnn9-py3.11-debian12-runtime"
    )
    assert raised.value.exit_code == 4


# --- labels ----------------------------------------------------------------------------------------------------


def image_with(labels: dict[str, str]) -> ImageInfo:
    return ImageInfo(id="sha256:" + "c" * 64, labels=labels, tags=(), digests=(), size=1)


def test_check_labels_accepts_the_plans_labels_plus_the_build_labels() -> None:
    p = plan("torch2.14.1-cu130-py3.11-debian12")
    target = p.target(R)
    check_labels(p, target, image_with(dict(target.labels) | p.build_labels() | {"extra.from.base": "x"}))


def test_check_labels_names_the_wrong_and_the_missing_label() -> None:
    p = plan("torch2.14.1-cu130-py3.11-debian12")
    target = p.target(R)
    labels = dict(target.labels) | p.build_labels() | {"io.torchyard.torch": "2.13.0+cu130"}
    del labels[CONTENT_LABEL]
    with pytest.raises(BuildError) as raised:
        check_labels(p, target, image_with(labels))
    assert str(raised.value) == (
        "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime: labels do not match the plan: "
        f"{CONTENT_LABEL}=None (expected '{p.content_hash}'); "
        "io.torchyard.torch='2.13.0+cu130' (expected '2.14.1+cu130')"
    )


def test_check_labels_lists_at_most_four() -> None:
    p = plan("torch2.14.1-cu130-py3.11-debian12")
    with pytest.raises(BuildError) as raised:
        check_labels(p, p.target(R), image_with({}))
    listed = str(raised.value).split(": labels do not match the plan: ")[1].split("; ")
    assert len(listed) == 4
    assert listed == sorted(listed)


# --- extension code (cuobjdump) -----------------------------------------------------------------------------

HOME = "/opt/venv/lib/python3.11/site-packages/nvidia/cu13"


def engine(**knobs: Any) -> FakeEngine:
    found = FakeEngine({})
    for name, value in knobs.items():
        setattr(found, name, value)
    return found


def test_cuobjdump_listing_with_every_arch_passes() -> None:
    fake = engine(cubins=("sm_89", "sm_90a"))
    assert check_extension_code(fake, "img", ("addone",), (SM89, SM90A), HOME) == "addone: sm_89 sm_90a"
    listing, objdump = fake.of("run")
    assert listing.args[:3] == ("img", "python", "-c")
    assert objdump.args == (
        "img",
        f"{HOME}/bin/cuobjdump",
        "--list-elf",
        "/opt/venv/lib/python3.11/site-packages/addone/_C.so",
    )


def test_a_missing_arch_is_named_with_what_was_found() -> None:
    with pytest.raises(BuildError) as raised:
        check_extension_code(engine(cubins=("sm_86",)), "img", ("addone",), (SM89,), HOME)
    assert str(raised.value) == "extension addone has no code for sm_89 (cuobjdump --list-elf found: sm_86)"


def test_sm90_code_is_not_sm90a_code() -> None:
    with pytest.raises(BuildError, match="no code for sm_90a"):
        check_extension_code(engine(cubins=("sm_90",)), "img", ("addone",), (SM90A,), HOME)


def test_an_extension_that_does_not_import_fails() -> None:
    broken = RunResult(1, "ModuleNotFoundError: No module named 'addone'\n")
    with pytest.raises(BuildError) as raised:
        check_extension_code(engine(scripted={"python": broken}), "img", ("addone",), (SM89,), HOME)
    assert str(raised.value) == (
        "could not import the extensions in the devel image: ModuleNotFoundError: No module named 'addone'"
    )


def test_an_extension_without_a_library_fails() -> None:
    empty = RunResult(0, 'warning: something\n{"addone": []}\n')
    with pytest.raises(BuildError, match="extension addone has no compiled library"):
        check_extension_code(engine(scripted={"python": empty}), "img", ("addone",), (SM89,), HOME)


def test_cuobjdump_failing_fails() -> None:
    failed = RunResult(1, "cuobjdump fatal   : Could not open input file '_C.so'\n")
    with pytest.raises(BuildError) as raised:
        check_extension_code(engine(scripted={"cuobjdump": failed}), "img", ("addone",), (SM89,), HOME)
    assert str(raised.value) == "cuobjdump failed on addone: cuobjdump fatal   : Could not open input file '_C.so'"
