"""Is this tree's code no slower than an older commit's? `throughput.py` rows, both trees, alternated.

Each round runs `benchmarks/throughput.py --rounds 1` twice, once importing this tree's `kappa_rllib`
and once a git worktree of `--base` (the same benchmark script both times: only the library differs),
in alternating order (this, base; base, this; ...), so a slow spell of the machine does not land on
one side. Per row and round it takes two ratios, this tree over base: of the raw env steps/s, and of
each side's "vs minimal" ratio (each divided by the minimal loop it ran beside, which cancels most of
the machine's drift). It prints the median of each over the rounds, with the range, and this tree's own
"vs minimal" ratios (median and range over its rounds).

    python benchmarks/against_commit.py --base 2ba1248 --rounds 3 -- --workload w1 --steps 10000
    python benchmarks/against_commit.py --base 2ba1248 --rounds 3 -- --workload w2 --iterations 10 --env-runners 0,2

A benchmark, not a test: run it on a quiet machine (pause long runs first).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from throughput import sections  # noqa: E402 (the benchmarks folder is not a package)


def worktree(commit: str, folder: Path) -> Path:
    """A detached git worktree of `commit` (removed by `remove_worktree`)."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(folder), commit],
                   check=True, capture_output=True, text=True)
    return folder


def remove_worktree(folder: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)], capture_output=True)


def one_round(tree: Path, bench_args: list[str], out: Path) -> dict:
    """throughput.py --rounds 1 with `tree`'s kappa_rllib first on the path; its --json rows."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    # run from `tree`: Ray puts the driver's working folder first on its workers' path
    subprocess.run([sys.executable, str(HERE / "throughput.py"), *bench_args, "--rounds", "1", "--json", str(out)],
                   check=True, env=env, cwd=tree)
    data = json.loads(out.read_text())
    for where in ("kappa_rllib", "kappa_rllib_ray_workers"):  # the editable install must not win: not comparable
        imported = Path(data[where]).resolve()
        if not imported.is_relative_to(tree.resolve()):
            raise SystemExit(f"against_commit: the run meant for {tree} imported kappa_rllib from {imported} ({where})")
    return {(section, r[0]): r for section, r in sections(data["rounds"][0])}


def vs_minimal(rows: dict) -> dict[tuple[str, str], float]:
    """(section, name) -> the row's rate over its own section's minimal loop (W1, W3, Atari share labels)."""
    minimal = {(sec, r[2]): r[1] for (sec, _), r in rows.items() if r[0].startswith("minimal")}
    return {(sec, name): r[1] / minimal[sec, r[2]] for (sec, name), r in rows.items() if (sec, r[2]) in minimal}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})" if values else "-"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="the commit to compare with (any git revision)")
    p.add_argument("--rounds", type=int, default=3, help="alternated rounds of both trees (default 3)")
    p.add_argument("bench_args", nargs=argparse.REMAINDER, help="-- then throughput.py's arguments")
    args = p.parse_args(argv)
    bench_args = [a for a in args.bench_args if a != "--"]
    with tempfile.TemporaryDirectory(prefix="against_commit_") as tmp:
        base = worktree(args.base, Path(tmp) / "base")
        try:
            rounds = []
            for r in range(args.rounds):
                order = [("this", ROOT), ("base", base)]
                if r % 2:
                    order.reverse()
                got = {}
                for side, tree in order:
                    print(f"== round {r + 1} of {args.rounds}: {side} ({tree})", flush=True)
                    got[side] = one_round(tree, bench_args, Path(tmp) / f"{side}_{r}.json")
                rounds.append(got)
        finally:
            remove_worktree(base)
    names = [key for key in rounds[0]["this"] if not key[1].startswith(("minimal", "gymnasium"))]
    print(f"\nthis tree ({ROOT}) against {args.base}, {args.rounds} alternated rounds: medians (range)")
    print(f"{'run':<64}{'this env steps/s':>18}{'base':>10}{'this vs minimal':>20}{'rate this/base':>22}"
          f"{'vs-minimal this/base':>24}")
    for name in names:
        this = [g["this"][name][1] for g in rounds if name in g["this"]]
        base_rate = [g["base"][name][1] for g in rounds if name in g["base"]]
        rate_ratio = [g["this"][name][1] / g["base"][name][1] for g in rounds if name in g["this"] and name in g["base"]]
        norm = [vs_minimal(g["this"])[name] / vs_minimal(g["base"])[name] for g in rounds
                if name in vs_minimal(g["this"]) and name in vs_minimal(g["base"])]
        this_norm = [vs_minimal(g["this"])[name] for g in rounds if name in vs_minimal(g["this"])]
        print(f"{name[0] + ': ' + name[1]:<64}{statistics.median(this):>18.0f}{statistics.median(base_rate) if base_rate else float('nan'):>10.0f}"
              f"{spread(this_norm):>20}{spread(rate_ratio):>22}{spread(norm):>24}")


if __name__ == "__main__":
    main()
