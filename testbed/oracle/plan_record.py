"""The circuits or lightpaths an optical fabric's plans give each GPU pair, as a record a user can
read (JSON) and see (one heat map per plan): what explains a prediction on SiP-OCS and SiP-Ring."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from testbed.network.flow_model import FlowModel

# Resources that join two GPUs directly: ("circuit", i, j) on SiP-OCS, ("lightpath", i, j) on SiP-Ring.
PAIR_LINKS = ("circuit", "lightpath")


def pair_links_gbps(model: FlowModel) -> dict[tuple[int, int], float]:
    """Gb/s of the direct link from GPU i to GPU j in one plan (pairs without one relay)."""
    return {(r[1], r[2]): bps / 1e9 for r, bps in model.capacity_bps.items()
            if len(r) == 3 and r[0] in PAIR_LINKS and bps > 0}


def plans_json(plans: Sequence[tuple[float, FlowModel]], hosts: int) -> dict[str, Any]:
    """Every plan of one iteration: when it took over and its links (empty for switched fabrics,
    whose GPUs all reach each other at their port's rate)."""
    return {"hosts": hosts, "plans": [
        {"from_ms": at_s * 1e3, "notes": list(model.notes),
         "links": [{"src": i, "dst": j, "gbps": gbps} for (i, j), gbps in sorted(pair_links_gbps(model).items())]}
        for at_s, model in plans]}


def draw_plans(record: dict[str, Any], title: str, path: str, most: int = 6) -> None:
    """One heat map of Gb/s from each GPU (rows) to each GPU (columns) per plan, the first `most`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    plans = record["plans"][:most]
    n = record["hosts"]
    fig, axes = plt.subplots(1, len(plans), figsize=(4 * len(plans), 4), squeeze=False)
    for ax, plan in zip(axes[0], plans):
        grid = np.zeros((n, n))
        for link in plan["links"]:
            grid[link["src"], link["dst"]] = link["gbps"]
        shown = ax.imshow(grid, cmap="viridis")
        ax.set_title(f"from {plan['from_ms']:.3f} ms")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("to GPU")
        ax.set_ylabel("from GPU")
        fig.colorbar(shown, ax=ax, fraction=0.046, label="Gb/s")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
