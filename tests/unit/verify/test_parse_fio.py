"""parse_fio_json on real fio 3.33 JSON written on the build machine (see data/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.verify.parsers.fio import parse_fio_json
from clusterctl.verify.result import ParseError

DATA = Path(__file__).parent / "data"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def test_sequential_write_then_read() -> None:
    result = parse_fio_json(_read("fio_seq_write_read.json"))

    assert result.fio_version == "fio-3.33"
    write, read = result.jobs
    assert (write.name, write.group_id, write.error) == ("seq-write", 0, 0)
    assert (read.name, read.group_id, read.error) == ("seq-read", 1, 0)
    assert write.write.bw_bytes == 475949390
    assert write.write.bw_bytes // 1024 == 464794  # fio's "bw", in KiB/s
    assert write.write.io_bytes == 64 << 20
    assert write.read.bw_bytes == 0
    assert read.read.bw_bytes == 1016800969
    assert read.options == {"rw": "read"}
    assert (result.read_bw_bytes, result.write_bw_bytes) == (1016800969, 475949390)
    assert result.failed_jobs == ()


def test_mixed_random_job() -> None:
    result = parse_fio_json(_read("fio_randrw.json"))

    (job,) = result.jobs
    assert job.name == "randrw"
    assert (job.read.bw_bytes, job.write.bw_bytes) == (65909932, 28344089)
    assert job.read.iops == pytest.approx(16091.292135)
    assert job.options["rwmixread"] == "70"


def test_job_error_with_fio_message_before_the_json() -> None:
    text = _read("fio_write_dev_full_enospc.json")
    assert text.startswith("fio: pid=")

    result = parse_fio_json(text)

    (job,) = result.failed_jobs
    assert (job.name, job.error) == ("write-to-dev-full", 28)
    assert result.write_bw_bytes == 0


def test_groups_run_in_parallel_add_up() -> None:
    text = _read("fio_seq_write_read.json").replace('"groupid" : 1', '"groupid" : 0')

    result = parse_fio_json(text)

    assert result.read_bw_bytes == 1016800969
    assert result.write_bw_bytes == 475949390
    assert len({job.group_id for job in result.jobs}) == 1


def test_truncated_json_reports_its_line() -> None:
    lines = _read("fio_randrw.json").splitlines()[:40]

    with pytest.raises(ParseError) as caught:
        parse_fio_json("\n".join(lines))

    assert caught.value.line_no == 40
    assert caught.value.line == lines[39]
    assert "malformed fio JSON" in caught.value.message


def test_not_json_and_no_jobs() -> None:
    with pytest.raises(ParseError) as normal_output:
        parse_fio_json("seq-read: (g=0): rw=read, bs=(R) 1024KiB-1024KiB\nRun status group 0 (all jobs):\n")
    with pytest.raises(ParseError) as no_jobs:
        parse_fio_json('{\n  "fio version" : "fio-3.33",\n  "jobs" : []\n}\n')

    assert normal_output.value.line_no == 2
    assert no_jobs.value.line_no == 1


def test_malformed_value() -> None:
    text = _read("fio_randrw.json").replace('"groupid" : 0', '"groupid" : "first"')

    with pytest.raises(ParseError, match="malformed value") as caught:
        parse_fio_json(text)

    assert caught.value.line_no == 1
