"""What a container started through pyxis gets: enroot's environment file, the rendered hook, pyxis' import.

:func:`container_environment` reproduces, step by step and with enroot's own shell functions
(``tests/fixtures/enroot/common.sh``, README there), how the environment of a task in
``srun --container-image`` comes about, and runs the rendered ``50-clusterctl-nccl.sh`` hook at
the point enroot runs its hooks. What it cannot reproduce without enroot's binaries (the mounts)
is checked on the rendered fstab and, in Molecule, on the installed files.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from tests.conftest import REPO_ROOT

ENROOT_COMMON = REPO_ROOT / "tests" / "fixtures" / "enroot" / "common.sh"
HOST_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def _bash(script: str, env: Mapping[str, str]) -> None:
    subprocess.run(["bash", "-c", script], env=dict(env), check=True, capture_output=True, text=True, timeout=60)


def container_environment(
    tmp_path: Path,
    *,
    hook: str,
    task_prolog: str,
    image_environment: str = "",
    job_env: Mapping[str, str] | None = None,
    host_paths: Mapping[str, Path] | None = None,
) -> dict[str, str]:
    """The environment a task sees in a pyxis container on a node with the rendered hook.

    Args:
        tmp_path: Scratch directory.
        hook: The rendered ``enroot/hooks.d/50-clusterctl-nccl.sh``.
        task_prolog: The rendered TaskProlog of the node's hardware profile.
        image_environment: The image's ``/etc/environment`` (``NAME=value`` lines).
        job_env: The job's environment (srun's, which pyxis hands to enroot and its hooks).
        host_paths: Node paths the scripts name, mapped into ``tmp_path`` (e.g. the plugin directory).

    Returns:
        The task's environment: the job's, with the container's environment file over it.
    """
    job = {"PATH": HOST_PATH, **(job_env or {})}
    prolog = tmp_path / "task_prolog.sh"
    hook_file = tmp_path / "50-clusterctl-nccl.sh"
    texts = {prolog: task_prolog, hook_file: hook}
    for path, text in texts.items():
        for node_path, local in (host_paths or {}).items():
            text = text.replace(node_path, str(local))
        path.write_text(text.replace("/etc/slurm/task_prolog.sh", str(prolog)))
        path.chmod(0o755)
    rootfs_env = tmp_path / "rootfs-environment"
    rootfs_env.write_text(image_environment)
    environ = tmp_path / "environment"
    common = f". {ENROOT_COMMON} 2>/dev/null"
    # runtime::_do_environ: the image's /etc/environment with the host's ${VAR}s substituted, formatted.
    _bash(
        f'{common}; : > "$E"; common::envsubst "$R" >> "$E"; common::envfmt "$E"',
        {**job, "E": str(environ), "R": str(rootfs_env)},
    )
    # runtime::_do_hooks: every hooks.d script with the host's environment and ENROOT_ENVIRON, then formatted again.
    subprocess.run([str(hook_file)], env={**job, "ENROOT_ENVIRON": str(environ)}, check=True, timeout=60)
    _bash(f'{common}; common::envfmt "$E"', {**job, "E": str(environ)})
    # enroot-switchroot: clearenv(), then setenv(name, value, 1) per valid line.
    container: dict[str, str] = {}
    for line in environ.read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and name.replace("_", "a").isalnum() and not name[0].isdigit():
            container[name] = value
    # pyxis: the container's environment over the job's (overwrite=1).
    return {**job, **container}


def environment_file(tmp_path: Path) -> list[str]:
    """The container's environment file as the last run left it."""
    return (tmp_path / "environment").read_text().splitlines()
