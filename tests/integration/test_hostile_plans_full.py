"""Every payload in every string field of the plans of five examples (the unit phase gives each
field a share of them: tests/security/test_hostile_plans.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.security.test_hostile_plans import CASES, check_plan_field, pattern, payloads_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize(("example", "path"), CASES, ids=[f"{e}:{pattern(p)}" for e, p in CASES])
def test_every_payload_in_each_plan_field(example: str, path: tuple[Any, ...], tmp_path: Path) -> None:
    check_plan_field(example, path, payloads_for(0, full=True), tmp_path)
