"""The whole hostile-spec corpus: every payload in every string field of both examples, in turn.

The unit phase (tests/security/test_hostile_specs.py) puts Jinja into each field in turn and
each payload into all fields at once; this runs the full matrix (a few minutes: each spec is
loaded, validated and, when accepted, rendered, run and templated by Ansible).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.security.corpus import PAYLOADS, FieldPath, dotted
from tests.security.test_hostile_specs import EXAMPLES, check_field, fields

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CASES = [(example, path) for example in EXAMPLES for path in fields(example)]


@pytest.mark.parametrize(("example", "path"), CASES, ids=[f"{e}:{dotted(p)}" for e, p in CASES])
def test_every_payload_in_each_field(example: str, path: FieldPath, tmp_path: Path) -> None:
    problems = check_field(example, path, list(PAYLOADS), tmp_path)
    assert not problems, "\n".join(problems)
