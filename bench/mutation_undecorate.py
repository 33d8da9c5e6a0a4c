"""Decorated functions made plain for mutmut, in its copy of the checkout only.

mutmut 3 does not mutate a decorated function (its file_mutation.py: a decorator runs when the function is defined,
and a copy per mutant would run it again): every smoke check (`@check(...)`), property, cached_property and context
manager of a group went untested by it. In the copy, `@d1 @d2 def f` becomes `def f` followed by `f = d1(d2(f))`:
the same object under the same name, defined in the same order (the smoke checks' registry keeps its order), now
with a plain `def` that mutmut mutates and wraps in its trampoline, which the decorators then wrap.

Left as they are: @staticmethod and @classmethod (mutmut handles them, alone), @overload and @abstractmethod (their
bodies are not run), a property's @x.setter / @x.deleter (the plain `def x` would hide the property), and a property
that has one, nested functions (mutmut mutates top-level functions and methods only).
"""

from __future__ import annotations

import ast

KEPT = {"staticmethod", "classmethod", "overload", "abstractmethod", "typing.overload", "abc.abstractmethod"}


def undecorate(source: str) -> str:
    """The module's text with its decorated top-level functions and methods rewritten as plain defs + assignment."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = [e for e in (_rewrite(node, source, where) for node, where in _functions(tree)) if e is not None]
    for decorators, after, assignment in sorted(edits, reverse=True):  # from the end: earlier lines stay where they are
        if not lines[after - 1].endswith("\n"):
            lines[after - 1] += "\n"
        lines.insert(after, assignment)
        del lines[decorators[0] : decorators[1] + 1]
    return "".join(lines)


def _functions(tree: ast.Module) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.ClassDef | None]]:
    found: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.ClassDef | None]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((node, None))
        elif isinstance(node, ast.ClassDef):
            found += [(n, node) for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return found


def _rewrite(
    node: ast.FunctionDef | ast.AsyncFunctionDef, source: str, where: ast.ClassDef | None
) -> tuple[tuple[int, int], int, str] | None:
    """(the decorators' first and last line, 0-based), the line to insert after (1-based: the def's last), the
    assignment that applies them; None for a function left as it is."""
    if not node.decorator_list or any(_kept(d) for d in node.decorator_list):
        return None
    if where is not None and _has_accessor(where, node.name):
        return None
    texts = [ast.get_source_segment(source, d) for d in node.decorator_list]
    if any(t is None or "\n" in t for t in texts):
        return None  # a decorator over several lines: left alone rather than rewritten wrongly
    call = node.name
    for text in reversed(texts):  # the decorator nearest the def applies first
        call = f"{text}({call})"
    indent = " " * node.col_offset
    first = node.decorator_list[0].lineno - 1
    last = node.decorator_list[-1].end_lineno or node.decorator_list[-1].lineno
    assert node.end_lineno is not None
    return (first, last - 1), node.end_lineno, f"{indent}{node.name} = {call}\n"


def _kept(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = ast.unparse(target)
    return name in KEPT or name.endswith((".setter", ".deleter", ".getter"))


def _has_accessor(cls: ast.ClassDef, name: str) -> bool:
    """Whether the class gives `name` a setter, deleter or getter (`@name.setter`): its property stays decorated."""
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                if ast.unparse(decorator) in (f"{name}.setter", f"{name}.deleter", f"{name}.getter"):
                    return True
    return False
