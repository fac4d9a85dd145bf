"""Each format's escaping function: what it writes reads back as the value, or it refuses."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from ruamel.yaml import YAML

from clusterctl.pipeline import load_and_validate
from clusterctl.plan.storage import systemd_mount_unit
from clusterctl.render import ansible_yaml, escape, render_files
from clusterctl.render.check import source_field
from clusterctl.render.escape import RenderError
from clusterctl.spec import SpecError
from tests.conftest import EXAMPLES
from tests.security import formats
from tests.specs import example_data, write_spec

HOSTILE = [
    "plain",
    "",
    "{{ lookup('pipe','touch x') }}",
    "{% if 1 %}x{% endif %}{# c #}",
    "a\nb",
    "a\r\nb",
    "a\u2028b\u2029c\x85d",
    "tab\there",
    "nul\x00x",
    "del\x7fx",
    "quote\"back\\slash'single",
    "#hash = equals; semi $(sub) `tick` ${VAR} %h %%",
    "unicode ｇрu é 😀 \u202e",
    "bom\ufeff",
    "a" * 3000,
    " leading and trailing ",
    "-starts-with-dash",
    "yes",
    "null",
    "12.10",
    "- item",
    "key: value",
    "[list]",
    "{map: 1}",
    "&anchor *alias !tag",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_yaml_quote_reads_back_exactly(value: str) -> None:
    text = f"k: {escape.yaml_quote(value)}\n"
    assert yaml.safe_load(text) == {"k": value}
    assert YAML(typ="safe", pure=True).load(text) == {"k": value}
    assert "\n" not in text[:-1]


@pytest.mark.parametrize("value", HOSTILE)
def test_ansible_yaml_is_unsafe_and_reads_back(value: str) -> None:
    text = ansible_yaml.dump({"all": {"vars": {"v": value, "l": [value], "d": {"k": value}, "n": 3, "b": True}}}, value)
    assert ansible_yaml.load(text) == {
        "all": {"vars": {"v": value, "l": [value], "d": {"k": value}, "n": 3, "b": True}}
    }
    # Every string value carries the tag, except text ansible-core would read as another type
    # (it re-resolves !unsafe scalars as plain ones; such text has no template syntax); the
    # header comment is one line.
    assert text.count("!unsafe") == (0 if ansible_yaml._reads_as_other_type(value) else 3)
    assert text.split("\n")[1].startswith("# ")
    assert len(text.split("\n")) in (11, 12)  # a list too long for one line is written one item a line


def test_only_the_allow_list_is_templated() -> None:
    render_dir = ansible_yaml.TEMPLATED["clusterctl_render_dir"]
    text = ansible_yaml.dump(
        {"clusterctl_render_dir": render_dir, "other": render_dir, "nested": {"clusterctl_render_dir": render_dir}}, "h"
    )
    assert 'clusterctl_render_dir: "{{ inventory_dir }}/../.."' in text.split("\n")
    assert 'other: !unsafe "{{ inventory_dir }}/../.."' in text.split("\n")
    assert '  clusterctl_render_dir: !unsafe "{{ inventory_dir }}/../.."' in text.split("\n")
    # Another value under the allowed name is data.
    assert "!unsafe" in ansible_yaml.dump({"clusterctl_render_dir": "{{ x }}"}, "h")


@pytest.mark.parametrize("value", HOSTILE)
def test_comment_is_one_printable_line(value: str) -> None:
    text = escape.comment(value)
    assert len(f"# {text}".splitlines()) == 1
    assert text.isprintable()


@pytest.mark.parametrize("value", HOSTILE)
def test_xml_comment_parses(value: str) -> None:
    root = ET.fromstring(f"<!-- {escape.xml_comment(value)} --><r/>")
    assert root.tag == "r"


@pytest.mark.parametrize("value", HOSTILE)
def test_xml_attr_reads_back_or_refuses(value: str) -> None:
    try:
        attr = escape.xml_attr(value)
    except RenderError:
        assert any(ord(c) < 0x20 and c not in "\t\n\r" for c in value) or "\ufffe" in value
        return
    assert ET.fromstring(f'<r a="{attr}"/>').attrib["a"] == value


@pytest.mark.parametrize("value", HOSTILE)
def test_shell_word_reads_back_or_refuses(value: str, tmp_path: Path) -> None:
    try:
        word = escape.shell(value)
    except RenderError:
        assert escape._CONTROL.search(value)
        return
    out = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert out.stdout == value
    assert not list(tmp_path.iterdir())


def test_shell_env_expands_only_the_allowed_variables() -> None:
    value = "/run/tcpx-${SLURM_JOB_ID}:$(touch x)`y`${HOME}:${LD_LIBRARY_PATH}"
    word = escape.shell_env(value)
    env = {"SLURM_JOB_ID": "42", "HOME": "/root", "LD_LIBRARY_PATH": "/lib", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, text=True, env=env, check=True)
    assert out.stdout == "/run/tcpx-42:$(touch x)`y`${HOME}:/lib"
    assert escape.shell_env("/run/tcpx-${SLURM_JOB_ID}") == '"/run/tcpx-${SLURM_JOB_ID}"'


def test_shell_args_keeps_the_words() -> None:
    fragment = '--volume /run/tcpx-${SLURM_JOB_ID}:/run/x --setup_param "--verbose 128 2 0" $(touch x)'
    words = escape.shell_args(fragment)
    env = {"SLURM_JOB_ID": "7", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(["bash", "-c", f"printf '<%s>' {words}"], capture_output=True, text=True, env=env, check=True)
    assert out.stdout == "<--volume></run/tcpx-7:/run/x><--setup_param><--verbose 128 2 0><$(touch><x)>"
    with pytest.raises(RenderError, match="shell words"):
        escape.shell_args("unbalanced 'quote")


@pytest.mark.parametrize("value", HOSTILE)
def test_slurm_value_parses_back_or_refuses(value: str) -> None:
    try:
        text = escape.slurm(value)
    except RenderError:
        return
    line = f"NodeName={text} Weight=1"
    assert formats.slurm_lines(line) == [["NodeName", "Weight"]]
    assert formats.slurm_values(line) == [{"NodeName": value, "Weight": "1"}]


@pytest.mark.parametrize("value", ["a b", "a#b", "a\\", 'a"b', "a\nb", "a\u00a0b"])
def test_slurm_refuses_what_it_cannot_carry(value: str) -> None:
    with pytest.raises(RenderError):
        escape.slurm(value)


def test_an_empty_slurm_value_does_not_take_the_next_key() -> None:
    line = f"NodeName=a Feature={escape.slurm('')} Weight=1"
    assert formats.slurm_values(line) == [{"NodeName": "a", "Feature": "", "Weight": "1"}]


@pytest.mark.parametrize("value", HOSTILE)
def test_systemd_value_reads_back_or_refuses(value: str) -> None:
    try:
        text = escape.systemd(value)
    except RenderError:
        return
    unit = f"[Mount]\nWhat={text}\nType=nfs\n"
    assert formats.systemd_unit(unit) == [("Mount", ""), ("Mount", "What"), ("Mount", "Type")]
    assert formats.systemd_values(unit)["What"] == value


def test_systemd_doubles_specifiers_and_refuses_continuations() -> None:
    assert escape.systemd("/export/%h") == "/export/%%h"
    for bad in ("a\\", " a", "a\nb"):
        with pytest.raises(RenderError):
            escape.systemd(bad)
    for bad in ("relative", "/a//b", "/a/../b", "/a/./b", "/a/"):
        with pytest.raises(RenderError):
            escape.systemd_path(bad)


@pytest.mark.parametrize("mount", ["/home", "/mnt/a:b/.x/é-y", "/.hidden", "/a b/c%d", "/x\\y", "/日本", "/"])
def test_mount_unit_names_match_systemd_escape(mount: str) -> None:
    if shutil.which("systemd-escape"):
        done = subprocess.run(
            ["systemd-escape", "--path", "--suffix=mount", mount], capture_output=True, text=True, check=True
        )
        assert systemd_mount_unit(mount) == done.stdout.strip()
    assert escape.systemd_unit(systemd_mount_unit(mount), mount) == systemd_mount_unit(mount)
    with pytest.raises(RenderError, match="systemd names"):
        escape.systemd_unit("other.mount", mount)


@pytest.mark.parametrize(
    ("function", "good", "bad"),
    [
        (escape.dnsmasq, ["eth0", "10.0.0.1", "3c:ec:ef:10:00:01"], ["a b", "a,b", "a#b", 'a"b', "", "a\\b"]),
        (escape.bootarg, ["http://10.0.0.2:8080", "ubuntu-24.04.iso", ""], ["a b", "a;b", "$x", "a'b", "{x}", "a*"]),
        (escape.dns_name, ["gpu001", "atlas.internal"], ["a_b", "a b", "-a", "a..b", "a.", "x" * 64, "ｇpu"]),
        (escape.word, ["10.0.0.1", "/mnt/ckpt"], ["a b", "a#b", "", "a\u2028b"]),
        (escape.file_name, ["ctl", "a.b"], ["a/b", "..", ".", "", "x" * 256, "a\x00"]),
        (escape.env_name, ["NCCL_DEBUG", "_x1"], ["1X", "A-B", "A B", "A=B", ""]),
        (escape.mount_option, ["vers=4.2", "_netdev"], ["a,b", "a b", ""]),
        (escape.nccl_conf, ["=mlx5_0:1", "a b#c"], ["a\nb", "x" * 1024]),
    ],
)
def test_field_formats_refuse_what_would_split_them(function: object, good: list[str], bad: list[str]) -> None:
    for value in good:
        assert function(value) == value  # type: ignore[operator]
    for value in bad:
        with pytest.raises(RenderError):
            function(value)  # type: ignore[operator]


def test_finalize_refuses_an_unescaped_control_character() -> None:
    assert escape.finalize("plain") == "plain"
    assert escape.finalize(escape.Escaped("ok")) == "ok"
    assert escape.finalize(3) == 3
    with pytest.raises(RenderError, match="not escaped"):
        escape.finalize("a\nb")


def test_a_render_error_names_the_template_line() -> None:
    plan = load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan
    storage = [plan.storage[0].model_copy(update={"source": "10.0.0.1:/x\\"}), *plan.storage[1:]]
    with pytest.raises(RenderError) as caught:
        render_files(plan.model_copy(update={"storage": storage}))
    message = str(caught.value)
    assert "templates/storage/mount.j2" in message
    assert "What={{ tier.source | systemd }}" in message
    assert "trailing backslash" in message


def test_source_field_finds_the_spec_value() -> None:
    data = {"name": "atlas", "nodes": [{"group": "gpu x"}], "storage": [{"mount": "/home/a b"}]}
    assert source_field(data, "/home/a b") == ("storage", 0, "mount")
    assert source_field(data, "gpu x[001-004]") == ("nodes", 0, "group")
    assert source_field(data, "nothing") == ()


def test_an_unrenderable_value_is_a_located_spec_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A value the types accept but a format cannot carry fails validation at its field."""
    data = example_data("onprem-h100-256.yaml")
    spec = write_spec(tmp_path, data)

    def refuse(plan: object) -> None:
        raise RenderError("Slurm configuration", "/export/home", "a test refusal")

    monkeypatch.setattr("clusterctl.pipeline.render_files", refuse)
    with pytest.raises(SpecError) as caught:
        load_and_validate(spec)
    finding = caught.value.findings[-1]
    assert finding.code == "CC-R001"
    assert finding.path == ("storage", 2, "export")
    assert finding.file == str(spec)
    assert finding.line > 1
    assert "a test refusal" in finding.message
