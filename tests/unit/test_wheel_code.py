"""builder/upstream/wheel_code.py on wheels built here: a zip whose CUDA provider is a synthetic ELF64 library
(tests/unit/fatbin_kit.py) with a fat binary and a dynamic section. The real wheels' lists (read the same way,
checked against cuobjdump) are in matrix.toml's [onnxruntime.<platform>] tables and their sources."""

from __future__ import annotations

import hashlib
import io
import re
import tomllib
import zipfile
from pathlib import Path

import pytest
from fatbin_kit import AARCH64, ELF, PTX, Entry, container, entry, provider, ptx, raw_container, sass
from http_kit import Net
from upstream_kit import serve_range

from builder.upstream.lazywheel import member_checksum
from builder.upstream.wheel_code import ORT_CUDA_PROVIDER, WheelCodeError, code_table, needed_libraries, read_wheel_code

ARCH_SPECIFIC = 0x100000  # the entry flag cuobjdump names with an `a` (sm_90a)


def wheel(tmp_path: Path, name: str, library: bytes, member: str = ORT_CUDA_PROVIDER) -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("onnxruntime/__init__.py", "")
        archive.writestr(member, library)
        archive.writestr(
            f"{name.split('-', maxsplit=1)[0]}-{name.split('-')[1]}.dist-info/METADATA", "Name: onnxruntime-gpu\n"
        )
    return path


def arch_specific(arch: int, kind: int = ELF) -> bytes:
    return entry(Entry(kind, arch), flags=ARCH_SPECIFIC)


def test_the_provider_of_a_wheel_gives_its_sass_ptx_and_linked_libraries(tmp_path: Path) -> None:
    fat = container(*sass(75, 80, 86, 89)) + raw_container(arch_specific(90) + arch_specific(120))
    library = provider(fat, "libcublas.so.13", "libcudart.so.13", "libc.so.6")
    path = wheel(tmp_path, "onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl", library)
    code = read_wheel_code(path)
    assert (code.sass, code.ptx) == (("7.5", "8.0", "8.6", "8.9", "9.0a", "12.0a"), ())
    assert code.needed == ("libcublas.so.13", "libcudart.so.13", "libc.so.6")
    assert code.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert code.wheel == path.name and code.member == ORT_CUDA_PROVIDER
    assert code.counts == {"sm_75": 1, "sm_80": 1, "sm_86": 1, "sm_89": 1, "sm_90a": 1, "sm_120a": 1}


def test_ptx_is_read_apart_and_an_arch_specific_ptx_keeps_its_suffix(tmp_path: Path) -> None:
    # onnxruntime-gpu 1.23.0 carried compute_90a (not forward compatible), 1.23.2 compute_90 again.
    fat = container(*sass(80, 86), *ptx(120)) + raw_container(arch_specific(90, kind=PTX))
    path = wheel(
        tmp_path, "onnxruntime_gpu-1.0.0-cp312-cp312-manylinux_2_34_aarch64.whl", provider(fat, machine=AARCH64)
    )
    code = read_wheel_code(path)
    assert (code.sass, code.ptx, code.needed) == (("8.0", "8.6"), ("9.0a", "12.0"), ())


def test_a_wheel_without_the_library_or_a_library_that_is_not_elf_is_refused(tmp_path: Path) -> None:
    path = wheel(tmp_path, "onnxruntime_gpu-1.0.0-cp312-cp312-manylinux_2_28_x86_64.whl", b"x", member="other.so")
    with pytest.raises(WheelCodeError, match=f"has no {re.escape(ORT_CUDA_PROVIDER)}"):
        read_wheel_code(path)
    text = tmp_path / "text.so"
    text.write_bytes(b"not an ELF file at all, but long enough to be read")
    with pytest.raises(WheelCodeError, match="not an ELF64 little-endian file"):
        needed_libraries(text)


def test_the_printed_table_is_what_matrix_toml_records(tmp_path: Path) -> None:
    fat = container(*sass(89)) + raw_container(arch_specific(90))
    path = wheel(tmp_path, "onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_34_aarch64.whl", provider(fat))
    code = read_wheel_code(path)
    text = code_table(code, "onnxruntime", "arm64", "ort-wheel-1311-arm64")
    assert text.startswith(f"# read from {path.name}: {ORT_CUDA_PROVIDER} links nothing\n[onnxruntime.arm64]\n")
    table = tomllib.loads(text)["onnxruntime"]["arm64"]
    assert table == {
        "sass": ["8.9", "9.0a"],
        "ptx": [],
        "wheel": path.name,
        "sha256": code.sha256,
        "source": "ort-wheel-1311-arm64",
    }


def test_the_providers_checksum_comes_from_the_central_directory_alone() -> None:
    library = provider(container(*sass(80)))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(ORT_CUDA_PROVIDER, library)
        archive.writestr("onnxruntime_gpu-1.0.dist-info/METADATA", "Name: onnxruntime-gpu\n")
    body = buffer.getvalue()
    url = "https://files.example/ort.whl"
    net = Net().on(lambda sent: serve_range(sent, body) if sent.url == url else None)
    found = member_checksum(net.http(), url, re.compile(re.escape(ORT_CUDA_PROVIDER) + "$"))
    assert found == (zipfile.ZipFile(io.BytesIO(body)).getinfo(ORT_CUDA_PROVIDER).CRC, len(library))
