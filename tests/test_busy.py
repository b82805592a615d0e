"""One Tune run at a time in a grid's folder (kappa_rllib.tuning.busy): a `--resume` typed while the run it
resumes is still going waits for it to end, then goes on where it stopped; it never runs beside it. (Before,
through Ray Client, the killed client's run went on on the head for the reconnect grace period, and a
`--resume` beside it ran a trial's last iteration a second time: CI's tests/test_client_storage.py failure,
rows [1, 2, 2] with two `done`.)"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from nodes import trial_rows
from test_client_storage import kill_ray_of

HOLD = textwrap.dedent("""\
    import sys, time
    from kappa_rllib.tuning import busy
    callback = busy.lock_callback(sys.argv[1], "g")
    callback.setup()
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
    callback.on_experiment_end(trials=[])
    print("let go", flush=True)
    time.sleep(60)
    """)


def _holder_process(folder: Path, hold_s: float) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), str(hold_s)], stdout=subprocess.PIPE,
                               text=True)
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_held_folder_names_its_holder_and_refuses_a_second_run_until_it_ends(tmp_path):
    from kappa_rllib.tuning import busy

    folder = tmp_path / "grid"
    assert busy.who_holds(folder) is None and busy.who_holds_each([str(folder)]) == [None]  # no folder yet: free
    folder.mkdir()  # (Tune makes it, tuner.pkl, before a run starts)
    process = _holder_process(folder, hold_s=600)
    try:
        who = busy.who_holds(folder)
        assert who is not None and f"pid {process.pid}," in who, who
        second = busy.lock_callback(str(folder), "g")
        with pytest.raises(busy.GridBusy) as refused:
            second.setup()
        message = str(refused.value)
        assert "\n" not in message and f"pid {process.pid}," in message and "grid 'g'" in message
        assert second.fd is None
        started = time.monotonic()
        assert busy.who_holds_each([str(folder)], wait_s=1.0) == [who]  # still held after the wait: named
        assert time.monotonic() - started >= 1.0
    finally:
        process.kill()  # SIGKILL: the kernel lets go of the lock with the process
        process.wait()
    assert busy.who_holds(folder) is None
    third = busy.lock_callback(str(folder), "g")
    third.setup()
    assert third.fd is not None and f"pid {os.getpid()}," in busy.who_holds(folder)
    third.on_experiment_end(trials=[])
    assert third.fd is None and busy.who_holds(folder) is None


def test_waiting_ends_when_the_holder_lets_go(tmp_path):
    from kappa_rllib.tuning import busy

    folder = tmp_path / "grid"
    folder.mkdir()
    process = _holder_process(folder, hold_s=1.5)  # lets go (on_experiment_end) after 1.5 s, stays alive
    try:
        started = time.monotonic()
        assert busy.who_holds_each([str(folder), str(tmp_path / "other")], wait_s=30) == [None, None]
        waited = time.monotonic() - started
        assert 0.5 < waited < 10, waited
        assert process.stdout.readline().strip() == "let go" and process.poll() is None
    finally:
        process.kill()
        process.wait()


def test_the_callback_pickles_without_its_descriptor(tmp_path):
    """Tune pickles the callbacks into tuner.pkl and, through Ray Client, to the head: a held lock's descriptor
    never travels."""
    from ray import cloudpickle

    from kappa_rllib.tuning import busy

    (tmp_path / "grid").mkdir()
    callback = busy.lock_callback(str(tmp_path / "grid"), "g")
    callback.setup()
    try:
        copy = cloudpickle.loads(cloudpickle.dumps(callback))
        assert copy.fd is None and callback.fd is not None
    finally:
        callback.release()


COPY = textwrap.dedent("""\
    import sys
    from ray import cloudpickle
    from kappa_rllib.tuning import busy
    callback = cloudpickle.loads(open(sys.argv[1], "rb").read())
    callback.setup()
    print("held" if callback.fd is not None and busy.who_holds(sys.argv[2]) else "not held", flush=True)
    callback.on_experiment_end(trials=[])
    print("free" if busy.who_holds(sys.argv[2]) is None and callback.fd is None else "still held", flush=True)
    """)


def test_a_callback_pickled_to_another_process_takes_and_lets_go_there(tmp_path):
    """Through Ray Client the callback is unpickled on the head (its class by value, with copies of the module
    globals its methods name): there it takes the lock in setup and lets go of it as the run ends."""
    from ray import cloudpickle

    from kappa_rllib.tuning import busy

    (tmp_path / "grid").mkdir()
    (tmp_path / "callback.pkl").write_bytes(cloudpickle.dumps(busy.lock_callback(str(tmp_path / "grid"), "g")))
    done = subprocess.run([sys.executable, "-c", COPY, str(tmp_path / "callback.pkl"), str(tmp_path / "grid")],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split("\n")[:2] == ["held", "free"], (done.stdout, done.stderr[-2000:])


def test_a_folder_that_moved_away_is_not_made_again(tmp_path):
    """Under Ray Client a resumed run's callbacks are the stored ones (tuner.pkl), naming the folder where the run
    started; Tune restores a folder moved since. The lock then holds nothing rather than make the old path again
    (where a later fresh run would be refused)."""
    from kappa_rllib.tuning import busy

    callback = busy.lock_callback(str(tmp_path / "moved"), "g")
    callback.setup()
    assert callback.fd is None and not (tmp_path / "moved").exists()


PEEK = textwrap.dedent("""\
    import fcntl, os, sys, time
    fd = os.open(os.path.join(sys.argv[1], ".kappa_rllib_driver.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_SH)  # what busy.who_holds's peek holds, here until told to let go
    print("peeking", flush=True)
    sys.stdin.readline()
    os.close(fd)
    print("let go", flush=True)
    time.sleep(60)
    """)


def test_a_runs_setup_beside_a_peek_takes_the_folder_and_beside_a_run_is_refused_at_once(tmp_path):
    """issue 64 (LOW 4): `who_holds()` peeks with a shared lock held for a moment. A run's setup that came at that
    moment was refused at once, naming no holder or itself (10 of 834 setups in a loop). It now tries again while
    only a peek holds the folder; a run's lock (exclusive) is still refused at once."""
    from kappa_rllib.tuning import busy

    folder = tmp_path / "grid"
    folder.mkdir()
    callback = busy.lock_callback(str(folder), "g")  # (made first: it imports Ray Tune, seconds on a busy machine)
    peek = subprocess.Popen([sys.executable, "-c", PEEK, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert peek.stdout.readline().strip() == "peeking"

        def let_go():  # the peek lets go while the run's setup is trying (the peek holds until then, however slow)
            time.sleep(0.2)
            peek.stdin.write("\n")
            peek.stdin.flush()

        letting_go = threading.Thread(target=let_go)
        letting_go.start()
        callback.setup()  # (before: GridBusy "grid 'g' is being run by another driver (another process)")
        letting_go.join()
        assert callback.fd is not None and peek.stdout.readline().strip() == "let go"
        callback.release()
    finally:
        peek.kill()
        peek.wait()
    process = _holder_process(folder, hold_s=600)
    try:
        started = time.monotonic()
        with pytest.raises(busy.GridBusy, match=f"pid {process.pid},"):
            busy.lock_callback(str(folder), "g").setup()
        assert time.monotonic() - started < busy.PEEK_S  # a run's lock is not waited on as a peek's is
    finally:
        process.kill()
        process.wait()


def test_the_folder_stays_held_until_the_runs_last_callback_has_ended(ray_local, tmp_path, monkeypatch):
    """issue 64 (LOW 4): the lock was let go in the hold's own on_experiment_end, before the callbacks after it
    ended (W&B's waits up to 1,800 s for its actors): a waiting --resume could repair beside a run still ending.
    The driver now puts the let-go last: a logger's end (after the hold) still sees the folder held by this run."""
    from ray import tune
    from ray.tune.callback import Callback

    from kappa_rllib.experiments import Grid
    from kappa_rllib.tuning import busy, tracking
    from test_config_once import SeededConfig, _run_grids

    seen = []

    class Ending(Callback):  # a tracker that takes its time to end, after the hold in the callbacks
        def on_experiment_end(self, trials, **info):
            seen.append(busy.who_holds(tmp_path / "storage" / "ends"))

    monkeypatch.setattr(tracking, "tune_loggers", lambda **kw: [Ending()])
    grid = Grid("ends", SeededConfig({"lr": 0.1, "seed": tune.grid_search([0]), "rows": 2}))
    _run_grids(tmp_path, [grid])
    assert len(seen) == 1 and seen[0] is not None and f"pid {os.getpid()}," in seen[0], seen  # (before: None)
    assert busy.who_holds(tmp_path / "storage" / "ends") is None  # let go as the run ended


LOOK = textwrap.dedent("""\
    import sys
    from types import SimpleNamespace
    from kappa_rllib.tuning import busy, driver
    try:
        grids = [SimpleNamespace(name="g"), SimpleNamespace(name="h")]
        taken = driver.wait_for_other_drivers(grids, sys.argv[1], wait_s=float(sys.argv[2]))
        print("taken", taken)
    except busy.GridBusy as e:
        print("refused", e)
    """)


def test_resume_holds_the_folder_from_its_first_look_and_its_run_adopts_the_lock(tmp_path, monkeypatch):
    """Two `--resume`s typed in the same seconds both found the folder free (the lock was taken only as Tune's run
    started, seconds of Ray start-up later) and both repaired it, one under the other's running trials. A local
    driver now takes the lock as it looks, before the repair: the second waits, then refuses naming the first.
    The first's Tune run adopts the lock (no refusal of itself) and lets go of it as it ends; a look that finds
    a folder held lets go of the others it took."""
    import ray

    from kappa_rllib.tuning import busy, driver

    monkeypatch.setattr(ray.util.client.ray, "is_connected", lambda: False)  # (the test's process: no Ray)
    storage = tmp_path / "storage"
    (storage / "g").mkdir(parents=True)
    (storage / "h").mkdir()
    grids = [SimpleNamespace(name="g"), SimpleNamespace(name="h")]

    def look(wait_s):
        done = subprocess.run([sys.executable, "-c", LOOK, str(storage), str(wait_s)], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip()

    taken = driver.wait_for_other_drivers(grids, str(storage), wait_s=0)
    assert sorted(Path(p).name for p in taken) == ["g", "h"]
    try:
        who = busy.who_holds(storage / "g")
        assert who is not None and f"pid {os.getpid()}," in who  # held before any Tune run started
        started = time.monotonic()
        second = look(wait_s=1.0)  # the other driver's --resume: waits, then one line naming this process
        assert second.startswith("refused") and f"pid {os.getpid()}," in second and "\n" not in second, second
        assert time.monotonic() - started >= 1.0
        run = busy.lock_callback(str(storage / "g"), "g")  # this driver's Tune run: adopts the lock its --resume took
        run.setup()
        assert run.fd is not None
        stranger = busy.lock_callback(str(storage / "g"), "g")  # anything else in this process: refused, as before
        with pytest.raises(busy.GridBusy):
            stranger.setup()
        run.on_experiment_end(trials=[])
        assert busy.who_holds(storage / "g") is None
        assert busy.who_holds(storage / "h") is not None  # (its run never started: driver.run lets go of it)
    finally:
        for path in taken:
            busy.release(path)
    assert busy.who_holds(storage / "h") is None and not busy._OUR_LOCKS
    out = look(wait_s=0)  # free again: the next driver takes both
    assert out.startswith("taken [") and out.count("/storage/") == 2, out
    # one folder of two held: the look takes the free one and waits for the other, which is let go after 1.5 s
    process = _holder_process(storage / "h", hold_s=1.5)
    try:
        started = time.monotonic()
        taken = driver.wait_for_other_drivers(grids, str(storage), wait_s=30)
        assert len(taken) == 2 and time.monotonic() - started < 10
        assert all(f"pid {os.getpid()}," in busy.who_holds(storage / name) for name in ("g", "h"))
    finally:
        for path in taken:
            busy.release(path)
        process.kill()
        process.wait()
    # still held after the wait: refused naming that folder, its grid and its holder, the other let go
    process = _holder_process(storage / "h", hold_s=600)
    try:
        with pytest.raises(busy.GridBusy) as refused:
            driver.wait_for_other_drivers(grids, str(storage), wait_s=1.0)
        message = str(refused.value)
        assert message.startswith(f"{storage / 'h'}: grid 'h'") and f"pid {process.pid}," in message, message
        assert not busy._OUR_LOCKS and busy.who_holds(storage / "g") is None  # (g was taken, then let go)
    finally:
        process.kill()
        process.wait()
    # the looks left only their lock files in the (empty) grid folders: a fresh run there is not refused
    assert sorted(f.name for f in (storage / "g").iterdir()) == [busy.LOCK_FILE]
    driver.check_fresh(grids, str(storage))


def test_a_run_whose_later_callback_fails_in_setup_lets_go_in_this_process(ray_local, tmp_path, monkeypatch):
    """Tune calls the callbacks' setup outside the try that ends them: one failing after the lock's (MLflow's talks
    to its server) left the folder held by this process, and the next run of the grid in it (a notebook, a test)
    waited 60 s, then refused naming itself. driver.run lets go of its holds as it returns; the resume runs."""
    from ray import tune
    from ray.tune.callback import Callback

    from kappa_rllib.experiments import Grid
    from kappa_rllib.tuning import busy, driver, tracking
    from test_config_once import SeededConfig, _run_grids

    class Fails(Callback):
        def setup(self, **info):
            raise RuntimeError("the tracking server is down")

    loggers = tracking.tune_loggers
    monkeypatch.setattr(tracking, "tune_loggers", lambda **kw: [Fails()])  # after the lock, as MLflow's is
    grid = Grid("held", SeededConfig({"lr": 0.1, "seed": tune.grid_search([0, 1]), "rows": 2}))
    with pytest.raises(driver.GridFailed, match="the tracking server is down"):
        _run_grids(tmp_path, [grid])
    assert busy.who_holds(tmp_path / "storage" / "held") is None  # (before: "host ..., pid <this process>")
    monkeypatch.setattr(tracking, "tune_loggers", loggers)
    started = time.monotonic()
    results = driver.run([grid], str(tmp_path / "storage"), resume=True, verbose=0)["held"]
    assert len(results) == 2 and not results.errors and time.monotonic() - started < busy.WAIT_S


CLI = [sys.executable, "-m", "kappa_rllib.cli"]


@pytest.mark.learning
def test_a_resume_typed_while_the_run_still_goes_waits_for_it_then_goes_on(tmp_path):
    """Driver A runs a grid; `--resume` B starts while A still runs, says it waits, and does nothing until A is
    SIGKILLed mid-run; then B repairs the folder and runs the grid to its end: every trial ends once, at T.
    A fresh run over the folder while a driver holds it is refused in one line naming that driver."""
    grid = tmp_path / "busy_grid.py"
    grid.write_text(textwrap.dedent("""\
        from kappa_rllib.experiments import SMOKE_SETTINGS, paper_grids

        def experiments(smoke=False):
            return paper_grids("dqn", "CartPole-v1", kappas=[0.84], c_fa=[0.1, 0.2], num_seeds=1, variants=("pi",),
                               baseline=False, **{**SMOKE_SETTINGS["dqn"], "total_env_steps": 16000})
        """))
    grid_dir = tmp_path / "results" / "busy_grid" / "kappa_pi_dqn"
    ray_a, ray_b = (Path(tempfile.mkdtemp(prefix=p, dir="/tmp")) for p in ("kba", "kbb"))
    env = {**os.environ, "RAY_ADDRESS": ""}
    args = [*CLI, "tune", str(grid), "--storage", str(tmp_path / "results"), "--num-cpus", "1",
            "--checkpoint-every", "1"]
    a = subprocess.Popen(args, cwd=tmp_path, env={**env, "RAY_TMPDIR": str(ray_a)}, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    b = None
    try:
        deadline = time.monotonic() + 300
        while not any(rows and not rows[-1].get("done") for rows in trial_rows(grid_dir).values()):
            assert a.poll() is None and time.monotonic() < deadline, "A reported nothing"
            time.sleep(0.2)
        fresh = subprocess.run(args, cwd=tmp_path, env={**env, "RAY_TMPDIR": str(ray_b)}, capture_output=True,
                               text=True, timeout=300)
        lines = fresh.stderr.strip().splitlines()
        assert fresh.returncode == 2 and len(lines) == 1, fresh.stderr[-3000:]
        assert "is being run by another driver" in lines[0] and "pid " in lines[0], lines[0]

        b = subprocess.Popen([*args, "--resume"], cwd=tmp_path, env={**env, "RAY_TMPDIR": str(ray_b)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        seen = [b.stderr.readline()]
        while seen[-1] and "another driver is still running it" not in seen[-1]:
            seen.append(b.stderr.readline())
        assert "waiting up to" in seen[-1], ("".join(seen)[-3000:], a.poll(), b.wait())
        time.sleep(2)
        assert a.poll() is None and b.poll() is None  # A still runs; B waits
        os.killpg(a.pid, signal.SIGKILL)
        a.wait()
        kill_ray_of(ray_a)
        assert any(not rows[-1].get("done") for rows in trial_rows(grid_dir).values()) or \
            len(trial_rows(grid_dir)) < 2, "the kill must land mid-grid"
        out, err = b.communicate(timeout=420)
        assert b.returncode == 0, out[-3000:] + err[-3000:]
        rows = trial_rows(grid_dir)
        assert len(rows) == 2
        for name, trial in rows.items():
            assert sum(1 for r in trial if r.get("done")) == 1, (name, [r["training_iteration"] for r in trial])
            assert trial[-1]["kappa"]["env_steps"] == 16000, name
    finally:
        for process in (a, b):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for ray_tmp in (ray_a, ray_b):
            kill_ray_of(ray_tmp)
            shutil.rmtree(ray_tmp, ignore_errors=True)


def test_a_buckets_repair_deletes_the_staging_it_merged_only_once_the_bucket_has_the_rows(tmp_path, monkeypatch):
    """A bucket's repair merges a killed driver's staged rows into a working copy (kappa_rllib.tuning.bucket): the
    staging folder stays on this node until that copy is written back (`deletions_deferred`), so a write-back cut
    short (an error, Ctrl-C) loses no row: the next --resume merges them again."""
    import json
    import types

    import ray

    from kappa_rllib.tuning import staging as leftovers

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    trial_dir = tmp_path / "work" / "grid" / "T_00000"
    staged = tmp_path / "session" / "artifacts" / "2026-12-05_10-00-00" / "grid" / "driver_artifacts" / "T_00000"
    staged.mkdir(parents=True)
    (staged / "result.json").write_text("".join(json.dumps({"training_iteration": i, "done": i == 2}) + "\n"
                                                 for i in (1, 2)))
    trial = types.SimpleNamespace(local_path=str(staged))
    with pytest.raises(OSError):
        with leftovers.deletions_deferred():
            assert leftovers.drop_stale_staging(trial, trial_dir).startswith("2 row(s) the killed driver wrote")
            assert staged.is_dir()  # merged into the working copy, still here
            raise OSError("the bucket went away mid write-back")
    assert staged.is_dir() and (trial_dir / "result.json").is_file()
    with leftovers.deletions_deferred():
        leftovers.drop_stale_staging(trial, tmp_path / "work2" / "grid" / "T_00000")
        assert staged.is_dir()
    assert not staged.exists()  # the block ended: deleted
    assert leftovers._DEFERRED is None


def test_a_killed_drivers_staging_rows_are_merged_into_storage_before_a_resume_on_a_cluster_still_up(tmp_path,
                                                                                                     monkeypatch):
    """Tune keeps a trial's staging folder under the run's start time, stored with the trial: a `--resume` on a
    cluster still up (Ray Client, `ray job submit`) meets the killed driver's staging folder again, whose rows were
    written after its last copy onto storage. The repair merges them into storage, then deletes the folder: all of
    a trial that finished (storage then holds its `done` row once, and its params where it had none), else those up
    to the newest whole checkpoint, the one the trial resumes from (the rows after it are made again). A folder
    inside the grid's own folder is never touched."""
    import json
    import types

    import ray

    from kappa_rllib.tuning import staging as leftovers

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    trial_dir = tmp_path / "grid" / "T_00000"
    trial_dir.mkdir(parents=True)
    staging = tmp_path / "session" / "artifacts" / "2026-12-03_16-31-13" / "grid" / "driver_artifacts" / "T_00000"

    def stage(iterations, done):
        staging.mkdir(parents=True, exist_ok=True)
        rows = [{"training_iteration": i, **({"done": True} if done and i == iterations[-1] else {})}
                for i in iterations]
        (staging / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (staging / "progress.csv").write_text("training_iteration,x\n" + "".join(f"{i},0\n" for i in iterations))
        (staging / "params.json").write_text('{"seed": 0}')

    def stored():
        rows = [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]
        return [r["training_iteration"] for r in rows], [r for r in rows if r.get("done")]

    # a finished trial whose rows never reached storage (its folder holds only a checkpoint): all of them merged
    stage([1, 2, 3], done=True)
    line = leftovers.drop_stale_staging(types.SimpleNamespace(local_path=str(staging)), trial_dir)
    assert line == "3 row(s) the killed driver wrote but never copied onto storage merged into it (the trial finished)"
    assert not staging.exists() and stored() == ([1, 2, 3], [{"training_iteration": 3, "done": True}])
    assert (trial_dir / "progress.csv").read_text() == "training_iteration,x\n1,0\n2,0\n3,0\n"
    assert json.loads((trial_dir / "params.json").read_text()) == {"seed": 0}

    # storage without the trial's folder (a killed driver cut its first upload short: a bucket's checkpoint, a
    # sync): an unfinished trial's staged rows reach no checkpoint, nothing is merged and no folder made (Tune
    # starts it afresh); a finished one's rows make its folder, with its params
    missing = tmp_path / "grid" / "T_00009"
    stage([1, 2], done=False)
    assert leftovers.drop_stale_staging(types.SimpleNamespace(local_path=str(staging)), missing) == (
        "2 row(s) past its checkpoint dropped: the trial makes them again")
    assert not missing.exists() and not staging.exists()
    stage([1, 2], done=True)
    assert leftovers.drop_stale_staging(types.SimpleNamespace(local_path=str(staging)), missing) == (
        "2 row(s) the killed driver wrote but never copied onto storage merged into it (the trial finished)")
    assert [json.loads(r)["training_iteration"] for r in (missing / "result.json").read_text().splitlines()] == [1, 2]
    assert json.loads((missing / "params.json").read_text()) == {"seed": 0} and not staging.exists()

    # an unfinished one with storage at 1 and a whole checkpoint at 3: rows 2-3 merged, 4-5 made again
    for f in trial_dir.iterdir():
        f.unlink()
    (trial_dir / "result.json").write_text('{"training_iteration": 1}\n')
    checkpoint = trial_dir / "checkpoint_000000"
    checkpoint.mkdir()
    (checkpoint / "kappa_rllib_checkpoint.json").write_text(json.dumps(
        {"package": "kappa-rllib", "format": 1, "training_iteration": 3, "files": {}}))
    stage([1, 2, 3, 4, 5], done=False)
    line = leftovers.drop_stale_staging(types.SimpleNamespace(local_path=str(staging)), trial_dir)
    assert line == ("2 row(s) the killed driver wrote but never copied onto storage merged into it (up to its "
                    "checkpoint at iteration 3); 2 row(s) past its checkpoint dropped: the trial makes them again")
    assert stored() == ([1, 2, 3], []) and not staging.exists()
    # rows that went back before (a resume from checkpoint 2 of a stretch that had reached 3): merged by position,
    # not by iteration, up to the checkpoint at 3; a progress.csv field with commas (a cluster's node ids) quoted
    def write(path, iterations, csv_too=True):
        path.mkdir(parents=True, exist_ok=True)
        (path / "result.json").write_text("".join(json.dumps({"training_iteration": i}) + "\n" for i in iterations))
        if csv_too:
            (path / "progress.csv").write_text("nodes,training_iteration\n" +
                                               "".join(f'"n1,n2",{i}\n' for i in iterations))

    write(trial_dir, [1, 2, 3, 3])
    write(staging, [1, 2, 3, 3, 4, 5])
    (checkpoint / "kappa_rllib_checkpoint.json").write_text(json.dumps(
        {"package": "kappa-rllib", "format": 1, "training_iteration": 4, "files": {}}))
    line = leftovers.drop_stale_staging(types.SimpleNamespace(local_path=str(staging)), trial_dir)
    assert line.startswith("1 row(s) the killed driver wrote but never copied onto storage merged into it (up to "
                           "its checkpoint at iteration 4)"), line
    assert stored() == ([1, 2, 3, 3, 4], [])
    assert (trial_dir / "progress.csv").read_text().splitlines()[-2:] == ['"n1,n2",3', '"n1,n2",4']
    write(trial_dir, [1, 2, 9])  # storage's rows are no prefix of the staged ones: nothing merged
    write(staging, [1, 2, 3, 4])
    leftovers.drop_stale_staging(types.SimpleNamespace(local_path=str(staging)), trial_dir)
    assert stored() == ([1, 2, 9], [])
    write(trial_dir, [1, 2, 3])
    stage([1, 2, 3], done=False)  # the same rows as storage's: deleted, nothing to say
    assert leftovers.drop_stale_staging(types.SimpleNamespace(local_path=str(staging)), trial_dir) is None
    assert not staging.exists() and stored() == ([1, 2, 3], [])
    for never in (trial_dir, trial_dir / "sub"):  # (staging that is storage, or inside it: never deleted)
        never.mkdir(exist_ok=True)
        assert leftovers.drop_stale_staging(types.SimpleNamespace(local_path=str(never)), trial_dir) is None
        assert never.is_dir()
    # a driver killed with its Ray (a laptop): the resume's Ray is a new session, and the killed driver's staging
    # folder is in the one before it on this machine, another run's start time above it; session_latest, a link
    # to it, is not read twice, and another trial's folder is left alone
    temp = tmp_path / "ray"
    old_staging = temp / "session_2026-12-03_16-31-10_1" / "artifacts" / "2026-12-03_16-31-13" / "grid" / \
        "driver_artifacts" / "T_00000"
    other_trial = old_staging.with_name("T_00001")
    write(trial_dir, [1])
    write(old_staging, [1, 2, 3, 4])
    write(other_trial, [1, 2, 3, 4])
    (temp / "session_latest").symlink_to(old_staging.parents[4])
    new_session = temp / "session_2026-12-03_17-00-00_2" / "artifacts" / "2026-12-03_17-00-02" / "grid" / \
        "driver_artifacts" / "T_00000"
    line = leftovers.drop_stale_staging(types.SimpleNamespace(local_path=str(new_session)), trial_dir)
    assert line == ("3 row(s) the killed driver wrote but never copied onto storage merged into it (up to its "
                    "checkpoint at iteration 4)"), line
    assert stored() == ([1, 2, 3, 4], []) and not old_staging.exists() and other_trial.is_dir()
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # no Ray session: no staging path to look at
    staging.mkdir(parents=True)
    assert leftovers.drop_stale_staging(types.SimpleNamespace(local_path=str(staging)), trial_dir) is None
    assert staging.is_dir()


def test_a_trial_folder_the_saved_state_does_not_know_is_set_aside_with_its_staged_copies(tmp_path):
    """A trial made after Tune's last save of its state, whose folder reached storage before the driver was
    killed: the resumed search makes it again under a new folder name, so the grid would hold it twice and
    `report` count its seed twice. `--resume` moves it to `.kappa_orphans/` (out of `report`'s reach) and deletes
    what the killed driver staged of it; so too a folder of a trial the state holds as never started (PENDING,
    no folder: Tune starts it afresh elsewhere). Left in place: the trials the state names, folders that are no
    trial's, and a trial the state lacks but the search has made already (Tune will not run it again), or where
    the search state cannot be read."""
    import json
    import types

    from ray import cloudpickle

    from kappa_rllib.report.load import load_runs
    from kappa_rllib.tuning import staging

    grid = tmp_path / "results" / "grid"
    known = "KappaPIDQN_abc12_00000_0_seed=0_2026-12-04_10-00-00"
    orphan = "KappaPIDQN_abc12_00001_1_seed=1_2026-12-04_10-00-09"
    pending = "KappaPIDQN_abc12_00002_2_seed=2_2026-12-04_10-00-11"
    made = "KappaPIDQN_abc12_00003_3_seed=3_2026-12-04_10-00-12"
    for seed, name in enumerate((known, orphan, pending, made)):
        (grid / name).mkdir(parents=True)
        (grid / name / "params.json").write_text(json.dumps({"seed": seed, "env": "CartPole-v1"}))
        row = {"training_iteration": 1, "done": True, "env_runners": {"episode_returns": [10.0 + seed],
                                                                      "num_env_steps_sampled_lifetime": 500}}
        (grid / name / "result.json").write_text(json.dumps(row) + "\n")
    (grid / "not_a_trial").mkdir()
    assert len(load_runs(tmp_path / "results")) == 4
    session = tmp_path / "ray" / "session_2026-12-04_10-00-00_1" / "artifacts" / "2026-12-04_10-00-00" / "grid" / \
        "driver_artifacts"
    (session / orphan).mkdir(parents=True)
    (session / known).mkdir(parents=True)
    here = session.parents[4] / "session_2026-12-04_11-00-00_2" / "artifacts" / "2026-12-04_11-00-00" / "grid" / \
        "driver_artifacts"

    def trial(trial_id, name):
        return types.SimpleNamespace(trial_id=trial_id, storage=types.SimpleNamespace(trial_dir_name=name),
                                     local_path=str(here / (name or "x")))

    # the state: 00000 with its folder, 00002 never started; 00001 and 00003 it lacks
    trials = [(trial("abc12_00000", known), None), (trial("abc12_00002", None), None)]
    said = staging.set_aside_orphans(grid, trials)  # no search state: nothing the state lacks is moved
    unread = "a trial folder Tune's saved state does not know, and the search state cannot be read: left in place"
    assert said[0] == f"{orphan}: {unread}" and said[2] == f"{made}: {unread}", said
    assert said[1].startswith(f"{pending}: a trial folder") and (grid / orphan).is_dir() and (grid / made).is_dir()
    (grid / ".kappa_orphans" / pending).rename(grid / pending)
    # the search state: abc12_ trials 00000..00002 made (counter 3): 00003 is not yet, so the search makes it again
    search = {"_iterators": [types.SimpleNamespace(uuid_prefix="abc12_", counter=3)]}
    (grid / "basic-variant-state-2026-12-04_10-00-00.json").write_bytes(cloudpickle.dumps(search))
    said = staging.set_aside_orphans(grid, trials)
    moved = "a trial folder Tune's saved state does not know (made after its last save, then the driver was " \
            "killed) moved to .kappa_orphans/: the trial runs again from its start"
    assert said == [f"{orphan}: a trial folder Tune's saved state does not know, and its search has made that "
                    "trial already: Tune will not run it; left in place",
                    f"{pending}: {moved}", f"{made}: {moved}"], said
    assert sorted(p.name for p in grid.iterdir() if p.is_dir()) == [".kappa_orphans", known, orphan, "not_a_trial"]
    assert (grid / ".kappa_orphans" / made / "result.json").is_file()
    assert (session / known).is_dir()
    assert sorted(run.seed for run in load_runs(tmp_path / "results")) == [0, 1]
    # a staged copy of a trial set aside is deleted (a cluster still up would copy it onto storage again)
    (session / made).mkdir()
    (grid / ".kappa_orphans" / made).rename(grid / made)
    staging.set_aside_orphans(grid, trials)
    assert not (session / made).exists() and not (grid / made).exists()


def test_adoption_moves_tunes_search_past_every_trial_the_state_holds_and_keeps_its_live_set_true(tmp_path):
    """kappa_rllib.tuning.adopt on Tune's own generator (a 5-seed grid, a function trainable), states as a killed
    driver and a full disk leave them: the search state saved when 2 trials were made (an older whole copy put
    back), the experiment state knowing trials 0-2 (2 finished), trial 3's folder on storage, trial 4 not made.
    Adopted: trial 3 (made again as Tune made it, its folder named); the search moved past 0-3 only once the
    caller has written the experiment state, so Tune's restored search makes trial 4 alone (before, it made
    trial 2 again, a seed twice); live: 3 (running), not finished 2 (it would hold a --max-concurrent slot)."""
    import json

    from ray import cloudpickle, tune
    from ray.tune.experiment import Experiment
    from ray.tune.experiment.trial import Trial
    from ray.tune.search.basic_variant import BasicVariantGenerator

    from kappa_rllib.tuning import adopt, repair

    tune.register_trainable("Adoptee", lambda config: None)
    experiment = Experiment("g", "Adoptee", config={"env": "CartPole-v1", "seed": tune.grid_search([0, 1, 2, 3, 4])},
                            storage_path=str(tmp_path))
    generator = BasicVariantGenerator(max_concurrent=4)
    generator.add_configurations([experiment])
    folder = tmp_path / "g"
    folder.mkdir(exist_ok=True)
    made = [generator.next_trial() for _ in range(2)]
    generator.save_to_dir(str(folder), "2026-12-05_10-00-00")  # counter 2
    made += [generator.next_trial(), generator.next_trial()]
    rows = []
    for index, trial in enumerate(made):
        trial.create_placement_group_factory()
        name = trial._generate_dirname()
        (folder / name).mkdir()
        (folder / name / "params.json").write_text(json.dumps(trial.config))
        if index == 3:
            continue  # made after the experiment state was saved
        trial.relative_logdir = trial.storage.trial_dir_name = name
        if index == 2:
            trial.status = "TERMINATED"
        trial.invalidate_json_state()
        rows.append(list(trial.get_json_state()))
    state_file = folder / "experiment_state-2026-12-05_10-00-00.json"
    state_file.write_text(json.dumps({"trial_data": rows, "runner_data": {}, "stats": {}}))
    search_file = folder / "basic-variant-state-2026-12-05_10-00-00.json"
    saved_search = search_file.read_bytes()

    state = json.loads(state_file.read_text())
    trials = [(Trial.from_json_state(row[0], stub=True), row) for row in state["trial_data"]]
    said, write_search = adopt.adopt_orphans(folder, state, trials)
    name3 = made[3]._generate_dirname()[:-len("2026-12-05_10-00-00")]
    assert len(said) == 2 and said[0].startswith(name3) and said[0].endswith(
        ": made after Tune last saved its state (then the driver was killed): adopted, it goes on from what its "
        "folder holds"), said
    assert said[1] == ("Tune's search state is older than its experiment state: its generator moved past the 1 "
                       "trial(s) the experiment state holds that it had not made (else made twice)")
    assert search_file.read_bytes() == saved_search  # not before the caller has written the experiment state
    adopted = Trial.from_json_state(state["trial_data"][3][0], stub=True)
    assert (adopted.trial_id, adopted.config["seed"], adopted.experiment_tag) == (made[3].trial_id, 3, "3_seed=3")
    assert repair._dir_name(adopted) == next(p.name for p in folder.iterdir() if p.name.startswith(name3))
    assert json.loads(state["trial_data"][3][0])["stub"] is False and adopted.placement_group_factory
    write_search()
    search = cloudpickle.loads(search_file.read_bytes())
    assert search["_live_trials"] == {made[0].trial_id, made[1].trial_id, made[3].trial_id}
    restored = BasicVariantGenerator()
    restored.set_state(search)
    following = restored.next_trial()
    assert (following.trial_id, following.config["seed"]) == (f"{made[0].trial_id[:-5]}00004", 4)
    assert restored.next_trial() is None

    # a trial the search made that neither the state nor storage holds (never started): added, PENDING
    state = {"trial_data": rows[:1], "runner_data": {}, "stats": {}}
    for path in folder.iterdir():
        if path.is_dir() and path.name != repair._dir_name(trials[0][0]):
            shutil.rmtree(path)
    search_file.write_bytes(saved_search)
    trials = [(Trial.from_json_state(row[0], stub=True), row) for row in state["trial_data"]]
    said, write_search = adopt.adopt_orphans(folder, state, trials)
    assert said == [f"trial {made[1].trial_id} (1_seed=1): made by Tune's search after its state was last saved, "
                    "never started: added to the state, it runs from its start"] and write_search is None
    lost = Trial.from_json_state(state["trial_data"][1][0], stub=True)
    assert (lost.trial_id, lost.status, repair._dir_name(lost)) == (made[1].trial_id, "PENDING", None)
