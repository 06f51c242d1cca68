"""Generate the docs' reference pages from the code, so they cannot drift from it.

Writes (run by ``make docs`` before ``mkdocs build``; the output is not committed):

* ``docs/reference/config/<group>.md``: every config group of ``conf/`` with its options, each
  option's description (the file's leading comment block) and every key with its default, its
  comment and its line; ``docs/reference/config/index.md`` lists the groups;
* ``docs/reference/cli.md``: the ``--help`` of ``ltr-bench``, ``ltr-bench-report`` and
  ``ltr-bench-predict``, as the installed console scripts print it;
* ``docs/reference/api.md``: mkdocstrings directives for the public Python API.

The comment convention: a key's comment is its trailing ``# ...`` on the same line, or else the
block of ``#`` lines directly above it; a file's leading comment block describes the option.

    .venv/bin/python docs/gen_reference.py [--out docs/reference]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml

from ltr_bench.config import docs as config_docs
from ltr_bench.config.docs import file_comment

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"
#: The console scripts whose ``--help`` the reference shows.
SCRIPTS = ("ltr-bench", "ltr-bench-report", "ltr-bench-predict")
#: The public API (DESIGN.md "Public API"): kept stable, documented from the docstrings.
PUBLIC_API = (
    ("Data", ["ltr_bench.data.load_letor", "ltr_bench.data.QuerySet"]),
    ("Synthetic data", ["ltr_bench.data.synthetic.make_synthetic"]),
    ("Metrics", ["ltr_bench.metrics.ndcg_at_k", "ltr_bench.metrics.average_precision"]),
    ("Models", ["ltr_bench.models.DirectRanker"]),
    ("Statistics", ["ltr_bench.stats"]),
)


def is_base(path: Path) -> bool:
    """A shared base (``conf/_<group>_<name>.yaml``): pulled in by options, never selected."""
    return path.parent == CONF and path.name.startswith("_")


def leading_comment(path: Path) -> str:
    """A config file's leading comment block (its description), without ``# @package``."""
    return file_comment(path)


def iter_documented_keys(path: Path) -> Iterator[tuple[str, str | None, str, int]]:
    """Every key of a config file as (key_path, default, comment, line); default None for a key
    that holds other keys (the convention of :mod:`ltr_bench.config.docs`)."""
    for key in config_docs.iter_documented_keys(path):
        yield key.key_path, (key.default or None), key.comment, key.line


def package_of(path: Path) -> str:
    """Where a file's keys land in the composed config: its ``# @package`` or its group."""
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.startswith("#"):
            break
        m = re.match(r"#\s*@package\s+(\S+)", raw)
        if m:
            return "" if m.group(1) == "_global_" else m.group(1)
    return "" if is_base(path) else ".".join(path.relative_to(CONF).parent.parts)


def groups(conf: Path = CONF) -> dict[str, list[Path]]:
    """Config group -> its option files (``hydra/launcher`` included; the shared bases
    ``conf/_<group>_*.yaml`` are listed with their group, after its options)."""
    out: dict[str, list[Path]] = {}
    for path in sorted(conf.rglob("*.yaml")):
        rel = path.relative_to(conf)
        if len(rel.parts) == 1:
            if path.name.startswith("_"):
                out.setdefault(path.stem[1:].split("_")[0], []).append(path)
            continue
        out.setdefault("/".join(rel.parent.parts), []).append(path)
    for files in out.values():
        files.sort(key=lambda p: (is_base(p), p.name))
    return out


def _cell(text: str | None, limit: int | None = None) -> str:
    """Table-cell text: ``|`` escaped, cut to ``limit`` characters (long defaults)."""
    if text is None:
        return "*(mapping / list below)*"
    if limit and len(text) > limit:
        text = text[: limit - 3] + "..."
    return text.replace("|", "\\|")


def option_markdown(path: Path, title: str) -> str:
    """One option: its description, and a table of its keys with defaults and comments."""
    package = package_of(path)
    rel = path.relative_to(CONF.parent)
    out = [
        f"## `{title}`",
        "",
        f"File: `{rel}`" + (f", package `{package}`" if package else ""),
        "",
    ]
    desc = leading_comment(path)
    if desc:
        out += ["```text", desc, "```", ""]
    rows = list(iter_documented_keys(path))
    if rows:
        out += ["| key | default | comment | line |", "| --- | --- | --- | ---: |"]
        for key, default, comment, line in rows:
            full = f"{package}.{key}" if package and key != "defaults" else key
            out.append(
                f"| `{full}` | {_cell(None) if default is None else '`' + _cell(default, 60) + '`'}"
                f" | {_cell(comment) if comment else ''} | {line} |"
            )
        out.append("")
    return "\n".join(out)


def config_pages(out: Path) -> list[Path]:
    """``config/index.md`` and one page per group; returns the files written."""
    folder = out / "config"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    written = []
    index = [
        "# Configuration reference",
        "",
        "Generated from `conf/` by `docs/gen_reference.py` (run by `make docs`): every group, its "
        "options and every key with its default and comment. Pick an option with "
        "`group=option`, override a key with `key=value`.",
        "",
        "The top-level config, `conf/config.yaml`:",
        "",
        option_markdown(CONF / "config.yaml", "config.yaml").replace("## ", "### ", 1),
        "## Groups",
        "",
        "| group | options |",
        "| --- | --- |",
    ]
    for group, files in groups().items():
        slug = group.replace("/", "-")
        options = [p.stem for p in files if not is_base(p)]
        index.append(f"| [`{group}`]({slug}.md) | {', '.join(options)} |")
        if group == "search":  # the sweeper a search selects is a structured config, not a file
            index.append("| [`hydra/sweeper`](sweeper.md) | ltr_optuna |")
        page = [f"# `{group}`", "", f"Options: {', '.join(f'`{o}`' for o in options)}.", ""]
        for path in files:
            base = is_base(path)
            title = (
                f"{group} (shared base {path.relative_to(CONF)})"
                if base
                else f"{group}={path.stem}"
            )
            page.append(option_markdown(path, title))
        written.append(folder / f"{slug}.md")
        written[-1].write_text("\n".join(page).rstrip() + "\n", encoding="utf-8")
    (folder / "index.md").write_text("\n".join(index) + "\n", encoding="utf-8")
    return [folder / "index.md", *written]


def sweeper_page(out: Path) -> Path:
    """``config/sweeper.md``: the keys of ``hydra/sweeper=ltr_optuna`` (a structured config in
    ``ltr_bench/sweeper/config.py``, not a file of ``conf/``) with their defaults and docstring."""
    import dataclasses
    import inspect

    from ltr_bench.sweeper.config import LtrOptunaSweeperConf

    rows = ["| key | default |", "| --- | --- |"]
    fields = dataclasses.fields(LtrOptunaSweeperConf)
    chosen = {
        k: v
        for f in fields
        if f.name == "defaults"
        for d in f.default_factory()
        for k, v in d.items()
    }  # type: ignore[misc]
    for f in fields:
        if f.name.startswith("_") or f.name == "defaults":
            continue
        if f.default is not dataclasses.MISSING:
            default: object = f.default
        else:
            default = f.default_factory()  # type: ignore[misc]
        if dataclasses.is_dataclass(default):
            default = dataclasses.asdict(default)  # type: ignore[arg-type]
        shown = (
            f"hydra/sweeper/{f.name}={chosen.get(f.name, '...')} (a group)"
            if default == "???"
            else yaml.safe_dump(default, default_flow_style=True).strip().removesuffix("\n...")
        )
        rows.append(f"| `hydra.sweeper.{f.name}` | `{_cell(shown, 120)}` |")
    doc = inspect.getdoc(LtrOptunaSweeperConf) or ""
    text = [
        "# `hydra/sweeper=ltr_optuna`",
        "",
        "The project's Optuna sweeper, selected by every `search=<model>` config. Its keys are set "
        "as `hydra.sweeper.<key>=<value>`; see the [Sweeps guide](../../guides/sweeps.md).",
        "",
        *rows,
        "",
        "```text",
        doc,
        "```",
        "",
    ]
    path = out / "config" / "sweeper.md"
    path.write_text("\n".join(text), encoding="utf-8")
    return path


def script_help(script: str) -> str:
    """``<script> --help`` from the console script beside this Python (the project's venv)."""
    exe = Path(sys.executable).parent / script
    cmd = [str(exe) if exe.exists() else script, "--help"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-500:]}")
    return proc.stdout.rstrip()


def cli_page(out: Path) -> Path:
    """``cli.md``: each console script's ``--help``."""
    text = [
        "# Command-line reference",
        "",
        "The `--help` of each console script, captured by `docs/gen_reference.py`.",
        "",
    ]
    for script in SCRIPTS:
        text += [f"## `{script}`", "", "```text", script_help(script), "```", ""]
    path = out / "cli.md"
    path.write_text("\n".join(text), encoding="utf-8")
    return path


def api_page(out: Path) -> Path:
    """``api.md``: mkdocstrings renders the public API from the docstrings at build time."""
    text = [
        "# Python API",
        "",
        "The public API (kept stable; see `DESIGN.md`), rendered from the docstrings.",
        "",
    ]
    for title, objects in PUBLIC_API:
        text += [f"## {title}", ""]
        for obj in objects:
            text += [f"::: {obj}", ""]
    path = out / "api.md"
    path.write_text("\n".join(text), encoding="utf-8")
    return path


def generate(out: Path, with_cli: bool = True) -> list[Path]:
    """Write every reference page under ``out``; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = config_pages(out) + [sweeper_page(out), api_page(out)]
    if with_cli:
        written.append(cli_page(out))
    return written


def main() -> None:
    """Command line: ``python docs/gen_reference.py [--out DIR] [--no-cli]``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "reference")
    parser.add_argument("--no-cli", action="store_true", help="skip the --help pages (faster)")
    args = parser.parse_args()
    for path in generate(args.out, with_cli=not args.no_cli):
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


if __name__ == "__main__":
    main()
