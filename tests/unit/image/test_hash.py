"""The content hash of a profile's image: stable, per profile, and moved only by what the install stage reads."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from clusterctl.image.hash import (
    BUILDER_HOSTNAME,
    builder_for,
    explain,
    host_matches,
    normalize_arch,
    play_roles,
    profile_hash,
    profiles,
    role_install_files,
)
from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from tests.specs import example_data, group, write_spec


def plan_of(tmp_path: Path, data: dict[str, Any], name: str = "spec.yaml") -> Plan:
    return load_and_validate(write_spec(tmp_path, data, name)).plan


def hashes(plan: Plan, roles_root: Path | None = None, **kw: Any) -> dict[str, str]:
    return {p: profile_hash(plan, p, arch="amd64", roles_root=roles_root, **kw).hash for p in profiles(plan)}


@pytest.fixture
def local() -> dict[str, Any]:
    return example_data("local.yaml")


@pytest.fixture
def onprem() -> dict[str, Any]:
    return example_data("onprem-h100-256.yaml")


# --- a small roles tree: one base role everywhere, one GPU role on real GPU nodes -----------------

SITE = """\
---
- name: Base
  hosts: controller:login:compute
  roles:
    - role: base

- name: GPU stack
  hosts: gpu:!emulated_gpu
  tasks:
    - name: Apply the GPU roles
      ansible.builtin.include_role:
        name: "{{ item }}"
      loop: "{{ ['gpu_stack'] + (['extra'] if false else []) }}"
"""
BASE_MAIN = """\
---
- name: Install
  ansible.builtin.import_tasks: install.yml
  tags: [base_install]
- name: Configure
  ansible.builtin.import_tasks: configure.yml
  tags: [base_configure]
- name: Services
  ansible.builtin.import_tasks: service.yml
  tags: [base_run]
"""
BASE_INSTALL = """\
---
- name: Repository
  ansible.builtin.template:
    src: repo.list.j2
    dest: /etc/apt/sources.list.d/x.list
    mode: "0644"
- name: Packages
  ansible.builtin.apt:
    name: "{{ base_packages }}"
"""
BASE_CONFIGURE = """\
---
- name: Configuration
  ansible.builtin.template:
    src: base.conf.j2
    dest: /etc/base.conf
    mode: "0644"
- name: More
  ansible.builtin.include_tasks: configure_more.yml
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def roles(tmp_path: Path) -> Path:
    root = tmp_path / "roles"
    _write(
        root,
        {
            "site.yml": SITE,
            "base/tasks/main.yml": BASE_MAIN,
            "base/tasks/install.yml": BASE_INSTALL,
            "base/tasks/configure.yml": BASE_CONFIGURE,
            "base/tasks/configure_more.yml": "---\n- name: X\n  ansible.builtin.debug:\n    msg: more\n",
            "base/tasks/service.yml": "---\n- name: S\n  ansible.builtin.debug:\n    msg: s\n",
            "base/templates/repo.list.j2": "deb http://example.invalid/ stable main\n",
            "base/templates/base.conf.j2": "cluster={{ clusterctl_cluster_name }}\n",
            "base/defaults/main.yml": '---\nbase_packages: [chrony]\nbase_enroot: "{{ clusterctl_versions.enroot }}"\n',
            "base/molecule/default/converge.yml": "---\n",
            "base/README.md": "# base\n",
            "gpu_stack/tasks/main.yml": (
                "---\n- name: I\n  ansible.builtin.import_tasks: install.yml\n  tags: [gpu_stack_install]\n"
            ),
            "gpu_stack/tasks/install.yml": "---\n- name: D\n  ansible.builtin.debug:\n    msg: x\n",
            "gpu_stack/defaults/main.yml": (
                '---\ngpu_stack_driver: "{{ clusterctl_versions.nvidia_driver }}"\n'
                "gpu_stack_cuda: \"{{ clusterctl_versions['cuda'] }}\"\n"
            ),
        },
    )
    return root


def test_the_same_spec_gives_the_same_hash(tmp_path: Path, local: dict[str, Any]) -> None:
    first = hashes(plan_of(tmp_path, local))
    again = hashes(load_and_validate(write_spec(tmp_path, copy.deepcopy(local), "again.yaml")).plan)
    assert first == again
    assert sorted(first) == ["emu-h100", "small"]
    assert first["emu-h100"] != first["small"]
    assert all(len(h) == 64 for h in first.values())


def test_cluster_data_does_not_enter_the_hash(tmp_path: Path, local: dict[str, Any]) -> None:
    before = hashes(plan_of(tmp_path, local))
    other = copy.deepcopy(local)
    other["name"] = "other"
    other["network"] = {"management_cidr": "10.9.0.0/24", "domain": "elsewhere.internal"}
    group(other, "gpu")["count"] = 2
    assert hashes(plan_of(tmp_path, other, "other.yaml")) == before


def test_the_driver_pin_moves_only_real_gpu_profiles(
    tmp_path: Path, local: dict[str, Any], onprem: dict[str, Any]
) -> None:
    # Local: the GPU roles are skipped on emulated GPUs, so no profile reads the driver's pin.
    before = hashes(plan_of(tmp_path, local))
    changed = copy.deepcopy(local)
    changed["versions"]["nvidia_driver"] = "570.124.06"
    assert hashes(plan_of(tmp_path, changed, "local2.yaml")) == before
    assert "nvidia_driver" not in profile_hash(plan_of(tmp_path, local), "emu-h100").inputs["versions"]
    # On prem: the GPU profile reads it, the CPU profile (controller, login) does not.
    base = hashes(plan_of(tmp_path, onprem, "onprem.yaml"))
    bumped = copy.deepcopy(onprem)
    bumped["versions"]["nvidia_driver"] = bumped["versions"]["fabric_manager"] = "570.124.06"
    after = hashes(plan_of(tmp_path, bumped, "onprem2.yaml"))
    assert after["cpu-1u"] == base["cpu-1u"]
    assert after["dgx-h100"] != base["dgx-h100"]


def test_gpu_profile_hash_covers_the_gpu_roles(tmp_path: Path, onprem: dict[str, Any]) -> None:
    image = profile_hash(plan_of(tmp_path, onprem), "dgx-h100")
    assert {"nvidia_driver", "cuda", "nccl", "dcgm"} <= set(image.roles)
    assert {"nvidia_driver", "cuda", "nccl"} <= set(image.inputs["versions"])
    cpu = profile_hash(plan_of(tmp_path, onprem), "cpu-1u")
    assert not {"nvidia_driver", "cuda", "nccl", "dcgm"} & set(cpu.roles)


def test_os_arch_and_base_enter_the_hash(tmp_path: Path, local: dict[str, Any]) -> None:
    plan = plan_of(tmp_path, local)
    first = profile_hash(plan, "small", arch="amd64")
    assert profile_hash(plan, "small", arch="arm64").hash != first.hash
    assert profile_hash(plan, "small", arch="amd64", base="local/debian:trixie").hash != first.hash
    ubuntu = plan.model_copy(update={"cluster": plan.cluster.model_copy(update={"os": "ubuntu-22.04"})})
    assert profile_hash(ubuntu, "small", arch="amd64").hash != first.hash


def test_builder_is_in_every_group_of_the_profile(tmp_path: Path, local: dict[str, Any]) -> None:
    plan = plan_of(tmp_path, local)
    small = builder_for(plan, "small")
    assert small.kind_groups == ("controller", "login")
    assert {"group_ctl", "group_login"} <= set(small.groups)
    assert small.nodes == ("ctl001", "login001")
    # Host-valued group variables name the builder when they named one of the profile's nodes.
    assert small.group_vars["clusterctl_controllers"] == [BUILDER_HOSTNAME]
    assert small.group_vars["clusterctl_slurm_dbd_host"] == BUILDER_HOSTNAME
    emu = builder_for(plan, "emu-h100")
    assert emu.kind_groups == ("compute", "emulated_gpu", "static_compute")
    assert emu.group_vars["clusterctl_controllers"] == ["ctl001"]
    assert emu.host_vars["clusterctl_emulated_gpus"] is True


# --- with the small roles tree -----------------------------------------------------------------


def test_configure_stage_files_do_not_enter_the_hash(tmp_path: Path, local: dict[str, Any], roles: Path) -> None:
    assert role_install_files(roles / "base") == [
        "defaults/main.yml",
        "tasks/install.yml",
        "tasks/main.yml",
        "templates/repo.list.j2",
    ]
    plan = plan_of(tmp_path, local)
    before = hashes(plan, roles)
    for rel in (
        "base/tasks/configure.yml",
        "base/tasks/configure_more.yml",
        "base/templates/base.conf.j2",
        "base/tasks/service.yml",
        "base/molecule/default/converge.yml",
        "base/README.md",
    ):
        path = roles / rel
        path.write_text(path.read_text() + "# changed\n")
        assert hashes(plan, roles) == before, rel


@pytest.mark.parametrize(
    "rel", ["base/tasks/install.yml", "base/tasks/main.yml", "base/templates/repo.list.j2", "base/defaults/main.yml"]
)
def test_install_stage_files_enter_the_hash(tmp_path: Path, local: dict[str, Any], roles: Path, rel: str) -> None:
    plan = plan_of(tmp_path, local)
    before = hashes(plan, roles)
    (roles / rel).write_text((roles / rel).read_text() + "# changed\n")
    after = hashes(plan, roles)
    assert all(after[p] != before[p] for p in before)


def test_a_pin_moves_only_the_profiles_whose_roles_read_it(tmp_path: Path, onprem: dict[str, Any], roles: Path) -> None:
    plan = plan_of(tmp_path, onprem)
    before = hashes(plan, roles)
    gpu = profile_hash(plan, "dgx-h100", roles_root=roles)
    assert gpu.roles == ("base", "gpu_stack")
    assert set(gpu.inputs["versions"]) == {"enroot", "nvidia_driver", "cuda"}
    assert profile_hash(plan, "cpu-1u", roles_root=roles).inputs["versions"] == {"enroot": "3.5.0"}

    driver = copy.deepcopy(onprem)
    driver["versions"]["nvidia_driver"] = driver["versions"]["fabric_manager"] = "570.124.06"
    after = hashes(plan_of(tmp_path, driver, "driver.yaml"), roles)
    assert after["cpu-1u"] == before["cpu-1u"]
    assert after["dgx-h100"] != before["dgx-h100"]

    # A pin nobody reads moves nothing; one every profile reads moves all.
    dcgm = copy.deepcopy(onprem)
    dcgm["versions"]["dcgm"] = "3.3.8"
    assert hashes(plan_of(tmp_path, dcgm, "dcgm.yaml"), roles) == before
    enroot = copy.deepcopy(onprem)
    enroot["versions"]["enroot"] = "3.5.1"
    moved = hashes(plan_of(tmp_path, enroot, "enroot.yaml"), roles)
    assert all(moved[p] != before[p] for p in before)


def test_explain_names_what_changed(tmp_path: Path, onprem: dict[str, Any], roles: Path) -> None:
    old = profile_hash(plan_of(tmp_path, onprem), "dgx-h100", roles_root=roles, arch="amd64")
    changed = copy.deepcopy(onprem)
    changed["versions"]["enroot"] = "3.5.1"
    (roles / "gpu_stack/tasks/install.yml").write_text("---\n- name: E\n  ansible.builtin.debug:\n    msg: y\n")
    new = profile_hash(plan_of(tmp_path, changed, "c.yaml"), "dgx-h100", roles_root=roles, arch="arm64")
    assert explain(old.inputs, new.inputs) == [
        "arch amd64 -> arm64",
        "versions.enroot 3.5.0 -> 3.5.1",
        "roles/gpu_stack's install stage changed",
    ]
    assert explain(old.inputs, old.inputs) == []


def test_explain_names_entries_that_came_or_went() -> None:
    locked = {"versions": {"slurm": "24.05"}, "vars": {"a": 1}, "roles": {"common": "x", "nfs": "y"}}
    current = {"versions": {"enroot": "3.5.1"}, "vars": {"a": 1, "b": 2}, "roles": {"common": "x", "pyxis": "z"}}
    assert explain(locked, current) == [
        "versions.enroot 3.5.1 now read",
        "versions.slurm no longer read",
        "b 2 now read",
        "role nfs no longer applied",
        "role pyxis now applied",
    ]


@pytest.mark.parametrize(
    ("pattern", "groups", "expected"),
    [
        ("controller:login:compute", ["login"], True),
        ("controller:login:compute", ["gpu"], False),
        ("gpu:!emulated_gpu", ["compute", "emulated_gpu"], False),
        ("gpu:!emulated_gpu", ["compute", "gpu"], True),
        ("compute:&gpu", ["compute"], False),
        ("compute:&gpu", ["compute", "gpu"], True),
        ("all", [], True),
        ("gp*", ["gpu"], True),
        (["controller", "login"], ["login"], True),
        ("{{ target_hosts }}", [], True),
        ("~gpu.*", [], True),
        ("compute:!~gpu.*", ["compute", "gpu"], True),
    ],
)
def test_host_patterns(pattern: Any, groups: list[str], expected: bool) -> None:
    assert host_matches(pattern, BUILDER_HOSTNAME, groups) is expected


def test_play_roles_reads_roles_includes_and_loops() -> None:
    play = {
        "roles": [{"role": "common"}, "munge"],
        "tasks": [
            {
                "ansible.builtin.include_role": {"name": "{{ r }}"},
                "loop": "{{ ['rdma', 'cuda'] + (['efa'] if x else []) }}",
            },
            {"block": [{"include_role": {"name": "slurm", "tasks_from": "packages"}}]},
            {"ansible.builtin.include_role": {"name": "{{ r }}"}, "loop": ["nccl", "unknown"]},
        ],
    }
    known = ["common", "munge", "rdma", "cuda", "efa", "slurm", "nccl"]
    assert play_roles(play, known) == ["common", "munge", "rdma", "cuda", "efa", "slurm", "nccl"]


def test_normalize_arch() -> None:
    assert normalize_arch("x86_64") == "amd64"
    assert normalize_arch("aarch64") == "arm64"
    assert normalize_arch("amd64") == "amd64"
