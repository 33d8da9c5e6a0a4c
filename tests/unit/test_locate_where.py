"""Where doctor's recommended image is (host.locate.locate_diagnosis): which names are asked in the local engine,
which `--repo` values name a registry (and so may be asked), and the size and build line it carries. Written for
the survivors of `bench/mutation.py host` (docs/mutation.md)."""

from __future__ import annotations

import pytest
from fake_engine import FakeEngine
from host_kit import H100X2_580, machine
from matrix_kit import real

from builder.core.errors import EngineError
from builder.engine import ImageInfo
from builder.host.doctor import Diagnosis, diagnose
from builder.host.locate import Location, Where, _registry, locate_diagnosis
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.resolve.query import RawQuery

M = real()
TAG = "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
SIZE = "about 6.33 GB (measured: docs/benchmarks.md)"


def recommended() -> Diagnosis:
    system = machine(H100X2_580, driver="580.65.06")
    wish = RawQuery(torch="2.14.1", python="3.11", os="debian12")
    d = diagnose(M, probe(M, system), read_runtime(system, lambda: {}), wish, "torchyard")
    assert d.recommended is not None and d.recommended.image == f"torchyard:{TAG}"
    return d


def engine_with(*refs: str) -> FakeEngine:
    fake = FakeEngine({})
    fake.images["sha256:r"] = ImageInfo(id="sha256:r", labels={}, tags=refs, digests=(), size=1)
    for ref in refs:
        fake.tags[ref] = "sha256:r"
    return fake


@pytest.mark.parametrize(
    ("repo", "registry"),
    [
        ("ghcr.io/acme/x", True), ("127.0.0.1:5000/team/x", True), ("localhost:5000/x", True),
        ("localhost/team/x", True), ("torchyard", False), ("team/x", False), ("team/v1.2/x", False),
        ("ghcr.io", False), ("localhost", False),
    ],
)  # fmt: skip
def test_only_a_repository_whose_first_part_is_a_host_names_a_registry(repo: str, registry: bool) -> None:
    assert _registry(repo) == (repo if registry else None)


def test_the_recommended_image_in_the_local_engine_is_found_with_its_size_and_build_line() -> None:
    d = recommended()
    assert d.recommended is not None
    found = locate_diagnosis(d, "torchyard", engine_with(f"torchyard:{TAG}"))
    assert found == Location(Where.LOCAL, f"torchyard:{TAG}", (), d.recommended.build, SIZE)


def test_a_local_copy_under_the_team_s_name_is_found_first() -> None:
    d = recommended()
    team = "localhost:5000/team/x"
    found = locate_diagnosis(d, team, engine_with(f"{team}:{TAG}", f"torchyard:{TAG}"))
    assert found is not None and found.reference == f"{team}:{TAG}"


def test_without_an_engine_the_image_is_nowhere_and_it_is_said() -> None:
    d = recommended()
    fake = engine_with(f"torchyard:{TAG}")
    fake.info_error = EngineError("no Docker engine")
    found = locate_diagnosis(d, "torchyard", fake)
    assert found is not None and found.where is Where.NOWHERE
    assert found.notes[0] == "the local engine could not be asked (no Docker engine)"
    assert found.size == SIZE


def test_no_recommendation_is_nowhere_to_look() -> None:
    d = recommended()
    d.recommended = None
    assert locate_diagnosis(d, "torchyard", engine_with(f"torchyard:{TAG}")) is None
