"""The publish set: how [[publish]] entries expand into items, what they exclude and why, glob selection,
and the commands that list it (`matrix publish`, `publish --dry-run`) or refuse bad flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_engine import FakeRegistry
from publish_kit import matrix_with

from builder.cli.main import main
from builder.core.errors import MatrixError, UsageError
from builder.matrix import Matrix
from builder.publish.items import Item, expand, select
from builder.publish.plan import plan_publish
from builder.publish.preview import preview

SET = """
[[publish]]
name = "cuda13"
torch = ">=2.14.0"
os = ["debian12"]
flavors = ["runtime", "devel"]

[[publish]]
name = "legacy"
torch = "==2.14.1"
variants = ["cu118", "cu126"]
python = ["3.8", "system"]
os = ["debian12"]
flavors = ["runtime"]

[[publish]]
name = "ubuntu"
torch = "==2.14.1"
variants = ["cu126"]
os = ["debian12", "ubuntu22.04"]
flavors = ["runtime"]
strategy = "cuda-base"

[[publish]]
name = "overlap"
torch = "==2.15.0"
os = ["debian12"]
flavors = ["runtime"]

[[publish]]
name = "ada"
torch = "==2.15.0"
os = ["debian12"]
flavors = ["runtime"]
archs = ["sm_89"]
pip = ["einops==0.8.1"]
"""
ITEMS = [
    ("cuda13", "torch2.14.0-cu130-py3.11-debian12-runtime"),
    ("cuda13", "torch2.14.0-cu130-py3.11-debian12-devel"),
    ("cuda13", "torch2.14.1-cu130-py3.11-debian12-runtime"),
    ("cuda13", "torch2.14.1-cu130-py3.11-debian12-devel"),
    ("cuda13", "torch2.15.0-cu132-py3.11-debian12-runtime"),
    ("cuda13", "torch2.15.0-cu132-py3.11-debian12-devel"),
    ("legacy", "torch2.14.1-cu126-py3.11-debian12-runtime"),
    ("ubuntu", "torch2.14.1-cu126-py3.10-ubuntu22.04-runtime-cuda-base"),
    ("ada", "torch2.15.0-cu132-py3.11-debian12-runtime-sm89"),
]


@pytest.fixture
def m(tmp_path_factory: pytest.TempPathFactory) -> Matrix:
    return matrix_with(SET, tmp_path_factory.mktemp("publish-set"))


@pytest.fixture
def expanded(m: Matrix) -> tuple[list[Item], list[tuple[str, str, str]]]:
    items, excluded = expand(m)
    return items, [(e.entry, e.id, e.reason) for e in excluded]


def test_every_entry_expands_to_its_items_once(expanded: tuple[list[Item], list[tuple[str, str, str]]]) -> None:
    items, _ = expanded
    assert [(i.entry.name, i.id) for i in items] == ITEMS
    assert len({i.id for i in items}) == len(items), "an item named by two entries is built once (the first)"


def test_items_of_one_combination_share_a_group_and_so_one_plan(
    expanded: tuple[list[Item], list[tuple[str, str, str]]],
) -> None:
    items, _ = expanded
    groups = {i.id: i.group for i in items}
    runtime, devel = ITEMS[2][1], ITEMS[3][1]
    assert groups[runtime] == groups[devel] == "cuda13/torch2.14.1-cu130-py3.11-debian12"
    assert len(set(groups.values())) == 6


def test_the_entry_options_reach_the_item(expanded: tuple[list[Item], list[tuple[str, str, str]]]) -> None:
    items, _ = expanded
    ada = next(i for i in items if i.entry.name == "ada")
    assert [a.name for a in ada.options.archs] == ["sm_89"]
    assert ada.options.extra_pip == ("einops==0.8.1",)
    assert next(i for i in items if i.entry.name == "ubuntu").options.strategy.value == "cuda-base"


def test_what_cannot_be_built_is_excluded_with_its_reason(
    expanded: tuple[list[Item], list[tuple[str, str, str]]],
) -> None:
    _, excluded = expanded
    no_cu118 = "torch 2.14.1 publishes no cu118 wheels (cu126, cu130, cu132, cpu)"
    assert excluded[:3] == [
        ("legacy", "torch2.14.1-cu118-py3.8-debian12-runtime", no_cu118),
        ("legacy", "torch2.14.1-cu118-py3.11-debian12-runtime", no_cu118),
        (
            "legacy",
            "torch2.14.1-cu126-py3.8-debian12-runtime",
            "python-torch: torch 2.14.1 has no wheels for Python 3.8 (wheels: 3.10-3.14)",
        ),
    ]
    entry, ident, reason = excluded[3]
    assert (entry, ident) == ("ubuntu", "torch2.14.1-cu126-py3.11-debian12-runtime-cuda-base")
    assert reason.startswith("no nvidia/cuda image for CUDA 12.6 on debian12 (published: 12.6.0: ubuntu20.04")
    # an image two entries name with the same settings is merged: built once by the first, the later one warns
    assert excluded[4:] == [
        ("overlap", "torch2.15.0-cu132-py3.11-debian12-runtime",
         "warning: merged: publish[cuda13] also names it, with the same settings, and builds it once"),
    ]  # fmt: skip


def test_publish_plan_shows_the_merge_as_a_warning(m: Matrix) -> None:
    items, excluded = expand(m)
    found = preview(plan_publish(m, items, excluded), FakeRegistry(), "127.0.0.1:5000/t")
    warning = (
        "torch2.15.0-cu132-py3.11-debian12-runtime (publish[overlap]): warning: merged: publish[cuda13] also names "
        "it, with the same settings, and builds it once"
    )
    assert found.warnings == (warning,)
    assert found.markdown().endswith(f"\n\n- {warning}\n")
    assert found.as_json()["warnings"] == [warning]


def test_two_entries_naming_one_image_with_other_settings_are_refused_naming_both_lines(tmp_path: Path) -> None:
    """Issue 44: the later entry's require_archs would be lost on the image the first builds: refused (exit 2)."""
    strict = SET.replace('name = "overlap"\n', 'name = "overlap"\nrequire_archs = ["sm_90"]\n')
    m = matrix_with(strict, tmp_path)
    with pytest.raises(MatrixError) as caught:
        expand(m)
    text = Path(m.path).read_text().splitlines()
    first = text.index('name = "cuda13"')  # 0-based: the line of the [[publish]] header above the name, 1-based
    later = text.index('name = "overlap"')
    assert str(caught.value) == (
        f"{m.path}:{later}: publish[overlap]: names torch2.15.0-cu132-py3.11-debian12-runtime, which "
        f"publish[cuda13] ({m.path}:{first}) names too with another require_archs: one image has one set of "
        "settings; narrow the torch, variants, python, os or flavors of one entry"
    )
    assert MatrixError.exit_code == 2


def test_globs_select_items_and_a_glob_matching_nothing_is_an_error(
    expanded: tuple[list[Item], list[tuple[str, str, str]]],
) -> None:
    items, _ = expanded
    assert [i.id for i in select(items, ("torch2.14*-cu130-*",))] == [ident for _, ident in ITEMS[:4]]
    both = select(items, ("*-devel", "*cuda-base"))
    assert [i.id for i in both] == [ITEMS[1][1], ITEMS[3][1], ITEMS[5][1], ITEMS[7][1]]
    assert select(items, ()) == items
    with pytest.raises(UsageError, match=r"--only 'torch3\*' matches no item of the publish set"):
        select(items, ("*-devel", "torch3*"))


def test_matrix_publish_lists_items_and_exclusions_as_json(
    m: Matrix, capsys: pytest.CaptureFixture[str], expanded: tuple[list[Item], list[tuple[str, str, str]]]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", m.path, "matrix", "publish", "--json"])
    assert exit_.value.code == 0
    data = json.loads(capsys.readouterr().out)
    assert [(i["entry"], i["id"]) for i in data["items"]] == ITEMS
    assert [(e["entry"], e["id"], e["reason"]) for e in data["excluded"]] == expanded[1]


def test_publish_dry_run_names_every_image_and_alias_and_touches_nothing(
    m: Matrix, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", m.path, "publish", "--dry-run", "--repo", "ghcr.io/acme/torch", "--only", "*2.15*"])
    assert exit_.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ITEM", "IMAGE", "ALIASES", "(moved", "last)"]
    assert lines[1].split() == [  # Debian 12 is off the default platform: the alias names it, and no latest-*
        "torch2.15.0-cu132-py3.11-debian12-runtime",
        "ghcr.io/acme/torch:2.15.0-cuda13.2-cudnn9-py3.11-debian12-runtime",
        "2.15-cuda13.2-py3.11-debian12-runtime",
    ]
    ident, image, *aliases = lines[3].split()
    assert ident == "torch2.15.0-cu132-py3.11-debian12-runtime-sm89"
    assert image.startswith("ghcr.io/acme/torch:2.15.0-cuda13.2-cudnn9-py3.11-debian12-runtime-sm89-x")
    user = image.rsplit("-x", 1)[1]
    assert aliases == [f"2.15-cuda13.2-py3.11-debian12-runtime-sm89-x{user}"]
    assert len(lines) == 4, "--only hides the exclusions of items it did not select"
    assert list(tmp_path.iterdir()) == [], "a dry run writes nothing"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--jobs", "0"], "--jobs: 0 is not a positive number"),
        (
            ["--only", "torch9*"],
            "--only 'torch9*' matches no item of the publish set (torchyard matrix publish lists them)",
        ),
        (
            ["--aliases-only", "--no-push"],
            "--aliases-only moves aliases in the registry: it cannot go with --no-aliases or --no-push",
        ),
        (["--gpus", "two"], "--gpus: 'two' is not all, none or a positive number of GPUs"),
        (["--zstd", "--no-push"], "--zstd writes zstd copies in the registry: it cannot go with --no-push"),
    ],
)
def test_bad_publish_flags_are_one_line_and_exit_2(
    m: Matrix, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", m.path, "publish", *flags])
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"torchyard: error: {message}\n")


def test_an_entry_labels_its_images_without_changing_their_tags(tmp_path: Path) -> None:
    from builder.pipeline.plan import make_plan

    plain = matrix_with(
        '[[publish]]\nname = "a"\ntorch = "==2.14.1"\nos = ["debian12"]\nflavors = ["runtime"]\n', tmp_path
    )
    (base,) = expand(plain)[0]
    (tmp_path / "l").mkdir()
    labelled = matrix_with(
        '[[publish]]\nname = "a"\ntorch = "==2.14.1"\nos = ["debian12"]\nflavors = ["runtime"]\n'
        'labels = { "org.example.team" = "vision", "org.opencontainers.image.vendor" = "ACME" }\n',
        tmp_path / "l",
    )
    (item,) = expand(labelled)[0]
    before = make_plan(plain, base.combo, base.options).target(base.flavor)
    after_plan = make_plan(labelled, item.combo, item.options)
    after = after_plan.target(item.flavor)

    assert after.tags == before.tags, "the family's labels are not additions of a user: no -x<id> suffix"
    assert dict(after.labels)["org.example.team"] == "vision"
    assert dict(after.labels)["org.opencontainers.image.vendor"] == "ACME"
    assert 'org.example.team="vision"' in after_plan.dockerfile
    assert after_plan.content_hash != make_plan(plain, base.combo, base.options).content_hash, "a new label rebuilds"


def test_the_licenses_label_names_nvidias_licence_where_nvidia_libraries_are(
    expanded: tuple[list[Item], list[tuple[str, str, str]]],
) -> None:
    from builder.render.context import licenses

    items = expanded[0]
    cuda = next(i for i in items if i.combo.variant.cuda is not None)
    assert licenses(cuda.combo) == "BSD-3-Clause AND LicenseRef-NVIDIA-Proprietary"
