"""builder/resolve/combos.py's enumerate_combinations reads the Python tags of the query's platform's wheels,
not linux/amd64's: an arm64 question for a Python only amd64 has wheels for lists nothing, where amd64 lists the
combination so that the missing interpreter is told as a reason (mutmut's `wheels = None` and `release.on(None)`
survived every other test, 2026-12-02)."""

from __future__ import annotations

from matrix_kit import BASE, edit, query, small

from builder.resolve.combos import enumerate_combinations

# torch 2.5.1 with arm64 wheels for Python 3.12 only (amd64's are 3.9 to 3.13); debian12 offers 3.11 and 3.12
ARM64 = edit(
    BASE,
    '[[torch.variants]]\nname = "cpu"\nsource = "pypi"\n',
    '[[torch.variants]]\nname = "cpu"\nsource = "pypi"\n\n[torch.variants.arm64]\nlocal = "none"\nsource = "pypi"\n\n'
    '[torch.arm64]\npypi_default = "cpu"\npython = ["3.12"]\nplatform_tag = "manylinux2014_aarch64"\nsource = "pypi"\n',
)


def ids(platform: str, python: str) -> list[str]:
    m = small(ARM64)
    return [c.id for c in enumerate_combinations(m, query(m, python=python, platform=platform))]


def test_a_python_only_amd64_has_wheels_for_is_listed_there_and_not_on_arm64() -> None:
    assert ids("linux/amd64", "3.10") == [
        "torch2.5.1-cu118-py3.10-debian12",
        "torch2.5.1-cu124-py3.10-debian12",
        "torch2.5.1-cpu-py3.10-debian12",
    ]
    assert ids("linux/arm64", "3.10") == []


def test_arm64_lists_its_own_wheel_tags_and_the_os_pythons() -> None:
    for python in ("3.11", "3.12"):
        assert ids("linux/arm64", python) == [
            f"torch2.5.1-{v}-py{python}-debian12-arm64" for v in ("cu118", "cu124", "cpu")
        ]


def test_a_combination_reports_torch_s_version_as_that_platform_s_wheel_does() -> None:
    # torch.__version__ is what the smoke suite compares: the arm64 CPU wheel has no local part (2.5.1, not 2.5.1+cpu)
    m = small(ARM64)
    found = {c.id: c for p in ("linux/amd64", "linux/arm64") for c in enumerate_combinations(m, query(m, platform=p))}
    assert found["torch2.5.1-cpu-py3.12-debian12"].local_version == "2.5.1+cpu"
    assert found["torch2.5.1-cpu-py3.12-debian12-arm64"].local_version == "2.5.1"
    assert found["torch2.5.1-cu124-py3.12-debian12"].local_version == "2.5.1+cu124"
    # a variant without arm64 wheels is listed there (to be ruled out by its reason): no code for any GPU
    no_wheels = found["torch2.5.1-cu124-py3.12-debian12-arm64"]
    assert (no_wheels.build, no_wheels.sass, no_wheels.ptx) == (None, None, ())
