"""Which kappa variant does what: the one place that decides it (imports neither Ray nor torch).

Paper, Algorithms 5-8. Every kappa algorithm solves the surrogate MDP M_{gamma kappa}(V_phi) with
the shaped reward r + gamma (1 - kappa) V_phi(s'); the variants differ only in how V_phi is
produced between two kappa-iterations:

  * kappa-PI (Algorithms 5, 7): V_phi *evaluates* the improved policy (TD(0) on Q_phi for DQN,
    a regression of V_phi on the plain returns rho_j for TRPO);
  * kappa-VI (Algorithms 6, 8): V_phi is a *copy* of the surrogate's own value (phi <- theta).

With kappa = 1 the shaping weight gamma (1 - kappa) is 0: V_phi is never read, so it is neither
evaluated nor copied, and every algorithm is exactly its base (DQN, TRPO).

Module ids (one vocabulary for both families):

  * `PHI_MODULE_ID`: the evaluation network, Q_phi (DQN) or V_phi (TRPO), learner-only;
  * `PHI_SHAPING_MODULE_ID`: kappa-PI-TRPO only, the frozen snapshot of V_phi that the shaped
    reward and R_j read while V_phi itself trains on every batch (see `PHI_FIT_*`).
"""

from __future__ import annotations

from dataclasses import dataclass

PHI_MODULE_ID = "kappa_phi"
PHI_SHAPING_MODULE_ID = "kappa_phi_shaping"
# Where kappa-DQN's V_phi(s') reads Q_phi (the torch learner's `v_phi`): the paper's Algorithms 5 and 6,
# or the authors' code (the target Q'_phi at the online Q_theta's greedy action).
V_PHI_PAPER, V_PHI_AUTHORS = "paper", "authors"
V_PHI_SOURCES = (V_PHI_PAPER, V_PHI_AUTHORS)

PI, VI = "pi", "vi"
VARIANTS = (PI, VI)

# kappa-PI-TRPO's V_phi schedule (docs/paper-settings.md, "V_phi in kappa-PI-TRPO"):
PHI_FIT_EVERY_BATCH = "every_batch"  # the authors' code: fit V_phi on every batch, snapshot at iteration end
PHI_FIT_ITERATION_END = "iteration_end"  # Alg. 7 read literally: one fit on the iteration's last batch
PHI_FITS = (PHI_FIT_EVERY_BATCH, PHI_FIT_ITERATION_END)

# kappa-PI-TRPO's V_phi target rho_j where a chunk ends without a terminal state (docs/paper-settings.md,
# "V_phi's target at a cut"):
PHI_TARGET_BOOTSTRAP = "bootstrap"  # default: a time-limit truncation and the batch end bootstrap with V_phi
PHI_TARGET_AUTHORS = "authors"  # the authors' code: a truncation ends rho as a terminal state would (gym
#   0.14's TimeLimit said done), and the batch end bootstraps with the frozen snapshot the shaping reads
PHI_TARGETS = (PHI_TARGET_BOOTSTRAP, PHI_TARGET_AUTHORS)
# kappa-PI-TRPO's V_phi settings and their defaults (config attributes, params.json keys)
PHI_OPTION_DEFAULTS = {"phi_fit": PHI_FIT_EVERY_BATCH, "phi_target": PHI_TARGET_BOOTSTRAP}


@dataclass(frozen=True)
class KappaPlan:
    """What a configured kappa algorithm does with V_phi; derived once from the config."""

    variant: str  # PI or VI
    kappa: float
    phi_fit: str = PHI_FIT_EVERY_BATCH  # kappa-PI-TRPO only
    phi_target: str = PHI_TARGET_BOOTSTRAP  # kappa-PI-TRPO only

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"kappa variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.phi_fit not in PHI_FITS:
            raise ValueError(f"phi_fit must be one of {PHI_FITS}, got {self.phi_fit!r}")
        if self.phi_target not in PHI_TARGETS:
            raise ValueError(f"phi_target must be one of {PHI_TARGETS}, got {self.phi_target!r}")

    @property
    def uses_v_phi(self) -> bool:
        """V_phi enters the shaped reward (its weight gamma (1 - kappa) is not 0)."""
        return self.kappa < 1.0

    @property
    def evaluates_phi(self) -> bool:
        """kappa-PI: V_phi is trained to evaluate the current policy."""
        return self.uses_v_phi and self.variant == PI

    @property
    def copies_theta_to_phi(self) -> bool:
        """kappa-VI: phi <- theta closes every kappa-iteration."""
        return self.uses_v_phi and self.variant == VI

    @property
    def fits_phi_every_batch(self) -> bool:
        """kappa-PI-TRPO with the authors' schedule: one V_phi fit per sample batch."""
        return self.evaluates_phi and self.phi_fit == PHI_FIT_EVERY_BATCH

    def fits_phi_on_batch(self, ends_iteration: bool) -> bool:
        """kappa-PI-TRPO: whether V_phi is fitted on a batch (every batch, or only on a kappa-iteration's
        last with `phi_fit="iteration_end"`: Alg. 7, line 13)."""
        return self.fits_phi_every_batch or (self.evaluates_phi and ends_iteration)

    @property
    def rho_ends_at_truncation(self) -> bool:
        """kappa-PI-TRPO: rho_j stops at a time-limit truncation as at a terminal state (the authors')."""
        return self.evaluates_phi and self.phi_target == PHI_TARGET_AUTHORS

    @property
    def rho_bootstrap_module(self) -> str:
        """kappa-PI-TRPO: the network whose V(s_n) bootstraps rho_j where a chunk is cut: the V_phi being
        fitted, or (the authors') the frozen snapshot that the shaped reward reads."""
        return PHI_SHAPING_MODULE_ID if self.phi_target == PHI_TARGET_AUTHORS else PHI_MODULE_ID
