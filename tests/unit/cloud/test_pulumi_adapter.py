"""The Automation API adapter: everything that can be checked without the Pulumi engine, and
(marked ``pulumi_engine``) a real preview with the file backend where the CLI exists."""

from __future__ import annotations

import re
import shutil
import stat
from pathlib import Path

import pytest

from clusterctl.pipeline import load_and_validate, render
from clusterctl.run.pulumi import (
    INSTALL_HINT,
    PLUGIN_VERSIONS,
    PULUMI_SDK_VERSION,
    ChangeSummary,
    PulumiCliMissingError,
    PulumiStack,
    StackOutputs,
    ensure_passphrase,
    load_stack_module,
    require_pulumi_cli,
    stack_name,
)
from tests.conftest import EXAMPLES, REPO_ROOT

HAVE_PULUMI = shutil.which("pulumi") is not None
pulumi_engine = pytest.mark.skipif(not HAVE_PULUMI, reason="pulumi CLI not installed")


@pytest.fixture
def no_pulumi_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_require_pulumi_cli_names_the_cli_and_the_install(no_pulumi_on_path: None) -> None:
    with pytest.raises(PulumiCliMissingError) as info:
        require_pulumi_cli()
    message = str(info.value)
    assert "Pulumi CLI" in message
    assert "`pulumi`" in message
    assert "https://get.pulumi.com" in message
    assert message == INSTALL_HINT


def test_stack_without_cli_touches_nothing(no_pulumi_on_path: None, tmp_path: Path) -> None:
    plan = load_and_validate(EXAMPLES / "aws-p5.yaml").plan
    state = tmp_path / "state"
    adapter = PulumiStack(plan, tmp_path / "build", state)
    with pytest.raises(PulumiCliMissingError):
        adapter.preview()
    assert not state.exists()


def test_fully_qualified_stack_name() -> None:
    plan = load_and_validate(EXAMPLES / "gcp-a3mega.yaml").plan
    assert stack_name(plan) == "organization/clusterctl-gcp/mesa"


def test_passphrase_is_generated_once_and_private(tmp_path: Path) -> None:
    first = ensure_passphrase(tmp_path)
    text = first.read_text()
    assert len(text) >= 32
    assert stat.S_IMODE(first.stat().st_mode) == 0o600
    assert stat.S_IMODE(first.parent.stat().st_mode) == 0o700
    assert first.parent == tmp_path / "secrets"
    assert ensure_passphrase(tmp_path).read_text() == text


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure", "baremetal"])
def test_plugin_versions_pinned_in_one_place(provider: str) -> None:
    requirements = (REPO_ROOT / "stacks" / provider / "requirements.txt").read_text()
    pins = dict(re.findall(r"^([a-z0-9-]+)==([0-9.]+)$", requirements, flags=re.MULTILINE))
    assert pins.pop("pulumi") == PULUMI_SDK_VERSION
    expected = {f"pulumi-{name}": version for name, version in PLUGIN_VERSIONS[provider].items()}
    assert pins == expected


def test_installed_sdks_match_the_pins() -> None:
    from importlib.metadata import version

    assert version("pulumi") == PULUMI_SDK_VERSION
    for stack in ("aws", "gcp", "azure"):
        for plugin, pinned in PLUGIN_VERSIONS[stack].items():
            assert version(f"pulumi_{plugin.replace('-', '_')}") == pinned


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure", "baremetal"])
def test_stack_modules_load_and_expose_deploy(provider: str) -> None:
    module = load_stack_module(provider)
    assert callable(module.deploy)
    project = (REPO_ROOT / "stacks" / provider / "Pulumi.yaml").read_text()
    assert f"name: clusterctl-{provider}" in project


def test_summaries() -> None:
    summary = ChangeSummary(changes={"create": 3, "same": 2})
    assert summary.has_changes
    assert summary.describe() == "3 to create, 2 unchanged"
    assert not ChangeSummary(changes={"same": 5}).has_changes
    outputs = StackOutputs(values={"nodes": {"a": "1"}, "token": "x"}, secret=frozenset({"token"}))
    assert outputs.masked() == {"nodes": {"a": "1"}, "token": "[secret]"}


@pytest.mark.pulumi_engine
@pulumi_engine
def test_preview_with_the_file_backend(tmp_path: Path) -> None:
    validated = load_and_validate(EXAMPLES / "onprem-h100-256.yaml")
    build, _ = render(validated, tmp_path / "build")
    state = tmp_path / "state"
    adapter = PulumiStack(validated.plan, build, state, ssh_public_key="ssh-ed25519 AAAAtest")
    summary = adapter.preview()
    assert summary.changes.get("create", 0) >= len(validated.plan.nodes)
    assert (state / "pulumi").is_dir()
    assert (state / "secrets" / "pulumi-passphrase").stat().st_mode & 0o077 == 0
