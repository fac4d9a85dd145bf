"""Test and runtime tools pinned in ``versions``: nccl-tests and the NVIDIA container toolkit.

Sources:

- nccl-tests source archives: GitHub's tag archive
  (``https://github.com/NVIDIA/nccl-tests/archive/v<version>.tar.gz``) with the sha256 Spack
  pins for it: ``var/spack/repos/builtin/packages/nccl-tests/package.py`` (copy
  scalability-llnl/spack @ 94e9e16: ``version("2.13.6", sha256="52b472a5...")``). GitHub
  generates tag archives on request; Spack's checksum is the record of this one, and a site
  mirror with its own archive needs its own checksum (``versions.nccl_tests_checksum``).
- NVIDIA container toolkit: the release roles/container_runtime pinned before it came into
  ``versions`` (1.17.8, NVIDIA/nvidia-container-toolkit releases; the packages come from
  NVIDIA's signed apt repository, so apt checks them, no tarball checksum).
"""

from __future__ import annotations

DEFAULT_NCCL_TESTS = "2.13.6"
DEFAULT_CONTAINER_TOOLKIT = "1.17.8"

# Where roles/nccl builds nccl-tests (its default nccl_tests_install_dir; a test keeps the two
# equal): sources under src/, the build linked at bin/, which is not on PATH. clusterctl verify
# runs ALL_REDUCE_PERF from there unless --nccl-binary says otherwise.
NCCL_TESTS_INSTALL_DIR = "/opt/nccl-tests"
NCCL_TESTS_BIN_DIR = f"{NCCL_TESTS_INSTALL_DIR}/bin"
ALL_REDUCE_PERF = f"{NCCL_TESTS_BIN_DIR}/all_reduce_perf"

# Where roles/rdma records each rail's RDMA device at converge (its rdma_rails_file): NCCL_IB_HCA,
# the health check, verify's rail checks and fabric check --from-nodes read it there.
RAILS_PATH = "/etc/clusterctl/rdma-rails.conf"

# nccl-tests release -> checksum of GitHub's tag archive, as get_url's `checksum` takes it.
NCCL_TESTS_CHECKSUMS: dict[str, str] = {
    "2.13.6": "sha256:52b472a58a4918d3221a9b8c4bd9335382643d7e241983918b64692d685cc3d1",
}


def nccl_tests_url(version: str) -> str:
    """GitHub's source archive of an nccl-tests release."""
    return f"https://github.com/NVIDIA/nccl-tests/archive/v{version}.tar.gz"


def nccl_tests_checksum(version: str) -> str | None:
    """The known checksum of an nccl-tests release's GitHub archive; None when unknown."""
    return NCCL_TESTS_CHECKSUMS.get(version)
