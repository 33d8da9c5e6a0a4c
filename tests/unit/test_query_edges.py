"""The refusals of parse_query word for word (an unknown --os, --arch or --gpu names the nearest and the known ones;
a name that fits several architectures lists them; --arch against --gpu names the GPU as typed; a bad version names
its flag), a GPU named twice, GPU names matched whatever their spacing, and where the platform came from (written for
the survivors of mutmut on builder/resolve/query.py and gpus.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from matrix_kit import BASE, edit, fake_os, query, real, small

from builder.core.errors import UsageError
from builder.core.kinds import Platform
from builder.matrix.model import Matrix
from builder.resolve.query import RawQuery, parse_query

M = real()
S = small()


def refusal(m: Matrix, **flags: str | tuple[str, ...]) -> str:
    with pytest.raises(UsageError) as raised:
        query(m, **flags)
    return str(raised.value)


def test_an_unknown_os_names_the_nearest_and_every_known_one() -> None:
    two = replace(S, os=(*S.os, fake_os("ubuntu22.04", "2.35", "3.10")))
    assert refusal(two, os="debian11") == (
        "--os: 'debian11' is not an OS base in the matrix (did you mean 'debian12'?) (known: debian12, ubuntu22.04)"
    )


def test_an_unknown_arch_lists_the_known_ones_without_the_suffixed() -> None:
    sm_90a = '[[arch]]\nname = "sm_90a"\nfamily = "Hopper"\nnvcc_added = "12.0"\nsource = "nv"\n\n'
    hopper_a = small(edit(BASE, "[[cudnn]]", sm_90a + "[[cudnn]]"))
    assert [a.name for a in hopper_a.archs] == ["sm_37", "sm_86", "sm_89", "sm_90", "sm_90a"]
    assert refusal(hopper_a, arch="sm_91") == (
        "--arch: 'sm_91' is not a GPU architecture in the matrix (did you mean 'sm_90'?) "
        "(known: sm_37, sm_86, sm_89, sm_90)"
    )


def test_a_listed_gpu_plus_words_suggests_at_most_three_of_the_names_it_extends() -> None:
    names = '"GeForce RTX 3090", "GeForce RTX 3090 Ti", "RTX 3090 Ti Super", "RTX 3090 Ti Super Max"'
    four = small(edit(BASE, 'gpus = ["GeForce RTX 3090"]', f"gpus = [{names}]"))
    assert refusal(four, gpu="RTX 3090 Ti Super Max Ultra") == (
        "--gpu: 'RTX 3090 Ti Super Max Ultra' is not a GPU the matrix knows (did you mean 'GeForce RTX 3090 Ti' "
        "(sm_86) or 'GeForce RTX 3090' (sm_86) or 'RTX 3090 Ti Super Max' (sm_86)?)"
    )


@pytest.mark.parametrize(
    ("typed", "name"),
    [
        ("RTX 40 90", "GeForce RTX 4090"),  # the words joined: spacing inside a model number does not matter
        ("H 100", "NVIDIA H100"),
        ("RTX8000", "Quadro RTX 8000"),  # the model number with its series word, written as one word
    ],
)
def test_a_gpu_name_is_matched_whatever_its_spacing(typed: str, name: str) -> None:
    assert query(M, gpu=typed).gpus[0].name == name


def _quadros(sm_86: int, sm_89: int) -> Matrix:
    """The small matrix with `sm_86` + `sm_89` more cards whose names all hold the word "Quadro"."""
    names = [f'"Quadro Q{n}"' for n in range(1, sm_86 + sm_89 + 1)]
    text = edit(BASE, 'gpus = ["GeForce RTX 3090"]', f"gpus = [{', '.join(names[:sm_86])}]")
    return small(edit(text, 'gpus = ["GeForce RTX 4090"]', f"gpus = [{', '.join(names[sm_86:])}]"))


def test_a_name_fitting_two_architectures_lists_up_to_eight_gpus() -> None:
    shown = ", ".join(f"Quadro Q{n} (sm_86)" for n in range(1, 5)) + ", "
    shown += ", ".join(f"Quadro Q{n} (sm_89)" for n in range(5, 9))
    assert refusal(_quadros(4, 4), gpu="Quadro") == (
        f"--gpu: 'Quadro' fits GPUs of different architectures: {shown}; name one of them"
    )
    assert refusal(_quadros(1, 1), gpu="Quadro") == (
        "--gpu: 'Quadro' fits GPUs of different architectures: Quadro Q1 (sm_86), Quadro Q2 (sm_89); name one of them"
    )


def test_a_name_fitting_more_than_eight_gpus_counts_the_rest() -> None:
    shown = ", ".join(f"Quadro Q{n} (sm_86)" for n in range(1, 6)) + ", "
    shown += ", ".join(f"Quadro Q{n} (sm_89)" for n in range(6, 9))
    assert refusal(_quadros(5, 4), gpu="Quadro") == (
        f"--gpu: 'Quadro' fits GPUs of different architectures: {shown} and 1 more; name one of them"
    )


def test_an_arch_against_a_gpu_names_the_gpu_as_typed() -> None:
    assert refusal(M, gpu=("4090", "H100"), arch=("sm_86", "sm_89")) == (
        "--arch sm_86 sm_89 contradicts --gpu 'H100', which is sm_90"
    )
    # the same card named twice is one GPU, and the text of each --gpu stays its own
    assert refusal(M, gpu=("RTX 4090", "4090", "H100"), arch="sm_89") == (
        "--arch sm_89 contradicts --gpu 'H100', which is sm_90"
    )


def test_a_gpu_named_twice_agrees_with_its_arch() -> None:
    q = query(M, gpu=("RTX 4090", "4090"), arch="sm_89")
    assert ([g.name for g in q.gpus], [a.name for a in q.archs]) == (["GeForce RTX 4090"], ["sm_89"])
    q = query(M, gpu=("RTX 4090", "RTX 4090"), arch="sm_89")
    assert ([g.name for g in q.gpus], [a.name for a in q.archs]) == (["GeForce RTX 4090"], ["sm_89"])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"torch": "2.x"}, "--torch: '2.x' is not a version or version range (examples: 2.5, 2.5.1, '>=2.4,<2.7')"),
        ({"python": "3.x"}, "--python: '3.x' is not a version or version range (examples: 3.11, '>=3.10,<3.13')"),
        ({"onnxruntime": "abc"}, "--onnxruntime: 'abc' is not a dotted version like 2.5.1"),
    ],
)
def test_a_bad_version_names_its_flag(flags: dict[str, str], message: str) -> None:
    assert refusal(M, **flags) == message


def test_a_grace_gpu_chooses_arm64_as_if_given() -> None:
    q = parse_query(M, RawQuery(gpus=("GH200",)))
    assert (q.platform, q.platform_given) == (Platform.ARM64, True)


def test_without_platform_or_grace_gpu_the_platform_is_this_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    for machine, platform in (
        (Platform.ARM64, Platform.ARM64),
        (Platform.AMD64, Platform.AMD64),
        (None, Platform.AMD64),
    ):
        monkeypatch.setattr(Platform, "here", classmethod(lambda cls, found=machine: found))
        q = parse_query(M, RawQuery(gpus=("RTX 4090",)))
        assert (q.platform, q.platform_given) == (platform, False), machine
