"""Reading a remote wheel's METADATA by HTTP range requests (builder/upstream/lazywheel.py): from the recorded
byte ranges of two real torch wheels (dist-info at the head of the archive, and at its tail), and from
wheels built here: small ones, zip64, truncated, damaged, without METADATA, a server without Range
support, a redirect."""

from __future__ import annotations

import struct
import zlib

import pytest
from http_kit import Answer, Net
from upstream_kit import SparseFile, build_wheel, recorded_metadata, serve_range

from builder.net.http import Policy
from builder.upstream.lazywheel import TAIL, WHOLE, WheelError, read_metadata
from builder.upstream.wheels import parse_metadata, pin_text, pins

URL = "https://files.example/torch.whl"


def serving(body: bytes | SparseFile, *, ranges: bool = True) -> Net:
    return Net().on(lambda sent: serve_range(sent, body, ranges=ranges) if sent.url == URL else None)


@pytest.mark.parametrize(
    ("filename", "requests", "cudnn"),
    [
        # 2.5.1 keeps .dist-info at the head of its central directory: tail, head of the directory, member
        ("torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl", 3, "nvidia-cudnn-cu12==9.1.0.70"),
        # 2.14.1 keeps it near the end: the tail holds its entry
        ("torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", 2, "nvidia-cudnn-cu13==9.24.0.43"),
    ],
)
def test_a_real_torch_wheel_costs_a_few_requests_and_about_100_kb(filename: str, requests: int, cudnn: str) -> None:
    net = serving(SparseFile.recorded(filename))
    http = net.http()
    meta = parse_metadata(read_metadata(http, URL))
    assert meta.name == "torch"
    assert cudnn in {pin_text(r) for r in pins(meta, "3.11", "linux/amd64").values()}
    assert http.counters.requests == requests
    assert http.counters.bytes < 150_000
    assert net.sent[0].headers["Range"] == f"bytes=-{TAIL}"


def test_a_small_wheel_is_read_in_one_request() -> None:
    wheel = build_wheel(
        "torchvision-0.20.1-cp311-cp311-manylinux1_x86_64.whl", recorded_metadata("torchvision", "0.20.1")
    )
    assert len(wheel) < TAIL
    http = serving(wheel).http()
    assert parse_metadata(read_metadata(http, URL)).version == "0.20.1"
    assert http.counters.requests == 1


@pytest.mark.parametrize("dist_info_first", [True, False])
def test_large_built_wheels_either_way_round(dist_info_first: bool) -> None:
    wheel = build_wheel(
        "w-1.0-py3-none-any.whl", "Name: w\nVersion: 1.0\n", payload=400_000, dist_info_first=dist_info_first
    )
    http = serving(wheel).http()
    assert read_metadata(http, URL) == "Name: w\nVersion: 1.0\n"
    assert http.counters.bytes < TAIL + 40_000


def test_a_redirect_to_the_files_host_is_followed_for_every_range() -> None:
    wheel = build_wheel("w-1.0-py3-none-any.whl", "Name: w\nVersion: 1.0\n", payload=200_000, dist_info_first=True)
    net = Net()
    net.route("GET", "https://index.example/w.whl", Answer(302, b"", {"Location": URL}))
    net.on(lambda sent: serve_range(sent, wheel) if sent.url == URL else None)
    assert read_metadata(net.http(), "https://index.example/w.whl").startswith("Name: w")
    assert [s.url for s in net.sent].count(URL) >= 2


def test_a_truncated_wheel_is_a_clear_error() -> None:
    wheel = build_wheel("w-1.0-py3-none-any.whl", "Name: w\nVersion: 1.0\n", payload=200_000)
    with pytest.raises(WheelError, match=r"no end-of-central-directory record \(not a zip, or truncated\)$"):
        read_metadata(serving(wheel[:-30]).http(), URL)


def test_a_wheel_cut_in_the_middle_points_outside_itself() -> None:
    wheel = build_wheel("w-1.0-py3-none-any.whl", "Name: w\nVersion: 1.0\n", payload=200_000, dist_info_first=True)
    cut = wheel[:1000] + wheel[150_000:]  # the directory still says where the members were
    with pytest.raises(WheelError, match=r"(outside the file|past the end|no local header)"):
        read_metadata(serving(cut).http(), URL)


def test_a_damaged_member_fails_its_crc() -> None:
    wheel = bytearray(build_wheel("w-1.0-py3-none-any.whl", "Name: w\nVersion: 1.0\n" + "x" * 100, payload=1000))
    at = wheel.find(b"PK\x03\x04", wheel.find(b"w-1.0.dist-info/METADATA") - 60)
    name_len, extra_len = struct.unpack("<HH", wheel[at + 26 : at + 30])
    data = at + 30 + name_len + extra_len
    stored = zlib.compress(b"Name: w\nVersion: 2.0\n" + b"x" * 100)[2:-4]
    wheel[data : data + len(stored)] = stored
    with pytest.raises(WheelError, match=r"(fails its CRC check|does not inflate)"):
        read_metadata(serving(bytes(wheel)).http(), URL)


def test_a_wheel_without_metadata_says_so() -> None:
    wheel = build_wheel("w-1.0-py3-none-any.whl", "Name: w\n").replace(
        b"w-1.0.dist-info/METADATA", b"w-1.0.dist-info/METADAT_"
    )
    with pytest.raises(WheelError, match=r"no \.dist-info/METADATA in the wheel$"):
        read_metadata(serving(wheel).http(), URL)


def test_a_zip64_archive_is_read_through_its_zip64_record() -> None:
    wheel = _as_zip64(build_wheel("w-1.0-py3-none-any.whl", "Name: w\nVersion: 1.0\n", payload=100_000))
    assert read_metadata(serving(wheel).http(), URL).startswith("Name: w")


def test_a_server_without_range_support_is_read_whole_only_when_small() -> None:
    small = build_wheel("w-1.0-py3-none-any.whl", "Name: w\nVersion: 1.0\n", payload=100_000)
    http = serving(small, ranges=False).http()
    assert read_metadata(http, URL).startswith("Name: w")
    assert http.counters.requests == 1
    big = bytes(WHOLE + 1)
    with pytest.raises(WheelError, match=r"the server ignores HTTP range requests"):
        read_metadata(serving(big, ranges=False).http(), URL)


def test_a_files_host_that_errors_is_named() -> None:
    net = Net().on(lambda sent: Answer(403, b"denied"))
    with pytest.raises(WheelError, match=r"answered HTTP 403 to a range request$"):
        read_metadata(net.http(Policy(workers=1)), URL)


def _as_zip64(data: bytes) -> bytes:
    """Rewrite a zip's end records the way zip64 writers do: EOCD fields 0xFFFF/0xFFFFFFFF, the real values
    in a zip64 end record found through its locator."""
    at = data.rfind(b"PK\x05\x06")
    fields = struct.unpack("<IHHHHIIH", data[at : at + 22])
    entries, size, offset = fields[4], fields[5], fields[6]
    record = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, entries, entries, size, offset)
    locator = struct.pack("<IIQI", 0x07064B50, 0, at, 1)
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return data[:at] + record + locator + eocd
