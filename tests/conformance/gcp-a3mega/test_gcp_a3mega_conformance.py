"""examples/gcp-a3mega.yaml against Google's own A3 Mega (GPUDirect-TCPXO) Slurm reference.

One test per piece Google's reference needs, each naming the vendor file (owner/repo:path@commit)
it checks against. The rendered build directory and the roles' tasks are both checked: what
the render writes (slurm.conf, the prolog/epilog/TaskProlog, the inventory) and what the
gpudirect role installs (docker, the dmabuf import helper, the aperture udev rule, slurmd's
ExecCondition drop-in). Vendor files not among the shared fixtures are verbatim copies in
vendor/ (SOURCES.md there).

The scripts are also run, with stand-in commands on PATH (docker, scontrol, modprobe, sleep), so
what is checked is behaviour, not only text.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml
from tests.conftest import EXAMPLES, REPO_ROOT
from tests.enroot_testkit import container_environment
from tests.shipped_slurm import slurm_tool

from clusterctl.pipeline import load_and_validate
from clusterctl.render.tree import render_files

HERE = Path(__file__).resolve().parent
VENDOR = HERE / "vendor"
ROLE = REPO_ROOT / "roles" / "gpudirect"
HW = "a3mega"


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    plan = load_and_validate(EXAMPLES / "gcp-a3mega.yaml").plan
    return {f.path: f.text for f in render_files(plan)}


@pytest.fixture(scope="module")
def blueprint(fixtures_dir: Path) -> dict:
    return yaml.safe_load((fixtures_dir / "cloud" / "gcp_ctk_a3mega-slurm-blueprint.yaml").read_text())


def _modules(blueprint: dict) -> dict[str, dict]:
    return {m["id"]: m for group in blueprint["deployment_groups"] for m in group["modules"]}


def _runner(blueprint: dict, destination: str) -> dict:
    for module in _modules(blueprint).values():
        for runner in (module.get("settings") or {}).get("runners") or []:
            if runner.get("destination") == destination:
                return runner
    raise AssertionError(f"the blueprint has no runner {destination}")


def _playbook_tasks(blueprint: dict, destination: str) -> list[dict]:
    return yaml.safe_load(_runner(blueprint, destination)["content"])[0]["tasks"]


def _slurm_conf(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line and not line.startswith(("NodeName=", "PartitionName=")):
            key, value = line.split("=", 1)
            out[key] = value
    return out


def _partitions(text: str) -> dict[str, dict[str, str]]:
    out = {}
    for line in text.splitlines():
        if line.startswith("PartitionName="):
            fields = dict(f.split("=", 1) for f in line.split())
            out[fields["PartitionName"]] = fields
    return out


def _tasks(path: Path) -> list[dict]:
    out = []
    for task in yaml.safe_load(path.read_text()) or []:
        out.append(task)
        out.extend(task.get("block", []))
    return out


def _module_args(tasks: list[dict], module: str) -> list[dict]:
    return [t[module] for t in tasks if module in t]


# --- slurm.conf --------------------------------------------------------------------------------


def test_long_prolog_timeouts(files: dict[str, str]) -> None:
    # GoogleCloudPlatform/cluster-toolkit:community/modules/scheduler/schedmd-slurm-gcp-v6-controller/
    # etc/long-prolog-slurm.conf.tpl@1047080 (TIMERS), which the a3mega blueprint sets as slurm_conf_tpl.
    vendor = _slurm_conf((VENDOR / "long-prolog-slurm.conf.tpl").read_text())
    ours = _slurm_conf(files["slurm/slurm.conf"])
    for key in ("MessageTimeout", "BatchStartTimeout", "PrologEpilogTimeout", "PrologFlags"):
        assert ours.get(key) == vendor[key], f"{key}: ours {ours.get(key)!r}, Google's {vendor[key]!r}"


def test_step_credentials_outlive_the_long_prolog(files: dict[str, str]) -> None:
    # long-prolog-slurm.conf.tpl@1047080 line 44: AuthInfo=cred_expire=600 beside the 600 s timers; slurm.conf(5)
    # AuthInfo cred_expire (default 120 s) must be "long enough to load user environment, run prolog".
    line = (VENDOR / "long-prolog-slurm.conf.tpl").read_text().splitlines()[43]
    assert line == "AuthInfo=cred_expire=600"
    ours = _slurm_conf(files["slurm/slurm.conf"])
    assert ours["AuthInfo"] == line.split("=", 1)[1]
    assert int(ours["AuthInfo"].split("=")[1]) >= int(ours["PrologEpilogTimeout"])


def test_a3mega_partitions_are_exclusive_with_the_vendor_timeouts(files: dict[str, str], blueprint: dict) -> None:
    # GoogleCloudPlatform/cluster-toolkit:examples/machine-learning/a3-megagpu-8g/
    # a3mega-slurm-blueprint.yaml@1047080, module a3mega_partition: partition_conf.
    vendor = {k: str(v) for k, v in _modules(blueprint)["a3mega_partition"]["settings"]["partition_conf"].items()}
    assert vendor == {"OverSubscribe": "EXCLUSIVE", "ResumeTimeout": "900", "SuspendTimeout": "600"}
    partitions = _partitions(files["slurm/slurm.conf"])
    assert set(partitions) == {"a3mega", "debug"}  # both hold a3mega nodes in the example
    for name, fields in partitions.items():
        for key, value in vendor.items():
            assert fields.get(key) == value, f"partition {name}: {key}={fields.get(key)}, Google's {value}"


# --- the prolog: receive-datapath-manager ------------------------------------------------------


def _docker_run_options(script: str, marker: str) -> set[str]:
    """The docker options (before the image) of the `docker run` that starts ``marker``."""
    text = re.sub(r"\\\n\s*", " ", script)
    for line in text.splitlines():
        if "docker run" not in line or marker not in line:
            continue
        words = iter(line.split("docker run", 1)[1].split())
        opts = set()
        for word in words:
            if not word.startswith("-"):
                break  # the image: what follows is the daemon's own arguments
            if word in ("--volume", "--env", "--gpus", "--name"):
                word = f"{word} {next(words)}"
            if not word.startswith(("--detach", "--rm", "--name", "--pull")):
                opts.add(word)
        return opts
    raise AssertionError(f"no docker run of {marker}")


def test_prolog_starts_rxdm_with_googles_docker_options(files: dict[str, str]) -> None:
    # GoogleCloudPlatform/slurm-gcp:tools/prologs-epilogs/receive-data-path-manager-mega@13fd92b
    vendor = _docker_run_options((VENDOR / "receive-data-path-manager-mega").read_text(), "${RXDM_IMAGE}")
    ours = _docker_run_options(files[f"slurm/prolog.d/nccl-{HW}.sh"], "tcpgpudmarxd-dev")
    assert {"--privileged", "--gpus all", "--volume /dev/dmabuf_import_helper:/dev/dmabuf_import_helper"} <= vendor
    assert vendor <= ours, f"missing: {sorted(vendor - ours)}"


def test_rxdm_and_plugin_are_the_pair_and_flags_of_googles_prolog(files: dict[str, str]) -> None:
    # GoogleCloudPlatform/slurm-gcp:tools/prologs-epilogs/receive-data-path-manager-mega@13fd92b lines 31-32
    # (plugin installer v1.0.17, tcpgpudmarxd v1.0.23) and line 73 (--num_hops=2 --num_nics=8 --uid=
    # --alsologtostderr). The references disagree on the flags: google/nccl-plugin-gpudirect-tcpxo:
    # README.md@04815d1 ("Notes for Existing Users") retires all but --num_hops=2 from RxDM v1.0.20 (the
    # others are accepted and only logged); clusterctl runs what Google's prolog runs.
    vendor = (VENDOR / "receive-data-path-manager-mega").read_text().splitlines()
    plugin = vendor[30].split("=", 1)[1]
    rxdm = vendor[31].split("=", 1)[1]
    flags = vendor[72].split()
    assert plugin.endswith(":v1.0.17")
    assert rxdm.endswith(":v1.0.23")
    prolog = files[f"slurm/prolog.d/nccl-{HW}.sh"]
    assert rxdm in prolog
    assert plugin in prolog
    started = re.sub(r"\\\n\s*", " ", prolog)
    (line,) = [ln for ln in started.splitlines() if "docker run" in ln and "tcpgpudmarxd-dev" in ln]
    assert line.split(rxdm, 1)[1].split()[: len(flags)] == flags


def test_prolog_installs_the_plugin_with_the_installer_image(tmp_path: Path, files: dict[str, str]) -> None:
    # receive-data-path-manager-mega@13fd92b: `docker run --rm --network=host -v /var/lib:/var/lib
    # ${NCCL_PLUGIN_IMAGE} install --install-nccl` writes /var/lib/tcpxo/lib64.
    rc, calls, _ = _run_script(tmp_path, files[f"slurm/prolog.d/nccl-{HW}.sh"], READY="1")
    assert rc == 0
    image = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.17"
    (install,) = [c for c in calls if c.startswith("docker run") and image in c]
    assert "--volume /var/lib:/var/lib" in install
    assert install.endswith(f"{image} install --install-nccl")


FAKE_DOCKER = """#!/bin/bash
echo "docker $*" >> "$CALLS"
case "$1 $2" in
  "container logs") [ -n "$READY" ] && echo "I buffer_mgr.cc] Buffer manager initialization complete" ;;
  "container inspect") exit 0 ;;
  "container ls") echo stale-container-id ;;
esac
exit 0
"""


SCONTROL = """#!/bin/bash
echo "scontrol $*" >> "$CALLS"
if [ "$1 $2" = "show hostnames" ]; then
  [ "${SLURM_JOB_NUM_NODES:-2}" -gt 1 ] && printf 'gpu001\\ngpu002\\n' || echo gpu001
fi
"""


def _run_script(tmp_path: Path, text: str, **env: str) -> tuple[int, list[str], str]:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    calls = tmp_path / "calls"
    calls.write_text("")
    for name, body in {
        "docker": FAKE_DOCKER,
        "scontrol": SCONTROL,
        "modprobe": '#!/bin/bash\necho "modprobe $*" >> "$CALLS"\n',
        "sleep": '#!/bin/bash\necho "sleep $*" >> "$CALLS"\n',
        "hostname": "#!/bin/bash\necho gpu001\n",
        "gcloud": "#!/bin/bash\nexit 0\n",
    }.items():
        path = bindir / name
        path.write_text(body)
        path.chmod(0o755)
    # The installer's stamp lives under /var/lib: point it at the test's directory.
    text = text.replace("/var/lib/tcpxo/lib64", str(tmp_path / "tcpxo"))
    script = tmp_path / "script.sh"
    script.write_text(text)
    base = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "CALLS": str(calls),
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_NUM_NODES": "2",
        # clusterctl's Slurm module as shipped, driving the scontrol stub.
        "CLUSTERCTL_SLURM_TOOL": str(slurm_tool(tmp_path)),
    }
    done = subprocess.run(["bash", str(script)], env={**base, **env}, capture_output=True, text=True, check=False)
    return done.returncode, calls.read_text().splitlines(), done.stderr


def test_prolog_loads_the_dmabuf_import_helper_first(tmp_path: Path, files: dict[str, str]) -> None:
    # receive-data-path-manager-mega@13fd92b: `modprobe import-helper` before RxDM starts.
    rc, calls, _ = _run_script(tmp_path, files[f"slurm/prolog.d/nccl-{HW}.sh"], READY="1")
    assert rc == 0
    first_run = next(i for i, c in enumerate(calls) if c.startswith("docker run --detach"))
    assert "modprobe import-helper" in calls[:first_run]


def test_prolog_stops_a_left_over_rxdm_first(tmp_path: Path, files: dict[str, str]) -> None:
    # receive-data-path-manager-mega@13fd92b: stops every receive-datapath-manager-* container
    # before starting the job's (one RxDM owns the NICs).
    rc, calls, _ = _run_script(tmp_path, files[f"slurm/prolog.d/nccl-{HW}.sh"], READY="1")
    assert rc == 0
    first_run = next(i for i, c in enumerate(calls) if c.startswith("docker run --detach"))
    assert any(c.startswith("docker container stop stale-container-id") for c in calls[:first_run])


def test_prolog_waits_for_rxdm_and_fails_the_job_with_a_reason(tmp_path: Path, files: dict[str, str]) -> None:
    # receive-data-path-manager-mega@13fd92b: waits up to 60 x 2 s for "Buffer manager
    # initialization complete", else `exit 1` (Slurm drains the node and requeues the job).
    vendor = (VENDOR / "receive-data-path-manager-mega").read_text()
    assert 'grep "Buffer manager initialization complete"' in vendor
    assert '"$counter" -gt 60' in vendor
    prolog = files[f"slurm/prolog.d/nccl-{HW}.sh"]
    rc, calls, stderr = _run_script(tmp_path, prolog, READY="")
    assert rc == 1
    assert calls.count("sleep 2") == 60
    drains = [c for c in calls if c.startswith("scontrol update")]
    assert drains
    assert "state=drain" in drains[0]
    assert "Buffer manager initialization complete" in drains[0]
    assert "within 120 s" in stderr
    rc, calls, _ = _run_script(tmp_path, prolog, READY="1")
    assert rc == 0
    assert not [c for c in calls if c.startswith("scontrol update")]


def test_prolog_skips_single_node_jobs(tmp_path: Path, files: dict[str, str]) -> None:
    # receive-data-path-manager-mega@13fd92b: "do not invoke RxDM on 1-node jobs".
    rc, calls, _ = _run_script(tmp_path, files[f"slurm/prolog.d/nccl-{HW}.sh"], SLURM_JOB_NUM_NODES="1")
    assert rc == 0
    assert not [c for c in calls if c.startswith(("docker", "modprobe"))]


def test_epilog_stops_rxdm_and_prunes(tmp_path: Path, files: dict[str, str]) -> None:
    # receive-data-path-manager-mega@13fd92b (epilog_slurmd): stop, then `docker container prune --force`.
    rc, calls, _ = _run_script(tmp_path, files[f"slurm/epilog.d/nccl-{HW}.sh"])
    assert rc == 0
    assert "docker container stop receive-datapath-manager-77" in calls
    assert "docker container prune --force" in calls
    assert calls.index("docker container prune --force") > calls.index(
        "docker container stop receive-datapath-manager-77"
    )


# --- the TaskProlog: the job's NCCL environment ----------------------------------------------


def _task_prolog(tmp_path: Path, text: str, **env: str) -> dict[str, str]:
    lib = tmp_path / "tcpxo"
    lib.mkdir(exist_ok=True)
    # google/nccl-plugin-gpudirect-tcpxo:tcpxo_scripts/nccl-env-profile.sh@04815d1, as the plugin
    # installer writes it to /var/lib/tcpxo/lib64.
    (lib / "nccl-env-profile.sh").write_text((VENDOR / "nccl-env-profile.sh").read_text())
    script = tmp_path / "task_prolog.sh"
    script.write_text(text.replace("/var/lib/tcpxo/lib64", str(lib)))
    base = {"PATH": "/usr/bin:/bin", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_ID": "77"}
    done = subprocess.run(["bash", str(script)], env={**base, **env}, capture_output=True, text=True, check=True)
    out = {}
    for line in done.stdout.splitlines():
        assert line.startswith("export "), line
        name, value = line.removeprefix("export ").split("=", 1)
        out[name] = value  # Slurm applies the lines in order: the last one wins
    return out


def test_task_prolog_sets_the_run_nccl_tests_environment(tmp_path: Path, files: dict[str, str]) -> None:
    # GoogleCloudPlatform/cluster-toolkit:examples/machine-learning/a3-megagpu-8g/nccl-tests/
    # run-nccl-tests.sh@1047080: source nccl-env-profile.sh with NCCL_LIB_DIR=/var/lib/tcpxo/lib64,
    # then export the four NIC/aperture variables.
    vendor = dict(re.findall(r"^export (NCCL_\w+)=(\S+)$", (VENDOR / "run-nccl-tests.sh").read_text(), re.M))
    assert len(vendor) == 4
    text = files[f"slurm/task_prolog.d/nccl-{HW}.sh"]
    assert "export NCCL_LIB_DIR=/var/lib/tcpxo/lib64" in text
    assert ". /var/lib/tcpxo/lib64/nccl-env-profile.sh" in text
    exported = _task_prolog(tmp_path, text)
    for name, value in vendor.items():
        assert exported.get(name) == value, name
    # The profile's own tuning (google/nccl-plugin-gpudirect-tcpxo:tcpxo_scripts/nccl-env-profile.sh@04815d1).
    assert exported["NCCL_PROTO"] == "Simple,LL128"
    assert exported["NCCL_FASTRAK_USE_LLCM"] == "1"
    assert exported["LD_LIBRARY_PATH"].split(":")[0] == str(tmp_path / "tcpxo")


def test_task_prolog_keeps_the_users_own_nccl_settings(tmp_path: Path, files: dict[str, str]) -> None:
    # run-nccl-tests.sh@1047080 sets NCCL_SOCKET_IFNAME and NCCL_FASTRAK_*; a user who sets them (or
    # NCCL_DEBUG, which nccl-env-profile.sh@04815d1 forces to WARN) must keep them: Slurm applies
    # every TaskProlog export over the task's environment (SchedMD/slurm src/slurmd/slurmstepd/task.c).
    user = {
        "NCCL_SOCKET_IFNAME": "enp0s12,lo",
        "NCCL_FASTRAK_IFNAME": "enp6s0",
        "NCCL_DEBUG": "INFO",
        "NCCL_PROTO": "Simple",
        "NCCL_TUNER_PLUGIN": "",
        "LD_LIBRARY_PATH": "/opt/my/nccl/lib",
    }
    exported = _task_prolog(tmp_path, files[f"slurm/task_prolog.d/nccl-{HW}.sh"], **user)
    for name in ("NCCL_SOCKET_IFNAME", "NCCL_FASTRAK_IFNAME", "NCCL_DEBUG", "NCCL_PROTO", "NCCL_TUNER_PLUGIN"):
        assert name not in exported, f"{name} would overwrite the user's {user[name]!r} with {exported.get(name)!r}"
    assert exported["NCCL_FASTRAK_CTRL_DEV"] == "enp0s12"  # not set by the user: the vendor's default
    assert exported["LD_LIBRARY_PATH"].endswith(":/opt/my/nccl/lib")  # the user's entries stay


def test_task_prolog_leaves_cuda_visible_devices_to_slurm(tmp_path: Path, files: dict[str, str]) -> None:
    # nccl-env-profile.sh@04815d1 exports CUDA_VISIBLE_DEVICES=0,...,7; Slurm sets it per job's GPUs.
    exported = _task_prolog(tmp_path, files[f"slurm/task_prolog.d/nccl-{HW}.sh"])
    assert "CUDA_VISIBLE_DEVICES" not in exported


# --- the roles: what the node gets ------------------------------------------------------------


def test_inventory_pins_the_gpudirect_pieces(files: dict[str, str], blueprint: dict) -> None:
    # a3mega-slurm-blueprint.yaml@1047080 install_dmabuf.yml: dmabuf_version "1.1"; the plugin and
    # RxDM images of the release the spec pins (Google's gpudirect-tcpxo release notes).
    group_vars = yaml.safe_load(files["ansible/inventory/group_vars/all.yml"].replace("!unsafe ", ""))
    dmabuf = yaml.safe_load(_runner(blueprint, "install_dmabuf.yml")["content"])[0]["vars"]["dmabuf_version"]
    versions = group_vars["clusterctl_versions"]
    assert versions["dmabuf_import_helper"] == dmabuf
    assert versions["gpudirect_tcpxo_plugin"] == "1.0.17"
    assert versions["gpudirect_tcpxo_rxdm"] == "1.0.23"
    assert group_vars["clusterctl_nccl_fabrics"] == {HW: "gpudirect-tcpxo"}


def test_site_applies_the_gpudirect_role_before_slurm() -> None:
    # The a3mega blueprint builds these into the image (slurm-build group) before slurmd runs.
    plays = yaml.safe_load((REPO_ROOT / "roles" / "site.yml").read_text())
    names = [p["name"] for p in plays]
    gpudirect = next(i for i, p in enumerate(plays) if "gpudirect" in str(p.get("tasks", "")))
    assert "gpudirect-tcpxo" in str(plays[gpudirect]["tasks"])
    assert gpudirect < names.index("Set up Slurm (accounting and controller, then compute nodes, then login nodes)")
    gpu_stack = next(i for i, p in enumerate(plays) if "container_runtime" in str(p.get("tasks", "")))
    assert gpu_stack < gpudirect  # docker's toolkit follows container_runtime's libnvidia-container pin


def test_aperture_udev_rule_is_googles(blueprint: dict) -> None:
    # a3mega-slurm-blueprint.yaml@1047080, aperture_devices.yml: /etc/udev/rules.d/00-a3-megagpu.rules.
    (copy,) = _module_args(_playbook_tasks(blueprint, "aperture_devices.yml"), "ansible.builtin.copy")
    ours = (ROLE / "files" / "00-a3-megagpu.rules").read_text()
    rule = "".join(line for line in ours.splitlines(keepends=True) if not line.startswith("#"))
    assert rule == copy["content"]
    (sync,) = _module_args(_tasks(ROLE / "tasks" / "aperture.yml"), "clusterctl.node.sync_files")
    (entry,) = [f for f in sync["files"] if f.get("src") == "00-a3-megagpu.rules"]
    assert entry["dest"] == copy["dest"] == "/etc/udev/rules.d/00-a3-megagpu.rules"


def test_slurmd_waits_for_the_aperture_devices(blueprint: dict) -> None:
    # a3mega-slurm-blueprint.yaml@1047080, slurm_aperture.yml: the wait script and slurmd's
    # ExecCondition drop-in /etc/systemd/system/slurmd.service.d/aperture.conf.
    script, dropin = _module_args(_playbook_tasks(blueprint, "slurm_aperture.yml"), "ansible.builtin.copy")
    ours = (ROLE / "files" / "wait-for-aperture-devices.sh").read_text()
    body = lambda t: [ln for ln in t.splitlines() if ln and not ln.startswith("#")]  # noqa: E731
    assert body(ours) == body(script["content"].replace("\\$", "$"))
    assert os.access(ROLE / "files" / "wait-for-aperture-devices.sh", os.X_OK)
    (sync,) = _module_args(_tasks(ROLE / "tasks" / "aperture.yml"), "clusterctl.node.sync_files")
    assert script["dest"] in {f["dest"] for f in sync["files"] if f.get("src") == "wait-for-aperture-devices.sh"}
    # slurmd's drop-in is a configure-stage file (tasks/configure.yml), from templates/slurmd-aperture.conf.j2.
    (sync,) = [t for t in _tasks(ROLE / "tasks" / "configure.yml") if "clusterctl.node.sync_files" in t]
    files = sync["vars"]["__gpudirect_aperture_files"]
    assert f"'dest': '{dropin['dest']}'" in files
    assert dropin["dest"] == "/etc/systemd/system/slurmd.service.d/aperture.conf"
    assert "lookup('ansible.builtin.template', 'slurmd-aperture.conf.j2')" in files
    text = (ROLE / "templates" / "slurmd-aperture.conf.j2").read_text()
    assert body(dropin["content"]) == [ln for ln in body(text) if not ln.startswith("{{")]


def test_dmabuf_import_helper_is_built_as_the_blueprint_does(blueprint: dict) -> None:
    # a3mega-slurm-blueprint.yaml@1047080, install_dmabuf.yml: the gpudirect-tcpxo-apt repository,
    # `apt-get download dmabuf-import-helper`, MODULE_IMPORT_NS patched, dkms add/build/install.
    vendor = yaml.safe_load(_runner(blueprint, "install_dmabuf.yml")["content"])[0]
    vendor_repo = next(t for t in vendor["tasks"] if "gpudirect-tcpxo" in str(t))["ansible.builtin.apt_repository"][
        "repo"
    ]
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert vendor_repo.split()[-3:] == [
        defaults["gpudirect_apt_base_url"],
        defaults["gpudirect_tcpxo_apt_suite"],
        "main",
    ]
    tasks = _tasks(ROLE / "tasks" / "dmabuf.yml")
    commands = [" ".join(t["ansible.builtin.command"]["argv"]) for t in tasks if "ansible.builtin.command" in t]
    assert any(c.startswith("apt-get download dmabuf-import-helper=") for c in commands)
    assert any(c.startswith("dkms add -m dmabuf-import-helper") for c in commands)
    assert any(c.startswith("dkms {{ item }} -m dmabuf-import-helper") for c in commands)
    (patch,) = _module_args(tasks, "ansible.builtin.replace")
    vendor_patch = next(t for t in vendor["tasks"][-1]["block"] if "ansible.builtin.replace" in t)[
        "ansible.builtin.replace"
    ]
    assert (patch["regexp"], patch["replace"]) == (vendor_patch["regexp"], vendor_patch["replace"])
    assert "clusterctl_versions.dmabuf_import_helper" in defaults["gpudirect_dmabuf_version"]  # pinned by the plan


def test_docker_for_rxdm_with_data_on_the_local_ssd(blueprint: dict) -> None:
    # a3mega-slurm-blueprint.yaml@1047080, a3mega_startup: docker enabled with daemon_config
    # {"data-root": "$(vars.localssd_mountpoint)/docker"}, localssd_mountpoint /mnt/localssd.
    startup = _modules(blueprint)["a3mega_startup"]["settings"]
    assert startup["docker"]["enabled"] is True
    mount = blueprint["vars"]["localssd_mountpoint"]
    vendor_root = yaml.safe_load(startup["docker"]["daemon_config"].replace("$(vars.localssd_mountpoint)", mount))
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    root = defaults["gpudirect_docker_data_root"].replace(
        "{{ gpudirect_localssd_mountpoint }}", defaults["gpudirect_localssd_mountpoint"]
    )
    assert root == vendor_root["data-root"]
    tasks = _tasks(ROLE / "tasks" / "docker.yml")
    installs = _module_args(tasks, "ansible.builtin.apt")
    assert any("__gpudirect_docker_wanted" in str(a["name"]) for a in installs)
    variables = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert "gpudirect_docker_packages" in variables["__gpudirect_docker_wanted"]
    assert defaults["gpudirect_docker_packages"] == ["docker.io"]
    # `docker run --gpus all` (receive-data-path-manager-mega@13fd92b) needs the NVIDIA container toolkit.
    assert any("nvidia-container-toolkit=" in str(a["name"]) for a in installs)


# --- containers (pyxis/enroot) ---------------------------------------------------------------


def test_containers_get_the_plugin_directory_and_the_aperture_devices(files: dict[str, str]) -> None:
    # GoogleCloudPlatform/cluster-toolkit:examples/machine-learning/a3-megagpu-8g/nccl-tests/
    # run-nccl-tests.sh@1047080 line 54 mounts /var/lib/tcpxo/lib64 into every container of the job by
    # hand (CONTAINER_MOUNTS); here the node's enroot mounts it into every container. The LLCM aperture
    # devices NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY names (line 38) come in read-write with their bind mounts.
    vendor = (VENDOR / "run-nccl-tests.sh").read_text().splitlines()
    assert vendor[53] == 'CONTAINER_MOUNTS=${CONTAINER_MOUNTS},"/var/lib/tcpxo/lib64/"'
    assert vendor[37] == "export NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY=/dev/aperture_devices"
    fstab = [ln.split() for ln in files[f"enroot/mounts.d/{HW}.fstab"].splitlines() if not ln.startswith("#")]
    mounts = {fields[0]: (fields[1], fields[3].split(",")) for fields in fstab}
    target, options = mounts["/var/lib/tcpxo/lib64"]
    assert target == "/var/lib/tcpxo/lib64"
    assert {"x-create=dir", "bind", "ro"} <= set(options)
    target, options = mounts["/dev/aperture_devices"]
    assert {"rbind", "rw"} <= set(options)
    assert "nodev" not in options  # the plugin maps the PCI resource files behind them


def test_a_stock_image_gets_what_run_nccl_tests_exports(files: dict[str, str], tmp_path: Path) -> None:
    # run-nccl-tests.sh@1047080 lines 34-38 (the profile, then the four NIC/aperture variables) and line 65
    # (LD_LIBRARY_PATH=/var/lib/tcpxo/lib64 first, inside the container), for a stock image, through the
    # rendered enroot hook and enroot's own environment code; the user's and the image's values stay.
    lib = tmp_path / "tcpxo"
    lib.mkdir()
    (lib / "nccl-env-profile.sh").write_text((VENDOR / "nccl-env-profile.sh").read_text())
    env = container_environment(
        tmp_path,
        hook=files["enroot/hooks.d/50-clusterctl-nccl.sh"],
        task_prolog=files[f"slurm/task_prolog.d/nccl-{HW}.sh"],
        image_environment="LD_LIBRARY_PATH=/usr/local/cuda/lib64\nNCCL_PROTO=Simple\n",
        job_env={"SLURM_JOB_NUM_NODES": "2", "NCCL_DEBUG": "INFO"},
        host_paths={"/var/lib/tcpxo/lib64": lib},
    )
    vendor = dict(re.findall(r"^export (NCCL_\w+)=(\S+)$", (VENDOR / "run-nccl-tests.sh").read_text(), re.M))
    for name, value in vendor.items():
        assert env[name] == value, name
    assert env["LD_LIBRARY_PATH"].split(":") == [str(lib), "/usr/local/cuda/lib64"]
    assert env["NCCL_PROTO"] == "Simple"  # the image's
    assert env["NCCL_DEBUG"] == "INFO"  # the user's, though the profile forces WARN
    assert env["NCCL_FASTRAK_USE_LLCM"] == "1"  # the plugin's own profile


def test_single_node_containers_keep_nccls_defaults(files: dict[str, str], tmp_path: Path) -> None:
    # run-nccl-tests.sh is a multi-node job; receive-data-path-manager-mega@13fd92b lines 23-25 skip 1-node jobs.
    env = container_environment(
        tmp_path,
        hook=files["enroot/hooks.d/50-clusterctl-nccl.sh"],
        task_prolog=files[f"slurm/task_prolog.d/nccl-{HW}.sh"],
        job_env={"SLURM_JOB_NUM_NODES": "1"},
    )
    assert not [name for name in env if name.startswith("NCCL_")]


def test_enroot_data_is_on_the_local_ssd(blueprint: dict) -> None:
    # a3mega-slurm-blueprint.yaml@1047080 lines 230-236: /etc/enroot/enroot.conf puts enroot's runtime,
    # cache, data and temporary files on the local SSD array (/mnt/localssd), per user. The role's paths
    # with the plan's storage for a3mega are the same (evaluated as Ansible would, plain Jinja is enough).
    runtime = yaml.safe_load((REPO_ROOT / "roles" / "container_runtime" / "vars" / "main.yml").read_text())
    paths = jinja2.Environment().from_string(runtime["__container_runtime_enroot_paths"])
    plan = load_and_validate(EXAMPLES / "gcp-a3mega.yaml").plan
    (profile,) = plan.nccl
    assert profile.container_storage == "/mnt/localssd"
    ours = ast.literal_eval(paths.render(container_runtime_enroot_storage=profile.container_storage).strip())
    vendor = {
        key: value.strip()
        for key, value in (
            line.split(None, 1) for line in _runner(blueprint, "/etc/enroot/enroot.conf")["content"].splitlines()
        )
        if key != "ENROOT_CONFIG_PATH"
    }
    assert vendor == {
        "ENROOT_RUNTIME_PATH": ours["runtime"],
        "ENROOT_CACHE_PATH": ours["cache"],
        "ENROOT_DATA_PATH": ours["data"],
        "ENROOT_TEMP_PATH": ours["temp"],
    }
