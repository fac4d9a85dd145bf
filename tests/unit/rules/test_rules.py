"""Every rule: the examples pass it, and a spec that breaks it gets its finding at the right field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clusterctl.rules import RULES, SAFETY_TAG, UnskippableRuleError, check_skip, validate
from clusterctl.spec import Level, load_spec
from tests.conftest import EXAMPLES
from tests.specs import Mutation, group, mutated


def _set(path: str, value: Any) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        keys = path.split(".")
        target = data
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target[key]
        target[keys[-1]] = value

    return apply


def _gpu(**changes: Any) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        group(data, "gpu").update(changes)

    return apply


def _hw(**changes: Any) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        data["hardware"]["dgx-h100"].update(changes)

    return apply


def _storage(index: int, **changes: Any) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        data["storage"][index].update(changes)

    return apply


def _drop_machine_row(data: dict[str, Any]) -> None:
    group(data, "gpu")["count"] = 33  # gpu033 has no row in machines.csv


def _two_defaults(data: dict[str, Any]) -> None:
    data["slurm"]["partitions"][1]["default"] = True


def _dup_partition(data: dict[str, Any]) -> None:
    data["slurm"]["partitions"][1]["name"] = "train"


# A valid domain (four 61-character labels) that leaves no room for a host name in 253 characters.
_LONG_DOMAIN = ".".join(["d" * 61] * 4)


def _hostname_clash(data: dict[str, Any]) -> None:
    group(data, "login")["hostname"] = "ctl{index:03d}"


# (code, mutation, expected level, fragment of the message, dotted path of the finding)
CASES: list[tuple[str, Mutation, Level, str, str]] = [
    ("REF001", _gpu(hardware="dgx-h200"), Level.ERROR, "not defined", "nodes[2].hardware"),
    (
        "REF002",
        _set("slurm.partitions.0.groups", ["gpus"]),
        Level.ERROR,
        "does not exist",
        "slurm.partitions[0].groups[0]",
    ),
    ("NAM001", _dup_partition, Level.ERROR, "Duplicate partition", "slurm.partitions[1].name"),
    ("NAM001", _hostname_clash, Level.ERROR, "also produced", "nodes[1].hostname"),
    ("NAM002", _gpu(hostname="GPU_{index}"), Level.ERROR, "not a DNS-safe", "nodes[2].hostname"),
    ("SLU001", _two_defaults, Level.ERROR, "second default", "slurm.partitions[1].default"),
    ("NET001", _set("network.management_cidr", "10.20.0.0/27"), Level.ERROR, "do not fit", "network.management_cidr"),
    ("FAB001", _hw(rails=["mlx5_0", "mlx5_3"]), Level.ERROR, "one rail per GPU", "hardware.dgx-h100.rails"),
    (
        "FAB004",
        lambda d: (_set("fabric.layout", "rack-leaf")(d), _set("provider", {"kind": "local"})(d)),
        Level.ERROR,
        "nodes_per_rack",
        "fabric.layout",
    ),
    ("FAB005", _set("fabric.oversubscription", 64), Level.ERROR, "leaves a leaf no uplink", "fabric.oversubscription"),
    ("FAB006", _set("fabric.subnet_manager", "opensm"), Level.ERROR, "never on every node", "fabric.opensm_hosts"),
    (
        "FAB007",
        lambda d: d["fabric"].update(subnet_manager="opensm", opensm_hosts=[{"host": "ctl001"}, {"host": "gpu001"}]),
        Level.ERROR,
        "no InfiniBand port",
        "fabric.opensm_hosts[0].port",
    ),
    (
        "FAB008",
        _set("fabric.ipoib", {"networks": ["10.20.128.0/17"]}),
        Level.ERROR,
        "overlaps",
        "fabric.ipoib.networks[0]",
    ),
    ("GPU001", _set("versions.cuda", "11.7"), Level.ERROR, "does not support Hopper", "versions.cuda"),
    ("GPU002", _set("versions.nvidia_driver", "560.35.03"), Level.ERROR, "older than 570.26", "versions.nvidia_driver"),
    ("GPU003", _set("versions.nccl", "2.21.5"), Level.ERROR, "no build for CUDA 12.8", "versions.nccl"),
    (
        "GPU004",
        _set("versions.fabric_manager", "570.124.06"),
        Level.ERROR,
        "exact same version",
        "versions.fabric_manager",
    ),
    ("SLU002", _set("versions.slurm", "24.05"), Level.ERROR, "ships Slurm 23.11", "versions.slurm"),
    ("SLU003", lambda d: _block_on_old_slurm(d), Level.ERROR, "topology/block needs Slurm >= 23.11", "slurm.topology"),
    ("FAB002", _gpu(count=8300, spares=500), Level.ERROR, "more than three tiers", "fabric.switch_ports"),
    ("FAB003", _set("fabric.oversubscription", 3), Level.WARNING, "33% of line rate", "fabric.oversubscription"),
    (
        "STO001",
        _storage(
            1,
            kind="lustre",
            mgs=["10.30.0.11@o2ib", "10.30.0.12@o2ib"],
            fsname="datasets",
            backends=None,
            filesystem=None,
        ),
        Level.WARNING,
        "same storage",
        "storage[1]",
    ),
    ("STO002", _storage(1, write_bw="10 GB/s"), Level.WARNING, "s to write", "storage[1].write_bw"),
    (
        "STO003",
        _hw(storage_netdevs=[], storage_nics=[]),
        Level.ERROR,
        "neither `storage_nics` nor `storage_netdevs`",
        "hardware.dgx-h100",
    ),
    ("HW001", _hw(memory_gib=512), Level.WARNING, "less than 1.5x", "hardware.dgx-h100.memory_gib"),
    ("HW002", _gpu(spares=1), Level.WARNING, "spare(s) for 32 nodes", "nodes[2].spares"),
    ("WRK001", _set("workload.model_params_b", 2000), Level.ERROR, "exceeds the cluster's", "workload.model_params_b"),
    ("MCH001", _drop_machine_row, Level.ERROR, "has no row", "provider.machines"),
    ("NAM002", _set("network.domain", _LONG_DOMAIN), Level.ERROR, "longer than the 253", "nodes[0].hostname"),
    ("NAM001", _gpu(hostname="{group}-node"), Level.ERROR, "another node of the same group", "nodes[2].hostname"),
    ("NAM002", _gpu(hostname="{index:03d}"), Level.ERROR, "all-digit names read as addresses", "nodes[2].hostname"),
    ("SAF001", _storage(0, mount="/home/datasets"), Level.ERROR, "inside tier `home` at /home", "storage[0].mount"),
    ("SAF002", _set("slurm.partitions.1.name", "default"), Level.ERROR, "is reserved", "slurm.partitions[1].name"),
    (
        "BMC001",
        _set("provider.bmc", {"ca_bundle": "bmc-ca.pem"}),
        Level.ERROR,
        "does not exist",
        "provider.bmc.ca_bundle",
    ),
    ("BMC001", _set("provider.bmc_verify_tls", False), Level.WARNING, "deprecated", "provider.bmc_verify_tls"),
    ("SLU004", _set("slurm.state_save_location", None), Level.ERROR, "finds no job state", "slurm"),
    (
        "SLU004",
        _set("slurm.state_save_location", "/srv/slurm/state"),
        Level.ERROR,
        "on no storage tier",
        "slurm.state_save_location",
    ),
    (
        "SLU004",
        _set("slurm.state_save_location", "/home"),
        Level.ERROR,
        "mount point itself",
        "slurm.state_save_location",
    ),
    (
        "SLU005",
        _set("site.slurm_conf", {"MaxJobCnt": 10}),
        Level.ERROR,
        "not a slurm.conf parameter",
        "site.slurm_conf.MaxJobCnt",
    ),
    (
        "SLU005",
        _set("site.slurm_conf", {"MaxJobCount": "many"}),
        Level.ERROR,
        "whole number from 0 to 4294967295",
        "site.slurm_conf.MaxJobCount",
    ),
    ("SLU005", _set("site.slurm_conf", {"UsePAM": 1}), Level.ERROR, "true or false", "site.slurm_conf.UsePAM"),
    (
        "SAF003",
        _set("site.slurm_conf", {"AuthType": "auth/none"}),
        Level.ERROR,
        "writes `AuthType`",
        "site.slurm_conf.AuthType",
    ),
    (
        "SAF003",
        _set("site.slurm_conf", {"AccountingStoragePass": "hunter2"}),
        Level.ERROR,
        "is a password",
        "site.slurm_conf.AccountingStoragePass",
    ),
]


def _block_on_old_slurm(data: dict[str, Any]) -> None:
    data["os"] = "debian-12"
    data["versions"]["slurm"] = "22.05"
    data["slurm"]["topology"] = "block"


def _clean_storage(data: dict[str, Any]) -> None:
    for tier in data["storage"]:
        for key in [k for k, v in tier.items() if v is None]:
            del tier[key]


@pytest.mark.parametrize(("code", "mutation", "level", "fragment", "path"), CASES, ids=[c[0] for c in CASES])
def test_rule_fires(tmp_path: Path, code: str, mutation: Mutation, level: Level, fragment: str, path: str) -> None:
    def apply(data: dict[str, Any]) -> None:
        mutation(data)
        _clean_storage(data)

    loaded = load_spec(mutated(tmp_path, apply))
    findings, _ = validate(loaded)
    hits = [f for f in findings if f.code == code]
    assert hits, f"{code} did not fire; findings: {[(f.code, f.message) for f in findings]}"
    hit = next((f for f in hits if fragment in f.message), hits[0])
    assert fragment in hit.message
    assert hit.level is level
    assert hit.dotted_path == path
    assert hit.line > 0, "every finding is located"


@pytest.mark.parametrize("example", ["onprem-h100-256.yaml", "local.yaml"])
@pytest.mark.parametrize("code", sorted({c[0] for c in CASES}))
def test_examples_pass_rule(example: str, code: str) -> None:
    findings, plan = validate(load_spec(EXAMPLES / example))
    assert plan is not None
    bad = [f for f in findings if f.code == code and f.level >= Level.WARNING]
    assert not bad, [f.message for f in bad]


def test_every_registered_rule_is_tested() -> None:
    validate(load_spec(EXAMPLES / "local.yaml"))  # registers the rules
    tested = {c[0] for c in CASES}
    untested = {r.code for r in RULES.values()} - tested - {"CLD", "BUR"}
    assert not {c for c in untested if not c.startswith(("CLD", "BUR"))}, untested


def test_machines_csv_findings_point_into_the_csv(tmp_path: Path) -> None:
    path = mutated(tmp_path, lambda d: None)
    csv = tmp_path / "machines.csv"
    lines = csv.read_text().splitlines()
    lines.append("gpu999,10.10.9.9,3c:ec:ef:99:99:99,r09")
    lines.append(lines[5].replace("gpu002", "gpu998"))  # duplicate BMC and MAC of gpu003's row
    csv.write_text("\n".join(lines) + "\n")
    findings, _ = validate(load_spec(path))
    csv_findings = [f for f in findings if f.file == str(csv)]
    assert any("gpu999" in f.message and f.line == len(lines) - 1 and f.level is Level.WARNING for f in csv_findings)
    assert any("appears on lines" in f.message and f.level is Level.ERROR for f in csv_findings)


def test_skip_rule(tmp_path: Path) -> None:
    loaded = load_spec(mutated(tmp_path, _gpu(spares=1)))
    findings, _ = validate(loaded, skip=["spares"])
    assert not [f for f in findings if f.code == "HW002"]
    with pytest.raises(ValueError, match="unknown rule"):
        validate(loaded, skip=["no-such-rule"])


SAFETY_RULES = {"NAM001": "unique-names", "NAM002": "dns-safe-hostnames", "SAF001": "safe-mount-points"}


def test_rules_guarding_names_and_paths_are_tagged_safety() -> None:
    validate(load_spec(EXAMPLES / "local.yaml"))  # registers the rules
    safety = {r.code: r.name for r in RULES.values() if SAFETY_TAG in r.tags}
    assert safety.items() >= SAFETY_RULES.items()
    assert "SAF002" in safety


@pytest.mark.parametrize("name", [*SAFETY_RULES, *SAFETY_RULES.values()])
def test_safety_rules_cannot_be_skipped(tmp_path: Path, name: str) -> None:
    # The hostname clash stays an error: a skip of the rule that finds it is refused, not obeyed.
    loaded = load_spec(mutated(tmp_path, _hostname_clash))
    with pytest.raises(UnskippableRuleError) as info:
        validate(loaded, skip=["spares", name])
    rule = next(r for r in RULES.values() if name in (r.code, r.name))
    assert f"{rule.name} ({rule.code})" in str(info.value)
    assert "cannot be skipped" in str(info.value)
    assert "spares" not in str(info.value)
    with pytest.raises(UnskippableRuleError):
        check_skip([name])


def test_check_skip_passes_ordinary_rules() -> None:
    assert check_skip(["spares", "FAB003"]) == {"spares", "FAB003"}


def test_phase_one_errors_stop_before_plan(tmp_path: Path) -> None:
    findings, plan = validate(load_spec(mutated(tmp_path, _gpu(hardware="nope"))))
    assert plan is None
    assert {f.code for f in findings} == {"REF001"}


def _six_independent_errors(data: dict[str, Any]) -> None:
    """Network, storage, partition and three version errors, none caused by another."""
    data["network"]["management_cidr"] = "10.20.0.0/27"  # NET001: 35 nodes
    data["versions"].update(nvidia_driver="535.54.03", nccl="2.18.1", slurm="24.05")  # GPU002, GPU003, SLU002
    for key in ("storage_nics", "storage_netdevs"):  # STO003: Lustre o2ib and WEKA with no storage NICs
        data["hardware"]["dgx-h100"].pop(key)
    data["slurm"]["partitions"][1]["default"] = True  # SLU001


def test_one_validation_reports_every_independent_error(tmp_path: Path) -> None:
    """A network error no longer hides the version, storage and partition errors behind it."""
    findings, plan = validate(load_spec(mutated(tmp_path, _six_independent_errors)))
    errors = sorted(f.code for f in findings if f.level is Level.ERROR)
    assert errors == ["GPU002", "GPU003", "NET001", "SLU001", "SLU002", "STO003"]
    assert plan is None  # NET001 leaves no addresses to plan with


def test_errors_that_leave_the_plan_buildable_do_not_stop_its_rules(tmp_path: Path) -> None:
    """Version and partition errors do not stop the rules that read the plan (here MCH001 on machines.csv)."""

    def mutation(data: dict[str, Any]) -> None:
        _six_independent_errors(data)
        data["network"]["management_cidr"] = "10.20.0.0/16"
        group(data, "gpu")["count"] = 33  # gpu033 has no row in machines.csv

    findings, plan = validate(load_spec(mutated(tmp_path, mutation)))
    assert plan is not None
    assert {"GPU002", "GPU003", "SLU001", "SLU002", "STO003", "MCH001"} <= {f.code for f in findings}


def test_an_unknown_slurm_conf_name_gets_the_name_slurm_knows(tmp_path: Path) -> None:
    findings, _ = validate(load_spec(mutated(tmp_path, _set("site.slurm_conf", {"Maxjobcount": 5, "MaxArraySze": 9}))))
    hints = {f.dotted_path: f.hint for f in findings if f.code == "SLU005"}
    assert hints["site.slurm_conf.Maxjobcount"].startswith("Did you mean `MaxJobCount`?")
    assert hints["site.slurm_conf.MaxArraySze"].startswith("Did you mean `MaxArraySize`?")


def test_the_parameters_clusterctl_writes_are_the_ones_it_refuses() -> None:
    """SAF003's list is what templates/slurm/slurm.conf.j2 writes (plus the controller lines' old names)."""
    import re

    from clusterctl.catalog.slurm_conf import OWNED, PARAMETERS

    template = (EXAMPLES.parent / "templates" / "slurm" / "slurm.conf.j2").read_text()
    written = set(re.findall(r"^([A-Z][A-Za-z]+)=", template, re.MULTILINE)) - {"NodeName", "PartitionName"}
    assert written - {"SlurmctldHost"} == OWNED - {"ControlMachine", "ControlAddr", "BackupController", "BackupAddr"}
    assert set(PARAMETERS) >= OWNED
