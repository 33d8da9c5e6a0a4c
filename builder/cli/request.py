"""One typed request per command: click's parameters -> one frozen dataclass, validated once.

A command's body takes its request instead of a parameter per flag:

    @click.command("smoke")
    @click.option("--gpus", ...)
    @takes(SmokeFlags)
    def smoke_cmd(flags: SmokeFlags) -> None: ...

The request's `__post_init__` checks the flags that need no file, engine or matrix (in the order the command
reported them before), so a bad flag is refused before anything is asked. A request field named `shared`
receives the parameters the request has no field for: the flags a command shares with others and that one
shared reader takes (render's and build's combination and image flags: common.prepare; the upstream commands'
client flags: upstream_cmd.clients).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

R = TypeVar("R")
SHARED = "shared"


def request_from(kwargs: dict[str, Any], kind: type[R]) -> R:
    """The request of type `kind` from click's parameters, by name. A field no parameter fills, or a parameter no
    field takes (unless the request has `shared`), is a mistake in the command: a TypeError at once."""
    names = [f.name for f in fields(kind) if f.init]  # type: ignore[arg-type]  # kind is a dataclass
    own = [n for n in names if n != SHARED]
    missing = [n for n in own if n not in kwargs]
    if missing:
        raise TypeError(f"{kind.__name__}: no click parameter for {', '.join(missing)}")
    values = {n: kwargs[n] for n in own}
    rest = {k: v for k, v in kwargs.items() if k not in values}
    if SHARED in names:
        values[SHARED] = rest
    elif rest:
        raise TypeError(f"{kind.__name__}: no field for the click parameter(s) {', '.join(sorted(rest))}")
    return kind(**values)


def takes(kind: type[R]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorate a command body `(ctx, request)` or `(request)`: click calls the wrapper with its parameters as
    keywords (and the context first with @click.pass_context); the body gets one request of type `kind`."""

    def wrap(body: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(body)
        def command(*args: Any, **kwargs: Any) -> None:
            body(*args, request_from(kwargs, kind))

        return command

    return wrap
