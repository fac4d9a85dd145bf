"""The render's one Jinja environment over ``templates/``, and ``render_template`` for everything else.

Every file clusterctl generates comes from a template here: the build directory (`tree`,
`burst`, `cloud`, `health`), the verify report's HTML, the burst README and the topology.conf of
a discovered fabric. Each value goes through its format's filter (`clusterctl.render.escape`);
``*.html.j2`` templates are autoescaped.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, Template, pass_eval_context, select_autoescape
from jinja2.nodes import EvalContext

from clusterctl.catalog.compat import at_least
from clusterctl.paths import templates_dir
from clusterctl.render.escape import FILTERS, RenderError, finalize


class _Template(Template):
    """A template whose escaping errors name the template line they come from."""

    def render(self, *args: Any, **kwargs: Any) -> str:
        try:
            return super().render(*args, **kwargs)
        except RenderError as exc:
            raise exc.located(f"templates/{self.name}", _template_line(exc, self)) from None


def _template_line(exc: BaseException, template: Template) -> str:
    """The template line that raised ``exc`` (Jinja rewrites the traceback to template lines)."""
    line = 0
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == template.filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    if not line or template.filename is None:
        return ""
    source = Path(template.filename).read_text().splitlines()
    text = source[line - 1].strip() if line <= len(source) else ""
    return f"line {line} `{text[:100]}`"


@pass_eval_context
def _finalize(eval_ctx: EvalContext, value: Any) -> Any:
    """`escape.finalize` for every format but HTML, which Jinja escapes itself (a line break there is white space)."""
    return value if eval_ctx.autoescape else finalize(value)


@functools.cache
def jinja_env() -> Environment:
    """The render's one Jinja environment: every plan value goes through its format's filter.

    ``finalize`` refuses any string a template writes unescaped if it could start a new line,
    so a template that forgets a filter still cannot break its file. Built once per process:
    compiling the templates costs ten times more than rendering them.
    """
    env = Environment(
        loader=FileSystemLoader(str(templates_dir())),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        # HTML's escaping is Jinja's own (markupsafe): every value of an *.html.j2 template is text.
        autoescape=select_autoescape(enabled_extensions=("html.j2",), default_for_string=False, default=False),
        finalize=_finalize,
    )
    env.template_class = _Template
    env.filters["at_least"] = at_least
    env.filters.update(FILTERS)
    return env


def render_template(name: str, **context: Any) -> str:
    """Render one template of ``templates/`` (a report page, a README) through the one environment.

    Why here: every text clusterctl generates comes from a template and its format's escaping
    (the filters of `clusterctl.render.escape`; HTML autoescaped), never from Python strings.

    Raises:
        RenderError: a value the template's format cannot carry.
    """
    return jinja_env().get_template(name).render(**context)
