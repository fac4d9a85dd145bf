"""A small Redfish client for what day-0 bring-up needs: one-time PXE boot, power, state.

Standard library only (urllib), so the Pulumi dynamic provider that uses it runs wherever the
program runs. BMC credentials come from ``CLUSTERCTL_BMC_USERNAME``/``CLUSTERCTL_BMC_PASSWORD``
or Pulumi secrets -- never from the spec. Errors name the BMC and say what to check: a wrong
address and bad credentials are the two mistakes everyone makes first.

Sources: DMTF Redfish ``ComputerSystem`` schema (``Boot.BootSourceOverrideTarget``/``Enabled``/
``Mode``, ``Actions/ComputerSystem.Reset``); sushy-tools' emulator implements the same surface.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from clusterctl.app import Env

SYSTEMS = "/redfish/v1/Systems"
DEFAULT_TIMEOUT_S = 15.0
# Power changes land after the BMC gets to them (seconds on real BMCs, 1-11 s in sushy's fake
# driver), so every change is followed by polling.
POWER_POLL_S = 1.0
POWER_TIMEOUT_S = 120.0


class RedfishError(Exception):
    """A BMC refused or failed a request; the message says which BMC and what to check."""


class BmcUnreachableError(RedfishError):
    """Nothing answers at the BMC address."""


class BmcAuthError(RedfishError):
    """The BMC rejected the credentials."""


class NodeNotReadyError(RedfishError):
    """The node was booted but never answered on its ready port."""


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


def parse_bmc(bmc: str) -> tuple[str, str | None]:
    """Split a machines.csv ``bmc`` value into (base URL, system path or None).

    Accepted: ``10.10.0.11`` (HTTPS), ``host:port``, ``https://host[:port]``, and a URL that
    names the system (``http://127.0.0.1:8000/redfish/v1/Systems/<id>``, as Metal3 writes it).
    """
    value = bmc.strip()
    if value.startswith("redfish://"):
        value = "https://" + value.removeprefix("redfish://")
    if "://" not in value:
        value = "https://" + value
    parts = urlsplit(value)
    if not parts.hostname:
        raise RedfishError(
            f"`{bmc}` is not a BMC address; write a host, host:port or https://host/redfish/v1/Systems/<id>"
        )
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    return base, path if path.startswith(SYSTEMS + "/") else None


class RedfishClient:
    """One BMC and the computer system it manages."""

    def __init__(
        self,
        bmc: str,
        credentials: BmcCredentials | None,
        *,
        verify_tls: bool = True,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.bmc = bmc
        self.base, self._system = parse_bmc(bmc)
        self.credentials = credentials
        self.timeout = timeout
        self._context: ssl.SSLContext | None = None
        if self.base.startswith("https") and not verify_tls:
            # Self-signed BMC certificates are common; the spec opts out explicitly.
            self._context = ssl.create_default_context()
            self._context.check_hostname = False
            self._context.verify_mode = ssl.CERT_NONE

    # --- transport -------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.credentials is not None:
            token = base64.b64encode(f"{self.credentials.username}:{self.credentials.password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._context) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:300]
            exc.close()  # the error holds the response (and its socket) open
            if exc.code in (401, 403):
                who = f"user `{self.credentials.username}`" if self.credentials else "no credentials"
                raise BmcAuthError(
                    f"BMC {self.bmc} rejected {who} (HTTP {exc.code}). Set {Env.BMC_USER} and {Env.BMC_PASSWORD} "
                    "(or the Pulumi secrets clusterctl:bmcUsername/bmcPassword) to an account with "
                    "power-control rights on this BMC."
                ) from None
            raise RedfishError(f"BMC {self.bmc}: {method} {path} failed with HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise BmcUnreachableError(
                f"cannot reach the BMC at {self.bmc} ({reason}). Check the `bmc` column of machines.csv, that this "
                "machine can reach the BMC network, and that Redfish is enabled on the BMC."
            ) from None
        return dict(json.loads(raw)) if raw.strip() else {}

    # --- the system --------------------------------------------------------------------------

    @property
    def system_path(self) -> str:
        """The Redfish path of the managed system (the only one, or the one the address names)."""
        if self._system is None:
            members = self._request("GET", SYSTEMS).get("Members", [])
            if len(members) != 1:
                raise RedfishError(
                    f"BMC {self.bmc} manages {len(members)} systems; name one in machines.csv as "
                    f"{self.base}{SYSTEMS}/<id>"
                )
            self._system = str(members[0]["@odata.id"]).rstrip("/")
        return self._system

    def system(self) -> dict[str, Any]:
        """The ComputerSystem resource."""
        return self._request("GET", self.system_path)

    def power_state(self) -> str:
        """``On``, ``Off`` (or a transitional state the BMC reports)."""
        return str(self.system().get("PowerState", "Unknown"))

    def boot_override(self) -> dict[str, Any]:
        """The ``Boot`` object (BootSourceOverrideTarget/Enabled/Mode)."""
        return dict(self.system().get("Boot", {}))

    def set_one_time_boot(self, target: str = "Pxe", mode: str | None = "UEFI") -> None:
        """Boot from ``target`` at the next boot only, then from disk again."""
        boot: dict[str, Any] = {"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Once"}
        if mode and "BootSourceOverrideMode" in self.boot_override():
            boot["BootSourceOverrideMode"] = mode
        self._request("PATCH", self.system_path, {"Boot": boot})

    def reset(self, reset_type: str) -> None:
        """Run ``ComputerSystem.Reset`` with ``reset_type``."""
        action = (
            self.system().get("Actions", {}).get("#ComputerSystem.Reset", {}).get("target")
            or f"{self.system_path}/Actions/ComputerSystem.Reset"
        )
        self._request("POST", str(action), {"ResetType": reset_type})

    def _allowed_resets(self) -> list[str]:
        reset = self.system().get("Actions", {}).get("#ComputerSystem.Reset", {})
        return list(reset.get("ResetType@Redfish.AllowableValues", []))

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
                    f"BMC {self.bmc}: the system is still {current} {timeout:.0f} s after asking for {state}"
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
    """The node's SSH host key as ``"<type> <base64>"`` (ssh-keyscan), right after it answered.

    Why here: bare-metal nodes generate their keys at install; reading them on the provisioning
    network the moment the node first answers is the earliest point they are known.
    """
    keyscan = shutil.which("ssh-keyscan")
    if keyscan is None:
        raise RedfishError("ssh-keyscan (openssh-client) is needed to record bare-metal host keys; install it")
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
    raise NodeNotReadyError(f"{address}:{port} answered but returned no {key_type} host key")
