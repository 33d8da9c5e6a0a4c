"""builder/smoke/manifest.py: the host-image contract, read leniently both ways."""

from __future__ import annotations

import json

from render_kit import plan

from builder.smoke.manifest import STACK_KEYS, Manifest, Observed

CU130 = "torch2.14.1-cu130-py3.11-debian12"


def test_a_manifest_round_trips_through_json() -> None:
    manifest = plan(CU130).targets[0].manifest
    assert Manifest.from_json(manifest.to_json()) == manifest
    assert json.loads(manifest.to_json())["arch_list"] == list(manifest.arch_list)


def test_an_old_images_manifest_with_unknown_and_missing_keys_is_read() -> None:
    # An image from before a key existed (no nccl), and one from after (a key this version does not know).
    old = Manifest.from_dict({"schema": 1, "torch": "2.0.1+cu118", "cuda": "11.8", "arch_list": ["sm_80"]})
    assert (old.torch, old.nccl, old.extensions, old.arch_list) == ("2.0.1+cu118", None, (), ("sm_80",))
    new = Manifest.from_dict({"torch": "2.16.0+cu132", "triton": "3.9.0", "schema": "2"})
    assert new.extra == {"triton": "3.9.0"} and new.schema == 2
    assert new.to_dict()["triton"] == "3.9.0"  # kept when written back


def test_the_plans_manifest_declares_every_stack_component() -> None:
    manifest = plan(CU130).targets[0].manifest
    assert list(manifest.stack()) == list(STACK_KEYS)
    assert manifest.stack() == {
        "torch": "2.14.1+cu130",
        "torchvision": "0.29.1",
        "torchaudio": "2.11.1",
        "cuda": "13.0",
        "cudnn": "9.24.0.43",
        "nccl": "2.30.7",
        "python": "3.11",
        "os": "debian12",
    }


def test_observed_keeps_what_the_checks_add_and_types_the_stack() -> None:
    data = {"torch": "2.14.1+cu130", "cudnn": 92400, "cuda": "13.0", "gpus": [{"index": 0}], "train_cpu": {}}
    seen = Observed.from_dict(data)
    assert (seen.torch, seen.cudnn, seen.cudnn_major(), seen.nccl) == ("2.14.1+cu130", 92400, 9, None)
    assert seen.details == {"gpus": [{"index": 0}], "train_cpu": {}}
    assert seen.to_dict() == data
    assert Observed.from_dict({"cudnn": 8907}).cudnn_major() == 8
    assert Observed.from_dict({"cudnn": "garbage"}).cudnn is None
