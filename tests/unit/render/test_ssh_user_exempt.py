"""The user clusterctl logs in as gets into compute nodes without a job; root-only clusters add nothing.

pam_slurm_adopt refuses an SSH login to a compute node from anyone without a job there; readiness,
verify, heal and the next `up` log in as the provider's ssh_user (the bare-metal lab found them
refused: "Access denied by pam_slurm_adopt: you have no active jobs on this node").
"""

from __future__ import annotations

from clusterctl.pipeline import load_and_validate
from clusterctl.render.inventory import group_vars
from tests.conftest import EXAMPLES


def test_the_ssh_user_is_exempt_from_pam_slurm_adopt() -> None:
    onprem = group_vars(load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan)
    assert onprem["slurm_pam_adopt_exempt_users"] == ["root", "ubuntu"]
    local = group_vars(load_and_validate(EXAMPLES / "local.yaml").plan)
    assert "slurm_pam_adopt_exempt_users" not in local  # root logs in; the role's default has it
