"""The per-claim tables of the paper sweep: ratios of times to accuracy, computed by hand."""

import pytest

from bench.claims_report import claims_summary, faster_than_flat, point_claims, write_claims_page


def _rows(model, b, **tta):
    names = {"flat": "Elect-Flat", "dp": "Elect-Flat (DP only)", "c400": "Elect-Cluster 400G",
             "c200": "Elect-Cluster 200G", "ocs": "SiP-OCS", "ring": "SiP-Ring"}
    return [{"model": model, "fabric": names[k], "gpu_bandwidth_gbps": b, "time_to_accuracy_min": v, "k": 1}
            for k, v in tta.items()]


ROWS = (_rows("resnet50", 512, flat=8.0, dp=9.0) +
        _rows("resnet50", 1024, flat=4.0, dp=6.0, c400=10.0, c200=15.0, ocs=5.0, ring=6.0) +
        _rows("megatron", 1024, flat=4.0, c400=20.0, c200=30.0, ocs=8.0, ring=5.0))


def test_each_point_compares_each_sip_fabric_with_its_baselines():
    points = point_claims(ROWS)
    resnet = points[("resnet50", 1024)]
    # SiP-OCS 5.0, SiP-Ring 6.0, each on its own: 10/5 and 10/6, 15/5 and 15/6; ring/OCS 6/5; at B
    # over Elect-Flat at B/2 (8.0) 5/8 and 6/8; pure DP over hybrid 6/4.
    assert resnet == {"cluster400_ocs": 2.0, "cluster400_ring": pytest.approx(10 / 6), "cluster200_ocs": 3.0,
                      "cluster200_ring": 2.5, "ring_ocs": pytest.approx(1.2), "flat_half_ocs": pytest.approx(0.625),
                      "flat_half_ring": 0.75, "dp_hybrid": 1.5}
    megatron = points[("megatron", 1024)]
    assert (megatron["cluster400_ocs"], megatron["cluster400_ring"], megatron["dp_hybrid"],
            megatron["flat_half_ring"]) == (2.5, 4.0, None, None)


def test_the_summary_spans_every_model_and_the_page_lists_both_setups(tmp_path):
    summary = dict((claim, (paper, default)) for claim, paper, default in claims_summary(ROWS, ROWS))
    cluster = summary["Elect-Cluster 400G over SiP-Ring (paper: 1.3–9.1×)"]
    assert cluster[0] == cluster[1] == "1.67 to 4.00 (resnet50 1.67 to 1.67; megatron 4.00 to 4.00)"
    # The hybrid claim is the paper's at Tb/s bandwidths: 512 Gb/s (9/8) is left out.
    assert summary["Pure DP over the best hybrid on Elect-Flat (paper: up to 2×)"][1].startswith("1.50 to 1.50")
    write_claims_page({"gpus": 1024, "when": "2026-12-05", "rows": ROWS},
                      {"gpus": 1024, "when": "2026-12-05", "rows": ROWS}, tmp_path)
    page = (tmp_path / "sipml-claims.md").read_text()
    assert "| megatron | — / — | 2.50 / 2.50 |" in page
    assert "- default setup: no fabric beats Elect-Flat at any point." in page


def test_a_fabric_faster_than_elect_flat_is_reported():
    rows = _rows("resnet50", 1024, flat=4.0, ocs=5.0, ring=3.0) + _rows("resnet50", 2048, flat=2.0, ring=2.0)
    assert faster_than_flat(rows) == [("resnet50", "SiP-Ring", 1024, 0.75)]
