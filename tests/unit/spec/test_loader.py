"""The loader: every problem reported at once, each at file:line:col, in the spec's words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clusterctl.spec import SpecError, load_spec
from clusterctl.spec.types import Bandwidth
from tests.conftest import EXAMPLES


def _errors(path: Path) -> list:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return info.value.findings


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["onprem-h100-256.yaml", "local.yaml"])
def test_examples_load(name: str) -> None:
    loaded = load_spec(EXAMPLES / name)
    assert loaded.spec.version == 1


def test_onprem_example_fields_as_written() -> None:
    spec = load_spec(EXAMPLES / "onprem-h100-256.yaml").spec
    assert spec.versions.cuda == "12.8"
    assert spec.hardware["dgx-h100"].rails[5] == "mlx5_9"
    ckpt = spec.storage[1]
    assert ckpt.write_bw == Bandwidth(120, "GB/s")
    assert str(ckpt.write_bw) == "120 GB/s"
    assert spec.storage[0].read_bw is not None
    assert spec.storage[0].read_bw.bytes_per_s == 60e9


def _onprem_text() -> str:
    return (EXAMPLES / "onprem-h100-256.yaml").read_text()


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


def test_all_errors_reported_with_positions(tmp_path: Path) -> None:
    text = (
        _onprem_text()
        .replace('cuda: "12.8"', "cuda: 12.8")
        .replace("sharp: false", "sharp: no")
        .replace("memory_gib: 2048", "memory_gb: 2048")
    )
    path = _write(tmp_path, text)
    findings = _errors(path)
    by_path = {f.dotted_path: f for f in findings}
    assert set(by_path) >= {"versions.cuda", "fabric.sharp", "hardware.dgx-h100.memory_gb"}
    cuda = by_path["versions.cuda"]
    assert cuda.line == _line_of(text, "cuda: 12.8")
    assert cuda.column == text.splitlines()[cuda.line - 1].index("12.8") + 1
    assert "quoted" in cuda.message
    assert by_path["fabric.sharp"].line == _line_of(text, "sharp: no")
    assert "true or false" in by_path["fabric.sharp"].message
    unknown = by_path["hardware.dgx-h100.memory_gb"]
    assert unknown.hint == "Did you mean `memory_gib`?"
    assert all(f.file == str(path) and f.line > 0 for f in findings)


@pytest.mark.parametrize("written", ["cuda: 12.10", "pyxis: 0.20", "slurm: 23.10"])
def test_quoting_hint_gives_back_what_was_written(tmp_path: Path, written: str) -> None:
    """YAML reads 12.10 as 12.1: the hint must ask for "12.10", not the number YAML made of it."""
    key, number = written.split(": ")
    text = re.sub(rf'{key}: "[^"]*"', written, _onprem_text(), count=1)
    finding = next(f for f in _errors(_write(tmp_path, text)) if f.dotted_path == f"versions.{key}")
    assert f'write it as "{number}"' in finding.message, finding.message
    assert f'"{number.rstrip("0")}"' not in finding.message


def test_missing_field_points_at_its_mapping(tmp_path: Path) -> None:
    text = _onprem_text().replace("    memory_gib: 2048\n", "")
    findings = _errors(_write(tmp_path, text))
    missing = next(f for f in findings if f.code == "SPEC-missing")
    assert missing.dotted_path == "hardware.dgx-h100.memory_gib"
    assert missing.line == _line_of(text, "dgx-h100:")


def test_unknown_provider_kind_points_at_kind(tmp_path: Path) -> None:
    text = _onprem_text().replace("provider: {kind: baremetal", "provider: {kind: metal")
    finding = _errors(_write(tmp_path, text))[0]
    assert finding.code == "SPEC-union_tag_invalid"
    assert "baremetal" in finding.message
    assert finding.line == _line_of(text, "kind: metal")


def test_union_member_errors_have_no_tag_in_path(tmp_path: Path) -> None:
    text = _onprem_text().replace("fsname: datasets,", "fsnam: datasets,")
    paths = {f.dotted_path for f in _errors(_write(tmp_path, text))}
    assert paths == {"storage[0].fsname", "storage[0].fsnam"}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("version: 1\nname: a\nname: b\n", "Duplicate key"),
        ("version: 1\nname: [unclosed\n", "not valid YAML"),
        ("- just\n- a list\n", "must be a YAML mapping"),
    ],
)
def test_document_level_errors(tmp_path: Path, text: str, needle: str) -> None:
    findings = _errors(_write(tmp_path, text))
    assert needle in findings[0].message
    assert findings[0].line >= 1


def test_missing_file_is_a_finding(tmp_path: Path) -> None:
    finding = _errors(tmp_path / "nope.yaml")[0]
    assert finding.code == "SPEC-file"
    assert "Cannot read" in finding.message


def test_timestamps_stay_strings(tmp_path: Path) -> None:
    text = _onprem_text().replace("name: atlas", "name: 2024-01-01")
    finding = next(f for f in _errors(_write(tmp_path, text)) if f.dotted_path == "name")
    assert "'2024-01-01'" in finding.message  # read as text, then rejected as not DNS-safe


@pytest.mark.parametrize("value", ['"60 GB"', '"fast"', "60"])
def test_bandwidth_needs_units(tmp_path: Path, value: str) -> None:
    text = _onprem_text().replace('read_bw: "60 GB/s"', f"read_bw: {value}")
    finding = next(f for f in _errors(_write(tmp_path, text)) if f.dotted_path == "storage[0].read_bw")
    assert "GB/s" in finding.message


@pytest.mark.parametrize(("written", "bytes_per_s"), [("1 GiB/s", 2**30), ("400 Gb/s", 50e9), ("2.5 TB/s", 2.5e12)])
def test_bandwidth_units(written: str, bytes_per_s: float) -> None:
    from clusterctl.spec.types import _bandwidth

    value = _bandwidth(written)
    assert value.bytes_per_s == pytest.approx(bytes_per_s)
    assert str(value) == written


def test_merge_keys_load_and_errors_inside_them_are_located(tmp_path: Path) -> None:
    # Keys that come in through `<<:` have no position of their own; they are placed at the mapping.
    text = (
        (EXAMPLES / "local.yaml")
        .read_text()
        .replace("provider: {kind: local}", "defaults: &d {kind: local}\nprovider: {<<: *d}", 1)
    )
    assert "<<: *d" in text
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    (finding,) = info.value.findings
    assert finding.path == ("defaults",)
    path.write_text(text.replace("defaults: &d {kind: local}\n", "").replace("{<<: *d}", "{<<: {kind: local}}"))
    assert load_spec(path).spec.provider.kind == "local"
    path.write_text("<<: {kind: evil}\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert all(f.line == 1 for f in info.value.findings)
