"""One escaping function per generated format: how a value from the plan is written into a file.

Why: spec strings are data. Each format that render writes has its own syntax, and a value must
never start a new line, key, section or command there. Each function below either writes the
value the way its format reads it back unchanged, or refuses it with a :class:`RenderError`
that says which format and why. None of them relies on the spec's field types (they are the
first line of defence; these are the second), so a value the types let through still cannot
break a file.

The functions are Jinja filters on the render's one environment (``environment.jinja_env``); every value a
template takes from the plan goes through the one for its format:

==================  =====================================================================
filter              format
==================  =====================================================================
``comment``         text inside a ``#`` comment (every line-oriented format)
``xml_comment``     text inside ``<!-- -->``
``slurm``           a value in slurm.conf, gres.conf, topology.conf (Slurm's parse_config)
``shell``           a word in a shell script (``shlex.quote``)
``shell_env``       a shell word in which only ``${SLURM_JOB_ID}``/``${LD_LIBRARY_PATH}`` expand
``shell_args``      several shell words given as one string (docker options of a job daemon)
``env_name``        a variable name (job env, nccl.conf, TaskProlog ``export`` lines)
``nccl_conf``       a value in /etc/nccl.conf (NCCL's setEnvFile: rest of the line)
``systemd``         a value in a systemd unit (``%`` specifiers doubled)
``systemd_path``    ``Where=`` of a mount unit: an absolute, normalized path
``mount_option``    one mount option (``Options=`` joins them with commas)
``yaml_str``        a YAML double-quoted scalar (user-data, Prometheus, lnet.conf, Pulumi)
``dnsmasq``         one field of a dnsmasq.conf option
``bootarg``         a word on a GRUB/PXELINUX kernel command line or menu entry
``dns_name``        a host or domain name where only a DNS name can stand (sed, /etc/hosts)
``word``            one whitespace-separated field (/etc/hosts, health.conf)
``file_name``       one path component (a file the value names must stay in its folder)
``xml_attr``        an XML attribute value (NCCL topology)
==================  =====================================================================

The Ansible inventory is escaped in :mod:`clusterctl.render.ansible_yaml` (``!unsafe``); HTML
templates (``*.html.j2``: the verify report) are autoescaped by the environment (markupsafe).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from clusterctl.plan.storage import systemd_mount_unit

# Every character that can end a line somewhere (Python's str.splitlines set), plus the other C0/C1
# controls and DEL: none of them may reach a line-oriented format unescaped.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DNS_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DNS_NAME = re.compile(rf"(?=.{{1,253}}\Z){_DNS_LABEL}(?:\.{_DNS_LABEL})*")
# A word GRUB and PXELINUX pass through unquoted and the kernel reads as one argument.
_BOOTARG = re.compile(r"[A-Za-z0-9._:/=@%+,~-]*")
# NCCL reads at most 1023 bytes of a value (src/misc/param.cc setEnvFile, envValue[1024]).
NCCL_VALUE_MAX = 1023
# systemd's UNIT_NAME_MAX is 256 including the NUL.
UNIT_NAME_MAX = 255


class RenderError(Exception):
    """A value that a generated format cannot carry; nothing is written.

    Attributes:
        fmt: the format, e.g. ``slurm.conf value``.
        value: the offending value.
        reason: why the format cannot carry it, as a sentence fragment.
        output: the build-dir file being rendered (filled in by the renderer).
        expression: the template expression that produced it (filled in by the renderer).
    """

    def __init__(self, fmt: str, value: object, reason: str, *, output: str = "", expression: str = "") -> None:
        self.fmt = fmt
        self.value = value
        self.reason = reason
        self.output = output
        self.expression = expression
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """One sentence: the value, the file and format, why, and what to do."""
        where = f"{self.output} ({self.fmt})" if self.output else self.fmt
        source = f" from {self.expression}" if self.expression else ""
        return (
            f"the value {show(self.value)}{source} cannot be written into {where}: {self.reason}; change the spec value"
        )

    def located(self, output: str, expression: str = "") -> RenderError:
        """This error with the file (and template expression) it happened in."""
        return RenderError(
            self.fmt,
            self.value,
            self.reason,
            output=self.output or output,
            expression=self.expression or expression,
        )


class Escaped(str):
    """A string an escaping filter produced: the environment's finalize writes it as is."""

    __slots__ = ()


def show(value: object, limit: int = 60) -> str:
    """``repr`` of a value for a message, shortened so a hostile value cannot flood the output."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 5] + "...'"


def _text(value: Any, fmt: str) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, list | tuple | dict):
        raise RenderError(fmt, value, "it is not a single text value")
    return str(value)


def _no_control(text: str, fmt: str) -> str:
    bad = _CONTROL.search(text)
    if bad:
        raise RenderError(fmt, text, f"it contains the control character {bad.group()!r} (a newline or similar)")
    return text


def _escape_char(char: str) -> str:
    code = ord(char)
    if char == "\n":
        return "\\n"
    if char == "\r":
        return "\\r"
    if char == "\t":
        return "\\t"
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with every non-printable character (controls, separators, bidi marks) as a backslash escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape_char(c) for c in text)


# --- comments -----------------------------------------------------------------------------------


def comment(value: Any) -> Escaped:
    """Text inside a ``#`` comment: never fails; every character that could end the line is escaped.

    A comment is for people, so an unusual value is shown (``\\n``, ``\\u202e``) rather than refused.
    Every format here ends a comment at the end of its line only (Slurm strips comments before it
    joins continued lines; shells, systemd and YAML never continue a comment).
    """
    return Escaped(printable(str(value)))


def xml_comment(value: Any) -> Escaped:
    """Text inside ``<!-- -->``: as :func:`comment`, and no ``--`` (XML forbids it in a comment)."""
    text = printable(str(value)).replace("--", "-\\x2d")
    if text.endswith("-"):
        text = text[:-1] + "\\x2d"
    return Escaped(text)


# --- Slurm --------------------------------------------------------------------------------------


def slurm(value: Any) -> Escaped:
    """A value in slurm.conf, gres.conf or topology.conf; refused when Slurm would read it differently.

    Slurm's parser (src/common/parse_config.c) splits ``Key=Value`` pairs on whitespace, ends the
    line at an unescaped ``#``, joins a line ending in ``\\`` with the next, strips ``\\`` escapes
    and reads ``"..."`` as a quoted value. So a value must be one non-empty run of printable
    characters without whitespace, ``#``, ``\\`` or ``"``. An empty value is written ``""``:
    unquoted, Slurm would take the next ``Key=Value`` as its value.
    """
    fmt = "Slurm configuration"
    text = _no_control(_text(value, fmt), fmt)
    if not text:
        return Escaped('""')
    for char in text:
        if char.isspace() or not char.isprintable():
            raise RenderError(fmt, text, f"Slurm ends a value at whitespace ({char!r})")
        if char in '#\\"':
            raise RenderError(fmt, text, f"{char!r} starts a comment, escape or quote in Slurm's syntax")
    return Escaped(text)


def slurm_parameter(value: Any) -> Escaped:
    """A slurm.conf parameter name from the spec (``site.slurm_conf``): one Slurm knows and clusterctl leaves alone.

    The name is a key, not a value: anything else would change what slurm.conf sets (a second
    ``AuthType``, an unknown key slurmctld stops on), so only the catalog's names pass.
    """
    from clusterctl.catalog.slurm_conf import OWNED, PARAMETERS, SECRET  # local: the catalog is data

    fmt = "slurm.conf parameter name"
    text = _no_control(_text(value, fmt), fmt)
    if text not in PARAMETERS:
        raise RenderError(fmt, text, "it is not a slurm.conf parameter Slurm knows")
    if text in OWNED or text in SECRET:
        raise RenderError(fmt, text, "clusterctl writes it itself, or it is a password")
    return Escaped(text)


# --- shell and environment files ----------------------------------------------------------------


def shell(value: Any) -> Escaped:
    """One word of a shell script (``shlex.quote``); refused with control characters.

    Quoting makes any text one word; control characters are refused anyway so a script stays one
    command per line (and a NUL cannot be passed at all).
    """
    fmt = "shell script"
    return Escaped(shlex.quote(_no_control(_text(value, fmt), fmt)))


# The only expansions a generated script keeps in a value: the job's id (per-job socket paths of
# the cloud fabrics) and the library path a plugin is prepended to. Nothing else a value holds
# is expanded, substituted or globbed.
SHELL_EXPANSIONS = ("${SLURM_JOB_ID}", "${LD_LIBRARY_PATH}")
_EXPANSION = re.compile("(" + "|".join(re.escape(e) for e in SHELL_EXPANSIONS) + ")")
_DOUBLE_QUOTE_SPECIAL = re.compile(r'["\\$`!]')


def shell_env(value: Any) -> Escaped:
    """One word of a shell script in which only :data:`SHELL_EXPANSIONS` expand.

    ``/run/tcpx-${SLURM_JOB_ID}`` becomes ``"/run/tcpx-${SLURM_JOB_ID}"``; any other ``$``,
    backquote or quote in the value stays literal (the value is split around the allowed
    expansions and each literal piece is quoted on its own).
    """
    fmt = "shell script"
    text = _no_control(_text(value, fmt), fmt)
    parts = _EXPANSION.split(text)
    if len(parts) == 1:
        return Escaped(shlex.quote(text))
    if not _DOUBLE_QUOTE_SPECIAL.search("".join(parts[0::2])):
        return Escaped(f'"{text}"')
    return Escaped("".join(f'"{p}"' if i % 2 else shlex.quote(p) for i, p in enumerate(parts) if p))


def shell_args(value: Any) -> Escaped:
    """Several words of a shell command line, given as one string (``--volume a:b``, ``--x "a b"``).

    The string is split the way a shell splits it (``shlex.split``) and each word written again
    with :func:`shell_env`, so the words stay the same and nothing in them runs.
    """
    fmt = "shell script"
    text = _no_control(_text(value, fmt), fmt)
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise RenderError(fmt, text, f"it is not a list of shell words ({exc})") from None
    if not words:
        raise RenderError(fmt, text, "it holds no words")
    return Escaped(" ".join(shell_env(w) for w in words))


def _matching(value: Any, fmt: str, pattern: re.Pattern[str], why: str) -> Escaped:
    """``value`` as is when the whole of it matches ``pattern``; refused with ``why`` otherwise."""
    text = _text(value, fmt)
    if not pattern.fullmatch(text):
        raise RenderError(fmt, text, why)
    return Escaped(text)


def env_name(value: Any) -> Escaped:
    """An environment variable name (``NAME=`` lines, ``export NAME=``)."""
    why = "a variable name is letters, digits and '_', not starting with a digit"
    return _matching(value, "environment variable name", _ENV_NAME, why)


def nccl_conf(value: Any) -> Escaped:
    """A value in /etc/nccl.conf: NCCL takes the rest of the line after the first ``=``, as is.

    NCCL (src/misc/param.cc, setEnvFile) has no quoting or escaping, so a value is refused when
    it holds a control character or is longer than NCCL reads.
    """
    fmt = "nccl.conf"
    text = _no_control(_text(value, fmt), fmt)
    if len(text.encode()) > NCCL_VALUE_MAX:
        raise RenderError(fmt, text, f"NCCL reads at most {NCCL_VALUE_MAX} bytes of a value")
    return Escaped(text)


# --- systemd ------------------------------------------------------------------------------------


def systemd(value: Any) -> Escaped:
    """A value in a systemd unit (``Description=``, ``What=``, ``Options=``).

    systemd expands ``%`` specifiers in these settings, so ``%`` is written ``%%``; a line
    ending in ``\\`` continues on the next, and leading or trailing whitespace is dropped, so
    those are refused along with control characters (systemd.syntax(7), systemd.unit(5)).
    """
    fmt = "systemd unit"
    text = _no_control(_text(value, fmt), fmt)
    if text != text.strip():
        raise RenderError(fmt, text, "systemd drops leading and trailing whitespace")
    if text.endswith("\\"):
        raise RenderError(fmt, text, "a trailing backslash continues the line in a systemd unit")
    return Escaped(text.replace("%", "%%"))


def systemd_path(value: Any) -> Escaped:
    """``Where=`` of a mount unit: an absolute, normalized path (systemd refuses any other)."""
    fmt = "systemd mount unit Where="
    text = _no_control(_text(value, fmt), fmt)
    if not text.startswith("/"):
        raise RenderError(fmt, text, "a mount point must be an absolute path")
    parts = text.split("/")[1:]
    if text != "/" and (any(p in ("", ".", "..") for p in parts)):
        raise RenderError(fmt, text, "a mount point must be normalized (no '//', '.', '..' or trailing '/')")
    return systemd(text)


def systemd_unit(value: Any, mount: Any) -> Escaped:
    """A mount unit's name: must be what systemd derives from ``mount`` (``systemd-escape --path``)."""
    fmt = "systemd unit name"
    text = _text(value, fmt)
    systemd_path(mount)
    expected = systemd_mount_unit(str(mount))
    if text != expected:
        raise RenderError(fmt, text, f"systemd names the mount unit of {show(mount)} {expected!r}")
    if len(text) > UNIT_NAME_MAX:
        raise RenderError(fmt, text, f"systemd unit names are at most {UNIT_NAME_MAX} characters")
    return Escaped(text)


def mount_option(value: Any) -> Escaped:
    """One mount option: ``Options=`` joins them with commas, so none may hold a comma or space."""
    fmt = "mount option"
    text = _no_control(_text(value, fmt), fmt)
    if not text or any(c == "," or c.isspace() or not c.isprintable() for c in text):
        raise RenderError(fmt, text, "a mount option is one non-empty word without commas or whitespace")
    return Escaped(text)


# --- YAML ---------------------------------------------------------------------------------------

# What YAML's double-quoted style must escape: its own quote and escape character, every C0/C1
# control and DEL, the line and paragraph separators, the BOM and the non-characters PyYAML refuses.
_YAML_ESCAPE = re.compile('["\\\\\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]')
_YAML_NAMED = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}


def yaml_quote(text: str) -> str:
    """``text`` as a YAML double-quoted scalar that reads back as exactly ``text``."""
    return '"' + _YAML_ESCAPE.sub(lambda m: _YAML_NAMED.get(m.group()) or _escape_char(m.group()), text) + '"'


def yaml_str(value: Any) -> Escaped:
    """A YAML scalar from a plan value: a double-quoted string, or a number or boolean as such."""
    if isinstance(value, bool):
        return Escaped("true" if value else "false")
    if isinstance(value, int | float):
        return Escaped(repr(value))
    return Escaped(yaml_quote(_text(value, "YAML")))


# --- dnsmasq, boot loaders, hosts ---------------------------------------------------------------


def dnsmasq(value: Any) -> Escaped:
    """One field of a dnsmasq.conf option: no whitespace, ``#``, ``,``, quotes or backslashes.

    dnsmasq (src/option.c, read_file) splits fields on commas, starts a comment at a ``#`` after
    whitespace, and reads quotes and backslash escapes; a field that needs any of them is refused.
    """
    fmt = "dnsmasq.conf"
    text = _no_control(_text(value, fmt), fmt)
    if not text or any(c.isspace() or not c.isprintable() or c in "#,\"'\\" for c in text):
        raise RenderError(fmt, text, "a dnsmasq field is one word without whitespace, '#', ',', quotes or '\\'")
    return Escaped(text)


def bootarg(value: Any) -> Escaped:
    """A word of a GRUB or PXELINUX kernel command line or menu title: letters, digits, ``._:/=@%+,~-``.

    GRUB's script syntax gives meaning to ``;|&$<>{}'"#\\``, whitespace and wildcards, and the
    kernel splits its command line on spaces, so anything beyond that plain set is refused.
    """
    why = "a boot argument holds only letters, digits and '._:/=@%+,~-'"
    return _matching(value, "boot loader configuration", _BOOTARG, why)


def dns_name(value: Any) -> Escaped:
    """A host or domain name where nothing but a DNS name can stand (``/etc/hosts``, a sed expression)."""
    return _matching(value, "host name", _DNS_NAME, "a host or domain name is letters, digits, '-' and '.'")


def word(value: Any, forbid: str = "") -> Escaped:
    """One whitespace-separated field (``/etc/hosts``, health.conf): no whitespace, ``#`` or ``forbid``."""
    fmt = "whitespace-separated field"
    text = _no_control(_text(value, fmt), fmt)
    if not text or any(c.isspace() or not c.isprintable() or c == "#" or c in forbid for c in text):
        extra = "".join(f", {c!r}" for c in forbid)
        raise RenderError(fmt, text, f"a field is one non-empty word without whitespace, '#'{extra}")
    return Escaped(text)


def enroot_path(value: Any) -> Escaped:
    """A path field of an enroot fstab: absolute and normalized, one word, nothing enroot substitutes.

    enroot replaces ``${VAR}`` with the host's environment in its fstab files
    (NVIDIA/enroot:doc/image-format.md), so ``$`` and ``\\`` are refused with whitespace and ``#``.
    """
    fmt = "enroot fstab path"
    text = _no_control(_text(value, fmt), fmt)
    parts = text.split("/")[1:]
    if not text.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise RenderError(fmt, text, "a mount path must be absolute and normalized (no '//', '.', '..')")
    return word(text, "$\\")


def file_name(value: Any) -> Escaped:
    """One path component: a file named by a plan value stays in its folder."""
    fmt = "file name"
    text = _no_control(_text(value, fmt), fmt)
    if text in ("", ".", "..") or "/" in text or len(text.encode()) > 255:
        raise RenderError(fmt, text, "a file name is one non-empty path component (no '/', '.' or '..')")
    return Escaped(text)


# --- XML ----------------------------------------------------------------------------------------

_XML_ATTR = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"}


def xml_attr(value: Any) -> Escaped:
    """An XML attribute value (double-quoted); characters XML 1.0 cannot hold are refused."""
    fmt = "XML attribute"
    text = _text(value, fmt)
    bad = re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]", text)
    if bad:
        raise RenderError(fmt, text, f"XML 1.0 cannot hold the character {bad.group()!r}")
    out = "".join(_XML_ATTR.get(c, c) for c in text)
    # Attribute value normalization turns tab, CR and LF into spaces: keep them as references.
    out = out.replace("\t", "&#9;").replace("\n", "&#10;").replace("\r", "&#13;")
    return Escaped(out)


FILTERS = {
    "comment": comment,
    "xml_comment": xml_comment,
    "slurm": slurm,
    "slurm_parameter": slurm_parameter,
    "shell": shell,
    "shell_env": shell_env,
    "shell_args": shell_args,
    "env_name": env_name,
    "nccl_conf": nccl_conf,
    "systemd": systemd,
    "systemd_path": systemd_path,
    "systemd_unit": systemd_unit,
    "mount_option": mount_option,
    "yaml_str": yaml_str,
    "dnsmasq": dnsmasq,
    "bootarg": bootarg,
    "dns_name": dns_name,
    "word": word,
    "enroot_path": enroot_path,
    "file_name": file_name,
    "xml_attr": xml_attr,
}


def finalize(value: Any) -> Any:
    """The environment's last word on every ``{{ }}``: an unescaped string cannot start a new line.

    Filters mark what they escaped (:class:`Escaped`); anything else a template writes (numbers,
    constants, a value a template forgot to escape) is refused if it holds a control character.
    """
    if isinstance(value, Escaped) or not isinstance(value, str):
        return value
    bad = _CONTROL.search(value)
    if bad:
        raise RenderError(
            "generated file", value, f"it contains the control character {bad.group()!r} and was not escaped"
        )
    return value
