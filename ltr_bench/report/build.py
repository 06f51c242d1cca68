"""Write the whole report for a set of fold runs into one folder.

Files (``<slug>`` = ``<protocol>_<eval>_<dataset>_<metric key>``)::

    report.md                    everything below in one Markdown page, plus the notes
    report.html                  the same as one self-contained page (figures embedded), which
                                 the MLflow UI's artifact view renders
    table1.png, table3.png       Table 1 chart (mean +- SE per model and dataset) and run times
    table1.{md,csv,tex}          Table 1 layout (models x datasets x metrics, mean(SE))
    table3.{md,csv,tex}          Table 3 layout (run times)
    pvalues/<slug>.{csv,png}     corrected t-test p-values between every pair of models
    cd/<slug>.png                critical-difference diagram (Friedman / Nemenyi)
    bayes/<slug>.{csv,png}       Bayesian correlated t-test: P(A better), P(equivalent), P(B better)
    per_query/<slug>_fold<k>.{md,csv}  per-query tests on one split and wins/ties/losses against
                                 a baseline (with ``baseline``)
    friedman_nemenyi.md          text summary of the Friedman / Nemenyi results
    fold_runs.csv                the fold runs used (run ids and values), for traceability
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ltr_bench import tracking_keys as tk
from ltr_bench.errors import UserError
from ltr_bench.report import bayes, plots, tables
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
    run_id: str | None = None  # the MLflow report run, when one was logged
    link: str = ""  # the printed lines that open it in the MLflow UI


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
    runs: FoldRuns,
    out: str | Path,
    metrics: list[str],
    split: str = "test",
    alpha: float = 0.05,
    *,
    rope: float = bayes.DEFAULT_ROPE,
    per_query: dict | None = None,
    baseline: str | None = None,
) -> Report:
    """Compute tables, tests and figures from ``runs`` and write them into ``out``.

    ``per_query`` maps ``(protocol, eval, dataset, fold)`` to a queries x models frame of the
    first metric (see :func:`ltr_bench.report.make.per_query_values`); with ``baseline`` it adds
    the per-query tests of that split.
    """
    check_metrics(runs, metrics, split)
    out = Path(out)
    (out / "pvalues").mkdir(parents=True, exist_ok=True)
    (out / "cd").mkdir(parents=True, exist_ok=True)
    (out / "bayes").mkdir(parents=True, exist_ok=True)
    frame = runs.frame
    report = Report(out=out, table1_markdown="", notes=list(runs.notes))
    t1 = tables.table1(frame, metrics, split)
    t3 = tables.table3(frame)
    report.table1_markdown = tables.to_markdown(t1)
    for stem, table in (("table1", t1), ("table3", t3)):
        _write(report, f"{stem}.md", tables.to_markdown(table))
        _write(report, f"{stem}.csv", tables.to_csv(table))
        _write(report, f"{stem}.tex", tables.to_latex(table))
    report.notes += t3.notes
    charts = _write_charts(out, t1, t3, split)
    report.files += [out / name for _, name in charts]

    comparisons = compare(frame, metrics, split, alpha)
    figure_lines, bayes_lines = _write_comparisons(report, comparisons, alpha, rope)
    per_query_lines = _write_per_query(report, per_query, baseline, metrics[0], split)
    summary = friedman_summary(comparisons)
    _write(report, "friedman_nemenyi.md", summary)
    _write(report, "fold_runs.csv", frame.to_csv(index=False))

    sections = _Sections(charts, figure_lines, bayes_lines, per_query_lines, summary)
    page = _markdown_page(runs, report, t3, split, alpha, rope, sections)
    _write(report, "report.md", page)
    figures = [(t, out / n) for t, n in charts] + [
        (t, p) for t, p in _figure_paths(comparisons, out)
    ]
    _write(
        report,
        "report.html",
        html_page(
            runs.experiment_name, split, alpha, len(frame), t1, t3, figures, summary, report.notes
        ),
    )
    return report


def _write(report: Report, name: str, text: str) -> Path:
    """Write ``text`` to ``<report.out>/<name>`` and list the file among the report's files."""
    path = report.out / name
    path.write_text(text, encoding="utf-8")
    report.files.append(path)
    return path


def _write_charts(
    out: Path, t1: tables.Table, t3: tables.Table, split: str
) -> list[tuple[str, str]]:
    """The Table 1 and Table 3 bar charts that have data: (title, file name) each."""
    charts = []
    if t1.index:
        plots.table_bars(t1, f"Table 1: {split} mean ± SE over folds", "metric", out / "table1.png")
        charts.append(("Table 1 chart: mean ± SE per model and dataset", "table1.png"))
    if t3.index and t3.columns:
        plots.table_bars(
            t3, "Run times per fold: mean ± SE", "seconds", out / "table3.png", log_scale=True
        )
        charts.append(("Run times (Table 3)", "table3.png"))
    return charts


def _write_comparisons(
    report: Report, comparisons: list, alpha: float, rope: float
) -> tuple[list[str], list[str]]:
    """Each comparison's Bayesian test, p-values and CD diagram; the page's figure lines and
    Bayesian sections. The comparisons' notes join the report's."""
    out = report.out
    figure_lines: list[str] = []
    bayes_lines: list[str] = []
    for c in comparisons:
        if c.pvalues is not None:
            table = bayes.bayes_table(c.scores, c.ratio, rope)
            _write(report, f"bayes/{c.slug}.csv", table.to_csv(index=False))
            png = out / "bayes" / f"{c.slug}.png"
            bayes.bayes_plot(table, f"How sure: {c.title}", rope, png)
            report.files.append(png)
            figure_lines.append(
                f"- Bayesian correlated t-test, {c.title}: [bayes/{c.slug}.png](bayes/{c.slug}.png)"
            )
            bayes_lines += [f"### {c.title}", "", bayes.bayes_markdown(table, rope)]
        if c.pvalues is not None:
            _write(report, f"pvalues/{c.slug}.csv", c.pvalues.to_csv(index_label="model"))
            png = out / "pvalues" / f"{c.slug}.png"
            plots.pvalue_heatmap(
                c.pvalues, c.diffs, f"Corrected t-test p-values: {c.title}", alpha, png
            )
            report.files.append(png)
            figure_lines.append(
                f"- p-values, {c.title}: [pvalues/{c.slug}.png](pvalues/{c.slug}.png)"
            )
        if c.friedman is not None:
            png = out / "cd" / f"{c.slug}.png"
            plots.cd_diagram(c.friedman, f"Critical difference: {c.title}", png)
            report.files.append(png)
            figure_lines.append(f"- CD diagram, {c.title}: [cd/{c.slug}.png](cd/{c.slug}.png)")
        report.notes += [f"{c.title}: {n}" for n in c.notes]
    return figure_lines, bayes_lines


def _write_per_query(
    report: Report, per_query: dict | None, baseline: str | None, metric: str, split: str
) -> list[str]:
    """The per-query tests against ``baseline`` of each split in ``per_query``; the page's lines."""
    lines: list[str] = []
    for (protocol, eval_name, dataset, fold), values in sorted((per_query or {}).items()):
        if baseline is None:
            break
        _, wtl, text = bayes.per_query_section(values, baseline)
        stem = f"per_query/{protocol}_{eval_name}_{dataset}_fold{fold}"
        (report.out / "per_query").mkdir(exist_ok=True)
        _write(report, f"{stem}.md", text)
        _write(report, f"{stem}.csv", wtl.to_csv(index_label="model"))
        lines += [
            f"### {dataset}, split {fold + 1} ({tables.setting_label(protocol, eval_name)}), "
            f"{metric} on {split}",
            "",
            text,
        ]
    return lines


@dataclass
class _Sections:
    """The parts of ``report.md`` computed while writing the files."""

    charts: list[tuple[str, str]]
    figure_lines: list[str]
    bayes_lines: list[str]
    per_query_lines: list[str]
    friedman: str


def _markdown_page(
    runs: FoldRuns,
    report: Report,
    t3: tables.Table,
    split: str,
    alpha: float,
    rope: float,
    sections: _Sections,
) -> str:
    """The text of ``report.md``."""
    page = [
        f"# Results report: experiment {runs.experiment_name!r}",
        "",
        "(In the MLflow UI open `report.html`: the same page with its figures embedded.)",
        "",
        f"{len(runs.frame)} fold runs ({tk.TAG_ROLE}={tk.ROLE_FOLD}); metrics on the {split} "
        f"split; alpha = {alpha}.",
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
        *[f"- {title}: [{name}]({name})" for title, name in sections.charts],
        *(sections.figure_lines or ["- none (fewer than 2 models everywhere)"]),
        "",
        sections.friedman.replace("# Friedman", "## Friedman", 1).replace("\n## ", "\n### "),
        f"## How sure: Bayesian correlated t-test (ROPE ±{rope:g})",
        "",
        "Posterior probabilities that A is better by more than the ROPE, that the two are within "
        "it of each other (practically equivalent), and that B is better (Corani & Benavoli 2015; "
        "the Nadeau-Bengio correction for overlapping training sets).",
        "",
        *(sections.bayes_lines or ["- none (fewer than 2 models everywhere)", ""]),
        *(
            ["## Per-query tests on one split", "", *sections.per_query_lines]
            if sections.per_query_lines
            else []
        ),
        "## Notes",
        "",
        *([f"- {n}" for n in report.notes] or ["- none"]),
        "",
    ]
    return "\n".join(page)


def _figure_paths(comparisons, out: Path) -> list[tuple[str, Path]]:
    found = []
    for c in comparisons:
        for kind, folder in (
            ("p-values", "pvalues"),
            ("CD diagram", "cd"),
            ("Bayesian correlated t-test", "bayes"),
        ):
            path = out / folder / f"{c.slug}.png"
            if path.is_file():
                found.append((f"{kind}, {c.title}", path))
    return found


def html_page(
    experiment: str,
    split: str,
    alpha: float,
    n_runs: int,
    t1: tables.Table,
    t3: tables.Table,
    figures: list[tuple[str, Path]],
    friedman: str,
    notes: list[str],
) -> str:
    """The report as one HTML page with its PNG figures embedded (data URIs), so it renders
    wherever it is opened, the MLflow UI's artifact view included (relative links do not)."""
    import base64
    import html

    def table_html(table: tables.Table) -> str:
        head = "".join(
            f"<th>{html.escape(n)}</th>" for n in table.index_names + table.column_names()
        )
        body = []
        for i, labels in enumerate(table.index):
            cells = "".join(f"<td>{html.escape(str(x))}</td>" for x in labels)
            for j in range(len(table.columns)):
                text = html.escape(table.cell(i, j))
                cells += f"<td class=num>{f'<b>{text}</b>' if table.marks_best and table.best[i, j] else text}</td>"
            body.append(f"<tr>{cells}</tr>")
        return f"<table><tr>{head}</tr>{''.join(body)}</table>"

    imgs = []
    for title, path in figures:
        data = base64.b64encode(path.read_bytes()).decode()
        imgs.append(
            f"<figure><img alt='{html.escape(title)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{html.escape(title)}</figcaption></figure>"
        )
    style = (
        "body{font-family:sans-serif;margin:1.5em;max-width:1100px}table{border-collapse:collapse;"
        "margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px}td.num{text-align:right}"
        "img{max-width:100%}figure{margin:1em 0}pre{white-space:pre-wrap}"
    )
    return "\n".join(
        [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>Results report: {html.escape(experiment)}</title><style>{style}</style></head><body>",
            f"<h1>Results report: experiment {html.escape(repr(experiment))}</h1>",
            f"<p>{n_runs} fold runs ({tk.TAG_ROLE}={tk.ROLE_FOLD}); metrics on the {html.escape(split)} "
            f"split; alpha = {alpha}.</p>",
            "<h2>Table 1</h2>",
            table_html(t1),
            f"<p>{html.escape(LEGEND)}</p>",
            "<h2>Table 3: run times</h2>",
            table_html(t3),
            "<h2>Figures</h2>",
            *imgs,
            "<h2>Friedman test and Nemenyi post-hoc</h2>",
            f"<pre>{html.escape(friedman)}</pre>",
            "<h2>Notes</h2>",
            "<ul>",
            *[f"<li>{html.escape(n)}</li>" for n in notes or ["none"]],
            "</ul>",
            "</body></html>",
            "",
        ]
    )
