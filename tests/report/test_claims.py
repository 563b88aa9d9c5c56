"""The paper's claims are checked on the measure each is about, with the paired tests."""

from gelus.experiments.presets import PRESETS
from gelus.experiments.selection import run_configs
from gelus.report.claims import check_claims
from test_synthetic import make_records


def test_figure_2_is_judged_on_training_loss_and_holds_when_gelu_trains_lowest():
    records, runs = make_records(seeds=(0, 1, 2, 3, 4))  # GELU lowest on every split by design
    protocol = PRESETS["mnist-classification"].protocol
    (check,) = check_claims("mnist-classification", records, protocol, run_configs(runs))
    assert "training log loss" in check.claim and check.measure.startswith("training log loss")
    assert {c.metric for c in check.comparisons} == {"loss"}
    assert {c.baseline for c in check.comparisons} == {"relu", "elu"}  # the paper's ranking only
    assert check.verdict == "✓ holds"


def test_a_claim_is_contradicted_when_the_other_way_is_significant():
    records, runs = make_records(seeds=(0, 1, 2, 3, 4))
    swapped = [
        r._replace(activation={"gelu": "relu", "relu": "gelu"}.get(r.activation, r.activation))
        for r in records
    ]  # now GELU trains highest
    protocol = PRESETS["mnist-classification"].protocol
    (check,) = check_claims("mnist-classification", swapped, protocol, run_configs(runs))
    assert check.verdict == "✗ contradicted"


def test_the_silu_claim_is_checked_only_when_silu_ran():
    records, runs = make_records(seeds=(0, 1, 2, 3, 4), activations=("gelu", "relu", "elu", "silu"))
    protocol = PRESETS["mnist-classification"].protocol
    checks = check_claims("mnist-classification", records, protocol, run_configs(runs))
    assert [c.claim.startswith("SiLU") for c in checks] == [False, True]
    (silu,) = [c for c in checks if c.claim.startswith("SiLU")]
    assert {c.baseline for c in silu.comparisons} == {"gelu", "relu", "elu"}
