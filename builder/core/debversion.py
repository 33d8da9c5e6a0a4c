"""Debian package versions compared as dpkg compares them ([epoch:]upstream[-revision]; `~` sorts before
everything, even the end; letters before other characters; runs of digits as numbers): deb-version(7)."""

from __future__ import annotations

import functools


def _split(version: str) -> tuple[int, str, str]:
    epoch, colon, rest = version.partition(":")
    if not colon:
        epoch, rest = "0", version
    upstream, dash, revision = rest.rpartition("-")
    if not dash:
        upstream, revision = rest, ""
    return int(epoch) if epoch.isdigit() else 0, upstream, revision


def _order(char: str) -> int:
    if char == "" or char.isdigit():
        return 0
    if char.isascii() and char.isalpha():
        return ord(char)
    if char == "~":
        return -1
    return ord(char) + 256


def _part(a: str, b: str) -> int:
    """dpkg's verrevcmp: alternating non-digit and digit runs."""
    i = j = 0
    while i < len(a) or j < len(b):
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac, bc = _order(a[i : i + 1]), _order(b[j : j + 1])
            if ac != bc:
                return ac - bc
            i, j = i + 1, j + 1
        start_i, start_j = i, j
        while i < len(a) and a[i].isdigit():
            i += 1
        while j < len(b) and b[j].isdigit():
            j += 1
        diff = int(a[start_i:i] or 0) - int(b[start_j:j] or 0)
        if diff:
            return diff
    return 0


def compare(a: str, b: str) -> int:
    """< 0, 0 or > 0 as dpkg --compare-versions a lt|eq|gt b."""
    ea, ua, ra = _split(a)
    eb, ub, rb = _split(b)
    return (ea - eb) or _part(ua, ub) or _part(ra, rb)


key = functools.cmp_to_key(compare)
