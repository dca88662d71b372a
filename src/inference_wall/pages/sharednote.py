"""The line a part's page shows under its figures when some of its points were measured beside another run: two runs
on one machine measure each other's load, and each point records the other runs' servers it saw (its manifest's
`shared_with`, written by the sweep)."""
from __future__ import annotations

from pathlib import Path

from ..records.store import iter_points, part_name
from ..schema import PARTS


def shared_points(part, data_dir: Path | None = None, rigs: list[str] | None = None) -> list[tuple[str, str, list]]:
    """(rig, point, the other runs it recorded) for each complete point of the part measured beside another run."""
    return [(rig, point.name, m["shared_with"]) for _, rig, point, m in iter_points(data_dir, part)
            if (rigs is None or rig in rigs) and m.get("shared_with")]


def _other(run: dict) -> str:
    return f"part {run['part']} on rig {run['rig']}" if run.get("part") and run.get("rig") else "another run"


def shared_note(part, data_dir: Path | None = None, rigs: list[str] | None = None) -> str | None:
    """A Markdown line naming the shown rigs' points measured beside another run, and with which; None if none."""
    found = shared_points(part, data_dir, rigs)
    if not found:
        return None
    number = next(n for n, name in PARTS.items() if name == part_name(part))
    items = ", ".join(f"{rig} {name} (beside {', '.join(sorted({_other(r) for r in others}))})"
                      for rig, name, others in found)
    return (f"**Measured beside another run:** {items}: another run served on the same machine while these points "
            f"were measured, so their numbers may hold its load. To measure them alone, remove their folders and "
            f"run `make reproduce PART={number} RIG=<rig>` with nothing else running.")
