"""The names Tune state pickled before kappa_rllib.tuning held the Tune layer refers to (a `tuner.pkl`'s
callbacks: `--resume` of a run an earlier version started); the code is kappa_rllib.tuning.retry and
kappa_rllib.tuning.repair."""

from kappa_rllib.tuning.repair import *  # noqa: F401,F403
from kappa_rllib.tuning.repair import _newest, _newest_state, _parses, _unpickles  # noqa: F401
from kappa_rllib.tuning.rows import _cut_partial_line, _drop_bad_rows  # noqa: F401
from kappa_rllib.tuning.retry import *  # noqa: F401,F403
