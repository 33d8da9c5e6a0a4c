"""Issue 24: wrong one-line changes that the unit tier once let through, each kept here as a mutant.

Each Mutant names a module, a snippet of its source and what a wrong change made of it, and a check: a plain
test of the behaviour the snippet guards. `test_the_code_as_it_is_passes` runs every check on the real
module; `test_each_mutant_is_caught` applies the change to a copy of the module's source text, loads the copy
as a module of its own, and runs the same check on it, which must fail. So the proof that a check can fail
stays in the suite, and a refactoring that moves the snippet away fails loudly here (it must be found once).
"""

from __future__ import annotations

import importlib
import io
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from fake_engine import wall_off_the_engine
from host_kit import machine
from http_kit import Answer, Net, json_answer
from matrix_kit import BASE, combo, edit, real, small
from publish_kit import BOTH, REPO, PublishFakes, fakes_for

from builder.core.errors import TorchyardError
from builder.core.kinds import AliasStatus, Flavor, Platform, Strategy
from builder.host.probe import probe
from builder.host.runtime import RuntimeReading
from builder.net.http import Policy
from builder.publish.plan import plan_publish
from builder.resolve.query import RawQuery


@dataclass(frozen=True)
class Mutant:
    id: str
    module: str
    old: str
    new: str
    check: Callable[[ModuleType, Path], None]


def mutate(m: Mutant) -> ModuleType:
    """A copy of the module with `old` (which must occur exactly once) replaced by `new`, loaded on its own."""
    real_module = importlib.import_module(m.module)
    assert real_module.__file__ is not None
    source = Path(real_module.__file__).read_text(encoding="utf-8")
    assert source.count(m.old) == 1, f"{m.module}: {m.old!r} occurs {source.count(m.old)} times"
    name = f"{m.module}__mutant_{m.id.replace('-', '_')}"
    copy = ModuleType(name)
    copy.__file__ = real_module.__file__
    sys.modules[name] = copy  # dataclasses look their module up while the class is made
    try:
        exec(compile(source.replace(m.old, m.new), f"<mutant {m.id}>", "exec"), copy.__dict__)
    finally:
        del sys.modules[name]
    return copy


# --- the checks: each one a plain test of the behaviour, given the module to test -----------------------------


def redact_keeps_no_part_of_an_authorization_header(mod: ModuleType, _: Path) -> None:
    assert mod.redact("Authorization: Bearer eyJhbGciOi.abc") == "Authorization: ***"
    assert mod.redact("proxy-authorization=Basic dXNlcjpwYXNz") == "proxy-authorization=***"
    assert mod.redact("X-Api-Key: k3y") == "X-Api-Key: ***"


def redact_keeps_the_flag_and_drops_the_value_of_a_secret_argument(mod: ModuleType, _: Path) -> None:
    assert mod.redact("login --password hunter2 --user me") == "login --password *** --user me"
    assert mod.redact("--token=abc123 --api-key k") == "--token=*** --api-key ***"


def a_retried_upload_sends_its_whole_body_again(mod: ModuleType, _: Path) -> None:
    url = "https://registry.example/v2/team/torch/blobs/uploads/1"
    net = Net().route("PUT", url, Answer(503, b"busy"), Answer(201, b""))
    http = mod.Http(Policy(workers=1), session_factory=net.session, sleep=net.waits.append)
    reply = http.request("PUT", url, data=io.BytesIO(b"the blob"))
    assert reply.status == 201
    assert [s.body for s in net.sent] == [b"the blob", b"the blob"]


def an_expired_bearer_token_is_not_sent_again(mod: ModuleType, _: Path) -> None:
    realm = "https://auth.example/token"
    net = Net().route("GET", realm, json_answer({"token": "t1", "expires_in": 300}))
    authenticator = mod.Authenticator(net.http(), None, use_docker_login=False)
    now = [1000.0]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mod, "time", SimpleNamespace(monotonic=lambda: now[0]))
        challenge = mod.parse_challenge(f'Bearer realm="{realm}",service="registry.example"')
        assert authenticator.answer("registry.example", ("repository:team/torch:pull",), challenge)
        assert authenticator.headers("registry.example", ("repository:team/torch:pull",)) == {
            "Authorization": "Bearer t1"
        }
        now[0] += 300 - 10 - 0.5  # kept for its lifetime less 10 s ...
        assert authenticator.headers("registry.example", ("repository:team/torch:pull",)) != {}
        now[0] += 1.0  # ... and not a moment longer
        assert authenticator.headers("registry.example", ("repository:team/torch:pull",)) == {}
        assert authenticator.headers("registry.example", ("repository:team/torch:push",)) == {}


TAG = "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
ALIAS = "2.14-cuda13.0-py3.11-debian12-runtime"  # BOTH is on Debian 12, off the default platform


def a_multi_platform_alias_stays_when_its_index_is_held(mod: ModuleType, tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as patch:
        wall_off_the_engine(patch)
        fakes = fakes_for(BOTH, tmp_path)
        arm64_only = PublishFakes(fakes.m, [i for i in fakes.items if i.combo.platform is Platform.ARM64])
        settings = mod.PublishSettings(repo=REPO, out_root=tmp_path / "work")
        pplan = plan_publish(fakes.m, arm64_only.items, [], fakes.items)
        report = mod.publish(pplan, settings, [].append, arm64_only.factory, arm64_only.registry_for)
    [index] = report.indexes
    assert index.status is AliasStatus.HELD  # amd64 is not published: the index cannot be written
    [alias] = report.aliases
    assert (alias.alias, alias.status, alias.reason) == (ALIAS, AliasStatus.HELD, f"its index {TAG} was held")
    assert arm64_only.registry.written == []


def the_newest_patch_alias_is_decided_per_python(mod: ModuleType, _: Path) -> None:
    # A later patch that dropped Python 3.11 leaves 3.11's minor alias on the older patch, and takes 3.12's.
    later = BASE[BASE.index("[[torch]]") :].replace('version = "2.5.1"', 'version = "2.5.2"', 1)
    later = edit(later, '"3.9", "3.10", "3.11", "3.12", "3.13"', '"3.12", "3.13"')
    m = small(BASE + "\n" + later)
    tags = mod.image_tags
    older311 = tags(m, combo(m, "2.5.1", "cu124", "3.11"), Flavor.RUNTIME, Strategy.WHEELS, ())
    older312 = tags(m, combo(m, "2.5.1", "cu124", "3.12"), Flavor.RUNTIME, Strategy.WHEELS, ())
    newer312 = tags(m, combo(m, "2.5.2", "cu124", "3.12"), Flavor.RUNTIME, Strategy.WHEELS, ())
    assert older311.aliases == ("2.5-cuda12.4-runtime",)
    assert older312.aliases == ()
    assert newer312.aliases == ("2.5-cuda12.4-py3.12-debian12-runtime",)


def a_tag_longer_than_docker_takes_is_refused_before_a_build(mod: ModuleType, _: Path) -> None:
    from render_kit import arch, combination
    from render_kit import matrix as render_matrix

    m = render_matrix()
    c = combination("torch2.5.1-cu124-py3.11-debian12")
    archs = tuple(arch(a.name) for a in m.archs)  # every architecture: the suffix alone is past 128
    with pytest.raises(TorchyardError, match=r"^the tag '2\.5\.1-cuda12\.4-cudnn9-py3\.11-debian12-devel-cuda-base-sm"):
        mod.image_tags(m, c, Flavor.DEVEL, Strategy.CUDA_BASE, archs)
    with pytest.raises(TorchyardError, match=r"' is \d{3} characters, more than Docker's 128: give fewer --arch$"):
        mod.image_tags(m, c, Flavor.DEVEL, Strategy.CUDA_BASE, archs)


def a_cuda_variant_without_a_recorded_cudnn_has_no_cudnn_in_its_tag(mod: ModuleType, _: Path) -> None:
    text = edit(BASE, 'name = "cu118"\ncuda = "11.8"\ncudnn = "9.1.0.70"\n', 'name = "cu118"\ncuda = "11.8"\n')
    m = small(text)
    tags = mod.image_tags(m, combo(m, "2.5.1", "cu118"), Flavor.RUNTIME, Strategy.WHEELS, ())
    assert tags.immutable == "2.5.1-cuda11.8-py3.11-debian12-runtime"
    with_cudnn = mod.image_tags(m, combo(m, "2.5.1", "cu124"), Flavor.RUNTIME, Strategy.WHEELS, ())
    assert with_cudnn.immutable == "2.5.1-cuda12.4-cudnn9-py3.11-debian12-runtime"


def the_capability_the_driver_reports_wins_over_the_name(mod: ModuleType, _: Path) -> None:
    m = real()
    # The matrix maps the RTX 4090 to sm_89; a driver that says 8.6 is believed (a renamed or modded card).
    host = mod.probe(m, machine("0, NVIDIA GeForce RTX 4090, 8.6, 24564, 550.54.15, [N/A]\n"))
    [gpu] = host.gpus
    assert (gpu.arch.name if gpu.arch else None, gpu.known) == ("sm_86", None)
    filled, _notes = mod.fill_from_host(RawQuery(), host, m)
    assert (filled.archs, filled.gpus) == (("sm_86",), ())
    agreeing = mod.probe(m, machine("0, NVIDIA GeForce RTX 4090, 8.9, 24564, 550.54.15, [N/A]\n"))
    assert agreeing.gpus[0].known is not None and agreeing.gpus[0].known.name == "GeForce RTX 4090"


def a_layers_members_are_sorted_by_name(mod: ModuleType, _: Path) -> None:
    dists = {
        "zeta": mod.Dist("zeta", "1.0", ["alpha==2.0", "mid>=1"], []),
        "alpha": mod.Dist("alpha", "2.0", [], []),
        "mid": mod.Dist("mid", "1.0", [], []),
    }
    assert mod.closure(dists, ["zeta"], mod.EXACT, set()) == ["alpha", "zeta"]
    assert mod.closure(dists, ["zeta", "mid"], mod.EXACT, set()) == ["alpha", "mid", "zeta"]


def a_registry_with_a_port_is_not_a_tag(mod: ModuleType, _: Path) -> None:
    for ref in ("127.0.0.1:5000/team/torch", "localhost:5000/torch", "registry.example:443/a/b@sha256:" + "0" * 64):
        assert mod.check_reference(ref) == ref
    assert mod.check_reference("127.0.0.1:5000/team/torch:2.5.1") == "127.0.0.1:5000/team/torch:2.5.1"


def cudnn_8_and_9_numbers_decode_on_both_sides_of_the_boundary(mod: ModuleType, _: Path) -> None:
    decode = mod._cudnn_version
    assert (decode(8902), decode(9999), decode(10000), decode(90100)) == ("8.9.2", "9.9.99", "1.0.0", "9.1.0")
    assert (decode(0), decode(-1), decode("90100"), decode(None)) == (None, None, None, None)


def docker_s_default_shm_is_a_problem_one_mb_more_is_not(mod: ModuleType, _: Path) -> None:
    host = probe(real(), machine(None))
    at_default = mod._runtime_problems(host, RuntimeReading(engine="28.3.0", shm_mib=64), [])
    above = mod._runtime_problems(host, RuntimeReading(engine="28.3.0", shm_mib=65), [])
    assert [p.check for p in at_default] == ["shm"]
    assert above == []


def a_file_of_exactly_the_limit_is_read_one_byte_more_is_not(mod: ModuleType, tmp_path: Path) -> None:
    exact, over = tmp_path / "exact.txt", tmp_path / "over.txt"
    exact.write_bytes(b"x" * 10)
    over.write_bytes(b"x" * 11)
    assert mod.read_bytes(exact, "test file", limit=10) == b"x" * 10
    with pytest.raises(TorchyardError, match=r"over\.txt: 11 bytes, more than the 10 a test file may have"):
        mod.read_bytes(over, "test file", limit=10)


def a_file_whose_stat_size_is_0_is_held_to_the_limit_by_what_it_holds(mod: ModuleType, _: Path) -> None:
    status = "/proc/self/status"  # stat says 0 bytes; reading gives about a kilobyte
    if not os.path.exists(status) or os.stat(status).st_size != 0:
        pytest.skip("needs Linux's /proc, whose files stat as 0 bytes")
    with pytest.raises(TorchyardError, match=r"^/proc/self/status: more than the 100 bytes a file may have$"):
        mod.read_bytes(status, "", limit=100)
    assert len(mod.read_bytes(status, "", limit=1 << 20)) > 100


MUTANTS = (
    Mutant(
        "redact-header-one-word",
        "builder.core.redact",
        r"(\S+(?:\s+\S+)?)",
        r"(\S+)",
        redact_keeps_no_part_of_an_authorization_header,
    ),
    Mutant(
        "redact-arg-value-kept",
        "builder.core.redact",
        'return _ARG.sub(lambda m: f"{m[1]}{MASK}", text)',
        'return _ARG.sub(lambda m: f"{m[2]}{MASK}", text)',
        redact_keeps_the_flag_and_drops_the_value_of_a_secret_argument,
    ),
    Mutant(
        "http-no-rewind",
        "builder.net.http",
        "                data.seek(0)",
        "                pass",
        a_retried_upload_sends_its_whole_body_again,
    ),
    Mutant(
        "auth-expired-token",
        "builder.oci.auth",
        "if token is not None and token[1] > time.monotonic():",
        "if token is not None:",
        an_expired_bearer_token_is_not_sent_again,
    ),
    Mutant(
        "publish-alias-past-held-index",
        "builder.publish.run",
        "if index.tags.immutable not in written:",
        "if False:",
        a_multi_platform_alias_stays_when_its_index_is_held,
    ),
    Mutant(
        "publish-held-index-counted-written",
        "builder.publish.run",
        "written = {i.tag for i in indexes if i.status is not AliasStatus.HELD}",
        "written = {i.tag for i in indexes}",
        a_multi_platform_alias_stays_when_its_index_is_held,
    ),
    Mutant(
        "tags-newest-patch-any-python",
        "builder.render.tags",
        "        and c.python in wheels.python\n",
        "\n",
        the_newest_patch_alias_is_decided_per_python,
    ),
    Mutant(
        "tags-length-unchecked",
        "builder.render.tags",
        "        problem = check_tag(tag)\n",
        "        problem = None\n",
        a_tag_longer_than_docker_takes_is_refused_before_a_build,
    ),
    Mutant(
        "tags-cudnn-always",
        "builder.render.tags",
        'cudnn = f"-cudnn{v.cudnn.major}" if v.cudnn else ""',
        'cudnn = f"-cudnn{v.cudnn.major}" if v.cudnn else "-cudnn"',
        a_cuda_variant_without_a_recorded_cudnn_has_no_cudnn_in_its_tag,
    ),
    Mutant(
        "probe-name-wins",
        "builder.host.probe",
        "known = None  # a name the matrix maps elsewhere",
        "pass  # a name the matrix maps elsewhere",
        the_capability_the_driver_reports_wins_over_the_name,
    ),
    Mutant(
        "venv-layers-unsorted",
        "builder.image.venv_layers",
        "    return sorted(members)\n",
        "    return members\n",
        a_layers_members_are_sorted_by_name,
    ),
    Mutant(
        "names-tag-split-on-whole-name",
        "builder.core.names",
        'if ":" in last:',
        'if ":" in name:',
        a_registry_with_a_port_is_not_a_tag,
    ),
    Mutant(
        "inspect-cudnn-boundary-1000",
        "builder.host.image_inspect",
        "if number >= 10000:",
        "if number >= 1000:",
        cudnn_8_and_9_numbers_decode_on_both_sides_of_the_boundary,
    ),
    Mutant(
        "doctor-shm-strict",
        "builder.host.doctor",
        "if runtime.shm_mib <= DEFAULT_SHM_MIB:",
        "if runtime.shm_mib < DEFAULT_SHM_MIB:",
        docker_s_default_shm_is_a_problem_one_mb_more_is_not,
    ),
    Mutant(
        "files-stat-limit-inclusive",
        "builder.core.files",
        "if info.st_size > limit:",
        "if info.st_size >= limit:",
        a_file_of_exactly_the_limit_is_read_one_byte_more_is_not,
    ),
    Mutant(
        "files-read-limit-inclusive",
        "builder.core.files",
        "if len(data) > limit:",
        "if len(data) >= limit:",
        a_file_of_exactly_the_limit_is_read_one_byte_more_is_not,
    ),
    Mutant(
        "files-stat-size-only",
        "builder.core.files",
        "    if len(data) > limit:\n",
        "    if False:\n",
        a_file_whose_stat_size_is_0_is_held_to_the_limit_by_what_it_holds,
    ),
)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.id for m in MUTANTS])
def test_the_code_as_it_is_passes(mutant: Mutant, tmp_path: Path) -> None:
    mutant.check(importlib.import_module(mutant.module), tmp_path)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.id for m in MUTANTS])
def test_each_mutant_is_caught(mutant: Mutant, tmp_path: Path) -> None:
    copy = mutate(mutant)
    with pytest.raises((AssertionError, TorchyardError, pytest.fail.Exception)):  # fail: DID NOT RAISE
        mutant.check(copy, tmp_path)
