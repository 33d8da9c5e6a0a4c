"""Who the container runs as (builder/host/identity.py): the caller, also through sudo, with a name inside."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from builder.engine.interactive import ContainerSpec, docker_run_argv
from builder.host.identity import Caller, caller, env_of, identity_files

PASSWD = b"root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
GROUP = b"root:x:0:\nnogroup:x:65534:\n"


def test_root_through_sudo_is_the_sudo_caller_and_only_then() -> None:
    sudo = {"SUDO_UID": "1000", "SUDO_GID": "1001", "SUDO_USER": "ana"}
    assert caller(sudo, uid=0, gid=0) == Caller(1000, 1001, "ana")
    assert caller(sudo, uid=0, gid=0).user == "1000:1001"
    assert caller(sudo, uid=1000, gid=1000).user == "1000:1000"  # not root: its own ids, whatever the environment
    assert caller({}, uid=0, gid=0).user == "0:0"  # a root shell without sudo is root
    assert caller({"SUDO_UID": "x; rm", "SUDO_GID": "1"}, uid=0, gid=0).user == "0:0"  # not numbers: not taken


@pytest.mark.parametrize(
    ("name", "uid", "given"),
    [("ana", 1000, "ana"), ("Ana:x", 1000, "torchyard1000"), ("a\nb", 7, "torchyard7"), ("", 1000, "torchyard1000")],
)
def test_a_name_a_passwd_file_cannot_hold_is_replaced(name: str, uid: int, given: str) -> None:
    assert caller({"SUDO_UID": str(uid), "SUDO_GID": "100", "SUDO_USER": name}, uid=0, gid=0).name == given


def test_the_environment_names_the_user() -> None:
    assert env_of(Caller(1000, 1000, "ana")) == ("USER=ana", "LOGNAME=ana")


def test_the_image_s_files_get_the_caller_and_are_kept_by_content(tmp_path: Path) -> None:
    files = {"/etc/passwd": PASSWD, "/etc/group": GROUP}
    found = identity_files(Caller(1000, 1001, "ana"), lambda path: files.get(path), tmp_path)  # noqa: PLW0108
    assert found is not None
    assert found.passwd.read_bytes() == PASSWD + b"ana:x:1000:1001:torchyard run:/tmp:/bin/sh\n"
    assert found.group.read_bytes() == GROUP + b"ana:x:1001:\n"
    assert oct(found.passwd.stat().st_mode & 0o777) == "0o644"
    again = identity_files(Caller(1000, 1001, "ana"), lambda path: files.get(path), tmp_path)  # noqa: PLW0108
    assert again == found
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([found.passwd.name, found.group.name])


def test_an_image_that_knows_the_uid_or_has_no_passwd_gets_nothing(tmp_path: Path) -> None:
    known = {"/etc/passwd": PASSWD + b"ubuntu:x:1000:1000::/home/ubuntu:/bin/bash\n", "/etc/group": GROUP}
    assert identity_files(Caller(1000, 1000, "ana"), lambda path: known.get(path), tmp_path) is None  # noqa: PLW0108
    assert identity_files(Caller(1000, 1000, "ana"), lambda path: None, tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_a_name_the_image_has_for_another_uid_is_not_taken_and_a_known_group_is_kept(tmp_path: Path) -> None:
    files = {"/etc/passwd": PASSWD + b"ana:x:1001:1001::/home/ana:/bin/sh\n", "/etc/group": GROUP + b"staff:x:50:\n"}
    found = identity_files(Caller(1000, 50, "ana"), lambda path: files.get(path), tmp_path)  # noqa: PLW0108
    assert found is not None
    assert found.passwd.read_text().splitlines()[-1] == "torchyard1000:x:1000:50:torchyard run:/tmp:/bin/sh"
    assert found.group.read_bytes() == GROUP + b"staff:x:50:\n"


def test_the_run_line_mounts_the_files_read_only_after_the_user() -> None:
    files = (("/c/passwd-1", "/etc/passwd"), ("/c/group-1", "/etc/group"))
    spec = ContainerSpec(image="img", name="n", user="1000:1000", env=("USER=ana", "LOGNAME=ana"), files=files,
                         interactive=False)  # fmt: skip
    assert shlex.join(docker_run_argv(spec)) == (
        "docker run --rm --name n --ipc=host --user 1000:1000 -e HOME=/tmp -v /c/passwd-1:/etc/passwd:ro "
        "-v /c/group-1:/etc/group:ro -e USER=ana -e LOGNAME=ana img"
    )


def test_this_process_is_its_own_caller_without_sudo(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SUDO_UID", "SUDO_GID", "SUDO_USER"):
        monkeypatch.delenv(name, raising=False)
    assert caller().user == f"{os.getuid()}:{os.getgid()}"
