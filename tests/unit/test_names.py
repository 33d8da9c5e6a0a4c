"""builder/core/names.py, Docker's reference grammar, case by case with the exact line a user sees: what is
accepted, what is refused and why, and each limit on both sides of its boundary (issue 24: mutation testing
found the refusals barely held)."""

from __future__ import annotations

import pytest

from builder.core.errors import UsageError
from builder.core.names import MAX_NAME, MAX_TAG, check_mirror, check_reference, check_repository, check_tag

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    "repo",
    [
        "torchyard",
        "127.0.0.1:5000/team/torch",
        "ghcr.io/org/torch",
        "localhost/torch",
        "localhost:5000/a/b",
        "[::1]:5000/torch",
        "a/b-c__d.e---f",
        "x" * MAX_NAME,
    ],
)
def test_repositories_docker_accepts(repo: str) -> None:
    assert check_repository(repo) == repo


@pytest.mark.parametrize(
    ("repo", "problem"),
    [
        ("", "it is empty"),
        ("team/my torch", "it contains whitespace"),
        ("https://ghcr.io/org/torch", "it has a scheme; give host/path without https://"),
        ("x" * (MAX_NAME + 1), f"{MAX_NAME + 1} characters, more than {MAX_NAME}"),
        ("Team/torch", "the path component 'Team' is not lower-case letters and digits joined by '.', '_' or '-'"),
        ("team//torch", "it has an empty path component"),
        ("team/torch-", "the path component 'torch-' is not lower-case letters and digits joined by '.', '_' or '-'"),
        ("bad_host.example:port/torch", "'bad_host.example:port' is not a registry host[:port]"),
        ("localhost:99999999/torch", "'localhost:99999999' is not a registry host[:port]"),
        ("UPPER", "the path component 'UPPER' is not lower-case letters and digits joined by '.', '_' or '-'"),
    ],
)
def test_repositories_refused_with_the_reason(repo: str, problem: str) -> None:
    with pytest.raises(UsageError) as refused:
        check_repository(repo, "--repo")
    assert str(refused.value) == f"--repo: {repo!r} is not an image repository: {problem} (example: ghcr.io/org/torch)"


def test_a_single_component_is_a_path_not_a_host() -> None:
    # "my.host" alone is a repository name (a path component), not a registry: no host rule applies.
    assert check_repository("my.host") == "my.host"
    assert check_repository("a.b/c") == "a.b/c"


@pytest.mark.parametrize(
    ("mirror", "kept"),
    [
        ("mirror.corp.example", "mirror.corp.example"),
        ("127.0.0.1:5000/torchyard-base", "127.0.0.1:5000/torchyard-base"),
        ("localhost/hub/", "localhost/hub"),
        ("localhost:5000", "localhost:5000"),
        ("mirror.corp.example/a/b", "mirror.corp.example/a/b"),
    ],
)
def test_mirrors_docker_accepts(mirror: str, kept: str) -> None:
    assert check_mirror(mirror) == kept


@pytest.mark.parametrize(
    ("mirror", "problem"),
    [
        ("", "it is empty"),
        ("mirror/hub", "'mirror' is not a registry host (it needs a '.', a :port, or localhost)"),
        ("localhost2", "'localhost2' is not a registry host (it needs a '.', a :port, or localhost)"),
        ("https://mirror.example", "it has a scheme; give host/path without https://"),
        (
            "mirror.example/Hub",
            "the path component 'Hub' is not lower-case letters and digits joined by '.', '_' or '-'",
        ),
    ],
)
def test_mirrors_refused_with_the_reason(mirror: str, problem: str) -> None:
    with pytest.raises(UsageError) as refused:
        check_mirror(mirror)
    assert str(refused.value) == (
        f"--registry-mirror: {mirror!r} is not a registry mirror: {problem} (example: mirror.corp.example/hub)"
    )


@pytest.mark.parametrize(
    "ref",
    [
        "pytorch/pytorch:2.5.1",
        "127.0.0.1:5000/team/torch",
        "127.0.0.1:5000/team/torch:2.5.1-cuda12.4",
        f"ghcr.io/org/torch@{DIGEST}",
        f"ghcr.io/org/torch:2.5.1@{DIGEST}",
        f"localhost:5000/torch:{'t' * MAX_TAG}",
        "sha256:" + "0" * 64,
        "0123456789ab",
        "torch:_private",
    ],
)
def test_references_docker_accepts(ref: str) -> None:
    assert check_reference(ref) == ref


@pytest.mark.parametrize(
    ("ref", "problem"),
    [
        ("Torch:1", "the path component 'Torch' is not lower-case letters and digits joined by '.', '_' or '-'"),
        (
            "torch:.hidden",
            "the tag '.hidden' is not one Docker accepts ([A-Za-z0-9_.-], at most 128, not starting with . or -)",
        ),
        (
            f"torch:{'t' * (MAX_TAG + 1)}",
            f"the tag '{'t' * (MAX_TAG + 1)}' is not one Docker accepts ([A-Za-z0-9_.-], at most 128, not starting "
            "with . or -)",
        ),
        ("torch@sha256:abc", "the digest 'sha256:abc' is not sha256:<64 hex digits>"),
        (f"torch@{DIGEST}@{DIGEST}", f"the digest '{DIGEST}@{DIGEST}' is not sha256:<64 hex digits>"),
        ("team/to rch:1", "it contains whitespace"),
        ("", "it is empty"),
    ],
)
def test_references_refused_with_the_reason(ref: str, problem: str) -> None:
    with pytest.raises(UsageError) as refused:
        check_reference(ref, "IMAGE")
    assert str(refused.value) == f"IMAGE: {ref!r} is not an image reference: {problem} (example: pytorch/pytorch:2.5.1)"


def test_a_tag_and_a_digest_split_at_the_first_at_and_the_last_colon_of_the_last_component() -> None:
    # host:port/name:tag: the port is not a tag; name:tag@digest: the digest is not part of the tag
    assert check_reference(f"localhost:5000/a/b:v1@{DIGEST}") == f"localhost:5000/a/b:v1@{DIGEST}"
    with pytest.raises(UsageError, match=r"the tag 'v!' is not one Docker accepts"):
        check_reference(f"localhost:5000/a/b:v!@{DIGEST}")
    with pytest.raises(UsageError, match=r"the path component 'b:c' is not lower-case"):
        check_reference("a/b:c/d:e")


@pytest.mark.parametrize(
    ("tag", "problem"),
    [
        ("t" * MAX_TAG, None),
        ("t" * (MAX_TAG + 1), f"{MAX_TAG + 1} characters, more than Docker's {MAX_TAG}"),
        ("2.5.1-cuda12.4", None),
        ("-x", "only [A-Za-z0-9_.-], not starting with '.' or '-'"),
        ("a/b", "only [A-Za-z0-9_.-], not starting with '.' or '-'"),
        ("", "only [A-Za-z0-9_.-], not starting with '.' or '-'"),
    ],
)
def test_check_tag(tag: str, problem: str | None) -> None:
    assert check_tag(tag) == problem
