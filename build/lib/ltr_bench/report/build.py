"""Write the whole report for a set of fold runs into one folder.

Files (``<slug>`` = ``<protocol>_<eval>_<dataset>_<metric key>``)::

    report.md                    everything below in one Markdown page, plus the notes
    table1.{md,csv,tex}          Table 1 layout (models x datasets x metrics, mean(SE))
    table3.{md,csv,tex}          Table 3 layout (run times)
    pvalues/<slug>.{csv,png}     corrected t-test p-values between every pair of models
    cd/<slug>.png                critical-difference diagram (Friedman / Nemenyi)
    friedman_nemenyi.md          text summary of the Friedman / Nemenyi results
    fold_runs.csv                the fold runs used (run ids and values), for traceability
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ltr_bench import tracking_keys as tk
from ltr_bench.errors import UserError
from ltr_bench.report import plots, tables
from ltr_bench.report.collect import FoldRuns
from ltr_bench.report.significance import compare, friedman_summary
from ltr_bench.stats import MISSING

LEGEND = (
    f"mean(SE) over folds: the SE's two significant digits in units of the mean's last digit; "
    f"bold = best in the column; {tables.PARTIAL_MARK} = fewer folds than the other models; "
    f"{MISSING} = not tracked."
)


@dataclass
class Report:
    """What :func:`build_report` wrote."""

    out: Path
    table1_markdown: str
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_metrics(runs: FoldRuns, metrics: list[str], split: str) -> None:
    """UserError naming the metrics asked for that no fold run logged."""
    have = set(runs.metric_keys())
    missing = [m for m in metrics if tk.metric_key(split, m) not in have]
    if missing:
        known = sorted(tk.metric_name(k)[1] for k in have if k.startswith(f"{split}/"))
        raise UserError(
            f"--metrics {' '.join(missing)}: not logged on the {split} split by any fold run of "
            f"experiment {runs.experiment_name!r} (logged: {', '.join(known) or 'none'})."
        )


def build_report(
    runs: FoldRuns, out: str | Path, metrics: list[str], split: str = "test", alpha: float = 0.05
) -> Report:
    """Compute tables, tests and figures from ``runs`` and write them into ``out``."""
    check_metrics(runs, metrics, split)
    out = Path(out)
    (out / "pvalues").mkdir(parents=True, exist_ok=True)
    (out / "cd").mkdir(parents=True, exist_ok=True)
    frame = runs.frame
    report = Report(out=out, table1_markdown="", notes=list(runs.notes))
    files = report.files

    def write(name: str, text: str) -> Path:
        path = out / name
        path.write_text(text, encoding="utf-8")
        files.append(path)
        return path

    t1 = tables.table1(frame, metrics, split)
    t3 = tables.table3(frame)
    report.table1_markdown = tables.to_markdown(t1)
    for stem, table in (("table1", t1), ("table3", t3)):
        write(f"{stem}.md", tables.to_markdown(table))
        write(f"{stem}.csv", tables.to_csv(table))
        write(f"{stem}.tex", tables.to_latex(table))
    report.notes += t3.notes

    comparisons = compare(frame, metrics, split, alpha)
    figure_lines = []
    for c in comparisons:
        if c.pvalues is not None:
            write(f"pvalues/{c.slug}.csv", c.pvalues.to_csv(index_label="model"))
            png = out / "pvalues" / f"{c.slug}.png"
            plots.pvalue_heatmap(c.pvalues, c.diffs, f"Corrected t-test p-values: {c.title}", alpha, png)
            files.append(png)
            figure_lines.append(f"- p-values, {c.title}: [pvalues/{c.slug}.png](pvalues/{c.slug}.png)")
        if c.friedman is not None:
            png = out / "cd" / f"{c.slug}.png"
            plots.cd_diagram(c.friedman, f"Critical difference: {c.title}", png)
            files.append(png)
            figure_lines.append(f"- CD diagram, {c.title}: [cd/{c.slug}.png](cd/{c.slug}.png)")
        report.notes += [f"{c.title}: {n}" for n in c.notes]
    summary = friedman_summary(comparisons)
    write("friedman_nemenyi.md", summary)
    write("fold_runs.csv", frame.to_csv(index=False))

    page = [
        f"# Results report: experiment {runs.experiment_name!r}",
        "",
        f"{len(frame)} fold runs ({tk.TAG_ROLE}={tk.ROLE_FOLD}); metrics on the {split} split; "
        f"alpha = {alpha}.",
        "",
        "## Table 1",
        "",
        report.table1_markdown,
        LEGEND,
        "",
        "## Table 3: run times",
        "",
        tables.to_markdown(t3),
        "## Figures",
        "",
        *(figure_lines or ["- none (fewer than 2 models everywhere)"]),
        "",
        summary.replace("# Friedman", "## Friedman", 1).replace("\n## ", "\n### "),
        "## Notes",
        "",
        *([f"- {n}" for n in report.notes] or ["- none"]),
        "",
    ]
    write("report.md", "\n".join(page))
    return report
