"""`publish --plan` with a refresh token (builder/publish/refresh_plan.py): an image the run will build and then
keep when no package changed says so, in the Markdown and in a stable-typed JSON field; its aliases move after the
build to the new image or to the kept one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_engine import wall_off_the_engine
from publish_kit import (
    REPO,
    PublishFakes,
    fakes_fixture,  # noqa: F401 (the `fakes` fixture)
    run_publish,
)
from test_publish_run import ALIASES, NEWEST_ALIAS

from builder.pipeline.plan import CONTENT_LABEL, REFRESH_LABEL, UNREFRESHED_LABEL, make_plan
from builder.publish.items import expand
from builder.publish.plan import plan_publish
from builder.publish.preview import (
    AFTER,
    AFTER_REFRESH,
    BUILD,
    IF_CHANGED,
    KEPT_IF_SAME,
    NEW_CONTENT_TOO,
    NEW_NOT_RECORDED,
    Preview,
    preview,
)
from builder.publish.refresh_plan import CONTENT_TOO, NO_COMPARE, NOT_RECORDED, TOKEN_ONLY

TOKEN = "2026-W50"


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


def _refreshed(fakes: PublishFakes, token: str = TOKEN) -> Preview:
    """The plan of the same set with a refresh token, against what the fakes' registry holds."""
    items, excluded = expand(fakes.m, refresh=token)
    return preview(plan_publish(fakes.m, items, excluded), fakes.registry, REPO)


def test_the_content_hash_with_the_plan_s_own_token_is_its_content_hash(fakes: PublishFakes) -> None:
    items, _ = expand(fakes.m, refresh=TOKEN)
    plan = make_plan(fakes.m, items[0].combo, items[0].options)
    assert plan.content_with_token(TOKEN) == plan.content_hash
    plain = make_plan(fakes.m, fakes.items[0].combo, fakes.items[0].options)
    assert plan.content_with_token("") == plain.content_hash != plan.content_hash


def test_a_refresh_of_a_published_set_is_built_then_kept_if_no_package_changed(
    fakes: PublishFakes, tmp_path: Path
) -> None:
    run_publish(fakes, tmp_path)  # published without a token
    found = _refreshed(fakes)
    assert {(i.action, i.refresh) for i in found.items} == {(BUILD, TOKEN_ONLY)}
    published = {i.ref: fakes.registry.images[i.ref][1] for i in found.items}
    assert {i.digest for i in found.items} == set(published.values())  # the digest a keep leaves in place
    # every alias names its published image: it moves only if a package changed
    assert {a.action for a in found.aliases} == {IF_CHANGED} and len(found.aliases) == len(ALIASES)
    text = found.markdown()
    assert all(f"| `{i.id}` | {KEPT_IF_SAME} | `{i.ref}` | `{i.digest[:19]}` |" in text for i in found.items)
    count = len(found.items)
    assert f"{count} to build ({count} kept if no package changed), 0 up to date" in text
    assert text.endswith(f"0 of {len(ALIASES)} aliases would move, {len(ALIASES)} more if a package changed.\n")
    data = json.loads(json.dumps(found.as_json()))
    assert {(i["action"], i["refresh"]) for i in data["items"]} == {("build", "token only")}


def test_an_image_published_under_another_token_is_a_refresh_too(fakes: PublishFakes, tmp_path: Path) -> None:
    run_publish(fakes, tmp_path)
    items, _ = expand(fakes.m, refresh="2026-W49")
    for item, planned in zip(items, _refreshed(fakes, "2026-W49").items, strict=True):
        assert planned.id == item.id
        labels = fakes.registry.refs[planned.ref]
        labels[REFRESH_LABEL] = "2026-W49"
        labels[CONTENT_LABEL] = make_plan(fakes.m, item.combo, item.options).content_hash
    # a refresh build of a torchyard from before the unrefreshed label: whether only its token differs is unknown
    assert {(i.refresh, i.digest) for i in _refreshed(fakes).items} == {(NOT_RECORDED, "")}
    assert all(f"| `{i.id}` | {NEW_NOT_RECORDED} |" in _refreshed(fakes).markdown() for i in items)
    for item, planned in zip(items, _refreshed(fakes, "2026-W49").items, strict=True):
        plan = make_plan(fakes.m, item.combo, item.options)
        fakes.registry.refs[planned.ref][UNREFRESHED_LABEL] = plan.content_with_token("")
    assert {i.refresh for i in _refreshed(fakes).items} == {TOKEN_ONLY}  # 2026-W50 against 2026-W49
    assert {i.action for i in _refreshed(fakes, "2026-W49").items} == {"skip"}  # the same token: published


def test_other_content_under_the_tag_is_published_anew_and_says_so(fakes: PublishFakes, tmp_path: Path) -> None:
    """A refresh keeps only packages' sameness: an image whose Dockerfile or files changed too is never kept."""
    run_publish(fakes, tmp_path)
    first = _refreshed(fakes).items[0]
    fakes.registry.refs[first.ref][CONTENT_LABEL] = "sha256:" + "0" * 64  # its Dockerfile or files changed too
    again = _refreshed(fakes).items[0]
    assert (again.action, again.refresh, again.digest) == (BUILD, CONTENT_TOO, "")
    assert f"| `{again.id}` | {NEW_CONTENT_TOO} |" in _refreshed(fakes).markdown()


def test_nothing_published_or_no_token_compares_nothing(fakes: PublishFakes, tmp_path: Path) -> None:
    found = _refreshed(fakes)  # an empty registry: a first publish is never kept
    assert {(i.action, i.refresh) for i in found.items} == {(BUILD, NO_COMPARE)}
    assert {a.action for a in found.aliases} == {AFTER}
    assert "kept if no package changed" not in found.markdown()
    run_publish(fakes, tmp_path)
    fakes.registry.refs = {ref: {CONTENT_LABEL: "sha256:" + "1" * 64} for ref in fakes.registry.refs}
    plain = preview(plan_publish(fakes.m, fakes.items, []), fakes.registry, REPO)
    assert {(i.action, i.refresh) for i in plain.items} == {(BUILD, NO_COMPARE)}  # no token: no comparison


def test_an_alias_on_another_image_moves_after_a_refresh_whatever_it_finds(fakes: PublishFakes, tmp_path: Path) -> None:
    run_publish(fakes, tmp_path)
    fakes.registry.images[f"{REPO}:{NEWEST_ALIAS}"] = ("linux/amd64", "sha256:" + "a8" * 32)
    actions = {a.alias: a.action for a in _refreshed(fakes).aliases}
    assert actions[NEWEST_ALIAS] == AFTER_REFRESH  # to the new image, or to the kept one: either way it moves
    assert {a for alias, a in actions.items() if alias != NEWEST_ALIAS} == {IF_CHANGED}
