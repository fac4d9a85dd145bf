"""A small Redfish client for what day-0 bring-up needs: one-time PXE boot, power, state.

Standard library only (urllib), so the Pulumi dynamic provider that uses it runs wherever the
program runs. BMC credentials come from ``CLUSTERCTL_BMC_USERNAME``/``CLUSTERCTL_BMC_PASSWORD``
or Pulumi secrets -- never from the spec. Errors name the BMC and say what to check: a wrong
address and bad credentials are the two mistakes everyone makes first.

The BMC is outside clusterctl's trust boundary (SECURITY.md), so the transport is strict:

- ``https`` only; a ``http://`` BMC address is refused unless the spec sets
  ``provider.bmc.insecure_http: true`` (labs and emulators);
- certificates are verified against the system CAs, or only against the spec's
  ``provider.bmc.ca_bundle`` when one is given; ``verify_tls: false`` turns verification off;
- redirects are followed only within the BMC's own origin (scheme, host and port): a redirect
  elsewhere is refused, so the credentials never reach another host;
- answers are read with a size cap and an overall deadline, and every field clusterctl uses is
  type-checked; junk becomes a ``BmcAnswerError`` naming the BMC and what was wrong.

Sources: DMTF Redfish ``ComputerSystem`` schema (``Boot.BootSourceOverrideTarget``/``Enabled``/
``Mode``, ``Actions/ComputerSystem.Reset``); sushy-tools' emulator implements the same surface.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urljoin, urlsplit

from clusterctl.bounded import json_document
from clusterctl.environ import Env

SYSTEMS = "/redfish/v1/Systems"
DEFAULT_TIMEOUT_S = 15.0
# Power changes land after the BMC gets to them (seconds on real BMCs, 1-11 s in sushy's fake
# driver), so every change is followed by polling.
POWER_POLL_S = 1.0
POWER_TIMEOUT_S = 120.0
# Redfish resources clusterctl reads are a few KiB; a collection of thousands of members still
# fits in 1 MiB. Anything larger is not an answer to what was asked.
MAX_ANSWER_BYTES = 1 << 20
# Error bodies are only quoted (shortened), so only their start is read.
MAX_ERROR_BYTES = 4096
MAX_REDIRECTS = 5
REDIRECT_CODES = (301, 302, 303, 307, 308)
DEFAULT_PORTS = {"http": 80, "https": 443}
# What a Redfish path (``@odata.id``, an action ``target``) may hold: RFC 3986 path characters.
_PATH_RE = re.compile(r"^/redfish/v1(/[A-Za-z0-9._~%!$&'()*+,;=:@-]+)*/?$")
_INSECURE_HINT = (
    "Write the BMC as https://..., or, for a lab BMC or an emulator only, set `insecure_http: true` in the "
    "spec's `provider.bmc` block."
)


class RedfishError(Exception):
    """A BMC refused or failed a request; the message says which BMC and what to check."""


class BmcUnreachableError(RedfishError):
    """Nothing answers at the BMC address."""


class BmcAuthError(RedfishError):
    """The BMC rejected the credentials."""


class BmcInsecureError(RedfishError):
    """The BMC address or a redirect asks for a transport clusterctl refuses (plain http, another host)."""


class BmcTlsError(RedfishError):
    """The BMC's certificate was not accepted (or the CA bundle is not usable)."""


class BmcAnswerError(RedfishError):
    """The BMC answered with something that is not the Redfish resource asked for."""


class NodeNotReadyError(RedfishError):
    """The node was booted but never answered on its ready port."""


class NoHostKeyYetError(NodeNotReadyError):
    """The node's port answers but its SSH server gave no host key (yet: it may still be starting)."""


@dataclass(frozen=True)
class BmcCredentials:
    """Username and password for a BMC (never logged, never written)."""

    username: str
    password: str

    @classmethod
    def from_env(cls) -> BmcCredentials | None:
        """Credentials from ``CLUSTERCTL_BMC_USERNAME``/``CLUSTERCTL_BMC_PASSWORD`` (None if unset)."""
        user = os.environ.get(Env.BMC_USER)
        password = os.environ.get(Env.BMC_PASSWORD)
        if user is None or password is None:
            return None
        return cls(user, password)

    def __repr__(self) -> str:  # keep the password out of tracebacks and logs
        return f"BmcCredentials(username={self.username!r}, password=***)"


@dataclass(frozen=True)
class BmcTransport:
    """How clusterctl talks to the BMCs (the spec's ``provider.bmc`` block, resolved by the plan).

    Attributes:
        insecure_http: ``http://`` BMC addresses are allowed (credentials cross the network in clear).
        verify_tls: check the BMC's certificate and host name.
        ca_bundle: PEM text of the CA certificate(s) the BMCs' certificates must chain to; when set,
            only these CAs are trusted (not the system's).
    """

    insecure_http: bool = False
    verify_tls: bool = True
    ca_bundle: str | None = None

    def warnings(self) -> list[str]:
        """What an operator must be told once per run about these settings (empty when strict)."""
        out = []
        if self.insecure_http:
            out.append(
                "provider.bmc.insecure_http is true: BMCs written as http://... get the BMC credentials and power "
                "commands in clear text; use it only on an isolated lab network"
            )
        if not self.verify_tls:
            out.append(
                "provider.bmc.verify_tls is false: the BMCs' certificates are not checked, so anyone on the BMC "
                "network can pose as a BMC and read its credentials; give the CA as provider.bmc.ca_bundle instead"
            )
        return out


def _shown(value: object, limit: int = 80) -> str:
    """A value from outside (a BMC answer, a Location header) made safe to print: escaped, shortened."""
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    shown = ascii(text[:limit])[1:-1]
    return shown + ("..." if len(text) > limit else "")


def _origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of ``url``, with the scheme's default port filled in."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or DEFAULT_PORTS.get(scheme, 0)


def _origin_text(origin: tuple[str, str, int]) -> str:
    scheme, host, port = origin
    host = f"[{host}]" if ":" in host else host
    return _shown(f"{scheme}://{host}:{port}", 120)


def parse_bmc(bmc: str, *, insecure_http: bool = False) -> tuple[str, str | None]:
    """Split a machines.csv ``bmc`` value into (base URL, system path or None).

    Accepted: ``10.10.0.11`` (HTTPS), ``host:port``, ``https://host[:port]``, and a URL that
    names the system (``https://10.10.0.11/redfish/v1/Systems/<id>``, as Metal3 writes it).
    ``http://`` only with ``insecure_http``.

    Raises:
        BmcInsecureError: an ``http://`` address without ``insecure_http``.
        RedfishError: anything else that is not a BMC address.
    """
    value = bmc.strip()
    if value.startswith("redfish://"):
        value = "https://" + value.removeprefix("redfish://")
    if "://" not in value:
        value = "https://" + value
    parts = urlsplit(value)
    shape = "write a host, host:port or https://host/redfish/v1/Systems/<id>"
    try:
        port = parts.port
    except ValueError:
        raise RedfishError(f"`{_shown(bmc)}` is not a BMC address (bad port); {shape}") from None
    del port
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise RedfishError(f"`{_shown(bmc)}` is not a BMC address; {shape}")
    if parts.username is not None or parts.password is not None:
        raise RedfishError(
            f"the BMC address `{_shown(parts.hostname)}` carries a user name or password; remove it: credentials come "
            f"from {Env.BMC_USER}/{Env.BMC_PASSWORD}, never from machines.csv"
        )
    if parts.query or parts.fragment:
        raise RedfishError(f"`{_shown(bmc)}` is not a BMC address (it has a ?query or #fragment); {shape}")
    if parts.scheme == "http" and not insecure_http:
        raise BmcInsecureError(
            f"BMC {_shown(bmc)} is plain http: the BMC credentials and power commands would cross the network "
            f"unencrypted, so clusterctl refuses it. {_INSECURE_HINT}"
        )
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if path.startswith(SYSTEMS + "/"):
        if not _PATH_RE.match(path):
            raise RedfishError(f"`{_shown(bmc)}` names the system with characters a Redfish path cannot hold; {shape}")
        return base, path
    return base, None


def tls_context(transport: BmcTransport) -> ssl.SSLContext:
    """The TLS settings for BMCs: the system CAs, only the spec's CA bundle, or (explicitly) none."""
    if not transport.verify_tls:
        # The spec opted out explicitly (self-signed BMC certificates are common); warned once per run.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if transport.ca_bundle is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cadata=transport.ca_bundle)
    except (ssl.SSLError, ValueError) as exc:
        raise BmcTlsError(
            f"provider.bmc.ca_bundle holds no usable PEM CA certificate ({_shown(exc, 120)}); give the PEM file of "
            "the CA that signed the BMCs' certificates"
        ) from None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Hand every redirect back to the client, which decides (urllib would forward all headers)."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> None:
        return None


T = TypeVar("T")


class RedfishClient:
    """One BMC and the computer system it manages."""

    def __init__(
        self,
        bmc: str,
        credentials: BmcCredentials | None,
        *,
        verify_tls: bool = True,
        ca_bundle: str | None = None,
        insecure_http: bool = False,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        """A client for ``bmc`` (a machines.csv ``bmc`` value).

        Args:
            bmc: the BMC address (see :func:`parse_bmc`).
            credentials: sent as HTTP basic auth, to this BMC's origin only.
            verify_tls: check the certificate (see :class:`BmcTransport`).
            ca_bundle: PEM text of the only CAs trusted for this BMC.
            insecure_http: allow an ``http://`` address.
            timeout: seconds one request may take from connecting to the last byte of the answer.

        Raises:
            RedfishError: the address is refused (see :func:`parse_bmc`) or the CA bundle is unusable.
        """
        self.bmc = bmc
        self.transport = BmcTransport(insecure_http=insecure_http, verify_tls=verify_tls, ca_bundle=ca_bundle)
        self.base, self._system = parse_bmc(bmc, insecure_http=insecure_http)
        self.credentials = credentials
        self.timeout = timeout
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        if self.base.startswith("https:"):
            handlers.append(urllib.request.HTTPSHandler(context=tls_context(self.transport)))
        self._opener = urllib.request.build_opener(*handlers)

    # --- transport -------------------------------------------------------------------------

    def _error(self, text: str) -> str:
        return f"BMC {_shown(self.bmc)}: {text}"

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request (following same-origin redirects) and return the JSON object it answers."""
        data = json.dumps(body).encode() if body is not None else None
        url = self.base + path
        deadline = time.monotonic() + self.timeout
        for _hop in range(MAX_REDIRECTS + 1):
            raw, location = self._send(method, path, url, data, deadline)
            if location is None:
                return self._json(method, path, raw)
            url = location
        raise BmcAnswerError(self._error(f"{method} {path} was redirected more than {MAX_REDIRECTS} times"))

    def _send(self, method: str, path: str, url: str, data: bytes | None, deadline: float) -> tuple[bytes, str | None]:
        """One HTTP exchange: (body, None), or (b"", next URL) for a redirect within the BMC's origin."""
        try:
            return self._exchange(method, path, url, data, deadline)
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ssl.SSLCertVerificationError | ssl.CertificateError):
                raise self._tls_error(exc.reason) from None
            if isinstance(exc.reason, ssl.SSLError):
                raise BmcTlsError(
                    self._error(f"the TLS handshake failed ({_shown(exc.reason, 160)}); is this an https BMC?")
                ) from None
            raise self._unreachable(exc.reason) from None
        except (ssl.SSLCertVerificationError, ssl.CertificateError) as exc:
            raise self._tls_error(exc) from None
        except TimeoutError as exc:
            raise BmcUnreachableError(
                self._error(f"{method} {path} got no complete answer within {self.timeout:.0f} s ({exc or 'timeout'})")
            ) from None
        except (http.client.HTTPException, OSError) as exc:
            # A broken status line, a header line too long, a connection cut mid-answer.
            raise self._unreachable(f"{type(exc).__name__}: {exc}") from None

    def _exchange(
        self, method: str, path: str, url: str, data: bytes | None, deadline: float
    ) -> tuple[bytes, str | None]:
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        # Only ever to the BMC's own origin: a redirect elsewhere is refused before any request is made.
        if self.credentials is not None and _origin(url) == _origin(self.base):
            token = base64.b64encode(f"{self.credentials.username}:{self.credentials.password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return self._read(response, MAX_ANSWER_BYTES, deadline, method, path), None
        except urllib.error.HTTPError as exc:
            with contextlib.closing(exc):  # the error holds the response (and its socket) open
                if exc.code in REDIRECT_CODES:
                    return b"", self._redirect(method, path, url, exc)
                code = exc.code
                detail = self._read(exc, MAX_ERROR_BYTES, deadline, method, path, truncate=True)
        if code in (401, 403):
            who = f"user `{_shown(self.credentials.username)}`" if self.credentials else "no credentials"
            raise BmcAuthError(
                self._error(
                    f"rejected {who} (HTTP {code}). Set {Env.BMC_USER} and {Env.BMC_PASSWORD} "
                    "(or the Pulumi secrets clusterctl:bmcUsername/bmcPassword) to an account with "
                    "power-control rights on this BMC."
                )
            )
        raise RedfishError(self._error(f"{method} {path} failed with HTTP {code}: {_shown(detail, 300)}"))

    def _unreachable(self, reason: object) -> BmcUnreachableError:
        return BmcUnreachableError(
            f"cannot reach the BMC at {_shown(self.bmc)} ({_shown(reason, 160)}). Check the `bmc` column of "
            "machines.csv, that this machine can reach the BMC network, and that Redfish is enabled on the BMC."
        )

    def _tls_error(self, exc: BaseException) -> BmcTlsError:
        reason = getattr(exc, "verify_message", None) or str(exc)
        if self.transport.ca_bundle is not None:
            fix = "Check that provider.bmc.ca_bundle holds the CA that signed this BMC's certificate"
        else:
            fix = (
                "Give the CA that signed the BMC certificates as provider.bmc.ca_bundle (a PEM file next to the "
                "spec), or, accepting that anyone on the BMC network can pose as the BMC, set "
                "provider.bmc.verify_tls: false"
            )
        return BmcTlsError(self._error(f"its TLS certificate was not accepted ({_shown(reason, 160)}). {fix}."))

    def _redirect(self, method: str, path: str, url: str, exc: urllib.error.HTTPError) -> str:
        """The URL a redirect points to, if it stays on the BMC's origin; else refuse it."""
        location = exc.headers.get("Location") if exc.headers is not None else None
        if not location:
            raise BmcAnswerError(self._error(f"{method} {path} answered HTTP {exc.code} without a Location"))
        target = urljoin(url, location.strip())
        if _origin(target) != _origin(self.base):
            raise BmcInsecureError(
                self._error(
                    f"{method} {path} was redirected (HTTP {exc.code}) to another host or scheme, "
                    f"{_origin_text(_origin(target))}; clusterctl sends the BMC credentials only to "
                    f"{_origin_text(_origin(self.base))} and did not follow it. If the BMC really lives there, "
                    "write that address in the `bmc` column of machines.csv."
                )
            )
        if exc.code in (301, 302, 303) and method not in ("GET", "HEAD"):
            # Clients turn these into GETs, which would silently drop the change asked for.
            raise BmcAnswerError(
                self._error(f"{method} {path} was redirected with HTTP {exc.code}, which would drop the request body")
            )
        return target

    def _read(
        self,
        response: Any,
        limit: int,
        deadline: float,
        method: str,
        path: str,
        *,
        truncate: bool = False,
    ) -> bytes:
        """At most ``limit`` bytes of the body, before ``deadline`` (a BMC that drips bytes is cut off)."""
        declared = response.headers.get("Content-Length") if response.headers is not None else None
        if not truncate and declared is not None and declared.strip().isdigit() and int(declared) > limit:
            raise BmcAnswerError(
                self._error(f"{method} {path} announced a {int(declared)}-byte answer; at most {limit} are read")
            )
        chunks: list[bytes] = []
        size = 0
        while True:
            if time.monotonic() > deadline:
                raise BmcUnreachableError(
                    self._error(f"{method} {path} did not finish answering within {self.timeout:.0f} s")
                )
            chunk = response.read1(65536) if hasattr(response, "read1") else response.read(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                if truncate:
                    return b"".join(chunks)[:limit]
                raise BmcAnswerError(self._error(f"{method} {path} answered more than {limit} bytes; refused"))

    def _json(self, method: str, path: str, raw: bytes) -> dict[str, Any]:
        if not raw.strip():
            if method == "GET":
                raise BmcAnswerError(
                    self._error(f"GET {path} answered with an empty body instead of a Redfish resource")
                )
            return {}  # PATCH/POST: 204 No Content or an empty 200 is success
        try:
            document = json_document(raw.decode("utf-8"), "BMC answer")
        except (ValueError, RecursionError):
            raise BmcAnswerError(
                self._error(f"{method} {path} answered with something that is not JSON (it starts `{_shown(raw, 60)}`)")
            ) from None
        if not isinstance(document, dict):
            raise BmcAnswerError(
                self._error(f"{method} {path} answered a JSON {type(document).__name__}, not a Redfish object")
            )
        return document

    def _field(self, document: dict[str, Any], key: str, kind: type[T], where: str, default: T | None = None) -> T:
        """``document[key]`` if it has type ``kind`` (``default`` when absent and a default is given)."""
        if key not in document and default is not None:
            return default
        value = document.get(key)
        if key not in document:
            raise BmcAnswerError(self._error(f"{where} has no `{key}`"))
        if not isinstance(value, kind) or isinstance(value, bool) is not (kind is bool):
            raise BmcAnswerError(
                self._error(
                    f"{where}: `{key}` is a {type(value).__name__} ({_shown(value, 40)}), not a {kind.__name__}"
                )
            )
        return value

    def _resource_path(self, value: object, where: str) -> str:
        """A path the BMC gave (``@odata.id``, an action target), checked to stay on this BMC's Redfish tree."""
        if not isinstance(value, str):
            raise BmcAnswerError(self._error(f"{where} is a {type(value).__name__}, not a Redfish path"))
        path = value.strip()
        if "://" in path:
            # Absolute URLs are allowed only on the BMC's own origin.
            if _origin(path) != _origin(self.base):
                raise BmcAnswerError(self._error(f"{where} points to another host ({_shown(path)})"))
            path = urlsplit(path).path
        segments = path.split("/")
        if not _PATH_RE.match(path) or ".." in segments or "." in segments or len(path) > 512:
            raise BmcAnswerError(self._error(f"{where} is not a Redfish path ({_shown(path)})"))
        return path.rstrip("/")

    # --- the system --------------------------------------------------------------------------

    @property
    def system_path(self) -> str:
        """The Redfish path of the managed system (the only one, or the one the address names)."""
        if self._system is None:
            collection = self._request("GET", SYSTEMS)
            members = self._field(collection, "Members", list, f"GET {SYSTEMS}")
            if len(members) != 1:
                raise RedfishError(
                    self._error(
                        f"manages {len(members)} systems; name one in machines.csv as {self.base}{SYSTEMS}/<id>"
                    )
                )
            member = members[0]
            if not isinstance(member, dict):
                raise BmcAnswerError(self._error(f"GET {SYSTEMS}: the member is a {type(member).__name__}"))
            self._system = self._resource_path(member.get("@odata.id"), f"GET {SYSTEMS}: Members[0].@odata.id")
        return self._system

    def system(self) -> dict[str, Any]:
        """The ComputerSystem resource."""
        return self._request("GET", self.system_path)

    def power_state(self) -> str:
        """``On``, ``Off`` (or a transitional state the BMC reports)."""
        value = self.system().get("PowerState", "Unknown")
        if value is None:
            return "Unknown"
        if not isinstance(value, str) or len(value) > 64:
            raise BmcAnswerError(
                self._error(f"GET {self.system_path}: `PowerState` is {_shown(value, 40)}, not a power state")
            )
        return value

    def boot_override(self) -> dict[str, Any]:
        """The ``Boot`` object (BootSourceOverrideTarget/Enabled/Mode)."""
        return dict(self._field(self.system(), "Boot", dict, f"GET {self.system_path}", default={}))

    def set_one_time_boot(self, target: str = "Pxe", mode: str | None = "UEFI") -> None:
        """Boot from ``target`` at the next boot only, then from disk again."""
        boot: dict[str, Any] = {"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Once"}
        if mode and "BootSourceOverrideMode" in self.boot_override():
            boot["BootSourceOverrideMode"] = mode
        self._request("PATCH", self.system_path, {"Boot": boot})

    def set_persistent_boot(self, target: str, mode: str | None = None) -> None:
        """Boot from ``target`` at every boot from now on (``BootSourceOverrideEnabled: Continuous``).

        Why: after a PXE install Ironic sets the disk as the persistent boot device, and network boot
        for machines that run from RAM; some BMCs ignore ``Once``, and a machine that boots the wrong
        device at its next reboot either reinstalls itself or does not come back.
        """
        boot: dict[str, Any] = {"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Continuous"}
        if mode and "BootSourceOverrideMode" in self.boot_override():
            boot["BootSourceOverrideMode"] = mode
        self._request("PATCH", self.system_path, {"Boot": boot})

    def _reset_action(self) -> dict[str, Any]:
        where = f"GET {self.system_path}"
        actions = self._field(self.system(), "Actions", dict, where, default={})
        return dict(self._field(actions, "#ComputerSystem.Reset", dict, f"{where}: Actions", default={}))

    def reset(self, reset_type: str) -> None:
        """Run ``ComputerSystem.Reset`` with ``reset_type``."""
        target = self._reset_action().get("target")
        if target is None:
            action = f"{self.system_path}/Actions/ComputerSystem.Reset"
        else:
            action = self._resource_path(target, f"GET {self.system_path}: the Reset action's target")
        self._request("POST", action, {"ResetType": reset_type})

    def _allowed_resets(self) -> list[str]:
        reset = self._reset_action()
        allowed = reset.get("ResetType@Redfish.AllowableValues", [])
        if not isinstance(allowed, list):
            raise BmcAnswerError(
                self._error(f"GET {self.system_path}: the allowed reset types are a {type(allowed).__name__}")
            )
        return [str(a) for a in allowed if isinstance(a, str)]

    def power_on(self) -> None:
        """Power on; a system that is already on is restarted so it boots the override."""
        if self.power_state() == "On":
            allowed = self._allowed_resets()
            self.reset("ForceRestart" if not allowed or "ForceRestart" in allowed else "PowerCycle")
        else:
            self.reset("On")

    def power_off(self) -> None:
        """Power off hard (the node is being decommissioned, not shut down for maintenance)."""
        if self.power_state() != "Off":
            self.reset("ForceOff")

    def wait_power(
        self,
        state: str,
        timeout: float = POWER_TIMEOUT_S,
        poll: float = POWER_POLL_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Poll until the system reports ``state``."""
        deadline = time.monotonic() + timeout
        current = self.power_state()
        while current != state:
            if time.monotonic() > deadline:
                raise RedfishError(
                    self._error(f"the system is still {_shown(current, 40)} {timeout:.0f} s after asking for {state}")
                )
            sleep(poll)
            current = self.power_state()


def wait_for_port(
    address: str, port: int, timeout: float, poll: float = 5.0, sleep: Callable[[float], None] = time.sleep
) -> float:
    """Wait until ``address:port`` accepts a TCP connection; return the seconds it took."""
    started = time.monotonic()
    while True:
        try:
            with socket.create_connection((address, port), timeout=min(poll, 10.0)):
                return time.monotonic() - started
        except OSError:
            if time.monotonic() - started > timeout:
                raise NodeNotReadyError(
                    f"{address}:{port} did not answer within {timeout:.0f} s after the PXE boot. Check the node's "
                    "console (BMC): did it PXE-boot, get its lease from dnsmasq, and finish the autoinstall?"
                ) from None
            sleep(poll)


def scan_host_key(address: str, port: int = 22, key_type: str = "ed25519", timeout: int = 10) -> str:
    """The SSH host key the node presents, as ``"<type> <base64>"`` (ssh-keyscan).

    Only :func:`check_host_key` uses it, to compare with the pinned key: a key read from the
    network is never trusted or recorded (that would be trust on first use).
    """
    keyscan = shutil.which("ssh-keyscan")
    if keyscan is None:
        raise RedfishError("ssh-keyscan (openssh-client) is needed to check bare-metal host keys; install it")
    done = subprocess.run(
        [keyscan, "-T", str(timeout), "-t", key_type, "-p", str(port), address],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout + 5,
    )
    for line in done.stdout.splitlines():
        if line and not line.startswith("#"):
            _host, kind, key = line.split(None, 2)
            return f"{kind} {key.strip()}"
    raise NoHostKeyYetError(f"{address}:{port} answered but returned no {key_type} host key")


def _fingerprint(key_b64: str) -> str:
    """OpenSSH's SHA256 fingerprint of a base64 public key blob (as ``ssh-keygen -l`` prints it)."""
    try:
        blob = base64.b64decode(key_b64, validate=True)
    except ValueError:
        return "(not base64)"
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def check_host_key(address: str, port: int, expected: str, timeout: int = 10) -> str:
    """Check that the node at ``address`` presents ``expected`` (its pinned key); return the fingerprint.

    Compared, never learnt: the key clusterctl generated (and served to the installer) is the
    only one known_hosts will hold; this only tells, right after the install, whether the
    machine that answers has it -- a node whose late-command failed, or another machine at its
    address, is reported here rather than as a refused connection later.

    Raises:
        NodeNotReadyError: the node presents another key (both fingerprints are named), or none.
        RedfishError: ``expected`` is not a public key line, or ssh-keyscan is missing.
    """
    fields = expected.split()
    if len(fields) < 2:
        raise RedfishError("the pinned host key is not an OpenSSH public key line; run `clusterctl up` again")
    kind, want = fields[0], fields[1]
    presented = scan_host_key(address, port, kind.removeprefix("ssh-"), timeout)
    got = presented.split()[1] if len(presented.split()) > 1 else ""
    if got != want:
        raise NodeNotReadyError(
            f"{address}:{port} presents the SSH host key {_fingerprint(got)}, not the pinned {_fingerprint(want)} "
            "clusterctl generated for it. Either the install did not fetch its key (see the node's console and "
            "/var/log/installer), or another machine answers at this address; nothing was trusted"
        )
    return _fingerprint(want)
