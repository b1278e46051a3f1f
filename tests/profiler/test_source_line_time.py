"""The portability report's estimated device time by source line (on by default, sampled on the axis of
estimated device time; LOCALNEURON_SOURCE_TIME_SAMPLE_NS=0 credits every op exactly)."""
import json
import math

from cli_runner import lines_of, localneuron, write

JOB = """
    import torch
    a = torch.randn(96, 96, device="neuron")
    w = torch.randn(96, 96, device="neuron", requires_grad=True)
    double = torch.compile(lambda t: t * 2 + 1, backend="neuron")  # COMPILED

    def heavy(t):
        return t @ t                                  # MATMUL

    for step in range(STEPS):
        h = heavy(a)                                  # CALLER
        s = a + 1                                     # ADD
        d = double(a)                                 # GRAPH
        loss = (w * a).sum()                          # FORWARD
        loss.backward()                               # BACKWARD
"""


def run(tmp_path, steps: int, gap_ns: int | None):
    script = write(tmp_path / "job.py", JOB.replace("STEPS", str(steps)))
    out = tmp_path / "report.json"
    env = {} if gap_ns is None else {"LOCALNEURON_SOURCE_TIME_SAMPLE_NS": str(gap_ns)}
    r = localneuron("run", "--json", str(out), str(script), env=env)
    assert r.returncode == 0, r.stderr
    return script, json.loads(out.read_text()), r.stdout


def test_every_op_credited_exactly_to_the_line_that_issued_it(tmp_path):
    script, data, stdout = run(tmp_path, 5, 0)
    line = lines_of(script, "# MATMUL", "# CALLER", "# COMPILED", "# GRAPH", "# BACKWARD")
    by_line = data["estimated_device_seconds_by_source_line"]
    by_op = data["estimated_device_seconds_by_op"]
    site = lambda name: f"{script}:{line[name]}"  # noqa: E731
    calls = [data[k] for k in ("native_ops", "native_ops_computed_in_32bit", "cpu_fallback_ops", "view_ops")]
    whole_ns = 1e-9 * sum(n for ops in calls for n in ops.values())  # each call's estimate is kept in whole ns

    assert math.isclose(by_line[f"{site('# MATMUL')} in heavy <- {site('# CALLER')} in <module>"],
                        by_op["aten::mm"], abs_tol=1e-9 * data["native_ops"]["aten::mm"])
    graphs = data["compile"]["estimated_device_seconds_by_graph"]
    assert math.isclose(by_line[f"{site('# COMPILED')} in <lambda> <- {site('# GRAPH')} in <module>"], sum(g["estimated_seconds"] for g in graphs.values()),
                        abs_tol=1e-9 * sum(g["calls"] for g in graphs.values()))
    # the autograd engine's thread has no Python caller: its ops go to the line that called backward()
    backward = by_line[f"{site('# BACKWARD')} in <module> (backward)"]
    assert backward > 0 and f"{site('# BACKWARD')} in <module>" in by_line  # the seed gradient: issued on the line
    device = data["estimated_device_seconds"]
    assert math.isclose(sum(by_line.values()), device["eager_ops"] + device["compiled_graphs"],
                        abs_tol=whole_ns + 1e-9 * sum(g["calls"] for g in graphs.values()))
    assert "by source line (every op):" in stdout and f"{site('# BACKWARD')} in <module> (backward)" in stdout


def test_sampled_by_default_and_the_credit_matches_the_total(tmp_path):
    gap_ns = 2000
    script, data, stdout = run(tmp_path, 10, gap_ns)
    line = lines_of(script, "# MATMUL", "# ADD")
    by_line = data["estimated_device_seconds_by_source_line"]
    device = data["estimated_device_seconds"]
    total = device["eager_ops"] + device["compiled_graphs"]
    samples = total / (gap_ns * 1e-9)
    assert samples > 400  # so five standard deviations of the Poisson count are under 25%
    assert abs(sum(by_line.values()) - total) < 5 * math.sqrt(samples) * gap_ns * 1e-9
    assert all(round(seconds / (gap_ns * 1e-9), 6).is_integer() for seconds in by_line.values())  # whole samples
    assert any(f":{line['# MATMUL']} in heavy" in site for site in by_line)
    assert "by source line (sampled, one sample per 2 us of device time on average):" in stdout
    assert data["source_line_sample_gap_ns"] == gap_ns


DEEP_JOB = """
    import sys
    import torch
    sys.setrecursionlimit(10_000)
    x = torch.zeros(16, device="neuron")

    def deep(n, x):
        if n == 0:
            for _ in range(20_000):
                x = x + 1                             # ADD
            return x
        return deep(n - 1, x)

    deep(300, x)
"""


def test_the_default_gap_widens_where_samples_are_costly_and_an_explicit_gap_is_kept(tmp_path):
    """Each sample walks 300 frames: with the default gap the sampler takes fewer samples, each crediting the
    wider mean it was drawn with, and the credit still matches the total; a gap set explicitly is kept."""
    script = write(tmp_path / "deep.py", DEEP_JOB)
    reports = {}
    for name, gap in (("default", ""), ("explicit", "100000")):
        out = tmp_path / f"{name}.json"
        r = localneuron("run", "--json", str(out), str(script), env={"LOCALNEURON_SOURCE_TIME_SAMPLE_NS": gap})
        assert r.returncode == 0, r.stderr
        reports[name] = json.loads(out.read_text()), r.stdout
    for name, (data, stdout) in reports.items():
        assert data["source_line_sample_gap_ns"] == 100_000
        total = data["estimated_device_seconds"]["eager_ops"]
        credited, samples = sum(data["estimated_device_seconds_by_source_line"].values()), data["source_line_samples"]
        mean = credited / samples
        # a run's gaps widen early and then stay: most samples credit the widest mean, about twice the average
        assert abs(credited - total) < 5 * 2 * math.sqrt(samples) * mean
        widened = "the gap widens under deep Python stacks" in stdout
        if name == "default":
            assert samples < 0.5 * total / 100e-6 and widened
        else:
            assert samples > 0.8 * total / 100e-6 and not widened
