"""The papers' table layouts built from fold runs, rendered as Markdown, CSV and LaTeX.

- Table 1: models x datasets x metrics, mean(SE) over folds, best per column marked.
- Table 3: run times per model (reading data, training, evaluating), mean(SE) over folds.

A :class:`Table` holds numbers (mean, SE, fold count) and marks; the renderers only format, so
Markdown, CSV and LaTeX always agree.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ltr_bench import tracking_keys as tk
from ltr_bench.stats import MISSING, format_mean_se, mean_se

PARTIAL_MARK = "†"  # appended to cells averaged over fewer folds than the others
TIME_LABELS = {
    tk.TIME_READ: "Read data [s]",
    tk.TIME_FIT: "Train model [s]",
    tk.TIME_EVAL: "Evaluate [s]",
}


def metric_label(name: str) -> str:
    """Display name of a metric: ``ndcg@10 -> NDCG@10``, ``map -> MAP``."""
    return name.upper()


def setting_label(protocol: str, eval_name: str) -> str:
    """How a (protocol, eval) pair is shown: ``letor_folds/paper``."""
    return f"{protocol}/{eval_name}"


@dataclass
class Table:
    """A table of mean(SE) cells with row labels and (group, column) headers.

    ``mean``, ``se``, ``n``, ``best`` and ``partial`` are ``[rows, columns]`` arrays; a group of
    ``""`` means the column has no group header.
    """

    caption: str
    index_names: list[str]
    index: list[tuple[str, ...]]
    columns: list[tuple[str, str]]
    mean: np.ndarray
    se: np.ndarray
    n: np.ndarray
    best: np.ndarray
    partial: np.ndarray
    marks_best: bool = True
    notes: list[str] = field(default_factory=list)

    def cell(self, i: int, j: int) -> str:
        """The formatted cell ``mean(SE)``, ``–`` when missing, with the partial-folds mark."""
        text = format_mean_se(self.mean[i, j], self.se[i, j])
        if text != MISSING and self.partial[i, j]:
            text += PARTIAL_MARK
        return text

    def column_names(self) -> list[str]:
        return [f"{g} {c}".strip() for g, c in self.columns]

    def frame(self) -> pd.DataFrame:
        """The formatted cells as a DataFrame (rows = index tuples, columns = ``group col``)."""
        cells = [
            [self.cell(i, j) for j in range(len(self.columns))] for i in range(len(self.index))
        ]
        idx = pd.MultiIndex.from_tuples(self.index, names=self.index_names)
        return pd.DataFrame(cells, index=idx, columns=self.column_names())


# --------------------------------------------------------------------------- builders


def _settings(frame: pd.DataFrame) -> list[tuple[str, str]]:
    return sorted(frame[["protocol", "eval"]].drop_duplicates().itertuples(index=False, name=None))


def _stats(values: pd.Series) -> tuple[float, float, int]:
    return mean_se(values.to_numpy(dtype=float))


def table1(frame: pd.DataFrame, metrics: list[str], split: str = "test") -> Table:
    """Table 1 layout from fold runs (``collect.FoldRuns.frame``): one row per (setting, model),
    one column per (dataset, metric); the best mean per column and setting is marked when at
    least two models have a value."""
    settings = _settings(frame)
    datasets = sorted(frame["dataset"].unique())
    columns = [(d, metric_label(m)) for d in datasets for m in metrics]
    keys = [tk.metric_key(split, m) for m in metrics]
    index: list[tuple[str, ...]] = []
    blocks: list[tuple[int, int]] = []  # row ranges of each setting
    cells = []
    for protocol, eval_name in settings:
        sub = frame[(frame["protocol"] == protocol) & (frame["eval"] == eval_name)]
        start = len(index)
        for model in sorted(sub["model"].unique()):
            runs = sub[sub["model"] == model]
            index.append((setting_label(protocol, eval_name), model))
            row = []
            for d in datasets:
                rd = runs[runs["dataset"] == d]
                for key in keys:
                    row.append(_stats(rd[key]) if key in rd else (np.nan, np.nan, 0))
            cells.append(row)
        blocks.append((start, len(index)))
    table = _from_cells(
        caption=f"Table 1 layout: {split} mean(SE) over folds; best per column in bold",
        index_names=["Setting", "Model"],
        index=index,
        columns=columns,
        cells=cells,
    )
    _mark(table, blocks, folds_per_dataset=_fold_counts(frame), settings=settings)
    return table


def table3(frame: pd.DataFrame) -> Table:
    """Table 3 layout: rows (setting, dataset, hardware, time kind), columns models, mean(SE)
    seconds.

    Times depend on the machine, so a cell only averages folds run on the same hardware (the
    ``hardware`` column, from the ``ltr.hardware`` tag): runs on different hardware get rows of
    their own, and the caption and a note name the hardware.
    """
    times = [t for t in TIME_LABELS if t in frame.columns]
    models = sorted(frame["model"].unique())
    if "hardware" not in frame:
        frame = frame.assign(hardware="unknown hardware")
    index: list[Any] = []
    cells: list[Any] = []
    for protocol, eval_name in _settings(frame):
        sub = frame[(frame["protocol"] == protocol) & (frame["eval"] == eval_name)]
        for d in sorted(sub["dataset"].unique()):
            sd = sub[sub["dataset"] == d]
            for hw in sorted(sd["hardware"].unique()):
                sh = sd[sd["hardware"] == hw]
                for t in times:
                    index.append((setting_label(protocol, eval_name), d, hw, TIME_LABELS[t]))
                    cells.append([_stats(sh.loc[sh["model"] == m, t]) for m in models])
    machines = sorted(frame["hardware"].unique())
    table = _from_cells(
        caption="Table 3 layout: run times per fold in seconds, mean(SE) over folds, on "
        + ("; ".join(machines) if len(machines) == 1 else "several machines (rows per hardware)"),
        index_names=["Setting", "Dataset", "Hardware", "Time"],
        index=index,
        columns=[("", m) for m in models],
        cells=cells,
    )
    table.marks_best = False
    # Partial: fewer folds than the most complete model in the same row.
    for i in range(len(index)):
        top = table.n[i].max(initial=0)
        table.partial[i] = (table.n[i] > 0) & (table.n[i] < top)
    if not times:
        table.notes.append("No run times (time_read_s / time_fit_s / time_eval_s) were logged.")
    elif len(machines) == 1:
        table.notes.append(f"Run times (Table 3) come from one machine: {machines[0]}.")
    else:
        table.notes.append(
            f"Run times (Table 3) come from {len(machines)} different machines or thread "
            f"settings and are shown in separate rows, never averaged: {' | '.join(machines)}."
        )
    return table


def _from_cells(caption, index_names, index, columns, cells) -> Table:
    shape = (len(index), len(columns))
    arr = np.array(cells, dtype=float).reshape(shape + (3,)) if index else np.zeros(shape + (3,))
    return Table(
        caption=caption,
        index_names=index_names,
        index=index,
        columns=columns,
        mean=arr[..., 0],
        se=arr[..., 1],
        n=arr[..., 2].astype(int),
        best=np.zeros(shape, dtype=bool),
        partial=np.zeros(shape, dtype=bool),
    )


def _fold_counts(frame: pd.DataFrame) -> dict[tuple[str, str, str], int]:
    """Distinct folds tracked per (setting, dataset), for spotting partial cells."""
    return frame.groupby(["protocol", "eval", "dataset"])["fold"].nunique().to_dict()


def _mark(table: Table, blocks, folds_per_dataset: dict, settings) -> None:
    """Best mean per column within each setting block (>= 2 values), and partial-fold cells."""
    for (lo, hi), (protocol, eval_name) in zip(blocks, settings):
        means = table.mean[lo:hi]
        for j, (dataset, _) in enumerate(table.columns):
            col = means[:, j]
            ok = ~np.isnan(col)
            if ok.sum() >= 2:
                table.best[lo:hi, j] = ok & (col == np.nanmax(col))
            full = folds_per_dataset.get((protocol, eval_name, dataset), 0)
            n = table.n[lo:hi, j]
            table.partial[lo:hi, j] = (n > 0) & (n < full)


# --------------------------------------------------------------------------- renderers


def to_markdown(table: Table, drop_constant_index: bool = True) -> str:
    """GitHub Markdown; best cells in bold; index columns with a single value are dropped."""
    keep = _kept_index_levels(table) if drop_constant_index else list(range(len(table.index_names)))
    header = [table.index_names[k] for k in keep] + table.column_names()
    align = ["---"] * len(keep) + ["---:"] * len(table.columns)
    lines = [_md_row(header), _md_row(align)]
    for i, labels in enumerate(table.index):
        cells = []
        for j in range(len(table.columns)):
            text = table.cell(i, j)
            cells.append(f"**{text}**" if table.marks_best and table.best[i, j] else text)
        lines.append(_md_row([labels[k] for k in keep] + cells))
    return "\n".join(lines) + "\n"


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _kept_index_levels(table: Table) -> list[int]:
    """Index levels that vary (the last level is always kept)."""
    last = len(table.index_names) - 1
    return [
        k
        for k in range(len(table.index_names))
        if k == last or len({labels[k] for labels in table.index}) > 1
    ]


_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX special characters in plain text."""
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)


def to_latex(table: Table, drop_constant_index: bool = True) -> str:
    """A booktabs ``tabular`` (needs ``\\usepackage{booktabs}``); best cells in ``\\textbf``."""
    keep = _kept_index_levels(table) if drop_constant_index else list(range(len(table.index_names)))
    n_idx = len(keep)
    spec = "l" * n_idx + "r" * len(table.columns)
    out = [f"% {table.caption}", f"\\begin{{tabular}}{{{spec}}}", "\\toprule"]
    groups: list[tuple[str, int]] = []
    for g, _ in table.columns:
        if groups and groups[-1][0] == g:
            groups[-1] = (g, groups[-1][1] + 1)
        else:
            groups.append((g, 1))
    if any(g for g, _ in groups):
        parts, rules, col = [""] * n_idx, [], n_idx + 1
        for g, span in groups:
            parts.append(f"\\multicolumn{{{span}}}{{c}}{{{latex_escape(g)}}}")
            if g:
                rules.append(f"\\cmidrule(lr){{{col}-{col + span - 1}}}")
            col += span
        out.append(" & ".join(parts) + " \\\\")
        out.append(" ".join(rules))
    names = [latex_escape(table.index_names[k]) for k in keep]
    out.append(" & ".join(names + [latex_escape(c) for _, c in table.columns]) + " \\\\")
    out.append("\\midrule")
    previous: tuple[str, ...] | None = None
    for i, labels in enumerate(table.index):
        if previous is not None and labels[0] != previous[0]:
            out.append("\\midrule")
        previous = labels
        cells = []
        for j in range(len(table.columns)):
            text = latex_escape(table.cell(i, j).replace(PARTIAL_MARK, "")).replace(MISSING, "--")
            if table.partial[i, j] and not np.isnan(table.mean[i, j]):
                text += "$^\\dagger$"
            cells.append(f"\\textbf{{{text}}}" if table.marks_best and table.best[i, j] else text)
        out.append(" & ".join([latex_escape(labels[k]) for k in keep] + cells) + " \\\\")
    out += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(out) + "\n"


def to_csv(table: Table) -> str:
    """CSV: index columns, then per column the formatted cell and its ``mean``, ``se``, ``n``
    (and ``best`` marker, True/False, when the table marks the best)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    header = list(table.index_names)
    for name in table.column_names():
        header += [name, f"{name} mean", f"{name} se", f"{name} n"]
        if table.marks_best:
            header.append(f"{name} best")
    writer.writerow(header)
    for i, labels in enumerate(table.index):
        row: list[Any] = list(labels)
        for j in range(len(table.columns)):
            row += [
                table.cell(i, j),
                _num(table.mean[i, j]),
                _num(table.se[i, j]),
                int(table.n[i, j]),
            ]
            if table.marks_best:
                row.append(bool(table.best[i, j]))
        writer.writerow(row)
    return buf.getvalue()


def _num(x: float) -> str:
    return "" if np.isnan(x) else repr(float(x))
