"""The Tune layer where its features meet (kappa_rllib.tuning): one file of three grids run through
`kappa-rllib tune` on a real local Ray, against tracking, kills, resume, caps, retries, a population and a
cluster. Every combination asserts the same invariants (`check_invariants`):

* every trial ends once, at its T, `done`, and Tune's state calls none of them failed;
* each trial's tracked run is in the store it belongs to (the file's one MLflow store, tagged with its grid;
  W&B's offline runs of the file), once, with its whole env-step axis;
* the peak of trials running at once (their iterations' spans, from result.json) respects the cap.

The fast parts of each seam (the MLflow store shared by grids set up at once, W&B's step, a resumed run's
--max-failures, the fresh-run check, a grid's failure in one line, the repair of a trial that finished after
Tune last saved its state) have tests of their own here too.
"""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from nodes import trial_rows
from test_tracking import wandb_offline_run as _wandb_offline_run

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "kappa_rllib.cli"]
STEP = "env_runners/num_env_steps_sampled_lifetime"
T = 2000  # env steps a trial: 4 iterations of 500
GRIDS = ("kappa_pi_dqn", "kappa_vi_dqn", "dqn")


def seam_file(folder: Path, *, seeds: int = 1, env: str = "CartPole-v1", population: bool = False,
              failing_stopper: str | None = None) -> Path:
    """Three grids (kappa-PI-DQN, kappa-VI-DQN, DQN; `seeds` trials each) of small CartPole trials; with
    `population`, a fourth: a PBT population over kappa; with `failing_stopper` (a marker file), the second
    grid's Tune run raises ConnectionError in its stopper while that file does not exist."""
    path = folder / "seams.py"
    path.write_text(textwrap.dedent(f"""\
        import os
        from ray.tune.stopper import Stopper
        from kappa_rllib.experiments import SMOKE_SETTINGS, Grid, paper_grids, population

        class FailingStopper(Stopper):
            def __call__(self, trial_id, result):
                return bool(result.get("done"))

            def stop_all(self):
                if not os.path.exists({failing_stopper!r}):
                    raise ConnectionError("the network went away (a deliberate error of the grid's Tune run)")
                return False

        def experiments(smoke=False):
            settings = {{**SMOKE_SETTINGS["dqn"], "total_env_steps": {T}}}
            grids = paper_grids("dqn", {env!r}, kappas=[0.84], c_fa=[0.2], num_seeds={seeds}, **settings)
            if {failing_stopper!r} is not None:
                grids[1].stop = FailingStopper()
            if {population!r}:
                [members] = paper_grids("dqn", {env!r}, kappas=[0.68, 0.84], c_fa=[0.2], num_seeds=1,
                                        variants=("pi",), baseline=False, name="pbt", **settings)
                grids.append(Grid("pbt_kappa_pi_dqn", members.config,
                                  scheduler=population("pbt", {{"kappa": [0.68, 0.84]}}, perturbation_interval=2),
                                  mutations={{"kappa": [0.68, 0.84]}}))
            return grids
        """))
    return path


def tune_args(file: Path, storage: Path, *extra) -> list[str]:
    return [*CLI, "tune", str(file), "--storage", str(storage), "--num-cpus", "2", "--checkpoint-every", "1",
            *map(str, extra)]


def environment(ray_tmp: Path, **extra) -> dict:
    # a Ray of its own (its temp dir names its processes, so a kill finds them all); W&B offline
    return {**os.environ, "PYTHONPATH": str(TESTS), "RAY_TMPDIR": str(ray_tmp), "WANDB_MODE": "offline",
            "WANDB_SILENT": "true", "MLFLOW_TRACKING_URI": "", "RAY_ADDRESS": "", **extra}


def run(args, env, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env=env, timeout=timeout)


def kill_all(proc: subprocess.Popen, ray_tmp: Path) -> None:
    """SIGKILL the driver's process group and every Ray process of its temp dir: a stop of the machine."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
    subprocess.run(["pkill", "-9", "-f", str(ray_tmp)], check=False)
    time.sleep(1)


def start_head(port: int, ray_tmp: Path, env: dict) -> subprocess.Popen:
    """A `ray start` head of 2 CPUs on loopback, its Ray temp dir `ray_tmp` (so `kill_all` finds its processes)."""
    return subprocess.Popen([str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", "--num-cpus=2",
                             f"--port={port}", "--node-ip-address=127.0.0.1", f"--temp-dir={ray_tmp}",
                             "--include-dashboard=false", "--disable-usage-stats"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def wait_for_head(port: int) -> None:
    from nodes import listening

    deadline = time.time() + 60
    while not listening(port):
        assert time.time() < deadline, "the head did not start"
        time.sleep(0.5)


# ------------------------------------------------------------------------------------------ invariants
def newest_state(grid_dir: Path) -> dict:
    return json.loads(sorted(grid_dir.glob("experiment_state-*.json"))[-1].read_text())


def timeline(rows: list[dict]) -> list[dict]:
    """A trial's rows as its last timeline went: a resumed iteration replaces the rolled-back ones."""
    kept = []
    for row in rows:
        while kept and kept[-1]["training_iteration"] >= row["training_iteration"]:
            kept.pop()
        kept.append(row)
    return kept


def check_invariants(file_dir: Path, grids=GRIDS, trials_per_grid: int = 1, cap: int | None = None,
                     mlflow: bool | Path = False, wandb: bool = False, population: dict | None = None) -> dict:
    """The invariants of the module's docstring; returns {trial id: its timeline's rows}. `population`:
    {grid: its members}, grids whose members may go on from each other's checkpoints (PBT)."""
    population = population or {}
    trials, ran = {}, {}  # trial id -> (grid, its timeline's rows), (grid, every row it wrote)
    for grid in grids:
        grid_dir = file_dir / grid
        rows = trial_rows(grid_dir)
        count = population.get(grid, trials_per_grid)
        assert len(rows) == count, (grid, sorted(rows))
        statuses = [json.loads(row[0])["status"] for row in newest_state(grid_dir)["trial_data"]]
        assert statuses == ["TERMINATED"] * count, (grid, statuses)
        for name, trial in rows.items():
            dones = [r for r in trial if r.get("done")]
            assert len(dones) == 1 and trial[-1].get("done"), (grid, name, [r["training_iteration"] for r in trial])
            line = timeline(trial)
            assert line[-1][STEP.split("/")[0]][STEP.split("/")[1]] == T, (grid, name)
            assert [r["training_iteration"] for r in line] == list(range(1, len(line) + 1)) or grid in population
            trials[trial[0]["trial_id"]] = (grid, line)
            ran[trial[0]["trial_id"]] = (grid, trial)
    if cap is not None:
        assert peak_running(ran) <= cap
    if mlflow:  # True: the file's default store; a path: the store MLFLOW_TRACKING_URI named
        check_mlflow(file_dir, trials, None if mlflow is True else mlflow)
    if wandb:
        check_wandb(file_dir, trials)
    return trials


def peak_running(trials: dict) -> int:
    """The most trials with an iteration in progress at one moment. A row's `timestamp` is its end in whole
    seconds (te in [timestamp, timestamp + 1)), so each iteration surely ran over [timestamp + 1 - its time,
    timestamp]; those spans are counted (an overlap of less than a second can go unseen)."""
    events = []
    for trial_id, (_, rows) in trials.items():
        for r in rows:
            start, end = r["timestamp"] + 1 - r["time_this_iter_s"], r["timestamp"]
            if start < end:
                events += [(start, 1), (end, -1)]
    peak = running = 0
    for _, change in sorted(events, key=lambda e: (e[0], e[1])):  # an end before a start at the same moment
        running += change
        peak = max(peak, running)
    return peak


def check_uploaded_whole(file_dir: Path, ray_tmp: Path, grids=GRIDS) -> None:
    """Tune's driver copied its files onto storage through kappa_rllib.tuning.sync: each storage copy of a
    trial's result.json has its staging file's (the driver's, under Ray's temp dir) bytes, mode and modification
    time (pyarrow's copy, Tune's own, gives the copy a time of its own), and no half-made copy is left."""
    from kappa_rllib.tuning.sync import TMP_SUFFIX

    staged = {p.parent.name: p for p in ray_tmp.rglob("driver_artifacts/*/result.json")}
    for grid in grids:
        for result in (file_dir / grid).glob("*/result.json"):
            source = staged[result.parent.name]
            # its stamp, or 1 ns before it where the file was modified just before the copy (racily clean)
            assert 0 <= source.stat().st_mtime_ns - result.stat().st_mtime_ns <= 1, (result, source)
            assert result.stat().st_mode == source.stat().st_mode
            assert result.read_bytes() == source.read_bytes()
    assert not list(file_dir.rglob("*" + TMP_SUFFIX))


def check_mlflow(file_dir: Path, trials: dict, store: Path | None = None) -> None:
    import mlflow

    assert not list(file_dir.glob("*/mlflow.db")), "a grid's store of its own"
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{store or file_dir / 'mlflow.db'}")
    (experiment,) = [e for e in client.search_experiments() if e.name == "seams"]
    runs = client.search_runs([experiment.experiment_id])
    by_trial = {}
    for run in runs:
        key = run.data.tags["trial_id"]
        assert key not in by_trial, f"trial {key} logged twice"
        by_trial[key] = run
    assert set(by_trial) == set(trials)
    for trial_id, (grid, rows) in trials.items():
        run = by_trial[trial_id]
        assert run.data.tags["grid"] == grid and run.info.status == "FINISHED"
        steps = {m.step for m in client.get_metric_history(run.info.run_id, STEP)}
        assert {r["env_runners"]["num_env_steps_sampled_lifetime"] for r in rows} <= steps and max(steps) == T


def check_wandb(file_dir: Path, trials: dict) -> None:
    from test_tracking import wandb_run

    seen, run_ids = {}, {}
    for folder in (file_dir / "wandb").glob("offline-run-*"):
        run_id = folder.name.split("-", 3)[3]  # offline-run-<date>_<time>-<storage key>-<trial id>
        trial_id = run_id.rsplit("-", 1)[1]
        run_ids.setdefault(trial_id, set()).add(run_id)
        _, history = wandb_run(folder)
        seen.setdefault(trial_id, set()).update(h[STEP] for h in history if STEP in h)
    assert set(seen) == set(trials), (sorted(seen), sorted(trials))
    assert all(len(ids) == 1 for ids in run_ids.values()), run_ids  # one W&B run (id) per trial, one storage key
    for trial_id, (_, rows) in trials.items():
        assert {r["env_runners"]["num_env_steps_sampled_lifetime"] for r in rows} <= seen[trial_id]
        assert max(seen[trial_id]) == T


# ------------------------------------------------------------------------------------------ the seams
# the kill schedules' seeds: two in CI on a folder, one on a bucket; KAPPA_KILL_SEEDS=3,4,5 (and
# KAPPA_KILL_BUCKET_SEEDS=...) run others, and replay a failing one
def _seeds(variable: str, default: str) -> list[int]:
    return [int(seed) for seed in (os.environ.get(variable) or default).split(",") if seed.strip()]


KILL_SEEDS = ([("folder", seed) for seed in _seeds("KAPPA_KILL_SEEDS", "47,5")]
              + [("bucket", seed) for seed in _seeds("KAPPA_KILL_BUCKET_SEEDS", "5")])


@pytest.mark.learning
@pytest.mark.parametrize("kind, seed", KILL_SEEDS)
def test_a_file_of_three_grids_killed_at_random_moments_and_resumed_tracks_each_trial_once(tmp_path, kind, seed,
                                                                                          request):
    """The resume invariant as a property (issue 64): --track mlflow,wandb, --max-concurrent 2, the driver and its
    Ray SIGKILLed at three random moments (a schedule drawn from `seed`: each run killed 15-45 s after it starts,
    across Ray's start, the trials' iterations and checkpoints, and Tune's state saves and syncs) and resumed each
    time, then resumed to the end: every trial stored once, its rows 1..T once each in its last timeline, one MLflow
    run and one W&B run a trial; on a folder, and on an S3 bucket (moto's server on loopback; there untracked,
    since the file's MLflow store sits beside a folder's results; half its kills, drawn apart, come as soon as a
    trial's end is staged but not stored, `staged_ends_not_stored`). A failure names its seed: KAPPA_KILL_SEEDS=<seed>
    (KAPPA_KILL_BUCKET_SEEDS) replays the schedule (the moments; what each kill hits also depends on the machine's
    speed)."""
    store = Storage(tmp_path, request.getfixturevalue("s3_endpoint") if kind == "bucket" else None)
    file, ray_tmp = seam_file(tmp_path), Path(f"/tmp/ks{os.getpid()}{kind[0]}")
    env = environment(ray_tmp, **store.env())
    rng = random.Random(seed)
    tracked = ("--track", "mlflow,wandb", "--track-project", "seams") if kind == "folder" else ()
    args = tune_args(file, store.uri, *tracked, "--max-concurrent", "2")
    schedule, ends = [], random.Random(-seed)  # (a second draw: the folder's schedules stay as they were)
    for attempt in range(3):
        proc = subprocess.Popen([*args, *(["--resume"] if attempt else [])], cwd=ROOT, env=env, text=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        moment, started = rng.uniform(15, 45), time.monotonic()
        at_an_end = kind == "bucket" and ends.random() < 0.5  # as soon as a trial's end is staged, not stored
        before = staged_ends_not_stored(ray_tmp, store) if at_an_end else set()
        while proc.poll() is None and time.monotonic() - started < (60 if at_an_end else moment):
            if at_an_end and staged_ends_not_stored(ray_tmp, store) - before:
                break
            time.sleep(0.3 if at_an_end else 0.1)
        took = time.monotonic() - started
        if proc.poll() is not None:
            schedule.append(f"run {attempt + 1} ended by itself at {took:.1f} s")
        else:
            kill_all(proc, ray_tmp)
            schedule.append(f"run {attempt + 1} killed at {took:.1f} s"
                            + (" (a trial's end staged, not stored)" if at_an_end and took < 60 else ""))
    out = run([*args, "--resume"], env)
    variable = "KAPPA_KILL_SEEDS" if kind == "folder" else "KAPPA_KILL_BUCKET_SEEDS"
    replay = f"kill schedule seed {seed} ({'; '.join(schedule)}): {variable}={seed} replays it"
    assert out.returncode == 0, (replay, (out.stdout + out.stderr)[-3000:])
    results = store.folder() / "seams"
    try:
        check_invariants(results, cap=2, mlflow=kind == "folder", wandb=kind == "folder")
    except AssertionError as e:
        raise AssertionError(f"{replay}; the last resume said:\n{out.stderr[-2000:]}") from e
    assert not list(results.rglob("*.kappa-tmp"))  # what a kill mid-copy left, deleted on resume


# the kept-up cluster's kill schedules: on a folder, two in CI, on a bucket one; KAPPA_KEPT_UP_SEEDS=... (and
# KAPPA_KEPT_UP_BUCKET_SEEDS=...) run others, and replay a failing one
KEPT_UP = ([("folder", seed) for seed in _seeds("KAPPA_KEPT_UP_SEEDS", "6,23")]
           + [("bucket", seed) for seed in _seeds("KAPPA_KEPT_UP_BUCKET_SEEDS", "6")])


class Storage:
    """A property test's storage: a folder, or an S3 bucket (moto's server on loopback, through pyarrow's S3
    filesystem as Tune writes any bucket) read back by copying it into a folder."""

    def __init__(self, tmp_path: Path, bucket_endpoint: str | None = None):
        self.local = tmp_path / "results"
        self.endpoint = bucket_endpoint
        self.uri = f"s3://kappa-seams/{tmp_path.name}" if bucket_endpoint else str(self.local)

    def env(self) -> dict:
        from conftest import S3_ENV

        return {**S3_ENV, "AWS_ENDPOINT_URL": self.endpoint} if self.endpoint else {}

    def _fs(self):
        from conftest import s3_filesystem

        return s3_filesystem(self.endpoint)

    def ends_done(self, trial_name: str) -> bool:
        """Whether the trial's rows on storage end in `done`."""
        if not self.endpoint:
            return any(_ends_done(stored) for stored in self.local.glob(f"*/*/{trial_name}/result.json"))
        import pyarrow.fs

        fs = self._fs()
        prefix = self.uri.removeprefix("s3://")
        try:
            for info in fs.get_file_info(pyarrow.fs.FileSelector(prefix, recursive=True, allow_not_found=True)):
                if info.base_name == "result.json" and info.path.split("/")[-2] == trial_name:
                    with fs.open_input_stream(info.path) as f:
                        lines = f.read().decode().strip().splitlines()
                    if lines and json.loads(lines[-1]).get("done"):
                        return True
        except (OSError, ValueError):
            return False
        return False

    def folder(self) -> Path:
        """The results as a folder: the bucket copied into one (checkpoints included)."""
        if self.endpoint:
            import pyarrow.fs

            shutil.rmtree(self.local, ignore_errors=True)
            self.local.mkdir(parents=True)
            pyarrow.fs.copy_files(self.uri.removeprefix("s3://"), str(self.local), source_filesystem=self._fs())
        return self.local


def staged_ends_not_stored(ray_tmp: Path, storage: Storage) -> set[Path]:
    """The trials' rows in drivers' staging folders (under the cluster's Ray temp dir) that end in `done` while their
    rows on storage do not yet: a driver killed then leaves the only copy of a finished trial's last rows in staging."""
    try:
        staged = list(ray_tmp.rglob("driver_artifacts/*/result.json"))
    except OSError:  # a folder of Ray's deleted while walked: the next look sees it
        return set()
    return {path for path in staged if _ends_done(path) and not storage.ends_done(path.parent.name)}


def _ends_done(result: Path) -> bool:
    try:
        lines = result.read_text().strip().splitlines()
        return bool(lines) and bool(json.loads(lines[-1]).get("done"))
    except (OSError, ValueError):
        return False


@pytest.mark.learning
@pytest.mark.xdist_group("clusters")
@pytest.mark.parametrize("kind, seed", KEPT_UP)
def test_drivers_killed_at_random_moments_on_a_cluster_that_stays_up_store_each_trial_once(tmp_path, kind, seed,
                                                                                           request):
    """The resume invariant as a property on a cluster that stays up (issue 64: a Ray Client or `ray job submit`
    driver that dies, then `--resume`): a `ray start` head of 2 CPUs on loopback, a file of three grids of two
    trials; the driver alone SIGKILLed three times and resumed each time on the same cluster, then resumed to the
    end. The cluster keeps each killed driver's staging folder, with rows never copied onto storage and trial folders
    Tune's last saved state does not know. A schedule (drawn from `seed`) sets Tune's state-save period (its own, 30
    s or 3600 s, which widen those windows), how often trials checkpoint (each iteration, every second, at the end
    only: Tune also saves its state every 2 checkpoints of a trial, the number kept), and each kill's moment: 5-25 s
    after the run starts (the grid takes ~30 s), or as soon as a trial's staged rows end in `done` while storage's
    do not (`staged_ends_not_stored`). Then: every trial stored once (no second folder of one trial), its rows
    1..T once each in its last timeline, its `done` row on storage, and `report` reads each seed once; on a folder,
    and on an S3 bucket (moto's server on loopback: Tune writes the bucket through pyarrow, as any). On the code
    before the staged rows were merged (4a7cd92^) seeds 6, 2, 23 and 10 failed: "4 row(s) the killed driver wrote but
    never copied onto storage dropped ... kept as finished, those rows missing", a grid short of a trial.
    KAPPA_KEPT_UP_SEEDS=<seed> replays a schedule (the moments; what each kill hits also depends on the machine)."""
    import secrets

    from nodes import free_port

    from kappa_rllib.report.load import load_runs

    rng = random.Random(seed)
    store = Storage(tmp_path, request.getfixturevalue("s3_endpoint") if kind == "bucket" else None)
    port, ray_tmp = free_port(), Path(f"/tmp/ku{os.getpid()}_{kind[0]}{seed}_")  # (a pattern for kill_all: no prefix of another)
    period, every = rng.choice([None, "30", "3600"]), rng.choice([0, 1, 2])
    env = environment(ray_tmp, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32), **store.env(),
                      **({"TUNE_GLOBAL_CHECKPOINT_S": period} if period else {}))
    head = start_head(port, ray_tmp, env)
    schedule = [f"on a {kind}, Tune's state saved {f'every {period} s' if period else 'at its own period'}, a checkpoint "
                + (f"every {every} iteration(s)" if every else "at the end only")]
    proc = None
    try:
        wait_for_head(port)
        file = seam_file(tmp_path, seeds=2)
        args = [*CLI, "tune", str(file), "--storage", store.uri, "--max-concurrent", "2", "--checkpoint-every",
                str(every), "--address", f"127.0.0.1:{port}"]
        drawn_at_an_end = False
        for attempt in range(3):
            log = tmp_path / f"run{attempt + 1}.log"
            with open(log, "w") as out:
                proc = subprocess.Popen([*args, *(["--resume"] if attempt else [])], cwd=ROOT, env=env,
                                        stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            at_an_end, moment, started = rng.random() < 0.5, rng.uniform(5, 25), time.monotonic()
            drawn_at_an_end = drawn_at_an_end or at_an_end
            before = staged_ends_not_stored(ray_tmp, store) if at_an_end else set()
            while proc.poll() is None and time.monotonic() - started < (45 if at_an_end else moment):
                if at_an_end and staged_ends_not_stored(ray_tmp, store) - before:  # a trial's end, in this run
                    break
                time.sleep(0.1 if kind == "folder" else 0.3)
            took = time.monotonic() - started
            if proc.poll() is not None:
                schedule.append(f"run {attempt + 1} ended by itself at {took:.1f} s, exit {proc.returncode}")
                assert proc.returncode == 0, (schedule, log.read_text()[-3000:])
                continue
            os.killpg(proc.pid, signal.SIGKILL)  # the driver alone: the cluster, its staging folders, stay
            proc.wait(timeout=30)
            schedule.append(f"run {attempt + 1}'s driver killed at {took:.1f} s"
                            + (" (a trial's end staged, not stored)" if at_an_end and took < 45 else ""))
        out = run([*args, "--resume"], env)
        variable = "KAPPA_KEPT_UP_SEEDS" if kind == "folder" else "KAPPA_KEPT_UP_BUCKET_SEEDS"
        replay = f"kill schedule seed {seed} ({'; '.join(schedule)}): {variable}={seed} replays it"
        print(replay)
        assert any("killed" in moment for moment in schedule), f"{replay}: no driver was killed"
        if every == 0 and period:  # (the window is wide: trials end before Tune saves; a kill drawn for it lands)
            assert any("staged, not stored" in moment for moment in schedule) or not drawn_at_an_end, \
                f"{replay}: no kill landed as a trial's end was staged"
        assert out.returncode == 0, (replay, (out.stdout + out.stderr)[-3000:])
        try:
            results = store.folder() / "seams"
            check_invariants(results, trials_per_grid=2)
            seeds = sorted((Path(run_.path).relative_to(results).parts[0], run_.done, run_.seed)
                           for run_ in load_runs(results))
            assert seeds == sorted((grid, True, s) for grid in GRIDS for s in (0, 1)), seeds
        except AssertionError as e:
            raise AssertionError(f"{replay}; the last resume said:\n{out.stderr[-2000:]}") from e
    finally:
        if proc is not None and proc.poll() is None:  # (a driver its command line does not tie to ray_tmp)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        kill_all(head, ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)


@pytest.mark.learning
def test_wandb_rows_a_killed_driver_lost_are_logged_again_by_resume(tmp_path):
    """W&B's writer holds a run's rows in memory: a driver killed after its trial's second checkpoint leaves
    W&B's run file without rows that result.json on storage has. --resume logs them again before the trial
    goes on; and a trial that had ended (its W&B file cut to its header here, as such a kill leaves it) gets
    its rows again in a W&B run of its own at the end of a --resume with nothing left to run."""
    from kappa_rllib.tuning.tracking import wandb_steps

    file, storage, ray_tmp = seam_file(tmp_path), tmp_path / "results", Path(f"/tmp/ks{os.getpid()}w")
    env = environment(ray_tmp)
    args = tune_args(file, storage, "--grids", "kappa_pi_dqn", "--track", "wandb", "--track-project", "seams")
    file_dir = storage / "seams"
    proc = subprocess.Popen(args, cwd=ROOT, env=env, text=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    try:
        while time.time() < deadline:  # the trial's checkpoint at iteration 2 on storage, and its rows
            results = list(file_dir.glob("kappa_pi_dqn/*/result.json"))
            if results and list(results[0].parent.glob("checkpoint_000001")) and \
                    len(results[0].read_text().splitlines()) >= 2:
                break
            assert proc.poll() is None, "the run ended before its trial's second checkpoint"
            time.sleep(0.2)
        else:
            pytest.fail("no second checkpoint within 300 s")
    finally:
        kill_all(proc, ray_tmp)
    stored = [json.loads(line) for line in results[0].read_text().splitlines()]
    trial_id = stored[0]["trial_id"]
    (run_file,) = {p.name for p in file_dir.glob(f"wandb/*run-*-{trial_id}/run-*{trial_id}.wandb")}
    run_id = run_file[len("run-"):-len(".wandb")]  # <storage key>-<trial id> (kappa_rllib.tuning.tracking)
    lost = {r[STEP.split("/")[0]][STEP.split("/")[1]] for r in stored} - wandb_steps(file_dir, run_id)
    assert lost, "W&B's file kept every row: the premise (a killed writer loses its rows) no longer holds"
    out = run([*args, "--resume"], env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    check_invariants(file_dir, grids=("kappa_pi_dqn",), wandb=True)

    for path in file_dir.glob(f"wandb/offline-run-*-{run_id}/run-{run_id}.wandb"):
        path.write_bytes(path.read_bytes()[:7])  # its header only: what a kill before W&B's writer ran leaves
    assert not wandb_steps(file_dir, run_id)
    out = run([*args, "--resume"], env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    check_invariants(file_dir, grids=("kappa_pi_dqn",), wandb=True)
    folders = len(list(file_dir.glob(f"wandb/offline-run-*-{trial_id}")))
    out = run([*args, "--resume"], env)  # W&B holds them now: no run of the trial is added
    assert out.returncode == 0 and folders == len(list(file_dir.glob(f"wandb/offline-run-*-{trial_id}")))


def test_replay_rows_takes_the_last_timeline_up_to_the_checkpoint_less_what_wandb_holds():
    from kappa_rllib.tuning.tracking import replay_rows

    def row(iteration, seconds):  # the kappa algorithms end iteration k at the same env step on any timeline
        return {"training_iteration": iteration, "time_total_s": seconds,
                "env_runners": {"num_env_steps_sampled_lifetime": 100 * iteration}}

    # iterations 1-3, a rollback to 1 (2 and 3 rerun, at the same env steps, later), then 2 and 3 again
    rows = [row(1, 1.5), row(2, 3.0), row(3, 4.5), row(2, 9.0), row(3, 10.5)]
    assert replay_rows(rows, set()) == [row(1, 1.5), row(2, 9.0), row(3, 10.5)]
    # W&B holds the first timeline (1-3): the rerun 2 and 3 are what it lacks
    assert replay_rows(rows, {(100, 1.5), (200, 3.0), (300, 4.5)}) == [row(2, 9.0), row(3, 10.5)]
    assert replay_rows(rows, {(100, 1.5), (300, 10.5)}, up_to=3) == [row(2, 9.0)]
    assert replay_rows(rows, {(100, 1.5)}, up_to=2) == [row(2, 9.0)]
    assert replay_rows(rows, set(), up_to=0) == []


def test_an_ended_trial_whose_rows_wandb_holds_is_checked_once_then_from_the_cache(tmp_path, monkeypatch):
    """--resume with --track wandb looks at each ended trial for rows its W&B runs lack (`missing_rows`). A full
    check reads result.json and every W&B file of the run (~0.3 s for a 2M-step trial); where it finds nothing
    missing, the next --resume reads neither while W&B's files are unchanged, and reads them again when one
    changes (here: cut to its header, as a kill leaves it)."""
    import pyarrow.fs

    from kappa_rllib.tuning import tracking

    def row(iteration):
        return {"training_iteration": iteration, "time_total_s": 1.5 * iteration,
                "env_runners": {"num_env_steps_sampled_lifetime": 100 * iteration, "episode_return_mean": 9.0}}

    rows = [row(i) for i in (1, 2, 3)]
    (tmp_path / "trial").mkdir()
    (tmp_path / "trial" / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    trial = SimpleNamespace(trial_id="abc12_00000", last_result=rows[-1], storage=SimpleNamespace(
        trial_fs_path=str(tmp_path / "trial"), storage_filesystem=pyarrow.fs.LocalFileSystem()))
    _wandb_offline_run(tmp_path, trial.trial_id, rows[:2])  # a killed driver's run: its last row lost
    reads = {"result.json": 0, "wandb": 0}

    def counted(name, function):
        def wrapper(*args, **kwargs):
            reads[name] += 1
            return function(*args, **kwargs)
        return wrapper

    from kappa_rllib.tuning.tracking import track_wandb, wandb_files

    monkeypatch.setattr(track_wandb, "stored_rows", counted("result.json", track_wandb.stored_rows))
    monkeypatch.setattr(wandb_files, "_read_held", counted("wandb", wandb_files._read_held))

    assert tracking.missing_rows(tmp_path, trial) == [rows[2]]
    assert tracking.missing_rows(tmp_path, trial) == [rows[2]]  # not complete: read again, W&B's files cached
    assert reads == {"result.json": 2, "wandb": 1}
    assert tracking.missing_rows(tmp_path, trial, up_to=2) == []  # a trial going on from its checkpoint at 2

    _wandb_offline_run(tmp_path, trial.trial_id, rows[2:])  # --resume logged it again, in a run of its own
    assert tracking.missing_rows(tmp_path, trial) == []  # the new file: a full check, W&B complete
    assert reads == {"result.json": 4, "wandb": 2}
    assert tracking.missing_rows(tmp_path, trial) == [] and tracking.missing_rows(tmp_path, trial) == []
    assert reads == {"result.json": 4, "wandb": 2}  # from the cache: neither read again

    trial.last_result = row(4)  # a last result the check has not seen (the trial went on): a full check
    assert tracking.missing_rows(tmp_path, trial) == [] and reads == {"result.json": 5, "wandb": 2}
    trial.last_result = rows[-1]

    for path in tmp_path.glob(f"wandb/offline-run-*-{trial.trial_id}/run-{trial.trial_id}.wandb"):
        path.write_bytes(path.read_bytes()[:7])  # W&B's files cut to their header: the cache no longer holds
    assert tracking.missing_rows(tmp_path, trial) == rows and reads == {"result.json": 6, "wandb": 3}
    cache = tmp_path / "wandb" / "kappa-held" / f"{trial.trial_id}.json"
    cache.write_text("{not json")  # a cache cut short: the files are read
    assert tracking.missing_rows(tmp_path, trial) == rows and reads == {"result.json": 7, "wandb": 4}
    assert tracking.wandb_steps(tmp_path, trial.trial_id) == set()


@pytest.mark.slow
@pytest.mark.xdist_group("clusters")
def test_errored_trials_resumed_with_a_new_cap_and_retry_budget(tmp_path):
    """First run: every trial's code raises at each try (--max-failures 1: the code's error is retried once,
    the retry raises again, and the trial errs). --resume --max-concurrent 1 --max-failures 3: the errored
    trials come back (Tune queues them with add_trial, past the shared cap's generator) and their processes
    die twice (lost nodes, counted by --max-failures): with this run's budget, counted from where the resume
    took them up, and cap they all finish, one at a time (before, a trial that had errored in its code
    error's retry kept that retry's budget, and its first lost node ended it)."""
    file, storage, ray_tmp = seam_file(tmp_path, env="crash_env:KappaCrash-v0"), tmp_path / "results", \
        Path(f"/tmp/ks{os.getpid()}b")
    out = run(tune_args(file, storage, "--max-failures", "1"), environment(ray_tmp))
    assert out.returncode == 1 and out.stderr.count("[tune] failed:") == 3, (out.stdout + out.stderr)[-3000:]
    assert all(path.read_text().count("Failure # 2") == 1 for path in (storage / "seams").glob("*/*/error.txt"))
    healed = tmp_path / "healed"
    healed.touch()  # crash_env: no more errors of the code
    exits = tmp_path / "exits"
    exits.mkdir()  # crash_env: the first two processes to reach step 300 die (os._exit)
    out = run(tune_args(file, storage, "--resume", "--max-concurrent", "1", "--max-failures", "3"),
              environment(ray_tmp, KAPPA_CRASH_ONCE=str(healed), KAPPA_EXIT_TWICE=str(exits)))
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert len(list(exits.glob("exit_*"))) == 2
    check_invariants(storage / "seams", cap=1)


@pytest.mark.slow
@pytest.mark.xdist_group("clusters")
def test_a_population_beside_plain_grids_killed_and_resumed_with_mlflow(tmp_path):
    """A PBT population beside the three plain grids, --track mlflow, killed twice and resumed: every member
    and trial ends once at T, each logged once in the file's store."""
    file, storage, ray_tmp = seam_file(tmp_path, population=True), tmp_path / "results", \
        Path(f"/tmp/ks{os.getpid()}c")
    env = environment(ray_tmp)
    args = tune_args(file, storage, "--track", "mlflow", "--track-project", "seams")
    rng = random.Random(48)
    for attempt in range(2):
        proc = subprocess.Popen([*args, *(["--resume"] if attempt else [])], cwd=ROOT, env=env, text=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(timeout=rng.uniform(20, 50))
        except subprocess.TimeoutExpired:
            kill_all(proc, ray_tmp)
    out = run([*args, "--resume"], env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    check_invariants(storage / "seams", grids=(*GRIDS, "pbt_kappa_pi_dqn"), population={"pbt_kappa_pi_dqn": 2},
                     mlflow=True)


@pytest.mark.slow
@pytest.mark.xdist_group("clusters")
def test_the_file_on_a_ray_start_cluster_with_tracking(tmp_path):
    """--address on a `ray start` head of 2 CPUs on loopback, --track mlflow,wandb with one shared MLflow
    store named by MLFLOW_TRACKING_URI (as a team's server would be): the invariants."""
    from nodes import free_port

    import secrets

    port, ray_tmp = free_port(), Path(f"/tmp/ks{os.getpid()}d")
    shared = tmp_path / "shared" / "mlflow.db"
    shared.parent.mkdir()
    env = environment(ray_tmp, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32),  # Ray 2.60's default
                      MLFLOW_TRACKING_URI=f"sqlite:///{shared}")
    head = start_head(port, ray_tmp, env)
    try:
        wait_for_head(port)
        file, storage = seam_file(tmp_path), tmp_path / "results"
        out = run([*tune_args(file, storage, "--track", "mlflow,wandb", "--track-project", "seams"), "--address",
                   f"127.0.0.1:{port}"], env)
        assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
        check_invariants(storage / "seams", mlflow=shared, wandb=True)
        assert not (storage / "seams" / "mlflow.db").exists()
    finally:
        kill_all(head, ray_tmp)


# ------------------------------------------------------------------------------------------ each seam, fast
def test_grids_setting_up_at_once_share_one_mlflow_store_and_leave_the_global_uri_alone(tmp_path):
    """Three grids' MLflow callbacks set up at the same moment on a fresh store (the grids start together):
    one experiment, each grid's trial run once under its tag, and MLflow's process-global tracking URI
    untouched (Ray's callback set it per grid: a UNIQUE-constraint crash, or runs in the wrong store)."""
    import mlflow

    from kappa_rllib.tuning.tracking import MLflowCallback

    before = mlflow.get_tracking_uri()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    callbacks = [MLflowCallback(uri, "kt", grid) for grid in GRIDS]
    barrier = threading.Barrier(len(callbacks))
    errors = []

    def set_up_and_log(callback, index):
        try:
            barrier.wait()
            callback.setup()
            trial = SimpleNamespace(trial_id=f"t{index}", config={"kappa": 0.84, "seed": index})
            callback.log_trial_start(trial)
            for steps in (500, 1000):
                callback.log_trial_result(1, trial, {"env_runners": {"num_env_steps_sampled_lifetime": steps,
                                                                     "episode_return_mean": float(index)}})
            callback.log_trial_end(trial)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=set_up_and_log, args=(c, i)) for i, c in enumerate(callbacks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert mlflow.get_tracking_uri() == before
    client = mlflow.MlflowClient(tracking_uri=uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "kt"]
    runs = client.search_runs([experiment.experiment_id])
    assert sorted((r.data.tags["grid"], r.data.tags["trial_id"], r.info.status) for r in runs) == [
        ("dqn", "t2", "FINISHED"), ("kappa_pi_dqn", "t0", "FINISHED"), ("kappa_vi_dqn", "t1", "FINISHED")]
    for r in runs:
        history = client.get_metric_history(r.info.run_id, "env_runners/episode_return_mean")
        assert [m.step for m in history] == [500, 1000]
    # a new driver (--resume) goes on in the trial's run: its callback is unpickled from tuner.pkl
    import pickle

    again = pickle.loads(pickle.dumps(callbacks[0]))
    again.setup()
    again.log_trial_start(SimpleNamespace(trial_id="t0", config={}))
    again.log_trial_result(2, SimpleNamespace(trial_id="t0", config={}),
                           {"env_runners": {"num_env_steps_sampled_lifetime": 1500}})
    assert len(client.search_runs([experiment.experiment_id])) == 3


def test_wandb_keeps_every_row_after_a_rollback(tmp_path, monkeypatch):
    """Rows of iterations 1, 2, 3, then 2, 3, 4 (a retry from the checkpoint at 1): W&B keeps all six on
    its own step, the env steps (the x-axis) going back with the rollback. Ray's actor logged
    step=training_iteration, and W&B dropped the three rows whose step was not above the last."""
    import queue

    from ray.air.integrations.wandb import _QueueItem

    from kappa_rllib.tuning.tracking import _wandb_callback
    from test_tracking import wandb_run

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    callback = _wandb_callback("kt", "grid", tmp_path, None)
    items = queue.Queue()
    cwd = os.getcwd()  # Ray's actor moves to its logdir
    actor = callback._logger_actor_cls(logdir=str(tmp_path), queue=items, exclude=[], to_config=[],
                                       id="trial1", name="trial1", project="kt", dir=str(tmp_path), resume="allow")
    for iteration, steps in ((1, 100), (2, 200), (3, 300), (2, 200), (3, 300), (4, 400)):
        items.put((_QueueItem.RESULT, {"training_iteration": iteration, "env_runners": {
            "num_env_steps_sampled_lifetime": steps, "episode_return_mean": float(10 * iteration + steps)}}))
    items.put((_QueueItem.END, None))
    try:
        actor.run()
    finally:
        os.chdir(cwd)
    (folder,) = (tmp_path / "wandb").glob("offline-run-*")
    deadline = time.time() + 30
    while True:  # W&B's writer may still be flushing the run file after finish() returns
        _, history = wandb_run(folder)
        if len(history) >= 6 or time.time() > deadline:
            break
        time.sleep(0.5)
    assert [(h["training_iteration"], h[STEP]) for h in history] == [(1, 100), (2, 200), (3, 300), (2, 200),
                                                                      (3, 300), (4, 400)]


def test_a_resumed_grid_takes_this_runs_max_failures():
    """Tune saves each trial's max_failures with it (and a resumed generator makes new trials from its saved
    spec) and decides by that value: the retry policy gives each trial this run's budget as it starts
    (before, a grid started with --max-failures 0 and resumed with 3 gave its trials no retry)."""
    from kappa_rllib.tuning import retry

    policy = retry.retry_policy(3)
    stored = SimpleNamespace(trial_id="t1", max_failures=0, run_metadata=SimpleNamespace(num_failures=1))
    retrying = SimpleNamespace(trial_id="t2", max_failures=2, run_metadata=SimpleNamespace(num_failures=2))
    made_after = SimpleNamespace(trial_id="t3", max_failures=0, run_metadata=SimpleNamespace(num_failures=0))
    policy.code_errors, policy.retrying_code_error = {"t2": 1}, {"t2"}
    for trial in (stored, retrying, made_after):
        policy.on_trial_start(0, [], trial)
    # (the first had errored, 1 failure past its 0: it counts this run's 3 from its resume)
    assert (stored.max_failures, retrying.max_failures, made_after.max_failures) == (1 + 3, 2, 3)


def test_a_trial_resumed_after_it_errored_gets_this_runs_budget_counted_from_its_resume(tmp_path):
    """A trial whose code error's retry failed too ends with an error (Tune's count: 2 failures). Its policy
    state (saved with Tune's, restored by --resume) says it errored, so the new driver counts its budget from
    its 2 failures: this run's 3 node losses and a code error's retry again."""
    from ray.exceptions import ActorDiedError
    from ray.tune.callback import CallbackList

    from kappa_rllib.tuning import retry

    policy = retry.retry_policy(1)
    trial = SimpleNamespace(trial_id="t1", max_failures=1, run_metadata=SimpleNamespace(num_failures=0),
                            pickled_error_file=None, get_pickled_error=lambda: RuntimeError("its own code"))
    policy.on_trial_start(0, [], trial)
    trial.run_metadata.num_failures = 1
    policy.on_trial_recover(1, [trial], trial)  # its code: retried once, one more failure ends it
    assert trial.max_failures == 1
    trial.run_metadata.num_failures = 2  # the retry raised too: Tune ends it (2 > 1)
    policy.on_trial_error(2, [trial], trial)
    CallbackList([policy]).save_to_dir(str(tmp_path), session_str="s")

    resumed = retry.retry_policy(3)
    CallbackList([resumed]).restore_from_dir(str(tmp_path))
    legacy = retry.retry_policy(3)  # a state saved before errored trials were kept (or none): told by the counts
    legacy.retrying_code_error = {"t1"}
    legacy.on_trial_start(0, [], trial)
    assert trial.max_failures == 2 + 3 and legacy.base == {"t1": 2} and not legacy.retrying_code_error
    trial.max_failures = 1
    resumed.on_trial_start(0, [], trial)
    assert trial.max_failures == 2 + 3
    trial.get_pickled_error = ActorDiedError
    for failures in (3, 4):  # two lost nodes: each retried (Tune: failures <= max_failures)
        trial.run_metadata.num_failures = failures
        resumed.on_trial_recover(failures, [trial], trial)
        assert trial.max_failures == 5
    trial.get_pickled_error = lambda: RuntimeError("its own code")
    trial.run_metadata.num_failures = 5  # an error of its code: within the budget, so retried, once
    resumed.on_trial_recover(5, [trial], trial)
    assert (resumed.retrying_code_error, resumed.code_errors, trial.max_failures) == ({"t1"}, {"t1": 1}, 5)
    resumed.on_trial_start(0, [], trial)  # the retry's start in the same run: not taken for a resume
    assert trial.max_failures == 5
    resumed.on_checkpoint(0, [], trial, checkpoint=None)  # got past it: the code error counts in the budget
    assert trial.max_failures == 2 + 3 + 1


def test_the_printed_resume_command_keeps_every_setting_the_run_was_given():
    """`resume with: ...` (a stop, a failed grid, a full disk) is the run's own command with --resume: tracking,
    the cap, retries, checkpoints, the cluster and resources kept; defaults left out."""
    import argparse
    import shlex

    from kappa_rllib.cli import tune as tune_verb

    parser = argparse.ArgumentParser()
    tune_verb.add_parser(parser.add_subparsers())
    argv = ["tune", "my file.py", "--storage", "/mnt/results", "--grids", "a,b", "--seeds", "5-9",
            "--max-concurrent", "40",
            "--checkpoint-every", "50", "--max-failures", "3", "--track", "wandb,mlflow", "--track-project", "p",
            "--wandb-entity", "lab", "--address", "ray://head:10001", "--num-cpus", "8", "--torch-threads", "2",
            "--gpus-per-trial", "0.25", "--tensorboard", "--report"]
    args = parser.parse_args(argv)
    command = tune_verb._resume_command(args)
    assert command.startswith("kappa-rllib tune 'my file.py' --storage /mnt/results --resume ")
    resumed = parser.parse_args(shlex.split(command)[1:])
    assert resumed.resume and {k: v for k, v in vars(resumed).items() if k != "resume"} == {
        k: v for k, v in vars(args).items() if k != "resume"}
    zero = parser.parse_args(["tune", "f.py", "--max-failures", "0", "--checkpoint-every", "0"])
    assert tune_verb._resume_command(zero).endswith(" --resume --checkpoint-every 0 --max-failures 0")
    args.track = ["mlflow"]  # as check_track leaves it: a list of back-ends (no W&B: no entity)
    assert tune_verb._resume_command(args).count("--track mlflow --track-project p --address") == 1
    plain = parser.parse_args(["tune", "f.py"])
    assert tune_verb._resume_command(plain) == "kappa-rllib tune f.py --storage results/tune --resume"


@pytest.mark.learning
def test_resume_applies_this_runs_checkpoint_every_to_the_trials_it_takes_up(tmp_path):
    """A grid started without --checkpoint-every, stopped (SIGINT: Tune saves its state) and resumed with
    --checkpoint-every 20: Tune keeps each trial's checkpoint settings with it, so before, no checkpoint came
    before the trial's end. Now the trial checkpoints every 20 iterations: the last two kept (of 20, 40, 60, 80;
    Tune numbers them from 0)."""
    file = tmp_path / "long.py"
    file.write_text(textwrap.dedent("""\
        from kappa_rllib.experiments import SMOKE_SETTINGS, paper_grids

        def experiments(smoke=False):
            settings = {**SMOKE_SETTINGS["dqn"], "total_env_steps": 40_000}  # 80 iterations of 500
            return paper_grids("dqn", "CartPole-v1", kappas=[0.84], c_fa=[0.2], num_seeds=1, variants=("pi",),
                               baseline=False, **settings)
        """))
    storage, env = tmp_path / "results", environment(Path(f"/tmp/ks{os.getpid()}c"))
    args = [*CLI, "tune", str(file), "--storage", str(storage), "--num-cpus", "1"]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline and not [p for p in storage.glob("long/*/*/result.json")
                                          if len(p.read_text().splitlines()) >= 1]:
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=300) == 130
    assert "--checkpoint-every" not in proc.stderr.read()  # (the resume line: none was given)
    (trial,) = storage.glob("long/*/*/result.json")
    rows = [json.loads(line) for line in trial.read_text().splitlines()]
    assert not rows[-1]["done"] and not list(trial.parent.glob("checkpoint_*"))
    out = run([*args, "--resume", "--checkpoint-every", "20"], env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert sorted(p.name for p in trial.parent.glob("checkpoint_*")) == ["checkpoint_000002", "checkpoint_000003"]


def test_a_resume_of_a_grid_that_changed_in_the_file_is_refused_in_one_line_before_ray(tmp_path):
    """The file's first grid now makes 2 trials (a seed added), its stored run was started with 1: Tune would
    go on with the stored run's one trial and never run the other, and every --resume would say one is left
    (exit 130: a cluster job retrying on it loops). Refused: one line naming the grid, exit 2, nothing written,
    before Ray starts. The same count goes on; the same count with other seeds (`--seeds`) is refused too."""
    from ray import cloudpickle

    from kappa_rllib import experiments
    from kappa_rllib.cli import tune as tune_verb
    from kappa_rllib.tuning import checks

    file, storage = seam_file(tmp_path, seeds=2), tmp_path / "results"
    folder = storage / "seams" / "kappa_pi_dqn"
    folder.mkdir(parents=True)
    state = folder / "basic-variant-state-2026-12-02_10-00-00.json"  # Tune's search state: a pickle
    state.write_bytes(cloudpickle.dumps({"_total_samples": 1, "_finished": True}))
    before = sorted(p.name for p in storage.rglob("*"))
    out = run([*CLI, "tune", str(file), "--storage", str(storage), "--resume"], environment(tmp_path / "ray"))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"kappa-rllib: error: {folder}: grid 'kappa_pi_dqn' makes 2 trials in the file now, "
                                 "its run there was started with 1: a changed grid cannot go on"), out.stderr
    assert sorted(p.name for p in storage.rglob("*")) == before and not (tmp_path / "ray").exists()
    state.write_bytes(cloudpickle.dumps({"_total_samples": 2, "_finished": True}))
    checks.check_resume(experiments.load_file(str(file)), storage / "seams")  # the same trials: goes on
    # as many trials, other values on an axis (`--seeds 5-6` where 0-1 ran): refused too, naming the axis
    state.write_bytes(cloudpickle.dumps({"_total_samples": 2, "_finished": True, "_iterators": [
        SimpleNamespace(unresolved_spec={"config": {"seed": {"grid_search": [0, 1]}, "lr": 1e-3}})]}))
    grids = experiments.load_file(str(file))
    checks.check_resume(grids, storage / "seams")  # the seeds it ran
    tune_verb._with_seeds(grids, [5, 6])
    with pytest.raises(ValueError, match=r"grid 'kappa_pi_dqn' has seed \[5, 6\] in the file now, its run there "
                                         r"was started with \[0, 1\]: a changed grid cannot go on"):
        checks.check_resume(grids, storage / "seams")
    # counted as Tune counts them: a grid_search at any depth of the config (here the model's layers)
    nested = SimpleNamespace(config={"lr": {"grid_search": [1e-3, 1e-4]},
                                     "model": {"fcnet_hiddens": {"grid_search": [[64], [256]]}}}, num_samples=3)
    assert checks.count_trials(nested) == 12


def test_a_fresh_run_refused_for_a_later_grid_writes_nothing_for_the_earlier_ones(tmp_path):
    """The third grid's folder holds a run: a fresh `tune` is refused in one line before Ray starts, and
    the first two grids' folders get no tuner.pkl (the next attempt would be refused for them too)."""
    file, storage = seam_file(tmp_path), tmp_path / "results"
    (storage / "seams" / "dqn").mkdir(parents=True)
    (storage / "seams" / "dqn" / "tuner.pkl").write_bytes(b"x")
    out = run(tune_args(file, storage), environment(Path(f"/tmp/ks{os.getpid()}e")), timeout=120)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        f"kappa-rllib: error: {storage / 'seams' / 'dqn'} already holds a run of grid 'dqn': pass --resume to "
        "continue it, or choose another --storage"]
    assert sorted(p.name for p in (storage / "seams").iterdir()) == ["dqn"]


@pytest.mark.learning
def test_a_grids_tune_run_that_raises_stops_the_others_in_one_line_and_resume_finishes(tmp_path):
    """The second grid's Tune run raises (a ConnectionError in its stopper, not a trial's error): one line
    naming the grid and the error (no traceback, no "disk full"), exit 1, the other grids stopped with their
    state saved; --resume finishes every trial once."""
    marker = tmp_path / "network_back"
    file, storage = seam_file(tmp_path, failing_stopper=str(marker)), tmp_path / "results"
    env = environment(Path(f"/tmp/ks{os.getpid()}f"))
    out = run(tune_args(file, storage), env)
    assert out.returncode == 1, (out.stdout + out.stderr)[-3000:]
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("kappa-rllib: error:")]
    assert line.startswith("kappa-rllib: error: grid 'kappa_vi_dqn' stopped: ConnectionError: the network went "
                           "away (a deliberate error of the grid's Tune run); the other grids (kappa_pi_dqn, dqn) "
                           "were stopped and saved their state; --resume goes on from each trial's last checkpoint;"
                           " resume with: kappa-rllib tune "), line
    assert "Traceback" not in out.stderr and "disk" not in line
    marker.touch()
    out = run([*tune_args(file, storage), "--resume"], env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    check_invariants(storage / "seams")


@pytest.mark.learning
def test_resume_keeps_a_trial_that_finished_after_tunes_last_state_finished(tmp_path):
    """A kill between a trial's checkpoint (written straight to storage) and Tune's next copy of its state and
    rows onto storage leaves a state that says RUNNING with an older checkpoint, and stored rows that may stop
    short. Made here by rewriting a finished grid's state and rows so, for each grid a case:

    * kappa-PI-DQN: every row stored: --resume keeps it finished (before, it was pointed at its final
      checkpoint, whose schedule is complete, and failed);
    * DQN: its last row not stored, but in the killed driver's staging folder, in the Ray session before this
      one on the same machine (a laptop's driver killed with its Ray): merged into storage, kept finished;
    * kappa-VI-DQN: rows 1-2 stored, no staging folder left (a new cluster), whole checkpoints at 3 and 4 (its
      end): it starts over, both checkpoints and its rows moved aside. Before, it resumed from 3, row 3 missing for good (CI:
      `test_a_file_of_three_grids_killed_...` found a trial whose stored rows began at iteration 2).

    Each ends at T with every row of its last timeline (`check_invariants`)."""
    from ray import cloudpickle
    from ray.tune.experiment.trial import Trial

    file, storage, ray_tmp = seam_file(tmp_path), tmp_path / "results", Path(f"/tmp/ks{os.getpid()}g")
    env = environment(ray_tmp)
    out = run(tune_args(file, storage), env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    check_uploaded_whole(storage / "seams", ray_tmp)
    trials = list((storage / "seams").glob("*/*/result.json"))
    assert len(trials) == 3 and not list((storage / "seams").rglob("events.out.tfevents.*"))  # no --tensorboard
    staged = {p.parent.name: p.parent for p in ray_tmp.rglob("driver_artifacts/*/result.json")}
    for grid, stored_rows in (("kappa_pi_dqn", 4), ("dqn", 3), ("kappa_vi_dqn", 2)):
        state_file = sorted((storage / "seams" / grid).glob("experiment_state-*.json"))[-1]
        state = json.loads(state_file.read_text())
        for row in state["trial_data"]:
            trial = Trial.from_json_state(row[0], stub=True)
            trial.restore_run_metadata(row[1])
            manager = trial.run_metadata.checkpoint_manager
            older = manager._checkpoint_results[0]  # two kept: the one before the final
            manager._latest_checkpoint_result = older
            trial.run_metadata._cached_json = None
            row[1] = trial.run_metadata.get_json_state()
            trial_state = json.loads(row[0])
            trial_state["status"] = "RUNNING"
            row[0] = json.dumps(trial_state)
        state_file.write_text(json.dumps(state))
        # Tune saves its generator's live trials with the state: the trial was live then
        search_file = sorted((storage / "seams" / grid).glob("basic-variant-state-*.json"))[-1]
        search = cloudpickle.loads(search_file.read_bytes())
        search["_live_trials"] = {trial.trial_id}
        search_file.write_bytes(cloudpickle.dumps(search))
        (result,) = (storage / "seams" / grid).glob("*/result.json")
        lines = result.read_text().splitlines(keepends=True)
        result.write_text("".join(lines[:stored_rows]))  # Tune had not copied the last rows onto storage
        csv = result.with_name("progress.csv")
        csv.write_text("".join(csv.read_text().splitlines(keepends=True)[:1 + stored_rows]))
        if grid == "kappa_vi_dqn":
            shutil.rmtree(staged[result.parent.name])
    out = run([*tune_args(file, storage), "--resume"], env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    said = out.stderr
    assert said.count("finished at iteration 4 after Tune last saved its state: kept as finished") == 2, said
    assert "1 row(s) the killed driver wrote but never copied onto storage merged into it (the trial finished)" \
        in said, said
    (vi_trial,) = (storage / "seams" / "kappa_vi_dqn").glob("*/result.json")
    assert ("its stored rows end at iteration 2, before its first whole checkpoint (the rows after were lost with "
            "the driver): it starts over from iteration 1; its 2 checkpoint(s) past its rows and its rows moved to "
            f".kappa_orphans/{vi_trial.parent.name}/") in said, said
    assert sorted(p.name for p in (storage / "seams" / "kappa_vi_dqn" / ".kappa_orphans" / vi_trial.parent.name)
                  .iterdir())[-2:] == ["progress.csv", "result.json"]
    timelines = check_invariants(storage / "seams")
    by_grid = {grid: [r["training_iteration"] for r in rows] for grid, rows in timelines.values()}
    assert by_grid == {grid: [1, 2, 3, 4] for grid in GRIDS}
    # started over without a checkpoint, Tune's loggers begin its rows afresh: storage holds the new timeline only
    (result,) = (storage / "seams" / "kappa_vi_dqn").glob("*/result.json")
    assert [json.loads(line)["training_iteration"] for line in result.read_text().splitlines()] == [1, 2, 3, 4]
    # the trial kept finished has its config on Tune's last result (Result.config), which its rows lack
    state_file = sorted((storage / "seams" / "kappa_pi_dqn").glob("experiment_state-*.json"))[-1]
    [row] = json.loads(state_file.read_text())["trial_data"]
    trial = Trial.from_json_state(row[0], stub=True)
    trial.restore_run_metadata(row[1])
    assert trial.run_metadata.last_result["config"]["seed"] == trial.config["seed"], trial.run_metadata.last_result
    for grid in ("kappa_pi_dqn", "dqn"):  # no trial left live for the shared cap to count forever
        search_file = sorted((storage / "seams" / grid).glob("basic-variant-state-*.json"))[-1]
        assert cloudpickle.loads(search_file.read_bytes())["_live_trials"] == set(), grid


def test_trials_waiting_for_resources_on_a_cluster_say_so_about_every_minute(monkeypatch, capsys):
    """tune on a cluster: one line for the file while none of its trials runs and they wait for what the
    cluster lacks; none while another grid's trial runs (Tune's queue) or the ask fits (about to start);
    train: a line per interval while it builds."""
    import ray

    from kappa_rllib import resources
    from kappa_rllib.tuning.progress import ResourceWait, WaitBoard

    free = {"CPU": 1.0}
    monkeypatch.setattr(ray, "available_resources", lambda: dict(free))
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    clock = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    board = WaitBoard(interval_s=60)
    a, b = ResourceWait("a", board), ResourceWait("b", board)
    pending = SimpleNamespace(status="PENDING", placement_group_factory=SimpleNamespace(required_resources={"CPU": 3.0}))
    for t in (0, 30, 61, 90, 122):
        clock[0] = t
        a.on_step_end(t, [pending, pending])
        b.on_step_end(t, [pending])
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["[tune] no trial running for 61 s: 3 wait for resources, each asking for 3 CPUs; the cluster has "
                     "1 CPU free (of 2)", "[tune] no trial running for 122 s: 3 wait for resources, each asking for "
                     "3 CPUs; the cluster has 1 CPU free (of 2)"]
    for t in (130, 200, 300):  # grid b's trial runs: the others queue behind it
        clock[0] = t
        a.on_step_end(t, [pending])
        b.on_step_end(t, [SimpleNamespace(status="RUNNING")])
    free["CPU"] = 3.0  # nothing runs, but the ask fits: about to start
    for t in (400, 470, 540):
        clock[0] = t
        a.on_step_end(t, [pending])
        b.on_step_end(t, [])
    assert capsys.readouterr().err == ""
    monkeypatch.undo()
    import io

    out = io.StringIO()
    monkeypatch.setattr(ray, "available_resources", lambda: {"CPU": 0.0})
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    # an actor waits to be placed (Ray's state API would ask whatever Ray this test process last joined, and
    # take its time doing so)
    monkeypatch.setattr(resources, "_actors_waiting", lambda need: True)
    with resources.WaitNotice("kappa-pi-trpo", {"CPU": 41.0}, interval_s=0.05, out=out) as notice:
        deadline = time.monotonic() + 10
        while notice.lines < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert notice.lines >= 2
    assert out.getvalue().splitlines()[0].endswith("s for resources: the run asks for 41 CPUs; the cluster has 0 CPU "
                                                   "free (of 2)")


def test_uploads_copy_only_the_files_that_changed_each_whole(tmp_path, monkeypatch):
    """sync.upload_folder: a first sync copies every file (less Tune's exclude patterns and the repair's own
    backups), a second copies none, a changed file alone is copied again (a rewrite of the same size too);
    a state file rewritten while it is read is not taken, a rows file appended to while it is read is taken
    as it was, whole rows only; a copy that fails (a full disk) leaves the storage copy as it was and the other
    files still copied; never a temporary file left."""
    from kappa_rllib.tuning import sync

    staging, target = tmp_path / "staging", tmp_path / "storage"
    (staging / "trial_0" / "checkpoint_000000").mkdir(parents=True)
    state = staging / "experiment_state-x.json"
    state.write_text('{"trial_data": [1, 2, 3]}')
    rows = staging / "trial_0" / "result.json"
    rows.write_text('{"training_iteration": 1}\n')
    (staging / "trial_0" / "checkpoint_000000" / "module.pt").write_bytes(b"\0" * 10)
    (staging / "trial_0" / "events.out.tfevents.1").write_bytes(b"x")
    (staging / ".kappa_rllib_experiment_state.json").write_text("stale")  # Tune's restore brings it back
    old = time.time_ns() - 10 * sync.RACY_NS  # stamps of files not modified just now
    for path in (state, rows):
        os.utime(path, ns=(old, old))
    exclude = ["*/checkpoint_*", "*.tfevents*"]

    def upload():
        return sync.upload_folder(str(staging), str(target), exclude)

    def stored():
        return sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())

    assert upload() == 2
    assert stored() == ["experiment_state-x.json", "trial_0/result.json"]
    assert upload() == 0
    state.write_text('{"trial_data": [7, 8, 9]}')  # the same size, another stamp
    os.utime(state, ns=(old + 1, old + 1))
    assert upload() == 1 and json.loads((target / state.name).read_text()) == {"trial_data": [7, 8, 9]}
    state.write_text('{"trial_data": [4, 5, 6]}')  # the same size, just now: copied again at the next sync
    assert upload() == 1 and upload() == 1
    os.utime(state, ns=(old + 2, old + 2))
    assert upload() == 1 and upload() == 0

    real_read = sync._read

    def rewritten_while_read(src, size):  # Tune's next snapshot, or the rest of a trial's row, lands meanwhile
        data = real_read(src, size)
        if "state" in src.name:
            Path(src.name).write_text('{"trial_da')  # rewritten in place: cut short for now
        else:
            with open(src.name, "a") as f:
                f.write('eration": 3}\n')
        return data

    state.write_text('{"trial_data": [1, 2, 3, 4]}')
    with open(rows, "a") as f:
        f.write('{"training_iteration": 2}\n{"training_it')  # a row half-flushed
    monkeypatch.setattr(sync, "_read", rewritten_while_read)
    assert upload() == 1  # the rows, as they were when the copy began, up to their last newline
    monkeypatch.setattr(sync, "_read", real_read)
    assert json.loads((target / state.name).read_text()) == {"trial_data": [4, 5, 6]}
    assert (target / "trial_0" / "result.json").read_text() == \
        '{"training_iteration": 1}\n{"training_iteration": 2}\n'
    assert upload() == 1  # the rows with iteration 3; the state, cut short (a snapshot being written), not taken
    assert [json.loads(x)["training_iteration"] for x in (target / "trial_0" / "result.json").read_text().splitlines()] \
        == [1, 2, 3]
    assert json.loads((target / state.name).read_text()) == {"trial_data": [4, 5, 6]}

    real_write = sync._write

    def disk_full(out, data):
        if b"trial_data" in data:
            out.write(data[:5])
            raise OSError(28, "No space left on device")
        real_write(out, data)

    state.write_text('{"trial_data": [1, 2, 3, 4, 5]}')
    with open(rows, "a") as f:
        f.write('{"training_iteration": 4}\n')
    monkeypatch.setattr(sync, "_write", disk_full)
    with pytest.raises(OSError) as raised:
        upload()
    assert raised.value.errno == 28
    assert json.loads((target / state.name).read_text()) == {"trial_data": [4, 5, 6]}
    assert (target / "trial_0" / "result.json").read_text().count("\n") == 4  # the others still copied
    assert not list(target.rglob("*" + sync.TMP_SUFFIX))
    monkeypatch.setattr(sync, "_write", real_write)
    assert upload() == 1  # the state (the rows, modified just now, are read again: the same, left as they are)
    assert json.loads((target / state.name).read_text()) == {"trial_data": [1, 2, 3, 4, 5]}
    assert stored() == ["experiment_state-x.json", "trial_0/result.json"]

    # Tune copying the storage file back into staging (a resume, a retry), read half-way: never fewer rows
    rows.write_text('{"training_iteration": 1}\n{"training_iteration": 2}\n{"traini')
    upload()
    assert (target / "trial_0" / "result.json").read_text().count("\n") == 4
    (staging / ".abc-tmp-basic-variant-state-x.json").write_bytes(b"half")  # Tune's own atomic-save temporary
    upload()
    assert stored() == ["experiment_state-x.json", "trial_0/result.json"]


def test_whole_uploads_is_the_copy_tunes_syncer_runs(tmp_path, monkeypatch):
    """Tune's driver syncer (`_FilesystemSyncer`, ray[rllib] pinned) looks its upload up by name at each sync:
    once `sync.install()`ed (by the WholeUploads callback's setup, where Tune's controller runs) it runs
    `sync.upload_folder` onto a local filesystem (the storage copy keeps the staging file's modification time,
    which pyarrow's copy does not), and Tune's own onto any other; installing twice wraps once."""
    import pyarrow.fs
    from ray.train._internal import storage
    from ray.train._internal.storage import _FilesystemSyncer

    from kappa_rllib.tuning import sync

    # start from Tune's own upload, put back as it was at the end (an in-process driver.run of an earlier test in
    # this worker, e.g. tests/test_config_once.py's, may have installed ours already)
    current = storage._upload_to_fs_path
    monkeypatch.setattr(storage, "_upload_to_fs_path", getattr(current, "_tunes_own", current))
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "result.json").write_text("{}\n")
    os.utime(staging / "result.json", ns=(1_000_000_000, 1_000_000_000))

    def upload(fs, target):
        command, kwargs = _FilesystemSyncer(storage_filesystem=fs, sync_period=0)._sync_up_command(
            str(staging), target)
        command(**kwargs)

    upload(pyarrow.fs.LocalFileSystem(), str(tmp_path / "b"))  # Tune's own copy
    assert (tmp_path / "b" / "result.json").stat().st_mtime_ns != 1_000_000_000
    original = storage._upload_to_fs_path
    assert not sync.installed()
    sync.WholeUploads().setup()
    sync.install()
    assert sync.installed() and storage._upload_to_fs_path._tunes_own is original
    upload(pyarrow.fs.LocalFileSystem(), str(tmp_path / "a"))
    assert (tmp_path / "a" / "result.json").stat().st_mtime_ns == 1_000_000_000
    mock = pyarrow.fs._MockFileSystem()  # any other filesystem: Tune's own copy, nothing written here
    upload(mock, "bucket/grid")
    assert mock.get_file_info("bucket/grid/result.json").type == pyarrow.fs.FileType.File
    assert not (Path.cwd() / "bucket").exists()


def test_a_trial_whose_error_file_never_reached_storage_counts_as_failed(tmp_path, monkeypatch):
    """failures.failures: Tune's Result.error reads the error file from storage; on a full disk the whole-or-
    nothing upload leaves none there. A trial Tune marked ERROR still counts as failed (not as a trial left to
    resume), with its error read from the driver's staging copy, else named as an error file not copied."""
    from ray import cloudpickle

    import pyarrow.fs

    from kappa_rllib.tuning import failures, retry

    staged = tmp_path / "error.pkl"
    staged.write_bytes(cloudpickle.dumps(OSError(28, "No space left on device")))

    def trial(status, pickled_error_file=None, local=True):
        storage = SimpleNamespace(storage_filesystem=pyarrow.fs.LocalFileSystem() if local else
                                  pyarrow.fs._MockFileSystem())
        return SimpleNamespace(status=status, pickled_error_file=pickled_error_file, storage=storage,
                               path=str(tmp_path / status) if local else f"bucket/grid/{status}",
                               local_path=str(tmp_path / "staging" / status) if local else None,
                               get_pickled_error=lambda: None)

    class Grid(list):
        pass

    results = [SimpleNamespace(error=None, metrics={"done": True}), SimpleNamespace(error=None, metrics={}),
               SimpleNamespace(error=None, metrics={}), SimpleNamespace(error=ValueError("own"), metrics={}),
               SimpleNamespace(error=None, metrics={})]
    grid = Grid(results)
    grid._experiment_analysis = SimpleNamespace(trials=[
        trial("TERMINATED"), trial("ERROR", str(staged)), trial("ERROR"), trial("ERROR"), trial("PENDING")])
    found = failures.failures(grid)
    assert [next(i for i, x in enumerate(results) if x is r) for r, _ in found] == [1, 2, 3]
    assert isinstance(found[0][1], OSError) and found[0][1].errno == 28
    assert "could not copy its error file onto storage" in str(found[1][1])
    assert str(found[2][1]) == "own"
    assert failures.unfinished(grid) == 1  # the pending one
    assert not retry.disk_full(found[1][1])  # space left: not said to be a full disk
    monkeypatch.setattr(shutil, "disk_usage", lambda path: SimpleNamespace(total=16 << 20, used=16 << 20, free=0))
    full = failures.failures(grid)[1][1]
    assert isinstance(full, OSError) and retry.disk_full(full), full  # `tune` then says the disk is full
    grid._experiment_analysis.trials[2] = trial("ERROR", local=False)  # a bucket: no local disk to blame
    assert not retry.disk_full(failures.failures(grid)[1][1])
    # the staging copy and the full disk are the machine Tune ran on: under Ray Client the head, so both are
    # looked at through storage.on_storage (a task there), once per trial Tune marked ERROR without its error
    from kappa_rllib.tuning import storage as stores

    ran = []
    monkeypatch.setattr(stores, "on_storage", lambda fn, *args: ran.append((fn.__name__, args[0].status)) or fn(*args))
    assert len(failures.failures(grid)) == 3
    assert ran == [("_unstored_error", "ERROR")] * 2
    # the head gone as the error is looked up: still a failed trial, said so
    monkeypatch.setattr(stores, "on_storage", lambda fn, *args: (_ for _ in ()).throw(OSError("on the cluster's head: gone")))
    found = failures.failures(grid)
    assert len(found) == 3 and "its error could not be read (OSError: on the cluster's head: gone)" in str(found[0][1])


@pytest.mark.learning
def test_trials_a_killed_driver_made_or_started_after_tunes_last_save_are_adopted_not_run_twice(tmp_path):
    """Tune saves its experiment state and its search state at most every ~10 s, each at its own moment; a trial's
    folder reaches storage sooner, with its first checkpoint. A driver killed in between leaves trial folders its
    state does not know. Made here from a finished 4-trial grid (a laptop's driver killed with its Ray, the staged
    rows of trials 1 and 2 lost with it):

    * trial 1: the state holds it PENDING, with no folder (it started after the save); its rows reach iteration 3;
    * trial 2: the state lacks it, the search state has made it (saved after the experiment state); rows to 3;
    * trial 3: the state lacks it and the search has not made it; it finished.

    Before, trials 1 and 3 were set aside and run again from their start, and trial 2 was never run again
    (unfinished for good). Adopted, 1 and 2 go on from their checkpoint at iteration 3 (their first three rows
    kept as they were) and 3 stays finished: four folders, each trial once, rows 1..4 once each."""
    from ray import cloudpickle
    from ray.train._internal.checkpoint_manager import _CheckpointManager
    from ray.tune.experiment.trial import Trial, _TrainingRunMetadata
    from ray.tune.search.basic_variant import _VariantIterator
    from ray.tune.search.variant_generator import generate_variants

    from kappa_rllib import checkpoints

    file, storage, ray_tmp = tmp_path / "adopt.py", tmp_path / "results", Path(f"/tmp/ks{os.getpid()}h")
    file.write_text(textwrap.dedent(f"""\
        from kappa_rllib.experiments import SMOKE_SETTINGS, paper_grids

        def experiments(smoke=False):
            return paper_grids("dqn", "CartPole-v1", kappas=[0.84], c_fa=[0.2], num_seeds=4, variants=("pi",),
                               baseline=False, **{{**SMOKE_SETTINGS["dqn"], "total_env_steps": {T}}})
        """))
    env = environment(ray_tmp)
    out = run(tune_args(file, storage), env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    grid_dir = storage / "adopt" / "kappa_pi_dqn"
    folders = sorted(p.name for p in grid_dir.iterdir() if p.is_dir())
    assert len(folders) == 4
    before = {name: (grid_dir / name / "result.json").read_text() for name in folders}
    state_file = sorted(grid_dir.glob("experiment_state-*.json"))[-1]
    state = json.loads(state_file.read_text())
    rows = sorted(state["trial_data"], key=lambda row: json.loads(row[0])["trial_id"])
    ids = [json.loads(row[0])["trial_id"] for row in rows]
    # trial 1: PENDING without a folder, as Tune holds a trial it has not started
    trial = Trial.from_json_state(rows[1][0], stub=True)
    trial.relative_logdir, trial.storage.trial_dir_name, trial.status = None, None, "PENDING"
    trial.invalidate_json_state()
    trial_state = json.loads(trial.get_json_state()[0])
    trial_state["stub"] = False
    trial.restore_run_metadata(rows[1][1])
    fresh = _TrainingRunMetadata()
    fresh.checkpoint_manager = _CheckpointManager(checkpoint_config=trial.run_metadata.checkpoint_manager
                                                  .checkpoint_config)
    state["trial_data"] = [rows[0], [json.dumps(trial_state), fresh.get_json_state()]]  # 2 and 3 lacking
    state_file.write_text(json.dumps(state))
    # the search state: trials 0-2 made (its counter 3), trial 3 not yet; 1 and 2 live
    search_file = sorted(grid_dir.glob("basic-variant-state-*.json"))[-1]
    search = cloudpickle.loads(search_file.read_bytes())
    [iterator] = search["_iterators"]
    variants = list(generate_variants(iterator.unresolved_spec, random_state=iterator.random_state))
    iterator.counter, iterator.variants = 3, _VariantIterator(variants[3:], lazy_eval=False)
    search["_finished"], search["_live_trials"] = False, {ids[1], ids[2]}
    search_file.write_bytes(cloudpickle.dumps(search))
    for name in folders[1:3]:  # rows to iteration 3, the final checkpoint not yet written, staged rows lost
        for rows_file, keep in (("result.json", 3), ("progress.csv", 4)):
            lines = (grid_dir / name / rows_file).read_text().splitlines(keepends=True)
            (grid_dir / name / rows_file).write_text("".join(lines[:keep]))
        for path in grid_dir.glob(f"{name}/checkpoint_*"):
            if checkpoints.check(path).get("done"):
                shutil.rmtree(path)
        for staged in ray_tmp.rglob(f"driver_artifacts/{name}"):
            shutil.rmtree(staged)
    out = run([*tune_args(file, storage), "--resume"], env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    said = out.stderr
    assert (f"{folders[1]}: started after Tune last saved its state (then the driver was killed): adopted, it goes "
            "on from what its folder holds") in said, said
    for name in folders[2:]:
        assert (f"{name}: made after Tune last saved its state (then the driver was killed): adopted, it goes on "
                "from what its folder holds") in said, said
    assert said.count("(iteration 3), its newest whole checkpoint its rows reach") == 2, said
    assert f"{folders[3]}: finished at iteration 4 after Tune last saved its state: kept as finished" in said, said
    assert sorted(p.name for p in grid_dir.iterdir() if p.is_dir()) == folders  # none set aside, none made again
    timelines = check_invariants(storage / "adopt", grids=("kappa_pi_dqn",), trials_per_grid=4)
    assert sorted(timelines) == ids and all(len(rows) == 4 for _, rows in timelines.values())
    for name in folders:  # trials 1 and 2 went on from iteration 3; 0 and 3 were not run again
        after = (grid_dir / name / "result.json").read_text().splitlines()
        assert after[:3] == before[name].splitlines()[:3] and len(after) == 4, name
        assert (after[3] == before[name].splitlines()[3]) == (name in (folders[0], folders[3])), name
    search = cloudpickle.loads(sorted(grid_dir.glob("basic-variant-state-*.json"))[-1].read_bytes())
    assert search["_iterators"][0].counter == 4 and search["_live_trials"] == set()
