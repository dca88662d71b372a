"""Frozen predictions (data/predictions/<gpu>.csv): what the step model said about a GPU before that GPU was
measured, written once by scripts/freeze-prediction.py."""
import pytest

from inference_wall.errors import UserError
from inference_wall.parts import predict


@pytest.fixture(scope="module")
def h100_rows():
    return predict.prediction_rows("h100-sxm")


def test_a_prediction_states_every_quantity_the_validation_compares_for_each_model(h100_rows):
    four = h100_rows[h100_rows["model"] == "4B"]
    assert set(four["quantity"]) >= {"single stream", "decode ceiling", "KV admission", "decode step",
                                     "decode step, async scheduling off", "flood output",
                                     "added sequence stops paying"}
    assert sorted(four[four["quantity"] == "decode step"]["batch"]) == list(predict.FROZEN_BATCHES)
    assert sorted(four[four["quantity"] == "flood output"]["cap"]) == list(predict.FROZEN_CAPS)
    # the admission at the series' utilization and at the one the rig's own starts logged
    assert len(four[four["quantity"] == "KV admission"]["utilization"].unique()) == 2
    assert (h100_rows["predicted"] > 0).all() and h100_rows["predicted"].notna().all()
    # a flood never runs more sequences than the model admits
    adm = four[(four["quantity"] == "KV admission") & (four["utilization"] == 0.9)]["predicted"].iloc[0]
    assert (four[four["quantity"] == "flood output"]["batch"] <= adm).all()


def test_a_gpu_without_a_datasheet_row_is_refused_by_name():
    with pytest.raises(UserError, match="no datasheet row 'h101'"):
        predict.prediction_rows("h101")
