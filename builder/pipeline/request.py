"""One request -> what to build: the best combination for the query that these options can build, its plan, and
the flavors `--target` selects. The one library entry render, build and the exports share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from builder.core.kinds import Flavor, Platform, Target
from builder.matrix.model import Matrix
from builder.pipeline.plan import Plan, make_plan
from builder.pipeline.project_plan import ProjectPlan
from builder.render.options import RenderOptions
from builder.render.spec import render_problem
from builder.resolve.choose import Choice, choose
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.resolver import evaluate


@dataclass(frozen=True)
class Chosen:
    choice: Choice
    plan: Plan
    flavors: tuple[Flavor, ...]
    notes: tuple[str, ...]  # what --target all left out, and why
    more: tuple[Plan, ...] = ()  # --platform A,B: the same combination's plans for the other platforms
    project: ProjectPlan | None = None  # in a project: its image, over plan's image of flavors[0]

    @property
    def plans(self) -> tuple[Plan, ...]:
        return (self.plan, *self.more)


def buildable_problem(m: Matrix, options: RenderOptions) -> Callable[[Combination], str | None]:
    """Why a combination cannot be rendered with these options (None: it can): the chosen strategy must find
    its base images (cuda-base needs a published nvidia/cuda image)."""

    def problem(c: Combination) -> str | None:
        return render_problem(m, c, options.strategy)

    return problem


def choose_plan(m: Matrix, q: Query, options: RenderOptions, target: Target) -> Chosen:
    choice = choose(m, q, buildable_problem(m, options))
    plan = make_plan(m, choice.result.combo, options)
    flavors, notes = select_flavors(plan, target)
    return Chosen(choice, plan, flavors, notes)


def choose_plans(
    m: Matrix, q: Query, options: RenderOptions, target: Target, platforms: tuple[Platform, ...]
) -> Chosen:
    """One combination for several platforms (a multi-platform image): the best one that is valid and buildable
    on every platform asked, planned once per platform."""
    first, others = platforms[0], platforms[1:]
    f, buildable = Facts(m), buildable_problem(m, options)

    def problem(c: Combination) -> str | None:
        found = buildable(c)
        for platform in others if found is None else ():
            failure = evaluate(f, replace(q, platform=platform), replace(c, platform=platform)).first_failure
            if failure is not None:
                return f"not on {platform.value}: {failure.reason}"
        return found

    choice = choose(m, replace(q, platform=first), problem)
    combo = choice.result.combo
    plan = make_plan(m, combo, options)
    flavors, notes = select_flavors(plan, target)
    more = tuple(make_plan(m, replace(combo, platform=p), options) for p in others)
    for other in more:
        for flavor in flavors:
            other.target(flavor)  # a flavor one platform cannot have: one RenderError with the reason
    return Chosen(choice, plan, flavors, notes, more)


def select_flavors(plan: Plan, target: Target) -> tuple[tuple[Flavor, ...], tuple[str, ...]]:
    """`--target all`: every flavor the combination can have (a note for each it cannot); a named flavor must
    be available (else one RenderError with the reason)."""
    if target is not Target.ALL:
        flavors = target.flavors()
        for flavor in flavors:
            plan.target(flavor)
        return flavors, ()
    missing = dict(plan.unavailable)
    kept = tuple(f for f in Flavor.family() if f not in missing)
    notes = tuple(
        f"--target all: no {f.value} image for {plan.id}: {reason}"
        for f, reason in plan.unavailable
        if f in Flavor.family()
    )
    return kept, notes
