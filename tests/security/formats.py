"""Small readers for every format render writes: what keys, sections and fields a file holds.

Each reader follows the way the real consumer reads the file (Slurm's parse_config.c, NCCL's
setEnvFile, systemd's unit syntax, dnsmasq's option file, YAML, XML, the shell) closely enough
to see a value that starts a new line, key, section or field. ``structure`` returns, per file,
a value that depends only on those keys and fields, never on the values, so a render of a
hostile spec must give the same structures as a render of the example it came from.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import Any

import yaml

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UnsafeLoader(_Loader):  # type: ignore[misc,valid-type]
    """libyaml's safe loader (fast: inventories of a few hundred hosts) that reads ``!unsafe`` as data."""


def _unsafe(loader: Any, node: Any) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_mapping(node, deep=True)


_UnsafeLoader.add_constructor("!unsafe", _unsafe)


def ansible_yaml(text: str) -> Any:
    """A YAML file clusterctl wrote for Ansible (an inventory, group vars), ``!unsafe`` values as data."""
    return yaml.load(text, Loader=_UnsafeLoader)


# POSIX [[:space:]] in the C locale, as Slurm's regex sees it.
_SP = "[ \t\n\v\f\r]"
# src/common/parse_config.c keyvalue_pattern, as a Python regex.
_SLURM_PAIR = re.compile(rf'^{_SP}*([A-Za-z0-9_.]+){_SP}*([-*+/]?)={_SP}*(("([^"]*)")|([^ \t\n\v\f\r]+))({_SP}|$)')


def _slurm_strip_comment(line: str) -> str:
    backslashes = 0
    for index, char in enumerate(line):
        if char == "#" and backslashes % 2 == 0:
            return line[:index]
        backslashes = backslashes + 1 if char == "\\" else 0
    return line


def _slurm_continued(line: str) -> str | None:
    """The line without its continuation backslash, or None when it does not continue."""
    stripped = line.rstrip(" \t\n\v\f\r")
    count = len(stripped) - len(stripped.rstrip("\\"))
    if count % 2 == 1:
        return stripped[:-1]
    return None


def _slurm_unescape(line: str) -> str:
    out, skip = [], False
    for char in line:
        if char == "\\" and not skip:
            skip = True
            continue
        out.append(char)
        skip = False
    return "".join(out)


def slurm_lines(text: str) -> list[list[str]]:
    """The keys of each logical line of a Slurm config file, in order; ``!PARSE`` marks leftovers.

    As src/common/parse_config.c: fgets lines (split on '\\n' only), strip comments at an
    unescaped '#', join lines ending in an odd number of backslashes, strip escapes, then match
    Key=Value pairs one after another; anything left over is a parse error.
    """
    out: list[list[str]] = []
    pending = ""
    for raw in text.split("\n"):
        line = _slurm_strip_comment(raw)
        continued = _slurm_continued(line)
        if continued is not None:
            pending += continued
            continue
        line = _slurm_unescape(pending + line)
        pending = ""
        keys: list[str] = []
        rest = line
        while True:
            match = _SLURM_PAIR.match(rest)
            if not match:
                break
            keys.append(match.group(1))
            rest = rest[match.end(3) :]
        if rest.strip(" \t\n\v\f\r"):
            keys.append("!PARSE")
        if keys:
            out.append(keys)
    return out


def slurm_values(text: str) -> list[dict[str, str]]:
    """Key -> value of each logical Slurm line (the value as Slurm reads it)."""
    out = []
    for raw in text.split("\n"):
        line = _slurm_unescape(_slurm_strip_comment(raw))
        pairs: dict[str, str] = {}
        rest = line
        while (match := _SLURM_PAIR.match(rest)) is not None:
            pairs[match.group(1)] = match.group(5) if match.group(5) is not None else match.group(6)
            rest = rest[match.end(3) :]
        if pairs:
            out.append(pairs)
    return out


def systemd_unit(text: str) -> list[tuple[str, str]]:
    """(section, key) of every setting of a systemd unit file (systemd.syntax(7))."""
    out: list[tuple[str, str]] = []
    section = ""
    pending = ""
    for raw in text.split("\n"):
        line = raw.strip()
        if not pending and (not line or line[0] in "#;"):
            continue
        if pending and line[:1] in ("#", ";"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            out.append((section, ""))
        elif "=" in line:
            out.append((section, line.split("=", 1)[0].strip()))
        else:
            out.append((section, "!PARSE"))
    return out


def systemd_values(text: str) -> dict[str, str]:
    """Setting -> value with ``%%`` resolved (the specifier systemd expands in these settings)."""
    values = {}
    for raw in text.split("\n"):
        line = raw.strip()
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip().replace("%%", "%")
    return values


def nccl_conf(text: str) -> list[str]:
    """Variables NCCL sets from the file (src/misc/param.cc setEnvFile), comment lines left out.

    NCCL has no comments: a line with '=' sets the variable named before it. A '#' line can
    only set a variable whose name starts with '#', which no program reads, so those are skipped.
    """
    keys = []
    for line in text.split("\n"):
        if "=" in line and not line.startswith("#"):
            keys.append(line.split("=", 1)[0])
    return keys


def dnsmasq(text: str) -> list[tuple[str, int]]:
    """(option, number of comma-separated fields) per line of a dnsmasq.conf (src/option.c)."""
    out = []
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        option, _, value = line.partition("=")
        out.append((option, len(value.split(",")) if value else 0))
    return out


def fields(text: str, *, keyword: bool = True) -> list[tuple[str, int]]:
    """(first field, number of fields) per non-comment line of a whitespace-separated file
    (the first field only when it is a keyword, as in health.conf, not a value, as in /etc/hosts)."""
    out = []
    for raw in text.split("\n"):
        if raw.lstrip().startswith("#"):
            continue
        words = raw.split()
        if words:
            out.append((words[0] if keyword else "", len(words)))
    return out


def shell_words(text: str) -> list[tuple[str, int]]:
    """(first word, number of words) per line, with shell-like quoting (GRUB, PXELINUX)."""
    out = []
    for raw in text.split("\n"):
        if raw.lstrip().startswith("#"):
            continue
        try:
            words = shlex.split(raw, comments=True)
        except ValueError:
            out.append(("!PARSE", 0))
            continue
        if words:
            out.append((words[0], len(words)))
    return out


def _key_paths(data: Any, path: tuple[str, ...] = ()) -> Iterable[tuple[str, ...]]:
    if isinstance(data, dict):
        for key, value in data.items():
            sub = (*path, str(key))
            yield sub
            yield from _key_paths(value, sub)
    elif isinstance(data, list):
        for value in data:
            yield from _key_paths(value, (*path, "[]"))


def yaml_keys(text: str, *, names: Iterable[str] = ()) -> list[tuple[str, ...]]:
    """Every key path of a YAML document (list items as ``[]``), with ``names`` (plan values used
    as keys: host names) replaced by ``<name>`` so only the shape is compared."""
    data = yaml.load(text, Loader=_UnsafeLoader)
    known = set(names)
    return sorted({tuple("<name>" if part in known else part for part in p) for p in _key_paths(data)})


def xml_elements(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """(tag, attribute names) of every element of an XML document, in document order."""
    return [(e.tag, tuple(sorted(e.attrib))) for e in ET.fromstring(text).iter()]


def ini_keys(text: str) -> list[tuple[str, str]]:
    """(section, key) of an INI file (ansible.cfg)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    return [(s, k) for s in parser.sections() for k in parser[s]]


def json_keys(text: str) -> list[tuple[str, ...]]:
    """Key paths of a JSON document."""
    return sorted(set(_key_paths(json.loads(text))))


def line_count(text: str) -> int:
    """Lines of a file (anything that has no reader of its own must keep its line count)."""
    return len(text.split("\n"))


def kind(path: str) -> str:
    """Which reader a build-dir file gets, from its path."""
    name = path.rsplit("/", 1)[-1]
    if path in ("slurm/slurm.conf", "slurm/gres.conf", "slurm/topology.conf", "slurm/cgroup.conf"):
        return "slurm"
    if path.startswith("storage/units/"):
        return "systemd"
    if path.startswith("nccl/") and name.endswith(".conf"):
        return "nccl"
    if path.startswith("nccl/") and name.endswith(".xml"):
        return "xml"
    if path == "pxe/dnsmasq.conf":
        return "dnsmasq"
    if path in ("hosts", "health/health.conf", "slurm/plugstack.conf") or path.startswith(
        ("slurm/plugstack.conf.d/", "enroot/mounts.d/")
    ):
        return "fields"
    if path.startswith("pxe/tftp/"):
        return "boot"
    if name in ("user-data", "meta-data") or name.endswith((".yml", ".yaml")) or path.startswith("ansible/env/"):
        return "yaml"
    if name == "ansible.cfg":
        return "ini"
    if name.endswith(".json"):
        return "json"
    return "lines"


def structure(path: str, text: str, names: Iterable[str] = ()) -> Any:
    """The shape of one rendered file: its keys, sections and fields, not its values."""
    reader = kind(path)
    if reader == "slurm":
        return slurm_lines(text)
    if reader == "systemd":
        return systemd_unit(text)
    if reader == "nccl":
        return nccl_conf(text)
    if reader == "xml":
        return xml_elements(text)
    if reader == "dnsmasq":
        return dnsmasq(text)
    if reader == "fields":
        # The first field is a value in /etc/hosts and in an fstab (the source), a keyword elsewhere.
        return fields(text, keyword=path != "hosts" and not path.startswith("enroot/mounts.d/"))
    if reader == "boot":
        return shell_words(text)
    if reader == "yaml":
        return yaml_keys(text, names=names)
    if reader == "ini":
        return ini_keys(text)
    if reader == "json":
        return json_keys(text)
    return line_count(text)


# Build-dir paths that hold a spec value (a hardware profile, group, cluster or mount name).
_NAMED_PATHS = (
    re.compile(r"nccl/[^/]+(\.conf|\.env|\.xml)"),
    re.compile(r"pulumi/Pulumi\.[^/]+(\.yaml)"),
    re.compile(r"pxe/tftp/grub/grub\.cfg-[^/]+()"),
    re.compile(r"pxe/tftp/pxelinux\.cfg/[^/]+()"),
    re.compile(r"pxe/http/autoinstall/[^/]+/(user-data|meta-data)"),
    re.compile(r"slurm/(prolog|epilog|task_prolog)\.d/[^/]+\.sh"),
    re.compile(r"storage/lnet/[^/]+(\.conf)"),
    re.compile(r"storage/units/[^/]+/[^/]+(\.mount)"),
    re.compile(r"burst/policy-[^/]+(\.json)"),
    re.compile(r"enroot/mounts\.d/[^/]+(\.fstab)"),
    re.compile(r"agent/controllers/[^/]+/(clusterctl-bundles\.service)"),
)


def group_key(path: str) -> str:
    """Files compared with each other: the path with the parts that hold spec values left out."""
    for pattern in _NAMED_PATHS:
        match = pattern.fullmatch(path)
        if match:
            return f"{pattern.pattern}"
    return path
