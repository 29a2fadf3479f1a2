"""``mbk presets``: list the paper configurations with parameter counts."""

import json


def register(subparsers):
    parser = subparsers.add_parser(
        "presets",
        help="list model presets with parameter counts",
        description="List the presets (paper configurations) with parameter counts computed from built "
        "models (cached after the first run) next to the paper's figure.",
    )
    parser.add_argument("--no-counts", action="store_true", help="list names only, without building models")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run)


def run(args):
    from rich.console import Console
    from rich.table import Table

    from mobilebert_kit.models.presets import PRESETS

    names = list(PRESETS)
    counts = {}
    if not args.no_counts:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from mobilebert_kit.models.summary import preset_param_counts

        # The first run counts every preset (about 30 s on 2 cores; cached afterwards): progress on
        # stderr, a bar on a terminal and a line per preset otherwise, so no run looks hung.
        console = Console(stderr=True)
        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       console=console, transient=True)
        task = None

        def progress(name, index, total):
            nonlocal task
            if task is None:
                console.print(f"counting the parameters of {total} preset(s) (first run; cached afterwards)",
                              highlight=False)
                task = bar.add_task(name, total=total)
            bar.update(task, completed=index, description=name)
            if not console.is_terminal:
                console.print(f"  {index + 1}/{total} {name}", highlight=False)

        with bar:
            counts = preset_param_counts(names, progress=progress)
    rows = []
    for name in names:
        paper = PRESETS[name]["paper_params"]
        count = counts.get(name)
        diff = None if (paper is None or count is None) else (count - paper) / paper
        rows.append({"name": name, "params": count, "paper_params": paper, "diff": diff,
                     "description": PRESETS[name]["description"]})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = Table(title="mobilebert-kit presets")
    for column in ("preset", "params", "paper", "diff", "description"):
        table.add_column(column, justify="right" if column in ("params", "paper", "diff") else "left")
    for row in rows:
        table.add_row(
            row["name"],
            "-" if row["params"] is None else f"{row['params'] / 1e6:.2f}M",
            "-" if row["paper_params"] is None else f"{row['paper_params'] / 1e6:.1f}M",
            "-" if row["diff"] is None else f"{row['diff']:+.1%}",
            row["description"],
        )
    Console().print(table)
    return 0
