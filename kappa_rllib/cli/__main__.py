"""`python -m kappa_rllib.cli`, the same as the `kappa-rllib` command."""

import sys

from kappa_rllib.cli import run

sys.exit(run())
