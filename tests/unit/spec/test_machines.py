"""machines.csv and the BMC CA bundle: files from outside the spec, read as untrusted input.

Only the named file beside the spec is read (no absolute path, ``..`` or symlink out), every
cell is checked with the spec's types, and errors are located and quote at most the offending
cell -- never other content of the file.
"""

from __future__ import annotations

import datetime
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from clusterctl.pipeline import load_and_validate
from clusterctl.rules import validate
from clusterctl.spec import Level, load_spec
from clusterctl.spec.findings import SpecError
from clusterctl.spec.machines import (
    MAX_LINE_CHARS,
    MAX_MACHINES_BYTES,
    MAX_PROBLEMS,
    MachinesError,
    parse_machines,
    read_ca_bundle,
    read_machines,
)
from tests.conftest import EXAMPLES
from tests.specs import example_data, write_spec

HEADER = "hostname,bmc,mac,rack\n"
GOOD_ROW = "gpu001,10.10.1.1,3c:ec:ef:10:00:04,r01\n"
# What /etc/shadow and /etc/passwd look like; none of it may reach a message except one cell.
SHADOW = (
    "root:$6$Zq0salt$VeryLongSecretHashThatMustNeverBePrinted1234567890abcdefABCDEF:19700:0:99999:7:::\n"
    "daemon:*:19700:0:99999:7:::\n"
    "alice:$y$j9T$AnotherSecretHashValueThatStaysPrivate0987654321:19701:0:99999:7:::\n"
)
PASSWD_ROWS = (
    "root:x:0:0:root:/root:/bin/bash\nsvc:x:998:998:TOPSECRET-API-KEY-0123456789abcdef:/var/lib/svc:/usr/sbin/nologin\n"
)


def _write(directory: Path, text: str | bytes, name: str = "machines.csv") -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def _problems(exc: pytest.ExceptionInfo[MachinesError]) -> list[tuple[int, int, str]]:
    return [(p.line, p.column, p.message) for p in exc.value.problems]


def _all_text(exc: pytest.ExceptionInfo[MachinesError]) -> str:
    return str(exc.value) + "\n".join(p.message for p in exc.value.problems)


# --- the good case --------------------------------------------------------------------------------


def test_example_machines_parse_with_positions() -> None:
    machines = read_machines(EXAMPLES, "machines.csv")
    assert len(machines) == 35
    first = machines[0]
    assert (first.hostname, first.bmc, first.mac, first.rack, first.line) == (
        "ctl001",
        "10.10.0.11",
        "3c:ec:ef:10:00:01",
        "r00",
        2,
    )
    assert [first.column(c) for c in ("hostname", "bmc", "mac", "rack")] == [1, 8, 19, 37]


def test_cells_are_normalized_and_quoted_cells_located(tmp_path: Path) -> None:
    _write(tmp_path, HEADER + '"gpu001", https://bmc1.mgmt:8443 ,3C:EC:EF:10:00:04,r01\r\n\n')
    (machine,) = read_machines(tmp_path, "machines.csv")
    assert machine.hostname == "gpu001"
    assert machine.mac == "3c:ec:ef:10:00:04"
    assert machine.bmc == "https://bmc1.mgmt:8443"
    assert machine.column("bmc") == 11


def test_a_symlink_inside_the_spec_directory_is_followed(tmp_path: Path) -> None:
    _write(tmp_path, HEADER + GOOD_ROW, "inventory/real.csv")
    (tmp_path / "machines.csv").symlink_to("inventory/real.csv")
    assert [m.hostname for m in read_machines(tmp_path, "machines.csv")] == ["gpu001"]
    assert [m.hostname for m in read_machines(tmp_path, "inventory/real.csv")] == ["gpu001"]


# --- only that file ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "fragment"),
    [
        ("/etc/passwd", "is absolute"),
        ("~/machines.csv", "is absolute"),
        ("../outside.csv", "climbs out"),
        ("inventory/../../outside.csv", "climbs out"),
        ("inventory\\..\\..\\outside.csv", "climbs out"),
        ("machines\x00.csv", "control characters"),
        ("", "empty"),
        ("missing.csv", "does not exist"),
    ],
)
def test_paths_that_leave_the_spec_directory_are_refused(tmp_path: Path, relative: str, fragment: str) -> None:
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    _write(tmp_path, HEADER + GOOD_ROW, "outside.csv")
    with pytest.raises(MachinesError) as exc:
        read_machines(spec_dir, relative)
    assert fragment in str(exc.value)
    assert exc.value.line == 0  # about the path: located at the spec's `machines:`, not in a file


def test_a_symlink_out_of_the_spec_directory_is_refused(tmp_path: Path) -> None:
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    outside = _write(tmp_path, SHADOW, "shadow")
    (spec_dir / "machines.csv").symlink_to(outside)
    (spec_dir / "inventory").symlink_to(tmp_path)  # a symlinked directory leads out just the same
    for relative in ("machines.csv", "inventory/shadow"):
        with pytest.raises(MachinesError) as exc:
            read_machines(spec_dir, relative)
        assert "leads out of the spec file's directory" in str(exc.value)
        assert "root" not in _all_text(exc)


def test_symlink_to_etc_passwd_is_refused_without_reading_it(tmp_path: Path) -> None:
    (tmp_path / "machines.csv").symlink_to("/etc/passwd")
    with pytest.raises(MachinesError) as exc:
        read_machines(tmp_path, "machines.csv")
    assert "leads out" in str(exc.value)
    assert "root" not in _all_text(exc)


def test_only_regular_files(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    os.mkfifo(tmp_path / "fifo")  # must be refused, not block the read
    for name in ("adir", "fifo"):
        with pytest.raises(MachinesError, match="not a regular file"):
            read_machines(tmp_path, name)


def test_size_is_capped(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER)
    with path.open("r+b") as handle:
        handle.truncate(MAX_MACHINES_BYTES + 1)  # sparse: no disk used
    with pytest.raises(MachinesError, match=f"at most {MAX_MACHINES_BYTES} are read"):
        read_machines(tmp_path, "machines.csv")


# --- never echo the file ----------------------------------------------------------------------------


def test_shadow_file_is_not_echoed(tmp_path: Path) -> None:
    _write(tmp_path, SHADOW)
    with pytest.raises(MachinesError) as exc:
        read_machines(tmp_path, "machines.csv")
    text = _all_text(exc)
    assert "header hostname,bmc,mac,rack" in text
    assert _problems(exc)[0][:2] == (1, 1)
    for secret in ("root", "$6$", "VeryLongSecretHash", "alice", "daemon", "19700"):
        assert secret not in text


def test_passwd_rows_after_a_header_quote_only_the_offending_cell_shortened(tmp_path: Path) -> None:
    _write(tmp_path, HEADER + PASSWD_ROWS)
    with pytest.raises(MachinesError) as exc:
        read_machines(tmp_path, "machines.csv")
    text = _all_text(exc)
    # The rows have one cell each (no commas): a wrong cell count, nothing quoted.
    assert [(line, message.split(";")[0]) for line, _, message in _problems(exc)] == [
        (2, "this row has 1 cell(s)"),
        (3, "this row has 1 cell(s)"),
    ]
    for secret in ("root", "TOPSECRET", "/bin/bash", "nologin"):
        assert secret not in text


def test_a_long_bad_cell_is_shortened(tmp_path: Path) -> None:
    secret = "TOPSECRET-" + "x" * 200 + "-TAIL"
    _write(tmp_path, HEADER + f"gpu001,10.10.1.1,3c:ec:ef:10:00:04,{secret}\n" + "other,secret,cells,here\n")
    with pytest.raises(MachinesError) as exc:
        read_machines(tmp_path, "machines.csv")
    problems = _problems(exc)
    assert problems[0][:2] == (2, 36)
    assert "`rack` cell" in problems[0][2]
    assert "-TAIL" not in _all_text(exc)
    assert "x" * 60 not in _all_text(exc)


def test_control_characters_in_a_cell_are_escaped(tmp_path: Path) -> None:
    _write(tmp_path, HEADER + "gpu001,10.10.1.1\x1b[31m,3c:ec:ef:10:00:04,r01\n")
    with pytest.raises(MachinesError) as exc:
        read_machines(tmp_path, "machines.csv")
    assert "\x1b" not in _all_text(exc)
    assert exc.value.line == 2
    assert exc.value.column == 8


# --- every cell checked, every problem located --------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "column", "fragment"),
    [
        ("GPU_001,10.10.1.1,3c:ec:ef:10:00:04,r01", 1, "`hostname` cell"),
        ("gpu001,10.10.1.1;reboot,3c:ec:ef:10:00:04,r01", 8, "`bmc` cell"),
        ("gpu001,https://admin:pw@10.10.1.1,3c:ec:ef:10:00:04,r01", 8, "`bmc` cell"),
        ("gpu001,ftp://10.10.1.1,3c:ec:ef:10:00:04,r01", 8, "`bmc` cell"),
        ("gpu001,https://10.10.1.1/../etc,3c:ec:ef:10:00:04,r01", 8, "`bmc` cell"),
        ("gpu001,999.10.1.1,3c:ec:ef:10:00:04,r01", 8, "not a host name or IPv4 address"),
        ("gpu001,10.10.1.1,3c-ec-ef-10-00-04,r01", 18, "`mac` cell"),
        ("gpu001,10.10.1.1,3c:ec:ef:10:00:04,r 01", 36, "`rack` cell"),
        ("gpu001,10.10.1.1,3c:ec:ef:10:00:04,r01=x", 36, "`rack` cell"),
        ("gpu001,10.10.1.1,3c:ec:ef:10:00:04", 35, "this row has 3 cell(s)"),
        ("gpu001,10.10.1.1,3c:ec:ef:10:00:04,r01,extra", 40, "this row has 5 cell(s)"),
        ('gpu001,"10.10.1.1,3c:ec:ef:10:00:04,r01', 1, "not CSV"),
    ],
)
def test_bad_cells_are_located(tmp_path: Path, row: str, column: int, fragment: str) -> None:
    _write(tmp_path, HEADER + GOOD_ROW + row + "\n")
    with pytest.raises(MachinesError) as exc:
        read_machines(tmp_path, "machines.csv")
    assert [(p.line, p.column) for p in exc.value.problems] == [(3, column)]
    assert fragment in exc.value.problems[0].message


def test_every_bad_cell_is_reported_up_to_a_cap(tmp_path: Path) -> None:
    _write(tmp_path, HEADER + "BAD,bad bmc,nomac,r01\n" + "x_1,10.0.0.1,3c:ec:ef:10:00:04,r01\n" * 40)
    with pytest.raises(MachinesError) as exc:
        read_machines(tmp_path, "machines.csv")
    problems = exc.value.problems
    assert [(p.line, p.column) for p in problems[:3]] == [(2, 1), (2, 5), (2, 13)]
    assert len(problems) == MAX_PROBLEMS


@pytest.mark.parametrize(
    ("data", "line", "column", "fragment"),
    [
        (HEADER.encode() + b"gpu001,10.10.1.1,3c:ec:ef:10:00:04,r\xe901\n", 2, 37, "not UTF-8"),
        (HEADER.encode() + b"gpu001,10.10.1.1\x00,3c:ec:ef:10:00:04,r01\n", 2, 17, "NUL byte"),
        (b"\xff\xfeh\x00o\x00s\x00t\x00", 1, 4, "NUL byte"),  # UTF-16
    ],
)
def test_bad_encodings_are_located(tmp_path: Path, data: bytes, line: int, column: int, fragment: str) -> None:
    _write(tmp_path, data)
    with pytest.raises(MachinesError) as exc:
        read_machines(tmp_path, "machines.csv")
    assert (exc.value.line, exc.value.column) == (line, column)
    assert fragment in str(exc.value)


def test_huge_lines_are_refused_without_quoting_them(tmp_path: Path) -> None:
    _write(tmp_path, HEADER + GOOD_ROW + "gpu002," + "A" * (MAX_LINE_CHARS * 50) + "\n")
    with pytest.raises(MachinesError) as exc:
        read_machines(tmp_path, "machines.csv")
    assert (exc.value.line, exc.value.column) == (3, 1)
    assert "AAAA" not in _all_text(exc)


def test_empty_and_headerless_files(tmp_path: Path) -> None:
    _write(tmp_path, "\n\n")
    with pytest.raises(MachinesError, match="is empty"):
        read_machines(tmp_path, "machines.csv")
    with pytest.raises(MachinesError, match="lacks mac, rack"):
        parse_machines(b"hostname,bmc\ngpu001,10.0.0.1\n")


def test_a_utf8_bom_is_accepted() -> None:
    assert len(parse_machines(b"\xef\xbb\xbf" + (HEADER + GOOD_ROW).encode())) == 1


# --- through validate: findings point into the CSV or at the spec's field -----------------------------


def _spec(tmp_path: Path, **provider: Any) -> Path:
    data = example_data()
    data["provider"] = {"kind": "baremetal", "machines": "machines.csv", **provider}
    return write_spec(tmp_path, data)


def test_validate_locates_a_bad_cell_in_the_csv(tmp_path: Path) -> None:
    path = _spec(tmp_path)
    csv = tmp_path / "machines.csv"
    lines = csv.read_text().splitlines()
    lines[4] = lines[4].replace("3c:ec:ef:10:00:04", "3c:ec:ef:10:00:zz")
    csv.write_text("\n".join(lines) + "\n")
    findings, _ = validate(load_spec(path))
    (hit,) = [f for f in findings if f.code == "MCH001" and f.level is Level.ERROR]
    assert (hit.file, hit.line, hit.column) == (str(csv), 5, 18)
    assert "`mac` cell" in hit.message


def test_validate_refuses_a_symlink_out_at_the_spec_field(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(EXAMPLES / "machines.csv", outside / "machines.csv")
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    (spec_dir / "machines.csv").symlink_to(outside / "machines.csv")
    path = _spec(spec_dir)
    findings, _ = validate(load_spec(path))
    (hit,) = [f for f in findings if f.code == "MCH001" and f.level is Level.ERROR]
    assert hit.file == str(path)
    assert hit.dotted_path == "provider.machines"
    assert hit.line > 0
    assert "leads out of the spec file's directory" in hit.message


@pytest.mark.parametrize("machines", ["../machines.csv", "/etc/passwd", "a b.csv"])
def test_the_spec_field_refuses_escaping_paths(tmp_path: Path, machines: str) -> None:
    path = _spec(tmp_path, machines=machines)
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    (finding,) = exc.value.findings
    assert finding.dotted_path == "provider.machines"
    assert finding.line > 0


def test_http_bmc_needs_insecure_http(tmp_path: Path) -> None:
    path = _spec(tmp_path)
    csv = tmp_path / "machines.csv"
    csv.write_text(csv.read_text().replace("gpu001,10.10.1.1,", "gpu001,http://10.10.1.1:8000,"))
    findings, _ = validate(load_spec(path))
    (hit,) = [f for f in findings if f.code == "MCH001" and f.level is Level.ERROR]
    assert (hit.file, hit.line, hit.column) == (str(csv), 5, 8)
    assert "plain http" in hit.message
    assert "insecure_http" in hit.hint

    path = _spec(tmp_path, bmc={"insecure_http": True})
    findings, plan = validate(load_spec(path))
    assert not [f for f in findings if f.level is Level.ERROR]
    (warning,) = [f for f in findings if f.code == "BMC001"]
    assert warning.level is Level.WARNING
    assert warning.dotted_path == "provider.bmc.insecure_http"
    assert plan is not None
    assert plan.baremetal is not None
    assert plan.baremetal.bmc.insecure_http is True


# --- the BMC settings and the CA bundle ---------------------------------------------------------------


def _ca_pem() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test BMC CA")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def test_ca_bundle_reaches_the_plan(tmp_path: Path) -> None:
    pem = _ca_pem()
    (tmp_path / "bmc-ca.pem").write_text(pem)
    findings, plan = validate(load_spec(_spec(tmp_path, bmc={"ca_bundle": "bmc-ca.pem"})))
    assert not [f for f in findings if f.code == "BMC001"]
    assert plan is not None
    assert plan.baremetal is not None
    bmc = plan.baremetal.bmc
    assert (bmc.verify_tls, bmc.insecure_http, bmc.ca_bundle_file, bmc.ca_bundle) == (True, False, "bmc-ca.pem", pem)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (SHADOW, "holds no PEM certificate"),
        ("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n", "does not load"),
    ],
)
def test_a_bad_ca_bundle_is_an_error_that_does_not_echo_it(tmp_path: Path, content: str, fragment: str) -> None:
    (tmp_path / "bmc-ca.pem").write_text(content)
    findings, plan = validate(load_spec(_spec(tmp_path, bmc={"ca_bundle": "bmc-ca.pem"})))
    assert plan is None  # a phase-1 error
    (hit,) = [f for f in findings if f.code == "BMC001"]
    assert hit.level is Level.ERROR
    assert hit.dotted_path == "provider.bmc.ca_bundle"
    assert fragment in hit.message
    assert "root" not in hit.message
    assert "bm90" not in hit.message


def test_a_ca_bundle_outside_the_spec_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text(_ca_pem())
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    (spec_dir / "bmc-ca.pem").symlink_to(tmp_path / "ca.pem")
    with pytest.raises(MachinesError, match="leads out"):
        read_ca_bundle(spec_dir, "bmc-ca.pem")
    findings, _ = validate(load_spec(_spec(spec_dir, bmc={"ca_bundle": "bmc-ca.pem"})))
    assert [f.dotted_path for f in findings if f.code == "BMC001" and f.level is Level.ERROR] == [
        "provider.bmc.ca_bundle"
    ]


def test_ca_bundle_with_verification_off_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as exc:
        load_spec(_spec(tmp_path, bmc={"ca_bundle": "bmc-ca.pem", "verify_tls": False}))
    assert "would not be used" in exc.value.findings[0].message


def test_deprecated_bmc_verify_tls_still_works_with_a_hint(tmp_path: Path) -> None:
    loaded = load_spec(_spec(tmp_path, bmc_verify_tls=False))
    assert loaded.spec.provider.bmc.verify_tls is False  # type: ignore[union-attr]
    findings, plan = validate(loaded)
    assert plan is not None
    assert plan.baremetal is not None
    assert plan.baremetal.bmc.verify_tls is False
    hits = {f.message.split(";")[0]: f for f in findings if f.code == "BMC001"}
    deprecated = hits["`bmc_verify_tls` is deprecated"]
    assert deprecated.level is Level.WARNING
    assert deprecated.hint == "Write `bmc: {verify_tls: false}` instead."
    assert deprecated.line > 0
    assert any("not verified" in f.message and f.level is Level.WARNING for f in findings if f.code == "BMC001")


def test_deprecated_and_new_setting_must_agree(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as exc:
        load_spec(_spec(tmp_path, bmc_verify_tls=False, bmc={"verify_tls": True}))
    assert "disagree" in exc.value.findings[0].message


def test_strict_by_default(tmp_path: Path) -> None:
    findings, plan = validate(load_spec(_spec(tmp_path)))
    assert plan is not None
    assert plan.baremetal is not None
    bmc = plan.baremetal.bmc
    assert (bmc.insecure_http, bmc.verify_tls, bmc.ca_bundle) == (False, True, None)
    assert not [f for f in findings if f.code in ("BMC001", "MCH001")]


def test_validate_command_prints_no_line_of_the_csv(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from clusterctl.commands import cli

    path = _spec(tmp_path)
    csv = tmp_path / "machines.csv"
    # A valid header, then what a shadow file holds; then a non-UTF-8 byte: located errors, nothing echoed.
    for content, where in (
        (HEADER.encode() + SHADOW.encode(), ":2:"),
        (HEADER.encode() + b"gpu001,10.10.1.1,3c:ec:ef:10:00:04,r\xe9\n" + SHADOW.encode(), ":2:37"),
    ):
        csv.write_bytes(content)
        result = CliRunner().invoke(cli, ["validate", str(path)], catch_exceptions=False)
        assert result.exit_code == 1
        assert f"{csv}{where}" in result.output
        for secret in ("$6$", "VeryLongSecretHash", "alice", "19700", "3c:ec:ef:10:00:04"):
            assert secret not in result.output


# --- the optional boot_mode column ---------------------------------------------------------------


def test_a_machine_may_name_its_firmware(tmp_path: Path) -> None:
    """``boot_mode`` (UEFI, Legacy or BIOS, any case; empty: the spec's) for a fleet of mixed firmware."""
    _write(
        tmp_path,
        "hostname,bmc,mac,rack,boot_mode\n"
        "gpu001,10.10.1.1,3c:ec:ef:10:00:04,r01,uefi\n"
        "gpu002,10.10.1.2,3c:ec:ef:10:00:05,r01,BIOS\n"
        "gpu003,10.10.1.3,3c:ec:ef:10:00:06,r01,\n",
    )
    assert [m.boot_mode for m in read_machines(tmp_path, "machines.csv")] == ["UEFI", "Legacy", None]


def test_a_bad_firmware_is_located(tmp_path: Path) -> None:
    _write(tmp_path, "hostname,bmc,mac,rack,boot_mode\ngpu001,10.10.1.1,3c:ec:ef:10:00:04,r01,coreboot\n")
    with pytest.raises(MachinesError) as exc:
        read_machines(tmp_path, "machines.csv")
    assert _problems(exc) == [(2, 40, "`boot_mode` cell: UEFI or Legacy (empty: the spec's provider.boot_mode)")]


def test_the_plan_gives_each_machine_its_firmware(tmp_path: Path) -> None:
    path = _spec(tmp_path)
    csv = tmp_path / "machines.csv"
    lines = csv.read_text().splitlines()
    lines = [lines[0] + ",boot_mode", *(f"{line},{'Legacy' if i == 1 else ''}" for i, line in enumerate(lines[1:], 1))]
    csv.write_text("\n".join(lines) + "\n")
    plan = load_and_validate(path).plan
    assert plan.baremetal is not None
    modes = {m.hostname: m.boot_mode for m in plan.baremetal.machines}
    assert modes["ctl001"] == "Legacy"
    assert set(modes.values()) == {"UEFI", "Legacy"}
    assert plan.baremetal.boot_mode == "UEFI"
