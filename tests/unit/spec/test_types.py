"""The spec's text types: each takes what it documents and refuses the rest with a message saying what to do."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from clusterctl.spec import types as T

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f"

# type name: (values it takes, [(value it refuses, fragment of the message)])
CASES: dict[str, tuple[list[str], list[tuple[Any, str]]]] = {
    "DnsLabel": (["atlas", "gpu-b"], [("Atlas", "DNS-safe"), ("1gpu", "start with a letter"), ("a\n", "control")]),
    "HostLabel": (["dgx-h100", "8gpu"], [("dgx_h100", "lower-case letters"), ("-a", "not first or last")]),
    "Hostname": (
        ["nfs01.atlas.internal", "10.20.0.5", "NFS01"],
        [("nfs_01", "no '_'"), ("10.20.0.256", "IPv4"), ("a.", "trailing dot"), ("a b", "spaces")],
    ),
    "DnsDomain": (["atlas.internal"], [("Atlas.internal", "lower-case"), ("a..b", "separated by dots")]),
    "SlurmName": (["gpu", "h100_nvl"], [("a,b", "no spaces, ','"), ("a=b", "'='")]),
    "LinuxUser": (["ubuntu", "azureuser"], [("Ubuntu", "lower-case"), ("root;id", "lower-case letters")]),
    "AbsolutePath": (
        ["/export/home", "/"],
        [("export/home", "start with '/'"), ("/a/../b", "`..` segments"), ("/home/$(id)", "'$'"), ("/a/", "trailing")],
    ),
    "MountPoint": (
        ["/home", "/lustre/datasets", "/mnt/ckpt", "/scratch"],
        [
            ("/", "not a mount point"),
            ("/etc", "directory the OS owns"),
            ("/usr/local/data", "inside /usr"),
            ("/var/lib/docker", "inside /var/lib"),
            ("/proc/x", "inside /proc"),
            ("/boot", "the OS owns"),
            ("/mnt", "system directory"),
            ("/home/{{ lookup('pipe','id') }}", "no spaces, quotes"),
        ],
    ),
    "RelativePath": (
        ["machines.csv", "inv/machines.csv", "./machines.csv"],
        [("/etc/passwd", "relative"), ("../machines.csv", "`..`"), ("a/../../b", "`..`"), ("-rf", "'-'")],
    ),
    "FileName": (["ubuntu-24.04.2-live-server-amd64.iso"], [("a/b.iso", "no '/'"), (".hidden", "not starting")]),
    "DiskMatch": (
        ["/dev/nvme0n1", "/dev/disk/by-id/nvme-*S5GX*"],
        [("/etc/shadow", "under /dev/"), ("/dev/../x", "`..`")],
    ),
    "Url": (
        ["https://mirror.example.com/debian", "http://10.0.0.1:8080/key.asc?op=get&x=1", "file:///srv/repo"],
        [
            ("ftp://mirror/x", "http://, https:// or file:///"),
            ("https://user:pw@mirror/x", "credentials"),
            ("https://mirror/a b", "without spaces"),
            ("https://mirror/$(id)", "shell characters"),
            ("https://mirror/%0aX", "control characters"),
            ("https:///path", "names no host"),
            ("https://h:99999/", "port"),
            ("file://host/x", "file:///"),
        ],
    ),
    "AptToken": (["bookworm", "main", "stable/updates"], [("main contrib", "letters"), ("../x", "letters")]),
    "NetdevName": (
        ["eth0", "ens1f0np0", "ibs1", "enP1s1.100"],
        [("a" * 16, "at most 15"), ("eth0:1", "no '/', ':'"), ("a/b", "no '/'"), ("all", "reserved")],
    ),
    "RdmaDevice": (["mlx5_0", "mlx5_ib0", "rocep12s0"], [("mlx5 0", "letters"), ("../mlx5", "letters")]),
    "PciAddress": (["0000:0c:00.0", "0000:0C:00.0"], [("0c:00.0", "write the 0000: domain"), ("0000:0c:00.8", "hex")]),
    "MacAddress": (["3c:ec:ef:01:02:03", "3C:EC:EF:01:02:03"], [("3c-ec-ef-01-02-03", "separated by ':'")]),
    "LustreNid": (
        ["10.30.0.11@o2ib", "172.31.0.5@tcp1"],
        [("10.30.0.300@o2ib", "not an IPv4 address"), ("mgs@tcp", "IPv4 address, '@'"), ("10.0.0.1@o2ib,x", "LNet")],
    ),
    "LustreFsname": (["datasets", "lustrefs"], [("datasets1", "at most 8"), ("a b", "letters")]),
    "MountOption": (["noatime", "vers=4.2", "x-systemd.automount"], [("rw,exec", "no commas"), ("a b", "no spaces")]),
    "CloudRegion": (["us-east-1", "us-central1", "eastus"], [("US-East", "lower-case"), ("us east", "lower-case")]),
    "CloudZone": (["us-east-1a", "1"], [("us east", "lower-case")]),
    "InstanceType": (["p5.48xlarge", "a3-megagpu-8g", "Standard_ND96isr_H100_v5"], [("p5 48xlarge", "letters")]),
    "AwsVpcId": (["vpc-0abc1234"], [("vpc_0abc", "'vpc-'"), ("subnet-1", "'vpc-'")]),
    "AwsSubnetId": (["subnet-0b578c46a39edb5d3"], [("vpc-1", "'subnet-'")]),
    "AwsCapacityReservationId": (["cr-0eaf243f6d60fcc9a"], [("cr-xyz", "hex")]),
    "AwsPlacementGroup": (["odcr-pg"], [("pg;x", "letters")]),
    "GcpProjectId": (["my-gpu-project", "example.com:my-project"], [("My-Project", "lower-case"), ("ab", "6 to 30")]),
    "GcpResource": (
        ["a3mega-reservation", "projects/p-1/regions/us-central1/subnetworks/nodes"],
        [("Net", "lower-case"), ("projects/../x", "a name")],
    ),
    "AzureResourceGroup": (["clusterctl-nimbus"], [("rg.", "not ending in '.'"), ("rg name", "letters")]),
    "AzureResourceId": (
        ["/subscriptions/00000000-0000/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s"],
        [("subscriptions/x", "/subscriptions/"), ("/subscriptions/x/../y", "`..`")],
    ),
    "CloudImage": (
        [
            "ami-0123456789abcdef0",
            "resolve:ssm:/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id",
            "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64",
            "Canonical:ubuntu-24_04-lts:server:latest",
        ],
        [("ami-xyz", "AMI id"), ("resolve:ssm:../secret", "`..`"), ("$(id)", "AMI id")],
    ),
    "ImageReference": (
        ["local/debian:bookworm", "ghcr.io:443/org/img:1.2@sha256:" + "a" * 64],
        [("Local/Debian", "docker writes it"), ("img:tag;id", "docker writes it")],
    ),
    "SshPublicKey": (
        [KEY, KEY + " ops@example.com"],
        [
            ('command="id" ' + KEY, "no options"),
            (KEY.replace("ssh-ed25519", "ssh-rsa"), "not a ssh-rsa key"),
            ("ssh-ed25519 AAAA!!!!AAAAAAAAAAAAAAAA", "'<type> <base64> [comment]'"),
            (KEY + " ops\nssh-rsa AAAA", "control character"),
        ],
    ),
    "PlainText": (
        ["A cluster for the NLP team (phase 2)."],
        [("a\nb", "control character"), ("x" * 1025, "at most 1024")],
    ),
    "SlurmTime": (["1-00:00:00", "UNLIMITED", "60"], [("1:00\n", "not a Slurm time"), ("1 day", "not a Slurm time")]),
    "VersionStr": (
        ["12.8", "570.133.20"],
        [(12.8, "quoted"), ("12.8\n", "not a version"), ("12.8; id", "not a version")],
    ),
}

PARAMS = [(name, value) for name, (good, _) in CASES.items() for value in good]
BAD = [(name, value, fragment) for name, (_, bad) in CASES.items() for value, fragment in bad]


@pytest.mark.parametrize(("name", "value"), PARAMS)
def test_takes(name: str, value: str) -> None:
    assert TypeAdapter(getattr(T, name)).validate_python(value).lower() == value.lower()


@pytest.mark.parametrize(("name", "value", "fragment"), BAD)
def test_refuses_with_what_is_allowed(name: str, value: Any, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        TypeAdapter(getattr(T, name)).validate_python(value)
    message = info.value.errors()[0]["msg"]
    assert fragment in message
    assert "\n" not in message, "a message never carries the value's newline"


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_text_type_refuses_control_characters_non_text_and_huge_values(name: str) -> None:
    adapter = TypeAdapter(getattr(T, name))
    good = CASES[name][0][0]
    # SlurmTime takes a whole number of minutes as YAML wrote it (max_time: 60).
    numbers = () if name == "SlurmTime" else (5,)
    for bad in (good + "\x00", good + "\n", "\u2028" + good, *numbers, True, None, good * 20000):
        with pytest.raises(ValidationError):
            adapter.validate_python(bad)


@pytest.mark.parametrize("name", sorted(CASES))
def test_schema_shows_the_contract(name: str) -> None:
    schema = TypeAdapter(getattr(T, name)).json_schema()
    assert schema["type"] == "string"
    assert "pattern" in schema
    assert schema["pattern"].startswith("^")
    assert schema["pattern"].endswith("$")
    assert name in {"SlurmTime", "VersionStr", "DnsLabel"} or schema["maxLength"] > 0


def test_unicode_look_alikes_are_refused() -> None:
    # Cyrillic 'а' (U+0430) and a fullwidth digit look like ASCII but are other characters.
    for name, value in [("DnsLabel", "\u0430tlas"), ("Hostname", "gpu\uff101"), ("MountPoint", "/h\u043eme")]:
        with pytest.raises(ValidationError):
            TypeAdapter(getattr(T, name)).validate_python(value)


def test_pci_and_mac_are_normalized_to_sysfs_case() -> None:
    assert TypeAdapter(T.PciAddress).validate_python("0000:0C:00.0") == "0000:0c:00.0"
    assert TypeAdapter(T.MacAddress).validate_python("3C:EC:EF:01:02:0A") == "3c:ec:ef:01:02:0a"


# --- hostname patterns: str.format runs on them ----------------------------------------------------


@pytest.mark.parametrize(
    "pattern", ["{group}{index:03d}", "mol-gpu{index}", "{group}-{index:02d}", "n{index}", "GPU_{index}"]
)
def test_hostname_pattern_takes(pattern: str) -> None:
    assert TypeAdapter(T.HostnamePattern).validate_python(pattern) == pattern


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("{group.__class__}", "only the fields {group} and {index}"),
        ("{group.__init__.__globals__}", "only the fields"),
        ("{index[0]}", "only the fields"),
        ("{0}", "only the fields"),
        ("{}", "only the fields"),
        ("{index!r}", "only the fields"),
        ("{index:0999999999d}", "zero-padded width"),
        ("{index:>10}", "zero-padded width"),
        ("{index:{group}}", "zero-padded width"),
        ("{group:>40}", "{group} takes no format"),
        ("gpu{index}.example", "no dots"),
        ("gpu {index}", "no dots, spaces"),
        ("{{index}}", "braces"),
        ("gpu{index", "not a hostname pattern"),
        ("gpu\n{index}", "control character"),
    ],
)
def test_hostname_pattern_refuses_format_injection(pattern: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        TypeAdapter(T.HostnamePattern).validate_python(pattern)
    assert fragment in info.value.errors()[0]["msg"]


def test_hostname_pattern_fills_in_only_group_and_index() -> None:
    assert T.hostname_from_pattern("{group}{index:03d}", "gpu", 7) == "gpu007"
