"""The real matrix.toml: consistency beyond what the loader checks, and spot checks against compat-facts.md.

The consistency checks are computed here from the facts themselves (not through the resolver's
indexes), so a wrong index in builder/resolve/facts.py cannot hide a wrong fact, or vice versa.
"""

from __future__ import annotations

from collections import defaultdict

from matrix_kit import combo, query, real
from packaging.version import Version

from builder.core.kinds import Platform
from builder.core.versions import Driver, minor_of, parse_driver
from builder.matrix.model import Wheels
from builder.render import tensorrt
from builder.resolve import rules
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.resolver import lookup

M = real()


def _ga_drivers() -> dict[tuple[int, int], Driver]:
    """Per CUDA minor, the lowest sourced toolkit driver (the GA release's)."""
    drivers: dict[tuple[int, int], list[Driver]] = defaultdict(list)
    for release in M.cuda:
        if release.min_driver is not None:
            drivers[minor_of(release.version)].append(release.min_driver)
    return {minor: min(found, key=lambda d: d.parts) for minor, found in drivers.items()}


# --- consistency ---------------------------------------------------------------------------------------


def test_every_torch_release_has_a_cpu_variant_and_its_pypi_default() -> None:
    for release in M.torch:
        names = [v.name for v in release.variants]
        assert "cpu" in names, release.version
        assert release.pypi_default in names, release.version
        assert release.pypi_default != "cpu", release.version


def test_torch_releases_are_listed_oldest_first_without_gaps_in_order() -> None:
    versions = [t.version for t in M.torch]
    assert versions == sorted(versions)
    assert versions[0] == Version("1.13.0")


def test_every_cuda_variant_has_a_sourced_ga_driver() -> None:
    ga = _ga_drivers()
    for release in M.torch:
        for variant in release.variants:
            if variant.cuda is not None:
                assert minor_of(variant.cuda) in ga, f"{release.version}+{variant.name}"


def test_driver_branches_ascend_and_report_ascending_cuda() -> None:
    branches = [b.branch for b in M.driver_branches]
    reported = [b.reports_cuda for b in M.driver_branches]
    assert branches == sorted(set(branches))
    assert reported == sorted(set(reported))


def test_each_cuda_minors_ga_driver_is_reported_by_its_branch() -> None:
    # A driver at or above the GA toolkit driver of X.Y reports X.Y (compat-facts §1a').
    reports = {b.branch: b.reports_cuda for b in M.driver_branches}
    for minor, driver in _ga_drivers().items():
        assert reports.get(driver.branch) == minor, f"CUDA {minor}: GA driver {driver}"


def test_toolkit_drivers_never_decrease_within_or_across_releases() -> None:
    sourced = [(c.version, c.min_driver) for c in M.cuda if c.min_driver is not None]
    assert [v for v, _ in sourced] == sorted(v for v, _ in sourced)
    drivers = [d.parts for _, d in sourced]
    assert drivers == sorted(drivers)


def test_mvc_floors_are_the_ga_drivers_of_each_majors_first_release() -> None:
    # §1b: 12.x >= 525.60.13 (12.0 GA) and 13.x >= 580.65.06 (13.0 GA); 11.x is 450.80.02, a later
    # "Tesla Recommended Driver", above the 11.0 GA driver; 10.x has none.
    floors = {m.major: m.mvc_min_driver for m in M.cuda_majors}
    ga = _ga_drivers()
    assert floors[10] is None
    assert str(floors[11]) == "450.80.02" and floors[11] is not None and floors[11].at_least(ga[11, 0])
    assert floors[12] == ga[12, 0] and str(floors[12]) == "525.60.13"
    assert floors[13] == ga[13, 0] and str(floors[13]) == "580.65.06"


def test_every_arch_in_a_torch_build_is_targetable_by_its_cuda() -> None:
    infos = {a.arch: a for a in M.archs}
    for release in M.torch:
        for v in release.variants:
            if v.cuda is None:
                continue
            for arch in (*(v.sass or ()), *v.ptx):
                info = infos[arch]
                assert info.nvcc_added is None or minor_of(info.nvcc_added) <= minor_of(v.cuda), (release, arch)
                assert info.nvcc_removed is None or minor_of(v.cuda) < minor_of(info.nvcc_removed), (release, arch)


def test_every_source_is_used_and_every_cited_source_exists() -> None:
    cited: set[str] = set()
    tables = (M.cuda_majors, M.driver_branches, M.cuda, M.archs, M.cudnn, M.os, M.cuda_images, M.gpu_products)
    for table in (*tables, M.onnxruntime, M.onnx_tools, M.notebook_tools, M.nvidia_wheels):
        for entry in table:
            cited.update(entry.sources)
    cited.update(s for ort in M.onnxruntime for code in ort.code for s in code.sources)
    for comp in (*M.torchvision, *M.torchaudio):
        cited.update(comp.sources)
    for release in M.torch:
        cited.update(release.sources)
        cited.update(s for w in release.wheels for s in w.sources)
        for v in release.variants:
            cited.update(v.sources)
            cited.update(s for b in v.builds for s in b.sources)
    facts = Facts(M)
    by_rules = {s for rule in rules.RULES for s in rule(facts, Query(), combo(M, "2.5.1", "cu124")).sources}
    by_rules |= set(tensorrt.SOURCES)  # the TensorRT refusals cite them (builder/render/tensorrt.py)
    assert by_rules <= set(M.sources), by_rules - set(M.sources)
    assert set(M.sources) <= cited | by_rules, set(M.sources) - cited - by_rules


def test_a_legacy_architectures_first_driver_comes_before_its_last_branch() -> None:
    for info in M.archs:
        if info.driver_min and info.driver_last_branch is not None:
            assert info.driver_min[-1].branch <= info.driver_last_branch, info.name


def test_first_drivers_of_pascal_to_turing_are_their_first_toolkits_drivers() -> None:
    """NVIDIA's architecture matrix names the first toolkit (Pascal CUDA 8.0, Volta 9.0, Turing 10.0); Table 3 of
    the release notes its Linux driver. Kepler's and Maxwell's first toolkits (6.0, 6.5) have no row there: not
    recorded, and neither are the Jetson-only architectures (L4T ships its own driver)."""
    floors = {a.name: [str(d) for d in a.driver_min] for a in M.archs}
    assert {n: floors[n] for n in ("sm_60", "sm_61", "sm_70", "sm_75")} == {
        "sm_60": ["367.48"],
        "sm_61": ["367.48"],
        "sm_70": ["384.81"],
        "sm_75": ["410.48"],
    }
    (cuda10,) = [c for c in M.cuda if c.version == Version("10.0.130")]  # Turing's first toolkit is in the file
    assert cuda10.min_driver is not None and floors["sm_75"] == [str(cuda10.min_driver)]
    assert all(floors[n] == [] for n in ("sm_35", "sm_37", "sm_50", "sm_52", "sm_53", "sm_62", "sm_72"))
    for name, source in (
        ("sm_60", "cuda-relnotes-legacy"),
        ("sm_70", "cuda-relnotes-legacy"),
        ("sm_75", "cuda-relnotes"),
    ):
        (info,) = [a for a in M.archs if a.name == name]
        assert {source, "nvidia-arch-matrix"} <= set(info.sources), name


def test_forward_compat_branches_are_known_driver_branches() -> None:
    branches = {b.branch for b in M.driver_branches}
    for image in M.cuda_images:
        assert set(image.fc_branches) <= branches, image.cuda
        assert (image.fc_brands is None) == (not image.fc_branches), image.cuda


def test_ranking_places_the_newest_torch_first() -> None:
    found = lookup(M, Query())
    known = [r for r in found.valid if not r.unrecorded]
    unknown = [r for r in found.valid if r.unrecorded]
    assert found.valid == (*known, *unknown)  # every combination that could be checked before any with unknowns
    assert unknown  # (the matrix leaves some facts unrecorded: the split is real)
    for group in (known, unknown):
        versions = [r.combo.torch.version for r in group]
        assert versions == sorted(versions, reverse=True)
    assert known[0].combo.torch.version == max(t.version for t in M.torch)


def test_ranking_prefers_full_level_cuda_then_the_newest_cuda() -> None:
    # Driver 580 runs CUDA 13.0 and 12.6 at full level (>= 580.65.06) but 13.2 only through MVC
    # (13.2 GA needs 595.45.04): for torch 2.14.1 that orders cu130, cu126, cu132.
    found = lookup(M, Query(driver=parse_driver("580"), torch=None))
    order = list(dict.fromkeys(r.combo.variant.name for r in found.valid if str(r.combo.torch.version) == "2.14.1"))
    assert order == ["cu130", "cu126", "cu132"]


def test_without_a_driver_the_pypi_default_comes_first() -> None:
    first = lookup(M, Query()).valid[0].combo
    assert first.is_pypi_default


# --- spot checks against compat-facts.md ------------------------------------------------------------------


def _release(version: str) -> list[str]:
    return [v.name for v in next(t for t in M.torch if str(t.version) == version).variants]


def test_pypi_defaults() -> None:
    # §3a
    expected = {
        "1.13.1": "cu117",
        "2.0.1": "cu117",
        "2.1.0": "cu121",
        "2.4.1": "cu121",
        "2.5.1": "cu124",
        "2.6.0": "cu124",
        "2.7.1": "cu126",
        "2.8.0": "cu128",
        "2.10.0": "cu128",
        "2.11.0": "cu130",
        "2.14.1": "cu130",
        "2.15.0": "cu132",
    }
    assert {str(t.version): t.pypi_default for t in M.torch if str(t.version) in expected} == expected


def test_variants_published() -> None:
    # §3a
    assert _release("2.5.1") == ["cu118", "cu121", "cu124", "cpu"]
    assert _release("2.8.0") == ["cu126", "cu128", "cu129", "cpu"]
    assert _release("2.12.0") == ["cu126", "cu130", "cu132", "cpu"]
    assert _release("2.15.0") == ["cu130", "cu132", "cpu"]
    last_cuda12 = max(t.version for t in M.torch if any(v.cuda and v.cuda.major == 12 for v in t.variants))
    assert last_cuda12 == Version("2.14.1")


def test_wheel_platform_tags() -> None:
    # §3a: manylinux1 up to 2.6.0, manylinux_2_28 from 2.7.0.
    for release in M.torch:
        expected = "manylinux_2_28_x86_64" if release.version >= Version("2.7") else "manylinux1_x86_64"
        assert release.platform_tag == expected, release.version


def test_no_official_build_carries_sm_89_sass() -> None:
    # §3d: get_arch_list never shows sm_89; Ada runs the sm_86 SASS.
    for release in M.torch:
        for v in release.variants:
            assert "sm_89" not in [a.name for a in v.sass or ()], release.version


def test_565_reports_cuda_12_7_although_no_12_7_toolkit_exists() -> None:
    assert next(b for b in M.driver_branches if b.branch == 565).reports_cuda == (12, 7)
    assert not [c for c in M.cuda if minor_of(c.version) == (12, 7)]


def test_cuda_13_images_have_no_ubuntu_20_04() -> None:
    # §5b: Ubuntu 20.04 images end with 12.9.x.
    for image in M.cuda_images:
        if image.cuda.major >= 13:
            assert "ubuntu20.04" not in image.os, image.cuda


def test_os_bases() -> None:
    expected = {"debian12": ("3.11", "2.36"), "ubuntu22.04": ("3.10", "2.35"), "ubuntu24.04": ("3.12", "2.39")}
    found = {o.name: (o.system_python, str(o.glibc)) for o in M.os}
    assert {k: found[k] for k in expected} == expected


# --- the linux/arm64 wheels (PyPI, read from the aarch64 wheels themselves) -------------------------------


def test_arm64_wheels_are_cpu_up_to_2_10_and_cuda_13_from_2_11() -> None:
    defaults = {str(t.version): w.pypi_default for t in M.torch if (w := t.on(Platform.ARM64)) is not None}
    assert defaults["2.10.0"] == "cpu"
    assert defaults["2.11.0"] == defaults["2.14.1"] == "cu130"
    assert defaults["2.15.0"] == "cu132"
    assert len(defaults) == len(M.torch)


def test_arm64_python_and_platform_tags_differ_where_pypi_differs() -> None:
    def arm(version: str) -> Wheels:
        wheels = next(t for t in M.torch if str(t.version) == version).on(Platform.ARM64)
        assert wheels is not None
        return wheels

    assert "3.11" not in arm("1.13.1").python
    assert "3.13" not in arm("2.5.1").python
    assert (arm("2.5.1").platform_tag, arm("2.6.0").platform_tag) == ("manylinux2014_aarch64", "manylinux_2_28_aarch64")


def test_arm64_cuda_builds_carry_sm_110_and_no_sm_86() -> None:
    release = next(t for t in M.torch if str(t.version) == "2.14.1")
    variant = release.variant("cu130")
    assert variant is not None
    build = variant.build(Platform.ARM64)
    assert build is not None and build.sass is not None
    assert [a.name for a in build.sass] == ["sm_80", "sm_90", "sm_100", "sm_110", "sm_120"]
    cpu = next(t for t in M.torch if str(t.version) == "2.5.1").variant("cpu")
    assert cpu is not None and cpu.build(Platform.ARM64) is not None
    assert cpu.build(Platform.ARM64).local is None  # type: ignore[union-attr]  # 2.5.1's aarch64 wheel: "2.5.1"


def test_companions_without_wheels_for_a_python_rule_it_out() -> None:
    # torchvision 0.14.x / torchaudio 0.13.x have no cp311 wheels although torch 1.13 has (PyPI file lists).
    assert not lookup(M, query(M, torch="1.13.1", python="3.11", variant="cu117")).valid
    assert lookup(M, query(M, torch="1.13.1", python="3.10", variant="cu117", os="ubuntu22.04")).valid
