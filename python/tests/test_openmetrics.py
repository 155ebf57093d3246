"""gpuscope's OpenMetrics output read by Prometheus's own parser
(`prometheus_client`): the installed `gpuscope report` command renders a
report file of the repository's test data. CI installs the parser in its
virtual environment and sets GPUSCOPE_CI=1, where a missing parser fails the
test instead of skipping it."""

import json
import os
import subprocess
import unittest
from pathlib import Path

from gpuscope import _native

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"

try:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
except ImportError:
    text_string_to_metric_families = None


class OpenMetrics(unittest.TestCase):
    def setUp(self):
        if text_string_to_metric_families is None:
            if os.environ.get("GPUSCOPE_CI") == "1":
                self.fail("prometheus_client is not installed in CI's environment")
            self.skipTest("prometheus_client is not installed (pip install prometheus_client)")

    def test_the_text_is_read_by_the_prometheus_parser_with_the_report_s_values(self):
        report = DATA / "schema1-trace.json"
        text = subprocess.run([str(_native.command_path()), "report", str(report), "--format", "openmetrics"],
                              capture_output=True, text=True, check=True).stdout
        samples = {}
        types = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                key = (s.name, tuple(sorted(s.labels.items())))
                samples[key] = s.value
                types[s.name] = family.type
        data = json.loads(report.read_text())
        # One series per kernel (labelled with its display name), the
        # report's launches.
        launches = {labels: v for (name, labels), v in samples.items() if name == "gpuscope_kernel_launches_total"}
        self.assertEqual(len(launches), len(data["kernels"]))
        self.assertEqual(sum(launches.values()), sum(k["launches"] for k in data["kernels"]))
        fused = next(k for k in data["kernels"] if k["name"] == "softmax_fused")
        self.assertEqual(launches[(("kernel", "softmax_fused"),)], fused["launches"])
        self.assertEqual(types["gpuscope_kernel_launches_total"], "counter")
        train = next(g for g in data["ranges"] if [f["name"] for f in g["path"]["frames"]] == ["train"])
        wall = samples[("gpuscope_range_wall_seconds_total", (("path", "train"),))]
        self.assertAlmostEqual(wall, train["wall_ns"] / 1e9, places=12)
        self.assertTrue(any(name == "gpuscope_range_gpu_utilization_ratio" for name, _ in samples), samples.keys())
        self.assertEqual(types["gpuscope_range_gpu_utilization_ratio"], "gauge")


if __name__ == "__main__":
    unittest.main()
