"""The rules. Each returns findings; codes are stable and documented in the README.

Sources for the facts behind the rules are in ``clusterctl.catalog``.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections import Counter
from collections.abc import Iterator

from clusterctl.catalog.compat import (
    LAST_NCCL_FOR_CUDA_MAJOR,
    MIN_CUDA_FOR_ARCH,
    MIN_DRIVER_FOR_CUDA,
    MIN_NCCL_FOR_CUDA,
    OS_SLURM,
    SLURM_BLOCK_TOPOLOGY,
    at_least,
    major_minor,
    version_tuple,
)
from clusterctl.catalog.gpus import GPU_MODELS
from clusterctl.catalog.slurm_conf import PARAMETERS as SLURM_PARAMETERS
from clusterctl.catalog.slurm_conf import UINT_MAX
from clusterctl.plan.cloud import is_cloud
from clusterctl.plan.nodes import FIRST_HOST_OFFSET
from clusterctl.plan.sizing import STATE_BYTES_PER_PARAM
from clusterctl.rules.engine import RuleContext, rule
from clusterctl.spec.findings import Finding, Level
from clusterctl.spec.machines import MachinesError, read_ca_bundle, read_machines
from clusterctl.spec.models import LustreStorage, NfsStorage, WekaStorage

# --- phase 1: structure (what the plan is built from) ---------------------------------------------


@rule("REF001", "hardware-ref", Level.ERROR, phase=1)
def hardware_ref(ctx: RuleContext) -> Iterator[Finding]:
    """Every node group names a hardware profile that exists."""
    for i, group in enumerate(ctx.spec.nodes):
        if group.hardware not in ctx.spec.hardware:
            known = ", ".join(sorted(ctx.spec.hardware))
            yield hardware_ref.finding(
                ("nodes", i, "hardware"),
                f"Node group `{group.group}` uses hardware `{group.hardware}`, which is not defined.",
                f"Define it under `hardware:` or use one of: {known}.",
            )


@rule("REF002", "partition-groups", Level.ERROR, phase=1)
def partition_groups(ctx: RuleContext) -> Iterator[Finding]:
    """Partitions hold compute groups that exist."""
    roles = {g.group: g.role for g in ctx.spec.nodes}
    for i, part in enumerate(ctx.spec.slurm.partitions):
        for j, name in enumerate(part.groups):
            if name not in roles:
                yield partition_groups.finding(
                    ("slurm", "partitions", i, "groups", j),
                    f"Partition `{part.name}` names node group `{name}`, which does not exist.",
                    f"Use one of: {', '.join(roles)}.",
                )
            elif roles[name] != "compute":
                yield partition_groups.finding(
                    ("slurm", "partitions", i, "groups", j),
                    f"Partition `{part.name}` names `{name}`, a {roles[name]} group; partitions hold compute nodes.",
                )


@rule("SLU001", "one-default-partition", Level.ERROR, phase=1, gates_plan=False)
def one_default_partition(ctx: RuleContext) -> Iterator[Finding]:
    """Exactly one partition is the default."""
    defaults = [i for i, p in enumerate(ctx.spec.slurm.partitions) if p.default]
    if not defaults:
        yield one_default_partition.finding(
            ("slurm", "partitions"), "No partition is the default.", "Add `default: true` to one partition."
        )
    for i in defaults[1:]:
        yield one_default_partition.finding(
            ("slurm", "partitions", i, "default"),
            f"Partition `{ctx.spec.slurm.partitions[i].name}` is a second default partition.",
            "Keep `default: true` on exactly one partition.",
        )


@rule("NET001", "cidr-fits", Level.ERROR, phase=1)
def cidr_fits(ctx: RuleContext) -> Iterator[Finding]:
    """Every node gets an address in the management network."""
    net = ctx.spec.network.management_cidr
    # Cloud burst groups with a network of their own take their addresses there (rule BUR004).
    nodes = sum(
        g.count
        for g in ctx.spec.nodes
        if g.burst is None or not is_cloud(g.burst.provider) or g.burst.provider.cidr is None
    )
    usable = net.num_addresses - FIRST_HOST_OFFSET - 1
    if nodes > usable:
        need = 32 - math.ceil(math.log2(nodes + FIRST_HOST_OFFSET + 1))
        yield cidr_fits.finding(
            ("network", "management_cidr"),
            f"{nodes} nodes do not fit {net}: it leaves {max(usable, 0)} addresses after the first "
            f"{FIRST_HOST_OFFSET - 1} reserved ones.",
            f"Use a /{need} or larger network.",
        )


@rule("FAB001", "rails-match-gpus", Level.ERROR, phase=1)
def rails_match_gpus(ctx: RuleContext) -> Iterator[Finding]:
    """On a rail-optimized fabric every GPU has its rail HCA."""
    if ctx.spec.fabric.layout != "rail-optimized" or ctx.spec.fabric.kind not in ("infiniband", "roce"):
        return
    # A cloud burst group's profile is on its instance type's fabric (EFA for p5), not this one.
    compute = {
        g.hardware
        for g in ctx.spec.nodes
        if g.role == "compute" and (g.burst is None or not is_cloud(g.burst.provider))
    }
    for name, profile in ctx.spec.hardware.items():
        if name in compute and profile.gpus and len(profile.rails) != profile.gpus.count:
            yield rails_match_gpus.finding(
                ("hardware", name, "rails"),
                f"Profile `{name}` has {profile.gpus.count} GPUs but {len(profile.rails)} rail HCA(s); "
                "rail-optimized cabling needs one rail per GPU.",
                "List the compute HCA of GPU 0..N-1 in order (see `nvidia-smi topo -m`).",
            )
        dupes = [h for h, n in Counter(profile.rails).items() if n > 1]
        overlap = set(profile.rails) & set(profile.storage_nics)
        if dupes or overlap:
            yield rails_match_gpus.finding(
                ("hardware", name, "rails"),
                f"Profile `{name}` lists HCA(s) {', '.join(sorted(set(dupes) | overlap))} twice "
                "(among rails or also as storage NICs).",
            )


@rule("FAB005", "leaf-has-uplinks", Level.ERROR, phase=1)
def leaf_has_uplinks(ctx: RuleContext) -> Iterator[Finding]:
    """The oversubscription leaves every leaf at least one uplink and one downlink."""
    fabric = ctx.spec.fabric
    if fabric.switch_ports // (fabric.oversubscription + 1) < 1:
        yield leaf_has_uplinks.finding(
            ("fabric", "oversubscription"),
            f"{fabric.oversubscription}:1 on {fabric.switch_ports}-port switches leaves a leaf no uplink.",
            f"Use an oversubscription below {fabric.switch_ports}.",
        )


@rule("FAB004", "rack-layout-needs-racks", Level.ERROR, phase=1)
def rack_layout_needs_racks(ctx: RuleContext) -> Iterator[Finding]:
    """rack-leaf layouts know how many nodes a rack holds."""
    fabric = ctx.spec.fabric
    if fabric.layout == "rack-leaf" and fabric.nodes_per_rack is None and ctx.spec.provider.kind != "baremetal":
        yield rack_layout_needs_racks.finding(
            ("fabric", "layout"),
            "The rack-leaf layout needs `nodes_per_rack` (or racks from machines.csv on bare metal).",
            "Add e.g. `nodes_per_rack: 4` to `fabric`.",
        )


# --- versions: the spec alone, so they run whatever else is wrong --------------------------------


def _gpu_profiles(ctx: RuleContext) -> Iterator[tuple[str, str]]:
    used = {g.hardware for g in ctx.spec.nodes}
    for name, profile in ctx.spec.hardware.items():
        if profile.gpus and name in used:
            yield name, profile.gpus.model


@rule("GPU001", "arch-vs-cuda", Level.ERROR, phase=1, gates_plan=False)
def arch_vs_cuda(ctx: RuleContext) -> Iterator[Finding]:
    """The CUDA version supports every GPU architecture in the cluster."""
    cuda = ctx.spec.versions.cuda
    for name, model_name in _gpu_profiles(ctx):
        model = GPU_MODELS[model_name]
        minimum = MIN_CUDA_FOR_ARCH[model.arch]
        if not at_least(cuda, minimum):
            yield arch_vs_cuda.finding(
                ("versions", "cuda"),
                f"CUDA {cuda} does not support {model.arch.title()} GPUs ({model_name} in `{name}`); "
                f"they need CUDA >= {minimum}.",
                f'Set versions.cuda to "{minimum}" or later.',
            )


@rule("GPU002", "driver-vs-cuda", Level.ERROR, phase=1, gates_plan=False)
def driver_vs_cuda(ctx: RuleContext) -> Iterator[Finding]:
    """The driver is at least NVIDIA's minimum for the CUDA version (CUDA release notes, Table 3)."""
    versions = ctx.spec.versions
    if not any(True for _ in _gpu_profiles(ctx)):
        return
    cuda = major_minor(versions.cuda)
    minimum = MIN_DRIVER_FOR_CUDA.get(cuda)
    if minimum is None:
        yield driver_vs_cuda.finding(
            ("versions", "cuda"),
            f"CUDA {versions.cuda} is not in clusterctl's driver table; the driver minimum cannot be checked.",
            f"Known: {', '.join(MIN_DRIVER_FOR_CUDA)}.",
            level=Level.WARNING,
        )
        return
    if version_tuple(versions.nvidia_driver) < version_tuple(minimum):
        yield driver_vs_cuda.finding(
            ("versions", "nvidia_driver"),
            f"Driver {versions.nvidia_driver} is older than {minimum}, the minimum for CUDA {cuda}.",
            f'Use driver "{minimum}" or newer, or an older CUDA.',
        )


@rule("GPU003", "nccl-vs-cuda", Level.ERROR, phase=1, gates_plan=False)
def nccl_vs_cuda(ctx: RuleContext) -> Iterator[Finding]:
    """NCCL has a build for the CUDA version (libnccl2=<nccl>-1+cuda<X.Y>)."""
    versions = ctx.spec.versions
    cuda = major_minor(versions.cuda)
    minimum = MIN_NCCL_FOR_CUDA.get(cuda)
    if minimum is None:
        yield nccl_vs_cuda.finding(
            ("versions", "nccl"),
            f"CUDA {cuda} is not in clusterctl's NCCL table; check that libnccl2={versions.nccl}-1+cuda{cuda} "
            "exists in your repository.",
            level=Level.WARNING,
        )
        return
    if not at_least(versions.nccl, minimum):
        yield nccl_vs_cuda.finding(
            ("versions", "nccl"),
            f"NCCL {versions.nccl} has no build for CUDA {cuda}; the first NCCL built for it is {minimum}.",
            f'Use NCCL "{minimum}" or newer (package libnccl2={minimum}-1+cuda{cuda}).',
        )
    last = LAST_NCCL_FOR_CUDA_MAJOR.get(cuda.split(".")[0])
    if last and version_tuple(versions.nccl)[:2] > version_tuple(last)[:2]:
        yield nccl_vs_cuda.finding(
            ("versions", "nccl"),
            f"NCCL {versions.nccl} is not built for CUDA {cuda.split('.')[0]}.x; the last series for it is {last}.",
        )


@rule("GPU004", "fabric-manager-version", Level.ERROR, phase=1, gates_plan=False)
def fabric_manager_version(ctx: RuleContext) -> Iterator[Finding]:
    """NVSwitch systems get a fabric manager at exactly the driver's version."""
    versions = ctx.spec.versions
    nvswitch = [name for name, model in _gpu_profiles(ctx) if GPU_MODELS[model].nvswitch]
    if versions.fabric_manager and versions.fabric_manager != versions.nvidia_driver:
        yield fabric_manager_version.finding(
            ("versions", "fabric_manager"),
            f"Fabric manager {versions.fabric_manager} differs from driver {versions.nvidia_driver}; "
            "nv-fabricmanager refuses to start unless both are the exact same version.",
            "Remove versions.fabric_manager (it follows the driver) or set it to the driver's version.",
        )
    elif nvswitch and ctx.spec.provider.kind != "local":
        yield fabric_manager_version.finding(
            ("versions", "nvidia_driver"),
            f"NVSwitch GPUs in {', '.join(nvswitch)}: nvidia-fabricmanager {versions.nvidia_driver} will be "
            "installed and held with the driver.",
            level=Level.INFO,
        )


@rule("SLU002", "slurm-vs-os", Level.ERROR, phase=1, gates_plan=False)
def slurm_vs_os(ctx: RuleContext) -> Iterator[Finding]:
    """The Slurm version is what the OS ships, unless another package source is declared."""
    spec = ctx.spec
    shipped = OS_SLURM[spec.os]
    wanted = major_minor(spec.versions.slurm)
    if wanted == shipped:
        return
    if spec.slurm.package_repo is not None:
        yield slurm_vs_os.finding(
            ("versions", "slurm"),
            f"Slurm {wanted} comes from {spec.slurm.package_repo.url} ({spec.os} ships {shipped}).",
            level=Level.INFO,
        )
        return
    yield slurm_vs_os.finding(
        ("versions", "slurm"),
        f"{spec.os} ships Slurm {shipped}, not {wanted}, and no other package source is declared.",
        f'Set versions.slurm to "{shipped}" or declare slurm.package_repo with a repository that has {wanted}.',
    )


@rule("SLU003", "slurm-features", Level.ERROR, phase=1, gates_plan=False)
def slurm_features(ctx: RuleContext) -> Iterator[Finding]:
    """Slurm features the spec asks for exist in its Slurm version."""
    spec = ctx.spec
    if spec.slurm.topology == "block" and not at_least(spec.versions.slurm, SLURM_BLOCK_TOPOLOGY):
        yield slurm_features.finding(
            ("slurm", "topology"),
            f"topology/block needs Slurm >= {SLURM_BLOCK_TOPOLOGY}; this cluster runs {spec.versions.slurm}.",
            "Use `topology: tree`, or a newer Slurm.",
        )


@rule("SLU004", "shared-state-save", Level.ERROR, phase=1, gates_plan=False)
def shared_state_save(ctx: RuleContext) -> Iterator[Finding]:
    """Two controllers keep slurmctld's state on storage both mount (a backup takes over from it)."""
    spec = ctx.spec
    controllers = sum(g.count for g in spec.nodes if g.role == "controller")
    location = spec.slurm.state_save_location
    tiers = [(t.name, t.mount) for t in spec.storage]
    holder = next((name for name, mount in tiers if location and location.startswith(mount.rstrip("/") + "/")), None)
    example = f"{tiers[0][1].rstrip('/')}/slurm/state" if tiers else "/shared/slurm/state"
    if controllers > 1 and location is None:
        yield shared_state_save.finding(
            ("slurm",),
            f"{controllers} controllers, but slurmctld's StateSaveLocation is each controller's own "
            "/var/spool/slurmctld: a backup controller that takes over finds no job state and loses every job.",
            f"Set `state_save_location` under `slurm:` to a directory inside a storage tier both controllers mount, "
            f"e.g. {example}" + ("" if tiers else " (add the tier under `storage:`)") + ".",
        )
    elif location is not None and holder is None and (controllers > 1 or any(location == m for _, m in tiers)):
        yield shared_state_save.finding(
            ("slurm", "state_save_location"),
            f"{location} is "
            + ("a storage tier's mount point itself" if any(location == m for _, m in tiers) else "on no storage tier")
            + (
                f"; with {controllers} controllers it must be a directory inside a tier both mount."
                if controllers > 1
                else "; the directory is made slurm's, mode 0700, which would lock everyone else out of the tier."
            ),
            f"Use a directory inside a tier, e.g. {example}.",
        )


@rule("SLU005", "slurm-conf-parameters", Level.ERROR, phase=1, gates_plan=False)
def slurm_conf_parameters(ctx: RuleContext) -> Iterator[Finding]:
    """Extra slurm.conf parameters are ones Slurm knows, with values of their type (slurmctld stops on others)."""
    for name, value in ctx.spec.site.slurm_conf.items():
        path = ("site", "slurm_conf", name)
        kind = SLURM_PARAMETERS.get(name)
        if kind is None:
            same = next((known for known in SLURM_PARAMETERS if known.lower() == name.lower()), None)
            close = difflib.get_close_matches(name, list(SLURM_PARAMETERS), n=1, cutoff=0.8)
            hint = f"Did you mean `{same or close[0]}`?" if same or close else "See slurm.conf(5) for the names."
            yield slurm_conf_parameters.finding(
                path,
                f"`{name}` is not a slurm.conf parameter Slurm knows; slurmctld would refuse to start.",
                hint + " clusterctl writes only the parameters of its catalog (clusterctl.catalog.slurm_conf).",
            )
        elif kind == "bool" and not isinstance(value, bool):
            yield slurm_conf_parameters.finding(path, f"`{name}` is yes or no: write true or false, not {value!r}.")
        elif kind in UINT_MAX and (isinstance(value, bool) or not isinstance(value, int) or value > UINT_MAX[kind]):
            yield slurm_conf_parameters.finding(
                path, f"`{name}` takes a whole number from 0 to {UINT_MAX[kind]} (Slurm's {kind}), not {value!r}."
            )


# --- phase 2: fabric ------------------------------------------------------------------------


@rule("FAB002", "fabric-tiers", Level.ERROR)
def fabric_tiers(ctx: RuleContext) -> Iterator[Finding]:
    """The fabric fits two or three tiers of the switch radix."""
    fabric = ctx.require_plan().fabric
    k = fabric.radix
    if fabric.tiers > 3:
        yield fabric_tiers.finding(
            ("fabric", "switch_ports"),
            f"{fabric.endpoints} node ports need more than three tiers of {k}-port switches "
            f"(three tiers hold at most {fabric.max_endpoints_3tier} at this oversubscription, k³/4 at 1:1).",
            "Use higher-radix switches or split the cluster into separate fabrics.",
        )
    elif fabric.tiers == 3:
        yield fabric_tiers.finding(
            ("fabric", "switch_ports"),
            f"{fabric.endpoints} node ports exceed two tiers ({fabric.max_endpoints_2tier}); the plan adds a core "
            f"tier: {fabric.spine_switches} spines and {fabric.core_switches} core switches.",
            level=Level.INFO,
        )


@rule("FAB003", "oversubscription-cost", Level.WARNING)
def oversubscription_cost(ctx: RuleContext) -> Iterator[Finding]:
    """Oversubscribed leaves cost cross-leaf bandwidth; say how much."""
    fabric = ctx.require_plan().fabric
    if ctx.spec.fabric.oversubscription > 1 and fabric.tiers > 1:
        share = 100 / fabric.oversubscription
        yield oversubscription_cost.finding(
            ("fabric", "oversubscription"),
            f"{fabric.down_ports_per_leaf}:{fabric.uplinks_per_leaf} at the leaf: traffic leaving a leaf gets "
            f"{share:.0f}% of line rate when all nodes send at once; all-reduce across leaves slows by up to "
            f"{fabric.oversubscription:.1f}x.",
            "Keep 1:1 for training fabrics, or place jobs within a leaf group (sbatch --switches=1).",
        )


# --- storage ---------------------------------------------------------------------------


def _backing(tier: LustreStorage | WekaStorage | NfsStorage) -> tuple[str, ...]:
    if isinstance(tier, LustreStorage):
        return ("lustre", *sorted(tier.mgs), tier.fsname)
    if isinstance(tier, WekaStorage):
        return ("weka", *sorted(str(b) for b in tier.backends), tier.filesystem)
    return ("nfs", tier.server, tier.export)


@rule("STO001", "dataset-checkpoint-separate", Level.WARNING, phase=1, gates_plan=False)
def dataset_checkpoint_separate(ctx: RuleContext) -> Iterator[Finding]:
    """Datasets and checkpoints on the same storage system contend for it."""
    datasets = [(i, t) for i, t in enumerate(ctx.spec.storage) if t.purpose == "dataset"]
    checkpoints = [(i, t) for i, t in enumerate(ctx.spec.storage) if t.purpose == "checkpoint"]
    for i, ckpt in checkpoints:
        for _, data in datasets:
            if _backing(ckpt) == _backing(data):
                yield dataset_checkpoint_separate.finding(
                    ("storage", i),
                    f"Checkpoint tier `{ckpt.name}` is the same storage as dataset tier `{data.name}`: checkpoint "
                    "bursts will stall data loading.",
                    "Put checkpoints on a separate tier (or accept the contention).",
                )


@rule("STO002", "checkpoint-write-time", Level.WARNING)
def checkpoint_write_time(ctx: RuleContext) -> Iterator[Finding]:
    """A checkpoint should be written in under 60 s."""
    plan = ctx.require_plan()
    for i, tier in enumerate(plan.storage):
        if tier.checkpoint_write_s is not None and tier.checkpoint_write_s > 60:
            assert plan.workload is not None
            yield checkpoint_write_time.finding(
                ("storage", i, "write_bw"),
                f"A {plan.workload.checkpoint_tib:.2f} TiB checkpoint takes {tier.checkpoint_write_s:.0f} s to "
                f"write at {tier.write_bw}; every checkpoint stalls training that long.",
                "Aim for under 60 s: more write bandwidth, asynchronous or sharded checkpoints.",
            )


@rule("STO003", "parallel-fs-netdevs", Level.ERROR, phase=1, gates_plan=False)
def parallel_fs_netdevs(ctx: RuleContext) -> Iterator[Finding]:
    """Lustre (o2ib) and WEKA tiers need storage_netdevs, or storage_nics whose netdevs the nodes find."""
    needs = [
        (i, t)
        for i, t in enumerate(ctx.spec.storage)
        if isinstance(t, WekaStorage) or (isinstance(t, LustreStorage) and any("@o2ib" in n for n in t.mgs))
    ]
    if not needs:
        return
    used = {g.hardware for g in ctx.spec.nodes if g.burst is None}
    for name, profile in ctx.spec.hardware.items():
        if profile.gpus and name in used and not profile.storage_netdevs and not profile.storage_nics:
            tiers = ", ".join(t.name for _, t in needs)
            yield parallel_fs_netdevs.finding(
                ("hardware", name),
                f"Profile `{name}` has neither `storage_nics` nor `storage_netdevs`, so {tiers} cannot be mounted "
                "over the storage network.",
                'Name the storage HCAs, e.g. `storage_nics: ["0000:29:00.0", "0000:aa:00.0"]` (each node finds '
                "their interfaces), or list their interfaces, e.g. `storage_netdevs: [ibs1, ibs2]`.",
            )


# --- sizing ---------------------------------------------------------------------------


@rule("HW001", "ram-vs-hbm", Level.WARNING, phase=1, gates_plan=False)
def ram_vs_hbm(ctx: RuleContext) -> Iterator[Finding]:
    """System memory should be at least 1.5x the GPUs' HBM (pinned buffers, checkpoint staging)."""
    if ctx.spec.provider.kind == "local":
        return
    for name, model_name in _gpu_profiles(ctx):
        profile = ctx.spec.hardware[name]
        assert profile.gpus is not None
        hbm = GPU_MODELS[model_name].hbm_gib * profile.gpus.count
        if profile.memory_gib < 1.5 * hbm:
            yield ram_vs_hbm.finding(
                ("hardware", name, "memory_gib"),
                f"Profile `{name}` has {profile.memory_gib} GiB RAM for {hbm:.0f} GiB of HBM; less than 1.5x "
                "leaves too little for pinned host buffers, data loaders and checkpoint staging.",
                f"Plan at least {math.ceil(1.5 * hbm)} GiB.",
            )


@rule("HW002", "spares", Level.WARNING, phase=1, gates_plan=False)
def spares(ctx: RuleContext) -> Iterator[Finding]:
    """At least 5% of GPU compute nodes are hot spares (failed nodes are replaced, not waited for)."""
    if ctx.spec.provider.kind == "local":
        return
    for i, group in enumerate(ctx.spec.nodes):
        profile = ctx.spec.hardware.get(group.hardware)  # an unknown profile is REF001's
        if group.role != "compute" or group.burst is not None or profile is None or profile.gpus is None:
            continue
        if group.spares < 0.05 * group.count:
            yield spares.finding(
                ("nodes", i, "spares"),
                f"Group `{group.group}` has {group.spares} spare(s) for {group.count} nodes "
                f"({100 * group.spares / group.count:.1f}%); at scale nodes fail weekly.",
                f"Hold at least {math.ceil(0.05 * group.count)} as spares.",
            )


@rule("WRK001", "model-state-fits", Level.ERROR)
def model_state_fits(ctx: RuleContext) -> Iterator[Finding]:
    """The model's training state fits the cluster's HBM at all."""
    plan = ctx.require_plan()
    if plan.workload is None or not plan.gpus.active:
        return
    state = STATE_BYTES_PER_PARAM * plan.workload.model_params_b * 1e9
    if state > plan.gpus.hbm_gib * 2**30:
        yield model_state_fits.finding(
            ("workload", "model_params_b"),
            f"{plan.workload.model_state_tib:.1f} TiB of model state (16 bytes/parameter) exceeds the cluster's "
            f"{plan.gpus.hbm_gib / 1024:.1f} TiB of HBM.",
            f"Needs at least {plan.workload.min_gpus_for_state} GPUs before activations.",
        )


# --- phase 2: bare metal ----------------------------------------------------------------------------


def _unquoted(finding: Finding) -> Finding:
    """A finding inside machines.csv: the reporter must not print the file's line (it may be anything)."""
    return dataclasses.replace(finding, quote_source=False)


@rule("MCH001", "machines-match-plan", Level.ERROR, tags=("baremetal",))
def machines_match_plan(ctx: RuleContext) -> Iterator[Finding]:
    """machines.csv is a valid file beside the spec with one row per planned bare-metal node, unique BMCs and MACs."""
    spec = ctx.spec
    if spec.provider.kind != "baremetal":
        return
    path = ctx.base_dir / spec.provider.machines
    try:
        machines = read_machines(ctx.base_dir, spec.provider.machines)
    except MachinesError as exc:
        for problem in exc.problems:
            yield _unquoted(
                machines_match_plan.finding(
                    ("provider", "machines"),
                    problem.message[:1].upper() + problem.message[1:] + ("" if problem.message.endswith(".") else "."),
                    "Fix machines.csv (hostname,bmc,mac,rack)." if problem.line else "",
                    # Problems with the path itself point at the spec's `machines:`; the others into the file.
                    file=str(path) if problem.line else "",
                    line=problem.line,
                    column=problem.column or (1 if problem.line else 0),
                )
            )
        return
    planned = [n.hostname for n in ctx.require_plan().nodes if not n.burst]
    rows = {m.hostname: m for m in machines}
    for name in planned:
        if name not in rows:
            yield machines_match_plan.finding(
                ("provider", "machines"),
                f"Planned node `{name}` has no row in {path.name}.",
                f"Add `{name},<bmc>,<mac>,<rack>` to {path.name}.",
            )
    planned_set = set(planned)
    for field_name in ("hostname", "bmc", "mac"):
        seen: dict[str, int] = {}
        for m in machines:
            value = getattr(m, field_name).lower()
            if value in seen:
                yield _unquoted(
                    machines_match_plan.finding(
                        ("provider", "machines"),
                        f"{field_name} `{value}` appears on lines {seen[value]} and {m.line}.",
                        file=str(path),
                        line=m.line,
                        column=m.column(field_name),
                    )
                )
            seen[value] = m.line
    insecure_ok = spec.provider.bmc.insecure_http
    for m in machines:
        if m.hostname not in planned_set:
            yield _unquoted(
                machines_match_plan.finding(
                    ("provider", "machines"),
                    f"Row for `{m.hostname}` matches no planned node; it will be ignored.",
                    "Remove it, or check the node groups' counts and hostname patterns.",
                    level=Level.WARNING,
                    file=str(path),
                    line=m.line,
                    column=1,
                )
            )
        if m.bmc.lower().startswith("http://") and not insecure_ok:
            yield _unquoted(
                machines_match_plan.finding(
                    ("provider", "machines"),
                    f"BMC `{m.bmc}` is plain http: the BMC credentials and power commands would cross the network "
                    "unencrypted.",
                    "Write it as https://..., or, for a lab BMC or an emulator only, set `bmc: {insecure_http: true}` "
                    "in the spec's provider block.",
                    file=str(path),
                    line=m.line,
                    column=m.column("bmc"),
                )
            )


@rule("BMC001", "bmc-transport", Level.ERROR, phase=1, tags=("baremetal",))
def bmc_transport(ctx: RuleContext) -> Iterator[Finding]:
    """The BMC CA bundle is a usable PEM file beside the spec; weakened BMC transport and old keys are flagged."""
    provider = ctx.spec.provider
    if provider.kind != "baremetal":
        return
    bmc = provider.bmc
    if provider.bmc_verify_tls is not None:
        yield bmc_transport.finding(
            ("provider", "bmc_verify_tls"),
            "`bmc_verify_tls` is deprecated; it still works and sets `bmc.verify_tls`.",
            f"Write `bmc: {{verify_tls: {str(provider.bmc_verify_tls).lower()}}}` instead.",
            level=Level.WARNING,
        )
    if bmc.insecure_http:
        yield bmc_transport.finding(
            ("provider", "bmc", "insecure_http"),
            "`insecure_http: true` lets http:// BMCs receive their credentials and power commands in clear text.",
            "Use it only on an isolated lab network or with an emulator; every run warns about it.",
            level=Level.WARNING,
        )
    if not bmc.verify_tls:
        yield bmc_transport.finding(
            ("provider", "bmc", "verify_tls") if provider.bmc_verify_tls is None else ("provider", "bmc_verify_tls"),
            "BMC certificates are not verified: anyone on the BMC network can pose as a BMC and read its credentials.",
            "Give the CA that signed the BMC certificates as `bmc: {ca_bundle: <file.pem>}` instead.",
            level=Level.WARNING,
        )
    if bmc.ca_bundle is not None:
        try:
            read_ca_bundle(ctx.base_dir, bmc.ca_bundle)
        except MachinesError as exc:
            message = str(exc)
            yield bmc_transport.finding(
                ("provider", "bmc", "ca_bundle"),
                message[:1].upper() + message[1:] + ("" if message.endswith(".") else "."),
                "Put the PEM file of the BMCs' CA next to the spec and name it here.",
            )
