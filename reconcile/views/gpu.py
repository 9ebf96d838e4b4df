"""GPU use, shown: a run's cell (`2 GPU 87% 31/80 GiB`), and for the page a small drawn timeline per run and per
cluster (an inline SVG polyline: no script, no library). Takes the objects a turn carries (state.ray.gpus'
ClusterGpus and RunGpus, reconcile.serve.gpu_window's GpuHistory) by their attributes: views sit below state.ray.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from specs.diagnostics import plain

GIB = 2**30
WIDTH, HEIGHT = 160, 28
PAGE_WINDOW = 1800.0
"""The timelines show the last half hour of the window serve keeps."""


def cell(run: Any) -> str:
    """`2 GPU 87% 31/80 GiB`; `0 GPU` when none of its processes is on a GPU; `? GPU` ... when the use is unknown."""
    if run is None:
        return "-"
    count = len(run.gpus)
    if not count:
        return "0 GPU"
    util = run.utilization
    shown = f"{util:.0f}%" if util is not None else "?%"
    return f"{count} GPU {shown} {run.memory_used / GIB:.0f}/{run.memory_total / GIB:.0f} GiB"


def cells(use: Mapping[str, Any]) -> dict[str, str]:
    """By submission id: the cell of each run the read found; an unknown cluster's runs are not listed (the
    caller says "unknown" for an active run it has no cell for)."""
    return {sid: cell(run) for cluster in use.values() if cluster.known for sid, run in cluster.runs.items()}


def sparkline(points: Sequence[tuple[float, float]], title: str, top: float = 100.0) -> str:
    """An SVG polyline of (time, value) from 0 to `top`, oldest left; a lone point is a short flat line."""
    points = [p for p in points if p[0] >= points[-1][0] - PAGE_WINDOW] if points else []
    if not points:
        return '<span class="muted">no samples yet</span>'
    first, last = points[0][0], points[-1][0]
    span = max(last - first, 1e-9)

    def xy(at: float, value: float) -> str:
        x = 0.0 if len(points) == 1 else (at - first) / span * WIDTH
        y = HEIGHT - max(0.0, min(value, top)) / top * (HEIGHT - 2) - 1
        return f"{x:.1f},{y:.1f}"

    drawn = [xy(at, v) for at, v in points] if len(points) > 1 else [xy(first, points[0][1]), f"{WIDTH},"
                                                                   + xy(first, points[0][1]).split(",")[1]]
    label = escape(plain(title), quote=True)
    return (f'<svg class="spark" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
            f'aria-label="{label}"><title>{label}</title>'
            f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#f4f4f4"/>'
            f'<polyline fill="none" stroke="#2a7" stroke-width="1.5" points="{" ".join(drawn)}"/></svg>')


def section(report: Any) -> str:
    """The page's "GPU use" part: per cluster GPUs held, busy and a timeline of their mean use; per active run
    its cell and timeline. Empty when the turn read no GPU use (no run active)."""
    use, history = report.gpu_use, report.gpu_history
    if not use:
        return ""
    rows = []
    for name, cluster in sorted(use.items()):
        held = sum(report.gpus_held.get(name, {}).values())
        if not cluster.known:
            rows.append((_e(name), f"{held:g}", "unknown", f'<span class="muted">{_e(cluster.problem)}</span>'))
            continue
        samples = [(s.at, s.utilization) for s in _of(history, "clusters", name) if s.utilization is not None]
        rows.append((_e(name), f"{held:g}", f"{cluster.busy} of {len(cluster.gpus)}",
                     sparkline(samples, f"cluster {name}: mean GPU use, last 30 min")))
    parts = [_table("GPU use per cluster", ("Cluster", "GPUs held", "GPUs busy", "Mean use, last 30 min"), rows)]
    runs = [(sid, run) for cluster in use.values() if cluster.known for sid, run in sorted(cluster.runs.items())
            if run.workspace == report.workspace]
    if runs:
        parts.append(_table("GPU use per run", ("Job", "Run", "GPU use", "Use, last 30 min"), [
            (_e(run.job), f"<code>{_e(sid)}</code>", _e(cell(run)),
             sparkline(_of(history, "runs", sid), f"run {sid}: mean GPU use, last 30 min")) for sid, run in runs]))
    return "\n".join(parts)


def _of(history: Any, kind: str, key: str) -> tuple:
    return getattr(history, kind, {}).get(key, ()) if history is not None else ()


def _table(title: str, head: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    header = "".join(f"<th>{cell}</th>" for cell in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<h2>{_e(title)}</h2><table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"


def _e(value: object) -> str:
    return escape(plain(str(value)), quote=True)
