"""Pulumi entry point of the clusterctl image program: one baked node image (builder, capture, done).

The components live in clusterctl_image.py (built from ../aws, ../gcp, ../azure); inputs and
output keys shared by all programs in ../common/clusterctl_stack.py.
"""

import sys
from pathlib import Path

# The program's own folder and ../common are not packages on sys.path when Pulumi runs it.
HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent / "common"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from clusterctl_image import deploy  # noqa: E402
from clusterctl_stack import load_inputs  # noqa: E402

deploy(load_inputs())
