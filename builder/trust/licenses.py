"""A component's license in the SBOM (builder/trust/sbom.py): a Debian package's short names (DEP-5, from its
copyright file) as an SPDX expression where every name has an SPDX id, else as a license name, Debian's own
words; a Python distribution's license as its metadata gives it.

Debian's names differ from SPDX's in a few regular ways (the copyright-format 1.0 table of short names): `GPL-2+`
is `GPL-2.0-or-later`, `LGPL-2.1` is `LGPL-2.1-only`, `Expat` is `MIT`; most others (`Apache-2.0`, `Zlib`,
`BSD-3-clause`, `ISC`) are SPDX ids already, spelled in another case. A name without an SPDX id (`public-domain`,
`Artistic`, `GPL-3+ with Bison exception`) makes the whole package's license a name: an expression is SPDX or it
is not one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from builder.image.inventory import debian_license

if TYPE_CHECKING:  # cyclonedx's model is imported only where an SBOM is made (builder/trust/sbom.py)
    from cyclonedx.model.license import License

# Debian short names whose SPDX id is another word (copyright-format 1.0, "License specification").
RENAMED = {"expat": "MIT"}
# The GNU licenses: Debian writes the version as the license does (GPL-2, LGPL-2.1) and `+` for "or later".
_GNU = re.compile(r"(A?GPL|LGPL|GFDL)-(\d+(?:\.\d+)?)(\+?)", re.IGNORECASE)
# SPDX's own name for a license it does not list (PEP 639 allows it; NVIDIA's newer wheels use it): an expression,
# though the SPDX license list (the library's check) does not hold it.
_REF = re.compile(r"LicenseRef-[A-Za-z0-9.-]+")
OPERATORS = {"and": "AND", "or": "OR"}  # DEP-5's `with` names an exception by words, which SPDX does not know


def spdx_id(name: str) -> str | None:
    """The SPDX id of one Debian short name; None where SPDX has none."""
    from cyclonedx.spdx import fixup_id

    gnu = _GNU.fullmatch(name)
    if gnu:
        version = gnu[2] if "." in gnu[2] else f"{gnu[2]}.0"
        name = f"{gnu[1].upper()}-{version}-{'or-later' if gnu[3] else 'only'}"
    return fixup_id(RENAMED.get(name.lower(), name))


def spdx_expression(names: Sequence[str]) -> str | None:
    """A package's names (each covers some of its files) as one SPDX expression; None where one has no SPDX id
    or its syntax is more than `A`, `A or B`, `A and B` (DEP-5's comma lists and `with` are left as written)."""
    from cyclonedx.spdx import is_expression

    parts = [_one(name) for name in names]
    if not parts or any(part is None for part in parts):
        return None
    joined = " AND ".join(f"({p})" if " OR " in str(p) and len(parts) > 1 else str(p) for p in parts)
    return joined if is_expression(joined) else None


def _one(name: str) -> str | None:
    words = name.replace(",", " , ").split()
    if len(words) % 2 == 0:  # "GPL-3+ with Bison exception", a dangling operator
        return None
    ids = [spdx_id(word) for word in words[::2]]
    operators = [OPERATORS.get(word.lower()) for word in words[1::2]]
    if None in ids or None in operators:
        return None
    tokens = [token for pair in zip(ids, [*operators, ""], strict=True) for token in pair if token]
    return " ".join(str(t) for t in tokens)


def debian_component_license(names: Sequence[str]) -> License:
    """The CycloneDX license of a Debian package that names `names`: an SPDX id or expression, else the name."""
    from cyclonedx.contrib.license.factories import LicenseFactory

    expression = spdx_expression(names)
    factory = LicenseFactory()
    if expression is not None:
        return factory.make_from_string(expression)
    return factory.make_with_name(str(debian_license(list(names))))


def python_component_license(text: str) -> License:
    """A distribution's license as its metadata words it (PEP 639's expression, a License field, classifiers):
    an SPDX id or expression where it is one, else the name (NVIDIA's wheels: "NVIDIA Proprietary Software",
    `LicenseRef-NVIDIA-Proprietary`)."""
    from cyclonedx.contrib.license.factories import LicenseFactory
    from cyclonedx.model.license import LicenseExpression

    if _REF.fullmatch(text):
        return LicenseExpression(text)
    return LicenseFactory().make_from_string(text)
