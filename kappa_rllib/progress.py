"""The name Tune state pickled before kappa_rllib.tuning held the Tune layer refers to (a `tuner.pkl`'s
progress callbacks: `--resume` of a run an earlier version started); the code is kappa_rllib.tuning.progress."""

from kappa_rllib.tuning.progress import *  # noqa: F401,F403
from kappa_rllib.tuning.progress import CompactProgress, FileProgress, GridProgress  # noqa: F401
