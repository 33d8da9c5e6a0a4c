"""What each zstd copy of a publish run reports (publish.zstd_copies._copy through write_zstd_copies): the copy's
own fields, written or unchanged, the alias's copy reusing its image's, and a failure's one redacted log line.
Written for the survivors of `bench/mutation.py publish` (docs/mutation.md)."""

from __future__ import annotations

import pytest

import builder.publish.zstd_copies as zc
from builder.core.errors import PushError
from builder.core.kinds import AliasStatus
from builder.oci.refs import ImageRef
from builder.oci.zstd import ZstdCopy
from builder.publish.zstd_copies import Published, ZstdResult, published_tags, write_zstd_copies

REPO = "127.0.0.1:5000/team/torch"


class Copies:
    """zstd_copy: a written copy, an unchanged one, or a refusal; and what it was asked."""

    def __init__(self, unchanged: bool = False, error: Exception | None = None) -> None:
        self.unchanged, self.error = unchanged, error
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    def __call__(
        self, client: object, source: ImageRef, *, reuse: tuple[str, ...] = (), before_tag: object = None
    ) -> ZstdCopy:
        self.asked.append((str(source), reuse))
        self.signers = [*getattr(self, "signers", []), before_tag]
        if self.error is not None:
            raise self.error
        return ZstdCopy(str(source), f"{source}-zstd", digest="sha256:" + "d" * 64, unchanged=self.unchanged,
                        gzip_bytes=300, zstd_bytes=200)  # fmt: skip


@pytest.mark.parametrize(("unchanged", "status"), [(False, "written"), (True, "unchanged")])
def test_a_copy_reports_its_target_digest_and_sizes(
    monkeypatch: pytest.MonkeyPatch, unchanged: bool, status: str
) -> None:
    copies = Copies(unchanged=unchanged)
    monkeypatch.setattr(zc, "zstd_copy", copies)
    lines: list[str] = []
    results = write_zstd_copies(None, REPO, Published(("1.0",), (("latest", "1.0"),)), lines.append)  # type: ignore[arg-type]
    digest = "sha256:" + "d" * 64
    assert results == [
        ZstdResult("1.0", status, f"{REPO}:1.0-zstd", digest, "", 300, 200),
        ZstdResult("latest", status, f"{REPO}:latest-zstd", digest, "", 300, 200),
    ]
    assert copies.asked == [(f"{REPO}:1.0", ()), (f"{REPO}:latest", ("1.0-zstd",))]
    assert all(line.startswith("ZSTD  ") for line in lines) and len(lines) == 2


def test_a_refused_copy_is_one_redacted_fail_line_and_fails_its_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zc, "zstd_copy", Copies(error=PushError("denied for https://bob:hunter2@example.com/x")))
    lines: list[str] = []
    results = write_zstd_copies(None, REPO, Published(("1.0",), (("latest", "1.0"),)), lines.append)  # type: ignore[arg-type]
    reason = results[0].reason
    assert "hunter2" not in reason and reason.startswith("denied for https://")
    assert lines == [f"FAIL  zstd copy of {REPO}:1.0: {reason}"]
    assert results == [
        ZstdResult("1.0", "failed", reason=reason),
        ZstdResult("latest", "failed", reason="the zstd copy of 1.0 was not written"),
    ]


def test_an_alias_naming_a_bare_tag_or_a_ref_with_a_port_copies_that_tag() -> None:
    aliases = [("latest", AliasStatus.MOVED, "1.0"), ("2", AliasStatus.UNCHANGED, "127.0.0.1:5000/team/torch:2.0")]
    assert published_tags([], [], aliases).aliases == (("latest", "1.0"), ("2", "2.0"))
