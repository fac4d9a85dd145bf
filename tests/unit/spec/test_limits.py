"""Caps: a hostile spec fails with one located error (file:line:col, field, hint), never a traceback or a hang.

Speed is measured in benchmarks/hostile_specs.py, not asserted here; these tests assert the error.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterctl.hostlist import MAX_HOSTLIST_NAMES, HostlistError, count, expand
from clusterctl.spec import Finding, SpecError, load_spec
from clusterctl.spec.limits import MAX_DEPTH, MAX_DOCUMENT_BYTES, MAX_SCALAR_CHARS, MAX_YAML_NODES
from clusterctl.spec.models import MAX_NODES_PER_GROUP, MAX_NODES_TOTAL
from tests.conftest import EXAMPLES

LOCAL = (EXAMPLES / "local.yaml").read_text()


def _error(tmp_path: Path, text: str) -> tuple[Finding, Path]:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    first = info.value.findings[0]
    assert first.file == str(path)
    assert first.line > 0
    assert first.column > 0
    return first, path


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


def billion_laughs(levels: int = 9) -> str:
    """The classic alias bomb: each level repeats the previous one ten times."""
    lines = ["version: 1", "lol0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_at_the_alias_before_expanding(tmp_path: Path) -> None:
    text = billion_laughs()
    finding, _ = _error(tmp_path, text)
    assert finding.code == "SPEC-limit"
    assert f"more than {MAX_YAML_NODES} YAML nodes" in finding.message
    assert "alias `*l" in finding.message
    assert "billion laughs" in finding.hint
    # The first level whose aliases add up past the cap: lol3 stands for 11,111 nodes > 10,000.
    assert finding.line == _line_of(text, "lol3:")
    assert finding.dotted_path == "lol3[9]"


def test_aliases_of_modest_size_still_work(tmp_path: Path) -> None:
    text = LOCAL.replace("  small:\n", "  small: &small\n").replace("\nnodes:\n", "\n  big: *small\nnodes:\n", 1)
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    assert load_spec(path).spec.hardware["big"] == load_spec(path).spec.hardware["small"]


def test_an_anchor_defined_twice_is_refused_at_the_second(tmp_path: Path) -> None:
    # ruamel only warns (ReusedAnchorWarning) and lets the second shadow the first.
    text = "version: 1\na: &x [1, 2]\nb: &x [3]\nc: *x\n"
    first, _ = _error(tmp_path, text)
    assert first.line == 3
    assert "`&x` is defined a second time" in first.message


def test_recursive_alias_is_refused(tmp_path: Path) -> None:
    finding, _ = _error(tmp_path, "version: 1\nloop: &a [1, *a]\n")
    assert finding.code == "SPEC-limit"
    assert "recursive" in finding.message
    assert (finding.line, finding.column) == (2, 14)
    assert finding.dotted_path == "loop[1]"


def test_huge_document_is_refused_without_parsing_it(tmp_path: Path) -> None:
    text = LOCAL + "# padding\n" * (MAX_DOCUMENT_BYTES // 10 + 1)
    finding, _ = _error(tmp_path, text)
    assert finding.code == "SPEC-limit"
    assert f"at most {MAX_DOCUMENT_BYTES}" in finding.message
    assert finding.line == text[:MAX_DOCUMENT_BYTES].count("\n") + 1
    assert finding.hint


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("version: 1\nname: " + "[x, " * 40 + "\n", "name" + "[1]" * (MAX_DEPTH - 1)),
        ("".join("  " * i + f"k{i}:\n" for i in range(200)), ".".join(f"k{i}" for i in range(MAX_DEPTH))),
        ("version: 1\nnodes:\n" + "".join("  " * i + "- \n" for i in range(1, 100)), "nodes" + "[0]" * (MAX_DEPTH - 1)),
    ],
    ids=["flow", "mapping", "block-list"],
)
def test_deep_nesting_is_refused(tmp_path: Path, text: str, where: str) -> None:
    finding, _ = _error(tmp_path, text)
    assert finding.code == "SPEC-limit"
    assert f"more than {MAX_DEPTH} levels" in finding.message
    assert finding.dotted_path == where


@pytest.mark.parametrize("unit", ["[", "{", "[ ", "[&a ", "[!!seq ", "[\n"])
def test_a_run_of_open_brackets_is_refused_before_the_scanner_sees_it(tmp_path: Path, unit: str) -> None:
    text = "version: 1\nname: " + unit * 5000 + "\n"
    finding, _ = _error(tmp_path, text)
    assert finding.code == "SPEC-limit"
    assert (finding.line, finding.column) == (2, 7)
    assert f"at most {MAX_DEPTH} levels" in finding.message


def test_long_value_is_refused_at_its_field(tmp_path: Path) -> None:
    text = LOCAL.replace("name: local", "name: " + "a" * (MAX_SCALAR_CHARS + 1))
    finding, _ = _error(tmp_path, text)
    assert finding.code == "SPEC-limit"
    assert finding.dotted_path == "name"
    assert (finding.line, finding.column) == (_line_of(text, "name: aaa"), 7)
    assert f"at most {MAX_SCALAR_CHARS}" in finding.message


def test_long_list_is_refused(tmp_path: Path) -> None:
    text = LOCAL.replace("rails: [mlx5_0,", "rails: [" + "mlx5_0, " * (MAX_YAML_NODES + 10) + "mlx5_0,")
    finding, _ = _error(tmp_path, text)
    assert finding.code == "SPEC-limit"
    assert finding.dotted_path.startswith("hardware.emu-h100.rails[")
    assert "shorten the lists" in finding.hint


@pytest.mark.parametrize("digits", [40, 5000])
def test_huge_number_is_refused_before_python_parses_it(tmp_path: Path, digits: int) -> None:
    text = LOCAL.replace("memory_gib: 1\n", "memory_gib: 1" + "0" * digits + "\n", 1)
    finding, _ = _error(tmp_path, text)
    assert finding.code == "SPEC-limit"
    assert finding.dotted_path == "hardware.emu-h100.memory_gib"
    assert "characters" in finding.message


@pytest.mark.parametrize(("value", "code"), [(".inf", "SPEC-finite_number"), ("1e300", "SPEC-less_than_equal")])
def test_infinite_or_absurd_floats_are_refused(tmp_path: Path, value: str, code: str) -> None:
    text = LOCAL + f"workload: {{model_params_b: {value}, train_tokens_t: 1}}\n"
    finding, _ = _error(tmp_path, text)
    assert finding.code == code
    assert finding.dotted_path == "workload.model_params_b"


@pytest.mark.parametrize("tag", ["!!python/object/apply:os.system", "!custom", "!!binary"])
def test_yaml_tags_are_refused(tmp_path: Path, tag: str) -> None:
    text = LOCAL.replace("name: local", f"name: {tag} local")
    finding, _ = _error(tmp_path, text)
    assert finding.code == "SPEC-limit"
    assert finding.dotted_path == "name"
    assert "tag" in finding.message


def test_nul_in_the_document_is_a_located_error(tmp_path: Path) -> None:
    text = LOCAL.replace("name: local", "name: lo\x00cal")
    finding, _ = _error(tmp_path, text)
    assert finding.code == "SPEC-yaml"
    assert (finding.line, finding.column) == (_line_of(text, "name: lo"), 9)


def test_list_or_mapping_as_a_key_is_refused(tmp_path: Path) -> None:
    text = LOCAL.replace("  small:\n", "  ? {a: 1}\n  : {b: 2}\n  small:\n")
    finding, _ = _error(tmp_path, text)
    assert finding.code == "SPEC-limit"
    assert finding.dotted_path == "hardware"
    assert finding.line == _line_of(text, "? {a: 1}")
    assert "plain names" in finding.message


def test_a_spec_that_is_not_utf8_is_a_located_error(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(LOCAL.replace("name: local", "name: lo\xffcal").encode("latin-1"))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    finding = info.value.findings[0]
    assert "not UTF-8" in finding.message
    assert (finding.line, finding.column) == (_line_of(LOCAL, "name: local"), 9)


def test_node_count_over_the_group_cap(tmp_path: Path) -> None:
    text = LOCAL.replace("hardware: emu-h100, count: 4}", "hardware: emu-h100, count: 99999999}")
    finding, _ = _error(tmp_path, text)
    assert finding.code == "SPEC-less_than_equal"
    assert finding.dotted_path == "nodes[2].count"
    assert f"at most {MAX_NODES_PER_GROUP}" in finding.message
    assert finding.line == _line_of(text, "99999999")


def test_node_count_over_the_total_cap(tmp_path: Path) -> None:
    per_group = MAX_NODES_TOTAL // 2  # each group within its own cap; with the login node one over in all
    assert per_group <= MAX_NODES_PER_GROUP
    text = LOCAL.replace("hardware: emu-h100, count: 4}", f"hardware: emu-h100, count: {per_group}}}").replace(
        "hardware: small, count: 1}\n  - {group: login", f"hardware: small, count: {per_group}}}\n  - {{group: login"
    )
    finding, _ = _error(tmp_path, text)
    assert finding.dotted_path == "nodes"
    assert f"{2 * per_group + 1} nodes in all" in finding.message
    assert f"at most {MAX_NODES_TOTAL}" in finding.message
    assert finding.line == _line_of(text, "nodes:")


def test_hostile_hostname_pattern_is_a_located_schema_error(tmp_path: Path) -> None:
    text = LOCAL.replace("{group: gpu,", "{hostname: '{group.__class__.__mro__}', group: gpu,")
    finding, _ = _error(tmp_path, text)
    assert finding.dotted_path == "nodes[2].hostname"
    assert "only the fields {group} and {index}" in finding.message


def test_a_fifo_or_directory_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        with pytest.raises(SpecError) as info:
            load_spec(path)
        assert "not a regular file" in info.value.findings[0].message


# --- hostlists ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "names"),
    [("node[0-99999999]", 100_000_000), ("a[0-999]b[0-999]", 1_000_000), ("n[1-40000],m[1-40000]", 80_000)],
)
def test_huge_hostlist_is_refused_by_counting(expr: str, names: int) -> None:
    assert count(expr) == names
    with pytest.raises(HostlistError, match=f"stands for {names} names; at most {MAX_HOSTLIST_NAMES}"):
        expand(expr)


def test_hostlist_index_with_too_many_digits_is_refused() -> None:
    with pytest.raises(HostlistError, match="more than 12 digits"):
        expand("n[1-" + "9" * 5000 + "]")


def test_hostlist_at_the_cap_still_expands() -> None:
    names = expand(f"gpu[1-{MAX_HOSTLIST_NAMES}]")
    assert len(names) == MAX_HOSTLIST_NAMES
    assert names[-1] == f"gpu{MAX_HOSTLIST_NAMES}"
    assert expand("a[1-2]b[3-4]") == ["a1b3", "a2b3", "a1b4", "a2b4"]
