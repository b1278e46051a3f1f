"""The distributed section of the portability report, from the counters the process groups keep."""
import json

import pytest

from localneuron.distributed import report, stats


def test_collect_and_render_count_calls_bytes_and_time():
    stats.reset()
    stats.record_issue("all_reduce", 4 << 20, 0.001)
    stats.record_issue("all_reduce", 4 << 20, 0.001)
    stats.record_time("all_reduce", 0.25)
    stats.record_issue("barrier", 0, 0.0001)
    data = report.collect()
    json.dumps(data)  # JSON-able, for the per-rank files
    assert data["collectives"]["all_reduce"] == {"calls": 2, "bytes": 8 << 20, "seconds": 0.25,
                                                 "estimated_seconds": pytest.approx(0.002)}
    assert data["total"] == {"calls": 3, "bytes": 8 << 20, "seconds": 0.25, "estimated_seconds": pytest.approx(0.0021)}
    lines = report.render(data)
    assert lines[0].startswith("Collectives (neuron process groups, gloo transport): 3 calls, 8.00 MiB")
    assert lines[0].endswith("estimated on Trainium 2.10 ms (cost model)")
    assert any(line.split()[:3] == ["all_reduce", "2", "calls"] for line in lines[1:])
    stats.reset()
    assert report.render(report.collect()) == []  # no section in the report of a run without collectives
