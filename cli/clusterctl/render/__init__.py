"""Renderers: pure functions from a ``Plan`` to the files of the build directory.

``render_files(plan)`` returns every file (path, text, mode) without touching the disk;
``write_tree`` (``builddir``) writes them, never outside the build directory. One Jinja
environment over ``templates/`` (StrictUndefined, sorted iteration) so the same plan always
gives a byte-identical tree.
"""

from clusterctl.render.builddir import BuildDirError, write_tree
from clusterctl.render.tree import RenderedFile, render_files

__all__ = ["BuildDirError", "RenderedFile", "render_files", "write_tree"]
