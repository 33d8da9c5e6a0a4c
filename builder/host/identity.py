"""Who the container runs as: the caller, not root, and with a name.

`torchyard run` and `doctor --check` start containers as the caller's UID:GID, so files written in /workspace
are theirs. Through sudo (the launcher's path when the Docker socket needs root) the process is root, and the
caller is SUDO_UID/SUDO_GID; only then: a root shell without sudo is root.

Inside, a UID the image does not know has no name: `whoami` fails, and `getpass.getuser()` (what torch.compile's
cache and many tools ask) raises. The container gets USER, LOGNAME and HOME in its environment, and where the
image lacks the UID, its own /etc/passwd and /etc/group with one line added, mounted read-only over the image's:
no file is written inside the container, so it works with `--read-only` too. The two files are kept in the
caller's cache folder, named by their content, so a printed `docker run` line runs as printed.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from builder.engine.interactive import HOME

NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")  # a name every passwd reader takes (useradd's NAME_REGEX)
FALLBACK = "torchyard"


@dataclass(frozen=True)
class Caller:
    uid: int
    gid: int
    name: str

    @property
    def user(self) -> str:
        return f"{self.uid}:{self.gid}"


def caller(environ: Mapping[str, str] | None = None, uid: int | None = None, gid: int | None = None) -> Caller:
    """The caller: SUDO_UID/SUDO_GID (and SUDO_USER) when this process is root through sudo, else its own ids."""
    environ = os.environ if environ is None else environ
    uid = os.getuid() if uid is None else uid
    gid = os.getgid() if gid is None else gid
    sudo_uid, sudo_gid = environ.get("SUDO_UID", ""), environ.get("SUDO_GID", "")
    if uid == 0 and sudo_uid.isdigit() and sudo_gid.isdigit():
        uid, gid = int(sudo_uid), int(sudo_gid)
        return Caller(uid, gid, _name(environ.get("SUDO_USER", ""), uid))
    return Caller(uid, gid, _name(_login(uid), uid))


def _login(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return ""


def _name(name: str, uid: int) -> str:
    return name if NAME.fullmatch(name) else (f"{FALLBACK}{uid}" if uid else "root")


def env_of(who: Caller) -> tuple[str, ...]:
    """What the container's environment says of its user (getpass.getuser() reads LOGNAME and USER first; HOME
    comes with --user, builder.engine.interactive)."""
    return (f"USER={who.name}", f"LOGNAME={who.name}")


@dataclass(frozen=True)
class Identity:
    """The image's passwd and group with the caller added, as files on this machine (mounted read-only)."""

    passwd: Path
    group: Path


def identity_files(who: Caller, read: Callable[[str], bytes | None], cache: Path) -> Identity | None:
    """None when the image already knows the caller's UID (nothing to add), or its files cannot be read (no
    /etc/passwd: a distroless image; the environment still names the user)."""
    passwd, group = read("/etc/passwd"), read("/etc/group")
    if passwd is None or group is None:
        return None
    users = _entries(passwd)
    if any(fields[2:3] == [str(who.uid)] for fields in users):
        return None
    taken = {fields[0] for fields in users}
    name = who.name if who.name not in taken else f"{FALLBACK}{who.uid}"
    line = f"{name}:x:{who.uid}:{who.gid}:torchyard run:{HOME}:/bin/sh\n"
    groups = _entries(group)
    extra_group = "" if any(fields[2:3] == [str(who.gid)] for fields in groups) else f"{name}:x:{who.gid}:\n"
    return Identity(_keep(cache, "passwd", _ended(passwd) + line), _keep(cache, "group", _ended(group) + extra_group))


def _entries(data: bytes) -> list[list[str]]:
    text = data.decode("utf-8", errors="replace")
    return [line.split(":") for line in text.splitlines() if line and not line.startswith("#")]


def _ended(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if not text or text.endswith("\n") else text + "\n"


def _keep(cache: Path, kind: str, text: str) -> Path:
    """The file in the cache folder, named by its content (written once, atomically, readable by the engine)."""
    data = text.encode()
    path = cache / f"{kind}-{hashlib.sha256(data).hexdigest()[:16]}"
    if path.is_file() and path.read_bytes() == data:
        return path
    cache.mkdir(parents=True, exist_ok=True, mode=0o755)
    part = path.with_name(f".{path.name}.{os.getpid()}")
    part.write_bytes(data)
    part.chmod(0o644)
    part.replace(path)
    return path


def cache_folder(environ: Mapping[str, str] | None = None) -> Path:
    """$XDG_CACHE_HOME/torchyard/identity, else ~/.cache/torchyard/identity."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "torchyard" / "identity"
