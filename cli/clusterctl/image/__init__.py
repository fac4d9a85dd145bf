"""Baked node images: one per hardware profile, content-addressed, recorded in ``clusterctl.lock``.

- :mod:`clusterctl.image.hash`: what an image of a profile is made of, and its content hash;
- :mod:`clusterctl.image.lock`: the lock file beside the spec (read, write, check against a plan);
- :mod:`clusterctl.image.drift`: a node's installed packages against the lock;
- :mod:`clusterctl.image.build`: build (or reuse) the images of a spec on a target, write the lock;
- :mod:`clusterctl.image.local`: the local target (Docker images from the local provider's base image).
"""

from __future__ import annotations

IMAGE_FORMAT = 2
"""The image format: bump it when what an image holds or how it is captured changes (every hash changes)."""

# Labels of a baked image (and so of every container made from it): the providers read them too.
from clusterctl.run.docker import LABEL_ARCH, LABEL_FORMAT, LABEL_HASH, LABEL_OS, LABEL_PROFILE  # noqa: E402

__all__ = ["IMAGE_FORMAT", "LABEL_ARCH", "LABEL_FORMAT", "LABEL_HASH", "LABEL_OS", "LABEL_PROFILE"]
