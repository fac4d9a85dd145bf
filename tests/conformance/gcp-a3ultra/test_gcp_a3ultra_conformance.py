"""An A3 Ultra cluster (examples/gcp-a3ultra.yaml) against Google's own A3 Ultra (RoCE, gIB) Slurm reference.

One test per piece Google's reference needs, each naming the vendor file (owner/repo:path@commit)
it checks against: the instance type's NICs, the job's NCCL environment (gIB plugin), the
partitions, what A3 Ultra does not have (RxDM, docker prolog, long-prolog timeouts), and what the
gpudirect role installs (nccl-gib pinned and held, the profile script). Vendor files not among the
shared fixtures are verbatim copies in vendor/ (SOURCES.md there).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from tests.conftest import REPO_ROOT
from tests.enroot_testkit import container_environment

from clusterctl.catalog.instances import instance_type
from clusterctl.pipeline import load_and_validate
from clusterctl.render.tree import render_files

HERE = Path(__file__).resolve().parent
VENDOR = HERE / "vendor"
SPEC = REPO_ROOT / "examples" / "gcp-a3ultra.yaml"
ROLE = REPO_ROOT / "roles" / "gpudirect"
HW = "a3ultra"


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    plan = load_and_validate(SPEC).plan
    return {f.path: f.text for f in render_files(plan)}


@pytest.fixture(scope="module")
def blueprint(fixtures_dir: Path) -> dict:
    return yaml.safe_load((fixtures_dir / "cloud" / "gcp_ctk_a3ultra-slurm-blueprint.yaml").read_text())


def _modules(blueprint: dict) -> dict[str, dict]:
    return {m["id"]: m for group in blueprint["deployment_groups"] for m in group["modules"]}


def _runner(blueprint: dict, destination: str) -> dict:
    for module in _modules(blueprint).values():
        for runner in (module.get("settings") or {}).get("runners") or []:
            if isinstance(runner, dict) and runner.get("destination") == destination:
                return runner
    raise AssertionError(f"the blueprint has no runner {destination}")


def _tasks(path: Path) -> list[dict]:
    return list(yaml.safe_load(path.read_text()) or [])


def _task_prolog(tmp_path: Path, text: str, **env: str) -> dict[str, str]:
    script = tmp_path / "task_prolog.sh"
    script.write_text(text)
    base = {"PATH": "/usr/bin:/bin", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_ID": "9"}
    done = subprocess.run(["bash", str(script)], env={**base, **env}, capture_output=True, text=True, check=True)
    return dict(line.removeprefix("export ").split("=", 1) for line in done.stdout.splitlines())


def test_catalog_has_a3_ultra_with_its_nics(blueprint: dict) -> None:
    # GoogleCloudPlatform/cluster-toolkit:examples/machine-learning/a3-ultragpu-8g/
    # a3ultra-slurm-blueprint.yaml@1047080: a3ultra-slurm-rdma-net (gpu-rdma-vpc, <zone>-vpc-roce
    # profile) with 8 subnetworks; run-nccl-tests.sh@1047080: NCCL_SOCKET_IFNAME=enp0s19,enp192s20.
    rdma = _modules(blueprint)["a3ultra-slurm-rdma-net"]["settings"]
    assert rdma["network_profile"].endswith("-vpc-roce")
    vendor_ifname = re.search(r"^export NCCL_SOCKET_IFNAME=(\S+)$", (VENDOR / "run-nccl-tests.sh").read_text(), re.M)
    assert vendor_ifname
    itype = instance_type("a3-ultragpu-8g")
    assert itype is not None
    assert itype.rdma_nics == rdma["subnetworks_template"]["count"] == 8
    assert ",".join(itype.socket_nics) == vendor_ifname.group(1)
    assert (itype.gpus, itype.gpu_model) == (8, "H200-SXM-141GB")


def test_job_environment_is_the_gib_plugins(tmp_path: Path, files: dict[str, str], fixtures_dir: Path) -> None:
    # GoogleCloudPlatform/cluster-toolkit:examples/machine-learning/a3-ultragpu-8g/nemo-framework/
    # Dockerfile@1047080 (mirrors /usr/local/gib/scripts/set_nccl_env.sh) and run-nccl-tests.sh@1047080
    # (NCCL_NET=gIB, NCCL_SOCKET_IFNAME). NCCL_DEBUG/NCCL_DEBUG_SUBSYS are debugging aids there.
    dockerfile = (fixtures_dir / "nccl" / "nccl_env_gcp_a3ultra_gib_dockerfile_excerpt.env").read_text()
    vendor = dict(re.findall(r"^ENV (NCCL_\w+)=(\S+)$", dockerfile, re.M))
    vendor.pop("NCCL_DEBUG")
    vendor.pop("NCCL_DEBUG_SUBSYS")
    runner = (VENDOR / "run-nccl-tests.sh").read_text()
    vendor.update(re.findall(r"^export (NCCL_\w+)=(\S+)$", runner, re.M))
    exported = _task_prolog(tmp_path, files[f"slurm/task_prolog.d/nccl-{HW}.sh"])
    assert {k: v for k, v in exported.items() if k.startswith("NCCL_")} == vendor


def test_task_prolog_sources_set_nccl_env_and_the_plugin_libraries(tmp_path: Path, files: dict[str, str]) -> None:
    # run-nccl-tests.sh@1047080: `source /usr/local/gib/scripts/set_nccl_env.sh`; the a3ultra
    # blueprint's /etc/profile.d/nccl-gib.sh puts /usr/local/gib/lib64 first on LD_LIBRARY_PATH.
    assert "source /usr/local/gib/scripts/set_nccl_env.sh" in (VENDOR / "run-nccl-tests.sh").read_text()
    text = files[f"slurm/task_prolog.d/nccl-{HW}.sh"]
    assert ". /usr/local/gib/scripts/set_nccl_env.sh" in text
    exported = _task_prolog(tmp_path, text, LD_LIBRARY_PATH="/opt/x", NCCL_IB_TC="104")
    assert exported["LD_LIBRARY_PATH"] == "/usr/local/gib/lib64:/opt/x"
    assert "NCCL_IB_TC" not in exported  # the user's own value stays


def test_a3ultra_partition(files: dict[str, str], blueprint: dict) -> None:
    # a3ultra-slurm-blueprint.yaml@1047080, module a3_ultra_partition: partition_conf.
    vendor = {k: str(v) for k, v in _modules(blueprint)["a3_ultra_partition"]["settings"]["partition_conf"].items()}
    assert vendor == {"OverSubscribe": "EXCLUSIVE", "ResumeTimeout": "1200", "SuspendTimeout": "1200"}
    line = next(ln for ln in files["slurm/slurm.conf"].splitlines() if ln.startswith("PartitionName=a3ultra "))
    fields = dict(f.split("=", 1) for f in line.split())
    for key, value in vendor.items():
        assert fields.get(key) == value, key


def test_no_rxdm_docker_prolog_or_long_prolog(files: dict[str, str], blueprint: dict) -> None:
    # a3ultra-slurm-blueprint.yaml@1047080: no slurm_conf_tpl (no long-prolog template), no RxDM
    # prolog staged (only gpu-test and sudo-oslogin), nothing docker-based in the job path.
    controller = _modules(blueprint)["slurm_controller"]["settings"]
    assert "slurm_conf_tpl" not in controller
    assert "receive-data-path-manager" not in yaml.safe_dump(blueprint)
    assert not [p for p in files if p.startswith(("slurm/prolog.d/", "slurm/epilog.d/"))]
    conf = files["slurm/slurm.conf"]
    assert not re.search(r"^(MessageTimeout|BatchStartTimeout|PrologEpilogTimeout)=", conf, re.M)


def test_nccl_gib_is_pinned_and_held(files: dict[str, str], blueprint: dict) -> None:
    # a3ultra-slurm-blueprint.yaml@1047080: install_nccl_gib.yml installs "nccl-gib=$(vars.nccl_gib_version)"
    # (1.1.0) from `deb ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-gib-apt main` and
    # holds it (dpkg_selections: the same dpkg selection the role sets with apt-mark hold).
    vendor_version = blueprint["vars"]["nccl_gib_version"]
    group_vars = yaml.safe_load(files["ansible/inventory/group_vars/all.yml"].replace("!unsafe ", ""))
    assert group_vars["clusterctl_versions"]["nccl_gib"] == vendor_version
    assert group_vars["clusterctl_nccl_fabrics"] == {HW: "gcp-rdma"}
    playbook = yaml.safe_load(_runner(blueprint, "install_nccl_gib.yml")["content"])[0]["tasks"]
    repo = next(t["apt_repository"]["repo"] for t in playbook if "gpudirect-gib-apt" in str(t))
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert repo.split()[-3:] == [defaults["gpudirect_apt_base_url"], defaults["gpudirect_gib_apt_suite"], "main"]
    tasks = _tasks(ROLE / "tasks" / "gib.yml")
    apt = next(t["ansible.builtin.apt"] for t in tasks if "ansible.builtin.apt" in t)
    assert "nccl-gib={{ gpudirect_nccl_gib_version }}" in apt["name"]
    hold = next(t["ansible.builtin.command"] for t in tasks if "ansible.builtin.command" in t)
    assert hold == {"argv": ["apt-mark", "hold", "nccl-gib"]}
    assert "clusterctl_versions.nccl_gib" in defaults["gpudirect_nccl_gib_version"]


def test_libnccl_is_the_build_the_blueprint_pins(blueprint: dict) -> None:
    # a3ultra-slurm-blueprint.yaml@1047080: libnccl2/libnccl-dev "$(vars.libnccl_version)" = 2.27.5-1+cuda12.9;
    # the nccl role installs "<versions.nccl>-1+cuda<versions.cuda>".
    plan = load_and_validate(SPEC).plan
    versions = plan.cluster.versions
    assert f"{versions['nccl']}-1+cuda{versions['cuda']}" == blueprint["vars"]["libnccl_version"]


def test_profile_script_and_ibverbs_utils(blueprint: dict) -> None:
    # a3ultra-slurm-blueprint.yaml@1047080: configure_nccl_env.yml writes /etc/profile.d/nccl-gib.sh
    # (sources set_nccl_env.sh, adds /usr/local/gib/lib64); install_ibverbs_utils.yml installs ibverbs-utils.
    vendor = yaml.safe_load(_runner(blueprint, "configure_nccl_env.yml")["content"])[0]["tasks"][0][
        "ansible.builtin.copy"
    ]
    # The profile script is a configure-stage file (tasks/configure.yml), from templates/nccl-gib.sh.j2.
    (sync,) = [t for t in _tasks(ROLE / "tasks" / "configure.yml") if "clusterctl.node.sync_files" in t]
    files = sync["vars"]["__gpudirect_configure_files"]
    assert "{'dest': __gpudirect_gib_profile, 'content': lookup('ansible.builtin.template', 'nccl-gib.sh.j2')}" in files
    variables = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert variables["__gpudirect_gib_profile"] == vendor["dest"] == "/etc/profile.d/nccl-gib.sh"
    tasks = _tasks(ROLE / "tasks" / "gib.yml")
    ours = (ROLE / "templates" / "nccl-gib.sh.j2").read_text()
    for piece in ("/usr/local/gib/scripts/set_nccl_env.sh", "/usr/local/gib/lib64"):
        assert piece in vendor["content"]
        assert piece in ours
    apt = next(t["ansible.builtin.apt"] for t in tasks if "ansible.builtin.apt" in t)
    assert "ibverbs-utils" in apt["name"]


# --- the nodes' image and placement ----------------------------------------------------------


def _blueprint_lines(fixtures_dir: Path) -> list[str]:
    return (fixtures_dir / "cloud" / "gcp_ctk_a3ultra-slurm-blueprint.yaml").read_text().splitlines()


def test_nodes_boot_ubuntus_accelerator_image(fixtures_dir: Path) -> None:
    # a3ultra-slurm-blueprint.yaml@1047080 lines 28-30: the nodes' image is built from
    # ubuntu-os-accelerator-images/ubuntu-accelerator-2404-amd64-with-nvidia-580-v20260522 (the NVIDIA 580
    # driver and the RDMA NIC setup), not the plain Ubuntu image the other machine types get.
    lines = _blueprint_lines(fixtures_dir)
    assert [ln.strip() for ln in lines[27:30]] == [
        "base_image:",
        "project: ubuntu-os-accelerator-images",
        "image: ubuntu-accelerator-2404-amd64-with-nvidia-580-v20260522",
    ]
    cloud = load_and_validate(SPEC).plan.cloud
    assert cloud is not None
    groups = {g.group: g for g in cloud.groups}
    vendor = (
        "projects/ubuntu-os-accelerator-images/global/images/ubuntu-accelerator-2404-amd64-with-nvidia-580-v20260522"
    )
    assert groups["gpu"].os_image == vendor
    assert groups["ctl"].os_image is None  # CPU nodes keep the plain image
    # The stacks boot it (and build the profile's baked image from it).
    import sys

    sys.path.insert(0, str(REPO_ROOT / "stacks" / "common"))
    from clusterctl_stack import base_image, group_image

    assert group_image(cloud, groups["gpu"]) == vendor
    assert base_image(cloud, "a3ultra") == vendor
    assert group_image(cloud, groups["ctl"]) == cloud.image


def test_no_compact_placement_policy(fixtures_dir: Path) -> None:
    # a3ultra-slurm-blueprint.yaml@1047080 line 623: the a3_ultra_nodeset sets enable_placement: false.
    assert _blueprint_lines(fixtures_dir)[622].strip() == "enable_placement: false"
    cloud = load_and_validate(SPEC).plan.cloud
    assert cloud is not None
    assert not any(g.placement for g in cloud.groups)
    assert cloud.placement_strategy is None


# --- containers (pyxis/enroot) ---------------------------------------------------------------


def test_containers_get_the_gib_directory(files: dict[str, str]) -> None:
    # run-nccl-tests.sh@1047080 line 46 mounts /usr/local/gib into the job's containers by hand; here the
    # node's enroot mounts it into every container. The RDMA NICs come in through enroot's 99-mellanox.sh
    # (MELLANOX_VISIBLE_DEVICES=all on RoCE nodes, roles/container_runtime).
    assert (VENDOR / "run-nccl-tests.sh").read_text().splitlines()[45] == (
        'CONTAINER_MOUNTS=${CONTAINER_MOUNTS},"/usr/local/gib"'
    )
    fstab = [ln.split() for ln in files[f"enroot/mounts.d/{HW}.fstab"].splitlines() if not ln.startswith("#")]
    mounts = {fields[0]: fields[3].split(",") for fields in fstab}
    assert {"x-create=dir", "bind", "ro"} <= set(mounts["/usr/local/gib"])
    defaults = yaml.safe_load((REPO_ROOT / "roles" / "container_runtime" / "defaults" / "main.yml").read_text())
    assert "'all' if" in defaults["container_runtime_enroot_config_defaults"]["MELLANOX_VISIBLE_DEVICES"]


def test_a_stock_image_gets_gib_first_and_its_environment(files: dict[str, str], tmp_path: Path) -> None:
    # run-nccl-tests.sh@1047080 line 56: LD_LIBRARY_PATH=/usr/local/gib/lib64 first inside the container;
    # lines 34-36: set_nccl_env.sh, NCCL_NET=gIB, NCCL_SOCKET_IFNAME. Through the rendered enroot hook and
    # enroot's own environment code; the image's and the user's values stay.
    gib = tmp_path / "gib"
    (gib / "scripts").mkdir(parents=True)
    (gib / "scripts" / "set_nccl_env.sh").write_text("export NCCL_CROSS_NIC=0\nexport NCCL_IB_TC=52\n")
    env = container_environment(
        tmp_path,
        hook=files["enroot/hooks.d/50-clusterctl-nccl.sh"],
        task_prolog=files[f"slurm/task_prolog.d/nccl-{HW}.sh"],
        image_environment="LD_LIBRARY_PATH=/usr/local/cuda/lib64\n",
        job_env={"SLURM_JOB_NUM_NODES": "2", "NCCL_IB_TC": "104"},
        host_paths={"/usr/local/gib": gib},
    )
    assert (
        (VENDOR / "run-nccl-tests.sh")
        .read_text()
        .splitlines()[55]
        .strip()
        .startswith("export LD_LIBRARY_PATH=/usr/local/gib/lib64:")
    )
    assert env["LD_LIBRARY_PATH"].split(":") == [str(gib / "lib64"), "/usr/local/cuda/lib64"]
    assert env["NCCL_NET"] == "gIB"
    assert env["NCCL_SOCKET_IFNAME"] == "enp0s19,enp192s20"
    assert env["NCCL_IB_TC"] == "104"
