"""Pointers: only the cluster's control machine (holder of the munge key) can tell a node what to apply."""

from __future__ import annotations

import json
import os

import pytest

from clusterctl.agent.pointer import Pointer, PointerError, sign, signing_key, verify

MUNGE = os.urandom(1024)
KEY = signing_key(MUNGE)
LAYERS = (("engine", "a" * 64), ("roles", "b" * 64), ("files", "c" * 64))


def _pointer(**changes: object) -> Pointer:
    fields: dict[str, object] = {
        "cluster": "local",
        "node": "gpu001",
        "generation": 1796537741989,
        "layers": LAYERS,
        "stage": "configure",
        "vars": {"clusterctl_heal_public_key": "ssh-ed25519 AAAAC3Nza clusterctl-heal"},
    }
    fields.update(changes)
    return Pointer(**fields)  # type: ignore[arg-type]


def test_a_signed_pointer_verifies_for_its_node() -> None:
    pointer = _pointer()
    assert verify(sign(pointer, KEY), KEY, cluster="local", node="gpu001") == pointer


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (lambda d: d["pointer"].update(stage="all"), "signature does not verify"),
        (lambda d: d["pointer"]["layers"][1].__setitem__(1, "d" * 64), "signature does not verify"),
        (lambda d: d.update(mac="0" * 64), "signature does not verify"),
        (lambda d: d.pop("mac"), "not a signed pointer"),
    ],
)
def test_a_changed_pointer_is_refused(tamper: object, message: str) -> None:
    document = json.loads(sign(_pointer(), KEY))
    tamper(document)  # type: ignore[operator]
    with pytest.raises(PointerError, match=message):
        verify(json.dumps(document).encode(), KEY, cluster="local", node="gpu001")


def test_another_clusters_key_or_another_nodes_pointer_is_refused() -> None:
    with pytest.raises(PointerError, match="signature"):
        verify(sign(_pointer(), signing_key(os.urandom(1024))), KEY, cluster="local", node="gpu001")
    with pytest.raises(PointerError, match="for gpu001 of local, not gpu002 of local"):
        verify(sign(_pointer(), KEY), KEY, cluster="local", node="gpu002")


@pytest.mark.parametrize(
    "variables",
    [
        {"clusterctl_x": "{{ lookup('pipe', 'id') }}"},
        {"clusterctl_x": "a\nb"},
        {"ansible_connection": "ssh"},
        {"clusterctl_x": [[[[["deep"]]]]]},
        {"clusterctl_x": 1.5},
    ],
)
def test_a_pointer_carries_plain_plan_facts_only(variables: dict[str, object]) -> None:
    with pytest.raises(PointerError):
        sign(_pointer(vars=variables), KEY)


def test_what_the_node_applies_changes_with_its_facts_not_with_the_generation() -> None:
    base = _pointer()
    assert base.identity == _pointer(generation=base.generation + 1).identity
    assert base.identity != _pointer(vars={"clusterctl_slurm_config_change_action": "restart"}).identity
    assert base.identity != _pointer(stage="all").identity


def test_a_short_munge_key_signs_nothing() -> None:
    with pytest.raises(PointerError, match="shorter than 32 bytes"):
        signing_key(b"x" * 8)


def test_oversized_or_malformed_documents_are_refused() -> None:
    with pytest.raises(PointerError, match="bytes, more than"):
        verify(b" " * 70_000, KEY, cluster="local", node="gpu001")
    with pytest.raises(PointerError, match="not JSON"):
        verify(b"[" * 100, KEY, cluster="local", node="gpu001")
