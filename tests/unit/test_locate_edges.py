"""builder/host/locate.py read precisely (written for the survivors of `bench/mutation.py host`, docs/mutation.md):
where an image is found, in the team's repository through the registry client, what is said when it is not, the
expected size, the lines and the JSON doctor and `lookup --here` print."""

from __future__ import annotations

from typing import Any

import pytest

from builder.core.errors import TorchyardError
from builder.host import locate
from builder.host.locate import (
    LOOKUP_TIMEOUT,
    Location,
    Where,
    expected_size,
    locate_image,
    locate_recommended,
    location_json,
    where_lines,
)
from builder.oci.refs import RepoRef, parse_repo

REPO = "127.0.0.1:5000/team/torch"
TAG = "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
BUILD = "torchyard build --torch 2.14.1 --variant cu130"
SIZE = "about 6.33 GB (measured: docs/benchmarks.md)"


class Registry:
    """The registry client's `manifest`: what each repository:tag holds, or an error for every question."""

    def __init__(self, tags: set[str] = frozenset(), error: TorchyardError | None = None) -> None:  # type: ignore[assignment]
        self.tags, self.error = tags, error
        self.asked: list[tuple[RepoRef, str]] = []

    def manifest(self, repo: RepoRef, tag: str) -> object | None:
        self.asked.append((repo, tag))
        if self.error is not None:
            raise self.error
        return object() if f"{repo.host}/{repo.name}:{tag}" in self.tags else None


def find(client: Registry, *, local: Any = None, repo: str | None = REPO) -> Location:
    return locate_image(TAG, local=local, repo=repo, build=BUILD, size=SIZE, client=client)  # type: ignore[arg-type]


def test_an_image_in_the_team_repository_is_found_there_with_its_build_line_and_size() -> None:
    client = Registry({f"{REPO}:{TAG}"})
    assert find(client, local=lambda ref: False) == Location(Where.REPOSITORY, f"{REPO}:{TAG}", (), BUILD, SIZE)
    assert client.asked == [(parse_repo(REPO), TAG)]


def test_without_an_engine_the_repository_is_still_asked_and_the_missing_engine_said() -> None:
    found = find(Registry({f"{REPO}:{TAG}"}))
    assert found == Location(
        Where.REPOSITORY, f"{REPO}:{TAG}", ("the local engine could not be asked (no Docker engine)",), BUILD, SIZE
    )


def test_an_image_the_repository_lacks_is_nowhere_and_says_so_after_the_engine_note() -> None:
    assert find(Registry()) == Location(
        Where.NOWHERE,
        None,
        ("the local engine could not be asked (no Docker engine)", f"{REPO}:{TAG} is not in the repository"),
        BUILD,
        SIZE,
    )


def test_a_registry_that_cannot_be_reached_is_a_note_not_an_error() -> None:
    found = find(Registry(error=TorchyardError("connection refused")), local=lambda ref: False)
    assert (found.where, found.reference, found.build, found.size) == (Where.NOWHERE, None, BUILD, SIZE)
    assert found.notes == (f"the registry of {REPO} is not reachable (connection refused)",)


def test_without_a_repository_only_the_engine_is_asked_and_that_is_said() -> None:
    client = Registry({f"{REPO}:{TAG}"})
    found = find(client, local=lambda ref: False, repo=None)
    assert found == Location(
        Where.NOWHERE, None, ("no team repository given (--repo REGISTRY/NAME or TORCHYARD_REPO)",), BUILD, SIZE
    )
    assert client.asked == []


def test_the_default_client_answers_at_once_or_not_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []

    class Client(Registry):
        def __init__(self, http: Any) -> None:
            super().__init__()
            made.append(http.policy)

    monkeypatch.setattr(locate, "Distribution", Client)
    locate_image(TAG, local=None, repo=REPO, build=BUILD, size=SIZE)
    [policy] = made
    assert (policy.timeout, policy.retries, policy.connect_retries) == (LOOKUP_TIMEOUT, 0, 0) == (1.0, 0, 0)


def test_the_recommended_image_is_looked_up_by_its_tag_even_behind_a_registry_port() -> None:
    seen: list[str] = []

    def local(ref: str) -> bool:
        seen.append(ref)
        return False

    found = locate_recommended(f"{REPO}:{TAG}", BUILD, SIZE, repo=None, local=local)
    assert seen == [f"torchyard:{TAG}"]
    assert found.build == BUILD and found.size == SIZE


@pytest.mark.parametrize(
    ("torch", "variant", "platform", "size"),
    [
        ("2.14.1", "cu130", "linux/amd64", "about 6.33 GB (measured: docs/benchmarks.md)"),
        ("2.14.1", "cu130", "linux/arm64", "about 6.17 GB (measured: docs/benchmarks.md)"),
        (
            "2.15.0",
            "cu132",
            "linux/amd64",
            "not measured for this combination (a torch 2.14.1 cu130 runtime image: 6.33 GB, docs/benchmarks.md)",
        ),
        ("2.14.1", "cu126", "linux/amd64", "not measured for this combination"),
        ("2.14.1", "cpu", "linux/amd64", "not measured for this combination"),
    ],
)
def test_the_expected_size_is_measured_or_said_not_to_be(torch: str, variant: str, platform: str, size: str) -> None:
    assert expected_size(torch, variant, platform) == size


def test_the_lines_and_the_json_of_each_place() -> None:
    local = Location(Where.LOCAL, f"torchyard:{TAG}", (), BUILD, SIZE)
    there = Location(Where.REPOSITORY, f"{REPO}:{TAG}", ("a note",), BUILD, SIZE)
    nowhere = Location(Where.NOWHERE, None, ("a note",), BUILD, SIZE)
    assert where_lines(local) == [f"in the local engine (torchyard:{TAG})"]
    assert where_lines(there) == [f"in the team's repository ({REPO}:{TAG}): docker pull {REPO}:{TAG}", "a note"]
    assert where_lines(nowhere) == [f"nowhere yet: build it first (its `build` line); expected size {SIZE}", "a note"]
    assert location_json(there) == {
        "where": "repository",
        "reference": f"{REPO}:{TAG}",
        "notes": ["a note"],
        "size": SIZE,
    }
    assert location_json(nowhere) == {"where": "nowhere", "reference": None, "notes": ["a note"], "size": SIZE}
