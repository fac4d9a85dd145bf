"""Inventory strings reach Ansible as the strings they are, whatever they look like.

ansible-core 2.19 reads ``!unsafe "12.8"`` as the float 12.8 (it resolves an ``!unsafe`` scalar
again as if it were plain), so ``versions.cuda: "12.10"`` would reach the roles as 12.1. These
tests load what :func:`clusterctl.render.ansible_yaml.dump` writes with ansible-core's own YAML
loader and compare the values and their types.
"""

from __future__ import annotations

import pytest
from ansible.parsing.utils.yaml import from_yaml

from clusterctl.render import ansible_yaml

LOOKS_LIKE_OTHER_TYPES = [
    "12.8",
    "23.10",
    "22.05",
    "1",
    "0",
    "0x10",
    "1:20",
    "yes",
    "no",
    "on",
    "true",
    "null",
    "~",
    "2024-01-01",
    "1e3",
]


@pytest.mark.parametrize("text", LOOKS_LIKE_OTHER_TYPES)
def test_number_like_strings_stay_strings(text: str) -> None:
    data = from_yaml(ansible_yaml.dump({"clusterctl_versions": {"cuda": text}, "value": text}, "test"))
    assert data["value"] == text
    assert isinstance(data["value"], str)
    assert data["clusterctl_versions"]["cuda"] == text


def test_strings_with_template_syntax_stay_unsafe() -> None:
    text = ansible_yaml.dump({"a": "{{ lookup('pipe', 'id') }}", "b": "1{#", "c": "plain"}, "test")
    assert 'a: !unsafe "{{ lookup' in text
    assert 'b: !unsafe "1{#"' in text
    assert 'c: !unsafe "plain"' in text


def test_numbers_and_booleans_keep_their_types() -> None:
    data = from_yaml(ansible_yaml.dump({"i": 3, "f": 12.5, "b": True, "n": None}, "test"))
    assert data == {"i": 3, "f": 12.5, "b": True, "n": None}
    assert isinstance(data["i"], int)
    assert isinstance(data["f"], float)
