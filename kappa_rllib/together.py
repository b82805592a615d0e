"""The name Tune state pickled before kappa_rllib.tuning held the Tune layer refers to (a `tuner.pkl`'s
`Started` callback: `--resume` of a run an earlier version started); the code is kappa_rllib.tuning.together."""

from kappa_rllib.tuning.together import *  # noqa: F401,F403
from kappa_rllib.tuning.together import Started  # noqa: F401
