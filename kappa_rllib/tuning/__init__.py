"""The Tune layer: how `kappa-rllib tune` runs a file's grids with Ray Tune (what a file defines, `Grid` and
`paper_grids`, is kappa_rllib.experiments).

One driver fits every grid of a file at once, each its own Tune run in a thread (`driver.run`,
`together.fit_together`). Where the grids meet, this package manages what Tune keeps per run:

| seam | where | tested by (tests/) |
|---|---|---|
| one Tune run per grid, started one after another (Tune's registry), all fitted together | `driver`, `together.fit_together`, `together.Started` | test_experiments.py (`..._run_together_...`), test_seams.py |
| the shared cap (`--max-concurrent` over the file): new trials and the trials a resumed grid brings back | `together.SharedCap`, `CappedVariantGenerator`, `capped_actor_starts` | test_experiments.py, test_seams.py (`..._killed_at_random_...`, `test_errored_trials_resumed_with_a_new_cap_and_retry_budget`) |
| the shared Ctrl-C (SIGINT stops every grid, each saving its state) | `together.interrupt_on_signal` | test_experiments.py, test_cli.py |
| a grid's own failure: the others stopped and saved, one line | `together.GridRaised`, `failures.GridFailed` | test_seams.py (`..._tune_run_that_raises_...`) |
| a fresh run checked for every grid before any writes; a resumed grid's trials as its stored run's; each folder repaired, then restored | `checks` (`check_fresh`, `check_resume`, `prepare_resume`) | test_seams.py (`test_a_fresh_run_refused_...`) |
| the shared tracking: one MLflow store for the file, W&B's own step; a run found by its grid's storage; the rows a run lacks filled alike for W&B and MLflow at each new driver | `tracking` (its modules: `replay`, `track_wandb`, `track_mlflow`, `wandb_files`, `loggers`) | test_seams.py, test_tracking.py (`test_a_tracked_run_belongs_to_its_storage_...`, `test_mlflow_fills_the_rows_a_run_lacks_...`) |
| retries: a lost node N times, the trial's own error once; this run's N on resume; the failed trials read back for the CLI's lines (a full disk's error file) | `retry`, `failures` | test_faults.py, test_seams.py (`test_a_resumed_grid_takes_this_runs_max_failures`) |
| the resume repair: Tune's state cut short, rows cut short, a trial pointed where its folder says (started over where its rows reach no checkpoint), a killed driver's staged rows merged into storage from this session or an older one on this node (all of a finished trial, else up to its checkpoint), then its staging deleted; a trial the state does not know adopted where a killed driver made or started it after Tune's last save (its folder named in the state, the search moved past it), else its folder set aside; on a bucket, the same repair on a working copy, written back (checkpoints moved in the bucket, never uploaded) | `repair`, `adopt`, `staging`, `rows`, `bucket` | test_faults.py, test_seams.py (`test_resume_keeps_a_trial_that_finished_...`, `test_trials_a_killed_driver_made_or_started_..._adopted_...`), test_busy.py, test_client_storage.py (`test_a_bucket_grid_is_repaired_...`) |
| one Tune run a grid folder at a time: a lock held from setup to the run's end, waited for by `--resume`, named by a refusal | `busy`, `checks.wait_for_other_drivers` | test_busy.py |
| the compact view, and trials waiting for resources on a cluster | `progress` | test_cli.py, test_experiments.py |
| the driver's files copied onto storage whole, and only those that changed | `sync.install`, `sync.WholeUploads` | test_seams.py (`test_uploads_...`, `test_whole_uploads_...`) |
| a trial's config in its rows once a stretch where the driver opts in (`compact_result_rows`; the driver's cost per report; whole on every row elsewhere, as RLlib's), its axes on every row and its whole config on its last (Tune's per-row views, `Result.from_path`), merged forward by `report` | `config_once.ConfigOnceMixin`, `config_once.compact`, `config_once.around_loggers`, report/load.py | test_config_once.py, test_report.py (`..._config-once`), test_driver_cluster_replay.py, test_rllib_habits.py |
| result storage: folders (`file://` too) and bucket URIs; under Ray Client every check and write of it on the cluster | `storage` (`on_storage`) | test_cluster_configs.py, test_report.py, test_client_storage.py |
| Tune's console output under the compact view | `output` | test_experiments.py |

The invariant every seam keeps: after any sequence of driver kills and `--resume`s, each trial of a grid is
stored once, ends once at its T, and its rows are 1..T once each in its last timeline (a resume from a checkpoint
rolls back, never leaves a gap). Tested as a property in test_seams.py, kill schedules drawn from seeds: the driver
and its Ray killed (`test_a_file_of_three_grids_killed_at_random_moments_...`; KAPPA_KILL_SEEDS, KAPPA_KILL_BUCKET_SEEDS), and the driver
alone killed on a cluster that stays up, some kills as a trial's end is staged but not yet stored, on a folder
and on an S3 bucket (moto's server on loopback) (`test_drivers_killed_at_random_moments_on_a_cluster_that_stays_up_...`;
KAPPA_KEPT_UP_SEEDS, KAPPA_KEPT_UP_BUCKET_SEEDS).

Tune's internals this layer leans on (ray[rllib] is pinned exactly): the per-run SIGINT hook
(`ray.tune.tune._setup_signal_catching`), `TuneController._maybe_add_actors` and its `_max_pending_trials`,
the experiment state's layout (`Trial.from_json_state`, its checkpoint manager), the upload
(`ray.train._internal.storage._upload_to_fs_path`). Tests check each.
"""
