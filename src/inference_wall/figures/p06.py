"""Part 6's own figure (Altair, the book's theme); its others are the variant parts' (figures.variants)."""
from __future__ import annotations

import altair as alt
import pandas as pd

from .. import figures
from .variants import key_color


def bytes_per_gpu(predicted: pd.DataFrame) -> alt.Chart:
    """Before any run: the weight bytes each GPU streams per decode step in each configuration (p06.predicted_bytes),
    one bar each, coloured as the part's other figures."""
    return alt.Chart(predicted.assign(format=predicted["config"])).mark_bar().encode(
        y=alt.Y("label:N", title=None, sort=list(predicted["label"]), axis=alt.Axis(labelLimit=320)),
        x=alt.X("gb_per_gpu:Q", title="bytes each GPU reads per decode step (GB)"),
        color=key_color(list(predicted["config"]), "Configuration"),
        tooltip=[figures.tip("label:N", "Configuration"), figures.tip("gpus", "GPUs", figures.COUNT),
                 figures.tip("engines", "Engines", figures.COUNT), figures.tip("gb_per_gpu", "GB per GPU per step")],
    ).properties(width=360, height=alt.Step(28))
