"""`kappa-rllib report FOLDER`: tables, IQM, curves and heat-maps from Tune results (no re-running)."""

from __future__ import annotations

from kappa_rllib.cli.common import error, one_line, positive_int


def add_parser(sub) -> None:
    report_p = sub.add_parser(
        "report", help="tables (md/csv/tex), IQM, curves and heat-maps from Tune results",
        description="Reads the Tune results under a folder (no re-running) and writes table.md/.csv/.tex (the paper's "
                    "Table 1/2 columns with 95% CIs, the paper's numbers beside), iqm.md/.csv (rliable), "
                    "improvement.md (rliable's probability of improvement: kappa_best against the baseline, "
                    "C_FA against naive, kappa_best against GAE and against kappa = 0), "
                    "curves_*.png (and cells_*.png, every kappa cell in one panel, for an env with four or more: an "
                    "ablation), heatmap_*.png and scores.csv.",
        epilog="example: kappa-rllib report results/tune/cartpole_dqn --out results/tune/cartpole_dqn/report")
    report_p.add_argument("folder", help="an experiment folder written by `kappa-rllib tune` (any Tune results), "
                          "or its bucket URI (s3://BUCKET/PATH/<file name>: the result files are mirrored to "
                          "OUT/results, checkpoints are not read)")
    report_p.add_argument("--out", default=None, help="output folder (default: FOLDER/report; for a URI "
                          "./<name>_report)")
    report_p.add_argument("--include-unfinished", action="store_true",
                          help="also score trials that have not reached their T (running, stopped or failed)")
    report_p.add_argument("--bootstrap-reps", type=positive_int, default=2000,
                          help="stratified-bootstrap repetitions for the IQM CIs (default 2000)")
    report_p.add_argument("--score-window", choices=("episodes", "env-steps"), default="episodes",
                          help="a run's score: the mean return of its last 10%% of training episodes by count "
                               "(episodes, the default, the paper's), or of those reported in its last 10%% of env "
                               "steps (env-steps: a check where episode lengths change over training)")
    report_p.add_argument("--title", default=None,
                          help="the experiment's name, put before each written page's heading (\"TITLE: Final "
                               "training performance\"), so that pages of several reports tell which they belong to")


def main_with_defaults(folder, out=None) -> int:
    """`kappa-rllib report FOLDER [--out OUT]` with every other option at its default (`tune --report`): the
    defaults are the parser's, so a new option cannot be missing from a namespace built by hand."""
    import argparse

    parser = argparse.ArgumentParser(prog="kappa-rllib")
    add_parser(parser.add_subparsers())
    return main(parser.parse_args(["report", str(folder), *(["--out", str(out)] if out is not None else [])]))


def main(args) -> int:
    from kappa_rllib import report

    notes: list[str] = []
    try:
        paths = report.report(args.folder, args.out, reps=args.bootstrap_reps,
                              include_unfinished=args.include_unfinished, notes=notes,
                              score_window=args.score_window, title=args.title)
    except (ValueError, OSError) as e:
        return error(one_line(e))
    for table in (p for p in paths if p.name in ("table.md", "adaptive.md")):  # fixed kappas, populations
        print(table.read_text())
    print("[report] wrote:")
    for p in paths:
        print(f"  {p.resolve()}")
    for note in notes:
        print(f"[report] {note}")
    return 0
