"""Faults (docs/reliability.md, "Faults"): what a grid keeps when a trial's code fails, a node is lost
(twice), a node joins late, or the whole cluster (its head) is lost.

The retry policy (kappa_rllib.tuning.retry) on an embedded Ray; node faults on a real multi-node Ray cluster
(`ray start` processes on loopback, token auth, tests/test_cluster.py's LocalCluster), one cluster at a
time. Every case asserts what was kept: each trial finished once, at its T, and a retried or resumed
trial went on from its latest checkpoint, not from iteration 1.
"""

import json
import os
import pickle
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nodes import trial_rows

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "kappa_rllib.cli"]


def grid_file(folder: Path, name: str, env: str, total_env_steps: int, kappas=(0.84,)) -> Path:
    """A kappa-PI-DQN grid (one seed, C_FA 0.2, 500 env steps per iteration) written as a tune file."""
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(f"""\
        from kappa_rllib.experiments import SMOKE_SETTINGS, paper_grids

        def experiments(smoke=False):
            return paper_grids("dqn", {env!r}, kappas={list(kappas)!r}, c_fa=[0.2], num_seeds=1, variants=("pi",),
                               baseline=False, **{{**SMOKE_SETTINGS["dqn"], "total_env_steps": {total_env_steps}}})
        """))
    return path


def failures(grid_dir: Path) -> list[int]:
    """Tune's failure count of each trial, from its error.txt ("Failure # N ...")."""
    counts = []
    for trial in sorted(p for p in grid_dir.iterdir() if p.is_dir()):
        error = trial / "error.txt"
        counts.append(error.read_text().count("Failure # ") if error.exists() else 0)
    return counts


def tune(*args: str, env=None, timeout: float = 420) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(TESTS), **(env or {})}
    return subprocess.run([*CLI, "tune", *map(str, args)], cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.mark.learning
def test_an_error_of_the_trials_own_code_is_retried_once_then_the_trial_stops(tmp_path):
    """With --max-failures -1 (unlimited node losses), a trial whose env raises at the same step every
    time fails twice (the run and one retry) and stops; `tune` exits 1. Without
    RetryPolicy, Tune would restart it forever."""
    file = grid_file(tmp_path, "crash", "crash_env:KappaCrash-v0", 1_000)
    out = tune(file, "--storage", tmp_path / "results", "--num-cpus", "1", "--max-failures", "-1")
    assert out.returncode != 0
    assert "[tune] finished: 0/1 trials without error" in out.stdout, (out.stdout + out.stderr)[-3000:]
    grid_dir = tmp_path / "results" / "crash" / "kappa_pi_dqn"
    assert failures(grid_dir) == [2]
    assert "crash_env: a deliberate error at step 300" in next(grid_dir.glob("*/error.txt")).read_text()


@pytest.mark.learning
def test_a_transient_error_of_the_trials_code_is_retried_and_the_trial_ends_at_t(tmp_path):
    """The same env raising only once (a full disk that was freed, say): the retry finishes at T."""
    file = grid_file(tmp_path, "crash_once", "crash_env:KappaCrash-v0", 1_000)
    out = tune(file, "--storage", tmp_path / "results", "--num-cpus", "1",
               env={"KAPPA_CRASH_ONCE": str(tmp_path / "crashed")})
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    grid_dir = tmp_path / "results" / "crash_once" / "kappa_pi_dqn"
    assert failures(grid_dir) == [1]
    (rows,) = trial_rows(grid_dir).values()
    assert rows[-1]["done"] and rows[-1]["kappa"]["env_steps"] == 1_000


@pytest.mark.learning
@pytest.mark.parametrize("max_failures", [5, 1])
def test_a_trial_whose_process_dies_twice_before_its_first_checkpoint_is_retried_as_a_lost_node(tmp_path,
                                                                                                max_failures):
    """The trial's process exits at its env's 300th step, twice, before any checkpoint (what Tune sees when
    the node is lost or the OOM killer strikes: ActorDiedError). Counted as node losses: with
    --max-failures 5 the third attempt finishes at T and `tune` exits 0; with --max-failures 1 the trial
    stops after the second loss, with one line naming the fault. (Tune writes the error file in its staging
    folder; read from storage, where it is not yet, the error was unknown and counted as the trial's own
    code's: retried once, so 5 stopped after 2 attempts.)"""
    exits = tmp_path / "exits"
    exits.mkdir()
    file = grid_file(tmp_path, "dies", "crash_env:KappaCrash-v0", 1_000)
    out = tune(file, "--storage", tmp_path / "results", "--num-cpus", "1", "--max-failures", max_failures,
               env={"KAPPA_EXIT_TWICE": str(exits)})
    grid_dir = tmp_path / "results" / "dies" / "kappa_pi_dqn"
    assert len(list(exits.iterdir())) == 2
    if max_failures == 5:
        assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
        assert failures(grid_dir) == [2]
        (rows,) = trial_rows(grid_dir).values()
        assert rows[-1]["done"] and rows[-1]["kappa"]["env_steps"] == 1_000
    else:
        assert out.returncode == 1, (out.stdout + out.stderr)[-3000:]
        assert failures(grid_dir) == [2]
        (line,) = [line for line in out.stderr.splitlines() if line.startswith("[tune] failed: ")]
        assert "ActorDiedError: " in line and "(a lost process or node, counted by --max-failures)" in line, line


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MB tmpfs (needs root to mount; CI sets KAPPA_TMPFS_TESTS=required so that it fails, not
    skips, where it cannot), unmounted at the end."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        if os.environ.get("KAPPA_TMPFS_TESTS") == "required":
            pytest.fail(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs (not root?): {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.learning
def test_a_full_disk_during_a_checkpoint_then_resume_goes_on_from_the_last_whole_checkpoint(small_disk, tmp_path):
    """Storage on a 16 MB tmpfs, filled once a trial's third checkpoint is whole: the next save fails
    part-way (ENOSPC), its retry too, and `tune` stops with one line naming the full folder. The whole
    checkpoints stay whole and the half-written one is refused. Then the worst a full disk leaves for
    --resume is made certain: Tune's experiment state as it was at the first checkpoint (a copy older than
    the trial's last checkpoint, naming one that has since been deleted or is older), a result row cut
    short, and Tune's search state cut short (without its whole copy put back, Tune starts the grid afresh).
    Space freed, `tune --resume` goes on from the newest whole checkpoint its stored rows reach (with the rows the
    stopped driver staged and never copied, merged first), every result row
    parses, the trial ends once at T, and `report` reads it. (Without repair.repair_state's checkpoint
    step it resumes from the stale state's checkpoint or from iteration 1: this test fails.)"""
    from kappa_rllib import checkpoints

    file = grid_file(tmp_path, "disk", "CartPole-v1", T)
    grid_dir = small_disk / "disk" / "kappa_pi_dqn"
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    args = [*CLI, "tune", str(file), "--storage", str(small_disk), "--num-cpus", "1", "--checkpoint-every", "2"]
    job = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)

    def whole(index: int) -> bool:
        try:
            return checkpoints.check(next(grid_dir.glob(f"*/checkpoint_{index:06d}"))) is not None
        except (StopIteration, checkpoints.CheckpointError):
            return False

    try:
        wait_for(lambda: whole(0), "the first checkpoint", job)
        stale = _newest_state_text(grid_dir)
        wait_for(lambda: whole(2), "the third checkpoint", job, poll=0.1)
        fill(small_disk / "filler")
        output, _ = job.communicate(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
    # exit 1 (the trial failed) or 2 (Tune's own summary could not read the error file the disk cut short)
    end = output[output.rfind("Trials did not complete"):]  # after Tune's logged tracebacks of the trial
    assert job.returncode in (1, 2), end
    lines = [x for x in output.splitlines() if "free space there" in x]
    assert len(lines) == 1, end
    assert str(small_disk) in lines[0] and "--resume" in lines[0], lines[0]
    (trial_dir,) = [p for p in grid_dir.iterdir() if p.is_dir()]
    newest_whole = checkpoints.latest(trial_dir)
    assert checkpoints.check(newest_whole)["training_iteration"] >= 6
    # --resume goes on from the newest whole checkpoint the trial's stored rows reach (Tune copies the rows onto
    # storage with its state, less often than the trial checkpoints; resuming past them would leave a gap), else
    # the oldest whole one
    # (a row a retry appended onto the partial row the full disk left counts: the repair keeps that whole row)
    reached = max(filter(None, map(_iteration_of, (trial_dir / "result.json").read_text().splitlines())))
    whole = sorted((checkpoints.check(c)["training_iteration"], c) for c in trial_dir.glob("checkpoint_*")
                   if _is_whole(c))
    clocks = {c: checkpoints.check(c)["time_total_s"] for _, c in whole}  # Tune's clock at each save
    for later in sorted(trial_dir.glob("checkpoint_*")):
        if later.name > newest_whole.name:  # the save the disk cut short: never taken for a checkpoint
            with pytest.raises(checkpoints.CheckpointError):
                checkpoints.check(later)

    (small_disk / "filler").unlink()
    newest = sorted(grid_dir.glob("experiment_state-*.json"))[-1]
    newest.write_text(stale)  # the state as it was at the first checkpoint
    with open(trial_dir / "result.json", "a") as f:  # a row cut short, if the full disk left none
        f.write('{"timers": {"training_it')
    search = sorted(grid_dir.glob("basic-variant-state-*.json"))[-1]
    search.write_bytes(search.read_bytes()[:4096])  # the search state cut short (else Tune starts afresh)
    out = tune(file, "--storage", small_disk, "--num-cpus", "1", "--checkpoint-every", "2", "--resume")
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    # the rows the stopped driver wrote after Tune's last copy, in its staging folder (the Ray session before this
    # one), are merged into storage up to its newest whole checkpoint first (staging.drop_stale_staging), unless
    # storage's rows are no prefix of them
    merged = re.search(r"merged into it \(up to its checkpoint at iteration (\d+)\)", out.stderr)
    if merged:
        reached = max(reached, int(merged.group(1)))
    kept, last_whole = max((c for c in whole if c[0] <= reached), default=whole[0])
    clock = clocks[last_whole]
    assert f"resumes from {last_whole.name} (iteration {kept})" in out.stderr, out.stderr[-3000:]
    assert [p for p in grid_dir.iterdir() if p.is_dir()] == [trial_dir], out.stderr[-3000:]  # no trial anew
    lines = (trial_dir / "result.json").read_text().splitlines()
    bad = [(i, x) for i, x in enumerate(lines) if not _parses(x)]
    assert not bad, (len(lines), bad)  # every row parses
    rows = [json.loads(x) for x in lines]
    restarts = [r["training_iteration"] for r in rows if r["iterations_since_restore"] == 1]
    seen = ([(r["training_iteration"], r["iterations_since_restore"]) for r in rows], sorted(os.listdir(grid_dir)),
            [x for x in out.stderr.splitlines() if "[tune]" in x or "dirname" in x or "Error" in x])
    assert restarts[-1] == kept + 1, seen  # --resume went on from the newest whole checkpoint
    # and with Tune's clock where that checkpoint left it (the manifest carries it; before, it restarted at 0)
    first = max(i for i, r in enumerate(rows) if r["iterations_since_restore"] == 1)
    assert clock > 0
    assert rows[first]["time_total_s"] - rows[first]["time_this_iter_s"] == pytest.approx(clock, abs=1e-6)
    assert rows[-1]["done"] and rows[-1]["kappa"]["env_steps"] == T
    assert sum(r.get("done", False) for r in rows) == 1
    report = subprocess.run([*CLI, "report", str(small_disk / "disk")], cwd=ROOT, capture_output=True, text=True)
    assert report.returncode == 0, report.stderr[-2000:]


def _is_whole(checkpoint: Path) -> bool:
    from kappa_rllib import checkpoints

    try:
        checkpoints.check(checkpoint)
        return True
    except checkpoints.CheckpointError:
        return False


def fill(path: Path) -> None:
    """Writes `path` until its disk is full (1 MiB blocks, then 4 KiB ones)."""
    import errno

    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        for block in (b"\0" * (1 << 20), b"\0" * 4096):
            try:
                while True:
                    os.write(fd, block)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
    finally:
        os.close(fd)


def _iteration_of(line: str) -> int | None:
    """The training_iteration of the whole row `line` is or ends with (a row appended onto a partial one), else
    None."""
    starts = [i for i in range(len(line)) if line.startswith('{"', i)]
    for start in starts:
        try:
            row = json.loads(line[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "training_iteration" in row:
            return row["training_iteration"]
    return None


def _parses(line: str) -> bool:
    try:
        json.loads(line)
        return True
    except json.JSONDecodeError:
        return False


def _newest_state_text(grid_dir: Path) -> str:
    """The newest experiment state, whole: Tune copies it onto storage in place, so a read can catch a copy
    half done (then it reads again)."""
    for _ in range(100):
        states = sorted(grid_dir.glob("experiment_state-*.json"))
        assert states, "no experiment state yet"
        text = states[-1].read_text()
        if _parses(text):
            return text
        time.sleep(0.05)
    raise AssertionError(f"{states[-1]} did not parse in 5 s")


# --- node faults on a real multi-node cluster -------------------------------------------------------

from test_cluster import LocalCluster  # noqa: E402  (the cluster tests' two-process cluster)

FAST_HEALTH_CHECK = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "5"}
T = 12_000  # 24 iterations of 500 env steps, ~20 s: time to lose a node mid-trial


@pytest.fixture
def cluster_factory():
    """Clusters of this test (`make(head_cpus, workers)`), all stopped at its end; a lost node is found
    in ~5 s (Ray's health check every 1 s, 5 misses) instead of ~15-30 s."""
    import shutil
    import tempfile

    made = []

    def make(head_cpus: int = 1, workers: int = 1) -> LocalCluster:
        cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="krf", dir="/tmp")))
        cluster.env.update(FAST_HEALTH_CHECK)
        cluster.env["PYTHONPATH"] = str(TESTS)
        made.append(cluster)
        cluster.start(head_cpus=head_cpus, workers=workers)
        return cluster

    try:
        yield make
    finally:
        for cluster in made:
            cluster.stop()
            shutil.rmtree(cluster.temp_dir, ignore_errors=True)


def submit(cluster, *args: str) -> subprocess.Popen:
    """`ray job submit -- kappa-rllib tune ...` to the cluster's Jobs API, waiting for the job's end."""
    return subprocess.Popen([str(Path(sys.executable).parent / "ray"), "job", "submit",
                             f"--address={cluster.dashboard}", "--", "kappa-rllib", "tune", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=cluster.env)


def wait_for(ready, what: str, job: subprocess.Popen, timeout: float = 300, poll: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert job.poll() is None, f"the job ended before {what}: {job.stdout.read()[-3000:]}"
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(poll)


def moves(rows: list[dict]) -> list[tuple[str, int]]:
    """(node id, first iteration there) each time a trial's rows change node."""
    out = []
    for row in rows:
        if not out or out[-1][0] != row["node_id"]:
            out.append((row["node_id"], row["training_iteration"]))
    return out


def finished_once_at_t(rows: list[dict], t: int = T) -> bool:
    return sum(1 for r in rows if r.get("done")) == 1 and rows[-1]["done"] and rows[-1]["kappa"]["env_steps"] == t


@pytest.mark.learning
@pytest.mark.xdist_group("clusters")
def test_a_trial_that_loses_its_node_twice_finishes_and_a_joining_node_gets_pending_trials(cluster_factory,
                                                                                             tmp_path):
    """Head without CPUs, workers A and B (1 CPU each): trial X runs on A, trial Y on B. A is killed
    with X past a checkpoint: X waits (no free CPU). Worker C joins mid-grid and gets X, which goes on
    from its checkpoint. C is killed with X past a later checkpoint: X goes on on B once Y is done, from
    that checkpoint, and ends at T. (With --max-failures 1, X fails at the second loss: run so, this
    test fails.)"""
    cluster = cluster_factory(head_cpus=0, workers=0)
    node_a, a = cluster.add_worker("a")
    _, b = cluster.add_worker("b")
    file = grid_file(tmp_path, "twice", "CartPole-v1", T, kappas=(0.68, 0.84))
    grid_dir = tmp_path / "results" / "twice" / "kappa_pi_dqn"
    job = submit(cluster, file, "--storage", tmp_path / "results", "--checkpoint-every", "2")
    try:
        def on(node, trial=None, rows_there=1):  # trials with >= rows_there rows on `node`, last one there
            return [name for name, rows in trial_rows(grid_dir).items() if rows[-1]["node_id"] == node
                    and not rows[-1]["done"] and sum(r["node_id"] == node for r in rows) >= rows_there
                    and trial in (None, name)]

        wait_for(lambda: on(a, rows_there=3), "trial X past its first checkpoint on A", job)
        (x,) = on(a)
        cluster.kill(node_a)
        node_c, c = cluster.add_worker("c")  # joins mid-grid: the pending trial X goes there
        wait_for(lambda: on(c, x, rows_there=3), "trial X past a checkpoint on the joined node C", job)
        cluster.kill(node_c)
        output, _ = job.communicate(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, output[-3000:]
    assert "[tune] finished: 2/2 trials without error" in output, output[-3000:]
    rows = trial_rows(grid_dir)
    assert all(finished_once_at_t(trial) for trial in rows.values())
    (y,) = set(rows) - {x}
    assert [node for node, _ in moves(rows[y])] == [b]
    path = moves(rows[x])
    assert [node for node, _ in path] == [a, c, b], path
    assert all(first > 2 for _, first in path[1:]), path  # each restart from a checkpoint (every 2)


@pytest.mark.learning
@pytest.mark.xdist_group("clusters")
def test_the_head_lost_mid_grid_then_resume_on_a_new_cluster_finishes_every_trial_once(cluster_factory,
                                                                                        tmp_path):
    """Every Ray process of the cluster is SIGKILLed (head, worker, the job's driver) with two trials
    past a checkpoint. A new cluster and `tune --resume` on the storage that outlived it finish the
    grid: each trial once, at T; the two interrupted ones from their checkpoints, with the counters they
    had there. (Without --checkpoint-every they restart at iteration 1: run so, this test fails.)"""
    first = cluster_factory(head_cpus=1, workers=1)
    # 48 iterations: both trials must be past a checkpoint and unfinished at once, however unevenly the
    # two start and run on a busy machine (at 24, one finished while the other was at iteration 8)
    file = grid_file(tmp_path, "headless", "CartPole-v1", 2 * T, kappas=(0.68, 0.84))
    storage, grid_dir = tmp_path / "results", tmp_path / "results" / "headless" / "kappa_pi_dqn"
    job = submit(first, file, "--storage", storage, "--checkpoint-every", "2")
    try:
        wait_for(lambda: sum(rows[-1]["training_iteration"] >= 5 and not rows[-1].get("done")
                             for rows in trial_rows(grid_dir).values()) == 2,
                 "two unfinished trials past their second checkpoint", job)
    finally:
        first_nodes = first.node_ids()
        for node in first.processes:  # the head with its GCS, the job's driver, then the worker
            first.kill(node)
        job.kill()
        job.wait()
    before = trial_rows(grid_dir)
    second = cluster_factory(head_cpus=1, workers=1)
    job = submit(second, file, "--storage", storage, "--checkpoint-every", "2", "--resume")
    output, _ = job.communicate(timeout=420)
    assert job.returncode == 0, output[-3000:]
    after = trial_rows(grid_dir)
    assert len(after) == 2 and all(finished_once_at_t(rows, 2 * T) for rows in after.values())
    interrupted = [name for name, rows in before.items() if not rows[-1].get("done")]
    assert len(interrupted) == 2
    for name in interrupted:
        rows = after[name]
        restart = next(i for i, r in enumerate(rows) if r["node_id"] not in first_nodes)  # the new cluster's
        resumed = rows[restart]
        assert resumed["training_iteration"] > 2, [r["training_iteration"] for r in rows]
        # the counters came from the checkpoint: T/24 env steps per iteration, as the first time through
        assert resumed["kappa"]["env_steps"] == resumed["training_iteration"] * 500
        same_before = [r for r in rows[:restart] if r["training_iteration"] == resumed["training_iteration"]]
        for before_row in same_before:  # and the kappa phase: where it was at that iteration before
            assert resumed["kappa"]["iteration"] == before_row["kappa"]["iteration"]


@pytest.mark.parametrize("name, whole", [
    ("experiment_state-2026-11-27_22-10-30.json", json.dumps({"trial_data": [], "runner_data": {}}).encode()),
    ("basic-variant-state-2026-11-27_22-10-30.json", pickle.dumps({"_total_samples": 1, "_finished": True})),
    ("callback-states-2026-11-27_22-10-30.pkl", pickle.dumps({0: {"kappa_rllib_retry_policy": {"code_errors": {}}}})),
])
def test_a_cut_short_tune_state_is_put_back_from_its_last_whole_copy(tmp_path, monkeypatch, name, whole):
    """A full disk cuts Tune's experiment state or its search state short (seen on a 16 MB tmpfs:
    40,960 bytes of a longer experiment state; a 12,288-byte basic-variant-state, after which Tune logged
    "Failed to restore the run state" and started the grid afresh beside the old trial). The grid's
    callback keeps the last whole copy of each, and skips a copy cut short; `--resume` puts it back, and
    with no whole copy stops with one line instead of letting Tune start the grid afresh."""
    from kappa_rllib.tuning import repair, retry

    monkeypatch.setattr(repair, "BACKUP_EVERY_S", 0.0)  # a look at every step (once a second in a run)
    newest = tmp_path / name
    backup = repair.state_backup(tmp_path)
    newest.write_bytes(whole)
    backup.on_step_end(0, [])
    newest.write_bytes(whole[:20])
    backup.on_step_end(1, [])  # cut short: the whole copy stays
    assert repair.repair_state(tmp_path) == [f"{name} was cut short (a full disk?): resuming from its last whole "
                                             f"copy ({name})"]
    assert newest.read_bytes() == whole
    assert repair.repair_state(tmp_path) == []  # whole: nothing to do
    for kept in tmp_path.glob(".kappa_rllib_*"):
        kept.unlink()
    newest.write_bytes(whole[:20])
    if name.startswith("callback-states"):  # the retry budgets' counts: dropped, not a reason to stop
        assert repair.repair_state(tmp_path) == [f"{name} was cut short (a full disk?) and no whole copy was "
                                                 "kept: dropped (the retry budgets of --max-failures start afresh)"]
        assert not newest.exists()
        return
    with pytest.raises(ValueError, match="is cut short .* no whole copy of it was kept: Tune cannot resume"):
        repair.repair_state(tmp_path)


def test_a_trials_error_in_one_line_and_a_full_disk_told_apart():
    from kappa_rllib.tuning import repair, retry

    error = RuntimeError("Traceback (most recent call last):\n  File x\nOSError: [Errno 28] Error writing bytes "
                         "to file. Detail: [errno 28] No space left on device\n")
    assert retry.failure_line(error) == ("OSError: [Errno 28] Error writing bytes to file. Detail: [errno 28] "
                                          "No space left on device")
    assert retry.disk_full(error) and not retry.disk_full(RuntimeError("crash_env: a deliberate error"))
    assert retry.last_error(object()) is None  # no error file to read: counted as the trial's own code


def test_result_rows_cut_short_are_dropped_wherever_they_are(tmp_path):
    """rows._drop_bad_rows: a row the full disk cut short mid-file with the next row appended onto it
    (what Tune's restore of a trial's result.json leaves, seen in CI) and one at the end: both partial rows
    dropped, every whole row kept in order (the appended one too), and a file with none bad not rewritten."""
    from kappa_rllib.tuning.rows import _drop_bad_rows

    rows = [json.dumps({"training_iteration": i, "kappa": {"env_steps": 500 * i}, "x": [i] * 3}) for i in range(1, 6)]
    path = tmp_path / "result.json"
    path.write_text("\n".join(rows) + "\n")
    before = path.stat().st_mtime_ns
    assert _drop_bad_rows(path) == 0 and path.stat().st_mtime_ns == before
    cut = rows[1][:rows[1].index("env_steps") + 14]  # inside the row's nested dict
    path.write_text(f"{rows[0]}\n{cut}{rows[2]}\n{rows[3]}\n{rows[4][:-1]}")
    assert _drop_bad_rows(path) == 2
    assert path.read_text() == f"{rows[0]}\n{rows[2]}\n{rows[3]}\n"
    assert _drop_bad_rows(tmp_path / "missing.json") == 0
    # a whole row without its newline (the disk filled between the two) is a row: kept, newline added
    path.write_text(f"{rows[0]}\n{rows[1]}\n{rows[2]}")
    assert _drop_bad_rows(path) == 0  # nothing dropped
    assert path.read_text() == f"{rows[0]}\n{rows[1]}\n{rows[2]}\n"


def test_resume_repair_keeps_whole_rows_and_never_rewrites_a_finished_trial(tmp_path):
    """repair.repair_state on a grid folder: an unfinished trial's last row without its newline is kept
    in result.json and in progress.csv (a whole CSV row: the header's fields, result.json's count, and its
    last field result.json's value); a row cut short is still dropped, in the CSV too when it was cut
    inside its last field; a finished trial's files are left byte for byte, whatever they hold."""
    from kappa_rllib.tuning import repair, retry

    rows = [json.dumps({"training_iteration": i, "done": False, "time": {"total": 10.5 * i}}) for i in (1, 2, 3)]
    csv_rows = ["training_iteration,done,time/total", "1,False,10.5", "2,False,21.0", "3,False,31.5"]
    unfinished, cut, cut_field, finished = (tmp_path / name for name in ("T_0", "T_1", "T_2", "T_3"))
    for trial in (unfinished, cut, cut_field, finished):
        trial.mkdir()
    (unfinished / "result.json").write_text("\n".join(rows))
    (unfinished / "progress.csv").write_text("\n".join(csv_rows))
    (cut / "result.json").write_text("\n".join(rows[:2]) + "\n" + rows[2][:9])
    (cut / "progress.csv").write_text("\n".join(csv_rows[:3]) + "\n3,Fa")
    (cut_field / "result.json").write_text("\n".join(rows) + "\n")
    (cut_field / "progress.csv").write_text("\n".join(csv_rows)[:-2])  # "3,False,31": cut in its last field
    done_row = json.dumps({"training_iteration": 4, "done": True})
    finished_text = f"{rows[0]}\n{rows[1][:7]}{rows[2]}\n{done_row}"  # odd, but finished: not touched
    (finished / "result.json").write_text(finished_text)
    (finished / "progress.csv").write_text("a,b\n1,2")
    repair.repair_state(tmp_path)
    assert (unfinished / "result.json").read_text() == "\n".join(rows) + "\n"
    assert (unfinished / "progress.csv").read_text() == "\n".join(csv_rows) + "\n"
    assert (cut / "result.json").read_text() == "\n".join(rows[:2]) + "\n"
    assert (cut / "progress.csv").read_text() == "\n".join(csv_rows[:3]) + "\n"
    assert (cut_field / "progress.csv").read_text() == "\n".join(csv_rows[:3]) + "\n"
    assert (finished / "result.json").read_text() == finished_text
    assert (finished / "progress.csv").read_text() == "a,b\n1,2"


def test_a_row_cut_short_is_dropped_reading_only_the_files_tail(tmp_path):
    """rows._cut_partial_line (progress.csv) keeps every whole row, across read blocks, and drops only the
    partial one."""
    from kappa_rllib.tuning.rows import _cut_partial_line

    path = tmp_path / "result.json"
    for data, changed, after in [(b"a\nb\n", False, b"a\nb\n"), (b"a\nbc", True, b"a\n"), (b"abc", True, b""),
                                 (b"x" * 200 + b"\n" + b"y" * 300, True, b"x" * 200 + b"\n")]:
        path.write_bytes(data)
        assert _cut_partial_line(path, block=16) is changed
        assert path.read_bytes() == after


def test_the_retry_budget_of_each_trial_is_kept_across_resume(tmp_path):
    """RetryPolicy's per-trial counts go into Tune's callback state and come back on `--resume` (Tune's
    own failure counts are restored with its experiment state): a trial retried past one error of its own
    code still has N + 1 failures to reach, not N."""
    from types import SimpleNamespace

    from ray.tune.callback import CallbackList

    from kappa_rllib.tuning import repair, retry

    policy = retry.retry_policy(3)
    trial = SimpleNamespace(trial_id="t1", max_failures=3, run_metadata=SimpleNamespace(num_failures=1))
    policy.on_trial_recover(1, [trial], trial)  # no error file: the trial's own code, retried once
    assert trial.max_failures == 1
    policy.on_checkpoint(2, [trial], trial, checkpoint=None)  # got past it
    assert trial.max_failures == 4
    assert retry.retry_policy(3).get_state() is None  # nothing to keep: no file
    CallbackList([policy, retry.retry_policy(3)]).save_to_dir(str(tmp_path), session_str="s")
    resumed = retry.retry_policy(3)
    CallbackList([resumed]).restore_from_dir(str(tmp_path))
    assert resumed.code_errors == {"t1": 1}
    from ray.exceptions import ActorDiedError

    lost = SimpleNamespace(trial_id="t1", max_failures=3, run_metadata=SimpleNamespace(num_failures=2),
                           pickled_error_file=None, get_pickled_error=ActorDiedError)
    resumed.on_trial_recover(3, [lost], lost)  # its node lost after the resume: N plus the code error's retry
    assert lost.max_failures == 4


@pytest.mark.slow
@pytest.mark.xdist_group("clusters")
def test_chaos_every_trial_finishes_once_at_t_while_a_random_worker_node_is_killed_every_20_to_40_s(
        cluster_factory, tmp_path):
    """In the spirit of Ray's own chaos release tests: a head without CPUs and two worker nodes (1 CPU
    each), a grid of 4 trials checkpointing every 2 iterations under `--max-failures -1`, and a killer
    that SIGKILLs a random worker node every 20-40 s for the grid's whole run and starts a replacement.
    Every trial finishes exactly once at its T, and what `report` reads of each (resumed timelines
    replacing rolled-back rows) has each env-step count once, rising to T. On demand (`-m slow`): ~5-8
    minutes on 2 cores."""
    import random

    from kappa_rllib.report import load_runs

    cluster = cluster_factory(head_cpus=0, workers=0)
    workers = [cluster.add_worker(f"w{i}")[0] for i in range(2)]
    total = 2 * T
    file = grid_file(tmp_path, "chaos", "CartPole-v1", total, kappas=(0.5, 0.68, 0.84, 0.92))
    grid_dir = tmp_path / "results" / "chaos" / "kappa_pi_dqn"
    job = submit(cluster, file, "--storage", tmp_path / "results", "--checkpoint-every", "2",
                 "--max-failures", "-1")
    rng, kills, started = random.Random(0), 0, time.monotonic()

    def replacement(name):  # a new worker node; one that dies while joining is tried again
        for attempt in range(3):
            for node in cluster.processes[1:]:  # (not the head: losing it ends the job, and the test)
                if node.poll() is not None:
                    cluster.killed.add(node.pid)
            try:
                return cluster.add_worker(f"{name}_{attempt}")[0]
            except RuntimeError:
                continue
        raise RuntimeError(f"no worker node would join ({name})")

    try:
        while job.poll() is None:
            deadline = time.monotonic() + rng.uniform(20, 40)
            while job.poll() is None and time.monotonic() < deadline:
                time.sleep(0.5)
            if job.poll() is not None:
                break
            # a node the GCS declared dead on its own (its raylet missed the health checks on a loaded
            # machine, then exited) is one more loss of the chaos: replaced like the killed ones
            for node in [w for w in workers if w.poll() is not None]:
                cluster.killed.add(node.pid)
                workers.remove(node)
            if workers:
                victim = workers.pop(rng.randrange(len(workers)))
                cluster.kill(victim)
                kills += 1
            while len(workers) < 2:
                workers.append(replacement(f"r{kills}_{len(workers)}"))
            assert time.monotonic() - started < 1500, "the grid did not finish within 25 minutes"
        output, _ = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
    print(f"chaos: {kills} worker nodes killed in {time.monotonic() - started:.0f} s")
    assert kills >= 2, f"only {kills} kills landed: the grid ran too short for this test"
    assert job.returncode == 0, output[-3000:]
    assert "[tune] finished: 4/4 trials without error" in output, output[-3000:]
    rows = trial_rows(grid_dir)
    assert len(rows) == 4 and all(finished_once_at_t(trial, total) for trial in rows.values()), \
        {name: [(r["training_iteration"], r.get("done")) for r in trial] for name, trial in rows.items()}
    runs = load_runs(grid_dir)
    assert len(runs) == 4
    for run in runs:
        steps = list(run.steps)
        assert steps == sorted(set(steps)) and steps[-1] == total, (run.path, steps)
