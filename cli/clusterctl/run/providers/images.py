"""Which image a node boots: its hardware profile's locked image, as the providers see it.

The lock (clusterctl.image.lock) is read above this layer; providers get each profile's image as a
:class:`BootImage` (its reference and content hash) and decide which nodes really booted it: only
those may skip the install stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from clusterctl.bounded import json_document
from clusterctl.plan.models import Plan
from clusterctl.run.pulumi import output_mapping
from clusterctl.run.state import StateDirError, read_text_nofollow

# stacks/common/clusterctl_stack.py OUT_NODE_IMAGES: what each instance of a cluster stack was made from.
OUT_NODE_IMAGES = "nodeImages"
# Where `clusterctl image build` records the cloud images it captured (in the cluster's state directory).
RECORDS = Path("images") / "cloud"


class BootImage(Protocol):
    """A profile's locked image: where it is and what it holds (clusterctl.image.lock.LockedImage is one)."""

    @property
    def ref(self) -> str:
        """The image's reference (Docker tag, AMI id, image URL, archive path)."""
        ...

    @property
    def hash(self) -> str:
        """Its content hash."""
        ...


def apply_locked_images(plan: Plan, images: Mapping[str, str | BootImage]) -> Plan:
    """The plan with each cloud group of a locked profile booting that profile's image.

    ``images``: hardware profile -> its locked image (or just its reference). Only the cloud
    stacks read ``CloudInstanceGroupPlan.image``; a plan without a cloud section is returned as is.
    """
    if plan.cloud is None or not images:
        return plan
    refs = {p: (i if isinstance(i, str) else i.ref) for p, i in images.items()}
    groups = [g.model_copy(update={"image": refs.get(g.hardware)}) for g in plan.cloud.groups]
    return plan.model_copy(update={"cloud": plan.cloud.model_copy(update={"groups": groups})})


def image_hashes(plan: Plan, images: Mapping[str, str | BootImage], state_dir: Path) -> dict[str, str]:
    """Hardware profile -> content hash of the locked image its cloud nodes boot.

    A ``LockedImage`` carries its hash; for a bare reference the record this state directory
    wrote when it captured the image says it (a reference it has no record of gives no hash, and
    its nodes run both stages).
    """
    out: dict[str, str] = {}
    folder = state_dir / RECORDS
    records: dict[str, str] = {}
    if any(isinstance(i, str) for i in images.values()) and folder.is_dir():
        for path in sorted(folder.glob(f"{plan.cluster.provider}-*.json")):
            try:
                data = json_document(read_text_nofollow(path, "image record") or "null", "image record")
            except (OSError, ValueError, StateDirError):
                continue
            if isinstance(data, dict) and isinstance(data.get("ref"), str) and isinstance(data.get("hash"), str):
                records[data["ref"]] = data["hash"]
    for profile, image in images.items():
        digest = records.get(image) if isinstance(image, str) else image.hash
        if digest:
            out[profile] = digest
    return out


def same_image(booted: str | None, ref: str | None) -> bool:
    """Whether the image a cloud says an instance was made from is the locked reference.

    GCP answers with a full URL where the lock may hold a partial one (``projects/...``), and Azure
    resource ids compare without case.
    """
    if not booted or not ref:
        return False

    def norm(text: str) -> str:
        text = text.strip().casefold()
        at = text.find("projects/")
        return text[at:] if text.startswith("https://") and at >= 0 else text

    return norm(booted) == norm(ref)


def made_from_locked(
    plan: Plan, images: Mapping[str, str | BootImage], outputs: Mapping[str, Any], state_dir: Path
) -> dict[str, str]:
    """Hostname -> content hash, for each node the cluster stack reports as made from its profile's locked image.

    Why the stack's answer and not the plan: a node made before the lock named an image keeps the
    image it was made from until it is replaced; only a node really booted from the baked image
    may skip the install stage. ``nodeImages`` is what the cloud says each instance was made from.
    """
    hashes = image_hashes(plan, images, state_dir)
    refs = {p: (i if isinstance(i, str) else i.ref) for p, i in images.items()}
    booted = output_mapping(dict(outputs), OUT_NODE_IMAGES, "the cluster stack")
    out: dict[str, str] = {}
    for node in plan.nodes:
        digest = hashes.get(node.hardware)
        if digest and same_image(booted.get(node.hostname), refs.get(node.hardware)):
            out[node.hostname] = digest
    return out
