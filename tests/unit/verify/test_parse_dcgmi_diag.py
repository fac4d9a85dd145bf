"""parse_dcgmi_diag on the real dcgmi diag tables, and on the per-GPU and DCGM 4 layouts."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.verify.parsers.dcgmi_diag import DiagStatus, parse_dcgmi_diag
from clusterctl.verify.result import ParseError

FIXTURES = (
    "dcgmi_diag_r2_p4de_8xA100_pass_awsome.txt",
    "dcgmi_diag_r3_8xH100_fail_no_fabricmanager.txt",
    "dcgmi_diag_r3_8xH200_pass_ramble.txt",
)
RULE = "+---------------------------+------------------------------------------------+"


def _read(fixtures_dir: Path, name: str) -> str:
    return (fixtures_dir / "dcgm" / name).read_text()


def _row(name: str, info: str) -> str:
    """A table row as dcgmi prints it (DIAG_DATA stencil in DCGM's dcgmi/Diag.cpp)."""
    return f"| {name:<25} | {info:<46} |"


def _section(name: str) -> str:
    return f"+-----  {name}  ".ljust(28, "-") + "+" + "-" * 48 + "+"


def _wrapped(name: str, text: str) -> list[str]:
    """A long message cut into 45-character rows, as DisplayVerboseInfo does."""
    pieces = [text[i : i + 45] for i in range(0, len(text), 45)]
    return [_row(name if i == 0 else "", piece) for i, piece in enumerate(pieces)]


def _table(body: list[str]) -> str:
    head = [
        "Successfully ran diagnostic for group.",
        RULE,
        _row("Diagnostic", "Result"),
        "+===========================+================================================+",
        "|-----  Metadata  ----------+------------------------------------------------|",
        _row("DCGM Version", "3.3.8"),
        _row("Driver Version Detected", "560.35.03"),
        _row("GPU Device IDs Detected", ",".join(["2330"] * 8)),
        "|-----  Deployment  --------+------------------------------------------------|",
        _row("Denylist", "Pass"),
    ]
    return "\n".join([*head, *body, RULE]) + "\n"


def test_every_dcgm_fixture_is_covered(fixtures_dir: Path) -> None:
    assert {p.name for p in (fixtures_dir / "dcgm").glob("dcgmi_*.txt")} == set(FIXTURES)


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_parses(fixtures_dir: Path, name: str) -> None:
    diag = parse_dcgmi_diag(_read(fixtures_dir, name))

    assert diag.error is None
    assert len(diag.gpu_device_ids) == 8
    assert diag.tests[0].name == "Denylist"
    assert all(t.section in ("Deployment", "Integration", "Hardware", "Stress") for t in diag.tests)


def test_p4de_level_2_pass(fixtures_dir: Path) -> None:
    diag = parse_dcgmi_diag(_read(fixtures_dir, "dcgmi_diag_r2_p4de_8xA100_pass_awsome.txt"))

    assert diag.level == 2
    assert (diag.dcgm_version, diag.driver_version) == ("3.3.3", "535.104.12")
    assert diag.gpu_device_ids == ("20b2",) * 8
    assert len(diag.tests) == 11
    assert {t.status for t in diag.tests} == {DiagStatus.PASS}
    assert [t.name for t in diag.tests if t.section != "Deployment"] == ["PCIe", "GPU Memory"]
    assert not [t for t in diag.tests if t.section == "Stress"]  # the Stress section is empty


def test_h100_level_3_fail_without_fabric_manager(fixtures_dir: Path) -> None:
    diag = parse_dcgmi_diag(_read(fixtures_dir, "dcgmi_diag_r3_8xH100_fail_no_fabricmanager.txt"))

    assert diag.level == 3  # from "dcgmi diag --run 3 --fail-early"
    assert (diag.dcgm_version, diag.driver_version) == ("3.3.8", "560.35.03")
    assert diag.gpu_device_ids == ("2330",) * 8
    assert len(diag.tests) == 13
    assert [t.name for t in diag.with_status(DiagStatus.FAIL)] == ["GPU Memory"]
    assert [t.name for t in diag.with_status(DiagStatus.SKIP)] == ["PCIe", "Memory Bandwidth", "EUD Test"]
    memory = diag.with_status(DiagStatus.FAIL)[0]
    assert memory.section == "Hardware"
    assert memory.line_no == 35
    assert memory.gpu_status == ()  # "Fail - All"
    assert [m.entity for m in memory.messages] == [f"GPU{i}" for i in range(8)]
    assert {m.kind for m in memory.messages} == {"Warning"}
    # Seven table rows joined back, including pieces cut mid-word ("initiali|ze", "h|ttps").
    assert memory.messages[0].text == (
        "GPU 0 Error using CUDA API cuInit Check DCGM and system logs for errors. Reset GPU. "
        "Restart DCGM. Rerun diagnostics. Unable to initialize CUDA library: 'system not yet "
        "initialized'. . Please check if a CUDA sample program can be run successfully on this "
        "host. Refer to https://github.com/nvidia/cuda-samples"
    )
    assert memory.messages[7].line_no == 85


def test_h100_info_cell_is_joined_under_its_test(fixtures_dir: Path) -> None:
    diag = parse_dcgmi_diag(_read(fixtures_dir, "dcgmi_diag_r3_8xH100_fail_no_fabricmanager.txt"))

    persistence = next(t for t in diag.tests if t.name == "Persistence Mode")
    (info,) = persistence.messages

    assert persistence.status is DiagStatus.PASS
    assert info.kind == "Info"
    assert info.text.startswith(
        'Persistence mode for GPU 0 is disabled. Enable persistence mode by running "nvidia-smi -i <gpuId> '
        '-pm 1 " as root.,Persistence mode for GPU 1 is disabled.'
    )
    assert info.text.endswith("Persistence mode for GPU 4 is disabled. Enable pers")  # dcgmi cut it there
    assert info.text.count("Persistence mode for GPU") == 5


def test_h200_level_3_pass(fixtures_dir: Path) -> None:
    diag = parse_dcgmi_diag(_read(fixtures_dir, "dcgmi_diag_r3_8xH200_pass_ramble.txt"))

    assert diag.level is None  # no command line in this capture
    assert (diag.dcgm_version, diag.driver_version) == ("3.3.9", "570.133.20")
    assert diag.gpu_device_ids == ("2335",) * 8
    assert len(diag.tests) == 16
    assert [t.name for t in diag.with_status(DiagStatus.SKIP)] == ["EUD Test"]
    assert len(diag.with_status(DiagStatus.PASS)) == 15
    assert [t.name for t in diag.tests if t.section == "Stress"] == [
        "Targeted Stress",
        "Targeted Power",
        "Memory Bandwidth",
        "EUD Test",
    ]


def test_per_gpu_results_dcgm3() -> None:
    warning = (
        "GPU 7 NvLink link 3 is down; expected 18 links up, found 17. Check the NVLink cabling and "
        "run nvidia-smi nvlink -s."
    )
    text = _table(
        [
            _section("Integration"),
            _row("PCIe", "Pass - GPUs: 0, 1, 2, 3, 4, 5, 6   "),
            _row("", "Fail - GPU: 7   "),
            *_wrapped("Warning", warning),
            _section("Hardware"),
            _row("GPU Memory", "Pass - All"),
        ]
    )

    diag = parse_dcgmi_diag("# dcgmi diag -r long\n" + text)

    pcie = diag.tests[1]
    assert diag.level == 3
    assert pcie.status is DiagStatus.FAIL
    assert pcie.gpus_with(DiagStatus.FAIL) == (7,)
    assert pcie.gpus_with(DiagStatus.PASS) == tuple(range(7))
    assert [(m.kind, m.entity, m.text) for m in pcie.messages] == [("Warning", "GPU7", warning)]
    assert diag.tests[2].status is DiagStatus.PASS


def test_entity_results_dcgm4() -> None:
    warning = "Error using CUDA API cuInit Unable to initialize CUDA library: 'system not yet initialized'."
    text = _table(
        [
            _section("Hardware"),
            _row("memory", "Fail"),
            _row("", "GPU0: Pass"),
            _row("", "GPU1: Fail"),
            *_wrapped("Warning: GPU1", warning),
            _row("diagnostic", "Warn"),
            _row("", "GPU0: Warn"),
            _row("", "GPU1: Pass"),
        ]
    )

    diag = parse_dcgmi_diag(text)

    memory, diagnostic = diag.tests[1:]
    assert memory.status is DiagStatus.FAIL
    assert memory.gpu_status == ((0, DiagStatus.PASS), (1, DiagStatus.FAIL))
    assert [(m.kind, m.entity, m.text) for m in memory.messages] == [("Warning", "GPU1", warning)]
    assert diagnostic.status is DiagStatus.WARN
    assert diagnostic.gpus_with(DiagStatus.WARN) == (0,)


def test_dcgmi_error_instead_of_a_table() -> None:
    text = (
        "$ dcgmi diag -r 2\n"
        "Error: Unable to complete diagnostic for group 2147483647. Return: (-21) "
        "Host engine connection invalid/disconnected.\n"
    )

    diag = parse_dcgmi_diag(text)

    assert diag.tests == ()
    assert diag.level == 2
    assert diag.error is not None
    assert "Host engine connection invalid" in diag.error


def test_unknown_result_reports_its_line(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "dcgmi_diag_r3_8xH100_fail_no_fabricmanager.txt").replace("Fail - All", "Fial - All")

    with pytest.raises(ParseError) as caught:
        parse_dcgmi_diag(text)

    assert caught.value.line_no == 35
    assert caught.value.line.startswith("| GPU Memory")
    assert "unknown result 'Fial - All'" in caught.value.message


def test_message_before_any_test() -> None:
    text = _table([]).replace(_row("Denylist", "Pass"), _row("Warning", "GPU 0 is missing"))

    with pytest.raises(ParseError) as caught:
        parse_dcgmi_diag(text)

    assert caught.value.line_no == 10


def test_text_without_a_table() -> None:
    with pytest.raises(ParseError) as caught:
        parse_dcgmi_diag("dcgmi: command not found\n")

    assert caught.value.line_no == 1


def test_another_tools_table_is_not_a_diag(fixtures_dir: Path) -> None:
    text = (fixtures_dir / "nvidia-smi" / "nvsmi_table_8xH100_560_nccltests264.txt").read_text()

    with pytest.raises(ParseError, match="no dcgmi diag test rows"):
        parse_dcgmi_diag(text)


def test_dcgm4_cpu_entities_and_not_run() -> None:
    text = _table(
        [
            _section("Stress"),
            _row("cpu_eud", "Pass"),
            _row("", "CPU0: Pass"),
            _row("", "CPU1: Fail"),
            _row("pulse_test", ""),
        ]
    )

    cpu_eud, pulse = parse_dcgmi_diag(text).tests[1:]

    assert cpu_eud.status is DiagStatus.FAIL
    assert cpu_eud.gpu_status == ()
    assert cpu_eud.messages == ()
    assert pulse.status is DiagStatus.SKIP
