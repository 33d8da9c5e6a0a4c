"""Edges of the reader of an image's distributions (builder/image/installed.py): a file that cannot be read is not
recorded (nothing made up), and a WHEEL's Tag lines are read as written."""

from __future__ import annotations

import email.parser
from email.message import Message
from importlib import metadata
from pathlib import Path

from builder.image import installed


class _Unreadable:
    """A distribution whose files other than METADATA raise OSError when read (an I/O error, a symlink loop)."""

    def __init__(self, name: str, version: str) -> None:
        self.metadata: Message = email.parser.Parser().parsestr(f"Name: {name}\nVersion: {version}\n")
        self.version = version

    def read_text(self, name: str) -> str | None:
        raise OSError(5, "Input/output error", name)


def test_files_that_cannot_be_read_are_not_recorded() -> None:
    assert installed.describe([_Unreadable("Broken_Dist", "1.0")]) == [
        {"name": "broken-dist", "version": "1.0", "tags": [], "installer": None, "direct_url": None}
    ]


def test_an_installer_file_in_a_symlink_loop_is_not_recorded(tmp_path: Path) -> None:
    info = tmp_path / "looped-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: looped\nVersion: 1.0\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nTag: py3-none-any\n")
    (info / "INSTALLER").symlink_to(info / "INSTALLER")  # reading it fails with ELOOP, an OSError
    found = installed.describe(list(metadata.distributions(path=[str(tmp_path)])))
    assert found == [
        {"name": "looped", "version": "1.0", "tags": ["py3-none-any"], "installer": None, "direct_url": None}
    ]


def test_a_tag_is_everything_after_the_first_colon_of_its_line(tmp_path: Path) -> None:
    info = tmp_path / "odd-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: odd\nVersion: 1.0\n")
    wheel = "Wheel-Version: 1.0\nTag:py3-none-any\nTag:  cp311-cp311-linux_x86_64 \nTag: x:y:z\nTagged: no\n"
    (info / "WHEEL").write_text(wheel)
    (found,) = installed.describe(list(metadata.distributions(path=[str(tmp_path)])))
    assert found["tags"] == ["cp311-cp311-linux_x86_64", "py3-none-any", "x:y:z"]
