"""kappa-APPO's learner: RLlib's APPOTorchLearner solving M_{gamma kappa}(V_phi) (paper, Sec. 3-4).

V-trace takes rewards and discounts as inputs. APPO's loss (RLlib's, unchanged) is called with

    the shaped reward   r_t + gamma (1 - kappa) V_phi(s_{t+1})   (0 past a terminal)
    the discount        gamma * kappa

so its V-trace targets and policy-gradient advantages are those of the surrogate MDP. V_phi is
evaluated here, on the learner, on the observations the batch already holds: the artificial last
timestep RLlib's AddOneTsToEpisodesAndTruncate adds to every episode chunk gives V_phi(s_n) at a
chunk's end. At kappa = 1 nothing is changed: this is APPO (tested, loss and gradients).

Which network is V_phi (kappa_rllib.algorithms.actor_critic):
  * kappa-PI: the snapshot `PHI_SHAPING_MODULE_ID` of `PHI_MODULE_ID`, which learns the current
    policy's value on every batch from V-trace targets of the *original* MDP (plain rewards,
    discount gamma; `phi_value_loss`); the snapshot is refreshed when a kappa-iteration ends;
  * kappa-VI: `PHI_MODULE_ID`, set to V_theta when a kappa-iteration ends.

When a kappa-iteration ends is decided here too, from data, so that several learners agree: every
update carries the env steps sampled when its batch was sent (`timesteps`); the first update whose
count reaches the end of a kappa-iteration (in the algorithm's phase machine, `set_kappa_schedule`)
closes it before its gradient step. With several learners the k-th updates of the learners need
not carry the same count: RLlib's LearnerGroup drops an async request for a learner that already
has `max_requests_in_flight_per_learner` in flight, while torch DDP still pairs every learner's k-th
update. So before deciding, the learners agree on the largest count of their k-th updates (one
all-reduce of one integer); with DDP every learner holds the same weights after each update, so
every learner then takes the same snapshot at the same update (tested with 2 learners, including
counts that differ between them).
"""

from __future__ import annotations

import torch

from ray.rllib.algorithms.appo.torch.appo_torch_learner import APPOTorchLearner
from ray.rllib.algorithms.impala.torch.vtrace_torch_v2 import make_time_major, vtrace_torch
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import TARGET_NETWORK_ACTION_DIST_INPUTS
from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

from kappa_rllib.algorithms.actor_critic import PHI_VF_LOSS, KappaValueLearnerMixin
from kappa_rllib.phases import KappaPhaseMachine
from kappa_rllib.shaping import shaped_reward, surrogate_discount
from kappa_rllib.variant import PHI_MODULE_ID

KAPPA_CLOSED = "kappa_iterations_closed"  # learner state and metrics key


class SurrogateDiscount:
    """The per-module config APPO's loss reads, with `gamma` replaced by gamma * kappa."""

    def __init__(self, config, gamma: float):
        self._config, self.gamma = config, gamma

    def __getattr__(self, name):
        return getattr(self._config, name)


class KappaAPPOTorchLearner(KappaValueLearnerMixin, APPOTorchLearner):
    def build(self) -> None:
        super().build()
        self._build_kappa()
        self._kappa_schedule: KappaPhaseMachine | None = None  # set by the algorithm
        self._kappa_closed = 0  # kappa-iterations this learner has closed
        self._kappa_updates = 0  # updates this learner has started
        self._kappa_closings: list[tuple[int, int, float]] = []  # (update, closed, snapshot checksum)

    # ----- the loss
    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        if module_id == PHI_MODULE_ID:
            return self.phi_value_loss(config=config, batch=batch, fwd_out=fwd_out)
        if module_id == DEFAULT_MODULE_ID and self.plan.uses_v_phi:
            batch = self.surrogate_batch(batch, config.gamma)
            config = SurrogateDiscount(config, surrogate_discount(config.gamma, self.plan.kappa))
        return super().compute_loss_for_module(module_id=module_id, config=config, batch=batch, fwd_out=fwd_out)

    def surrogate_batch(self, batch, gamma: float) -> dict:
        """The batch with its rewards shaped: r + gamma (1 - kappa) V_phi(s'). V_phi(s') of row t
        is row t+1's (the artificial timestep's at a chunk's end); the artificial (loss-masked)
        rows keep their reward, so nothing reaches across two chunks."""
        v_phi = self.shaping_values(batch)
        next_v_phi = torch.cat([v_phi[1:], v_phi.new_zeros(1)])
        if Columns.LOSS_MASK in batch:
            next_v_phi = next_v_phi * batch[Columns.LOSS_MASK].float()
        rewards = shaped_reward(batch[Columns.REWARDS], next_v_phi, batch[Columns.TERMINATEDS].float(),
                                gamma, self.plan.kappa)
        return {**batch, Columns.REWARDS: rewards}

    def phi_value_loss(self, *, config, batch, fwd_out):
        """kappa-PI's V_phi learns the current policy's value in the original MDP: APPO's value
        loss (same weight) on V-trace targets with the plain rewards and gamma, importance
        weights from the same (target-network) policy as V_theta's."""
        values = self.module[PHI_MODULE_ID].unwrapped().compute_values(batch, embeddings=fwd_out.get(Columns.EMBEDDINGS))
        policy = self.module[DEFAULT_MODULE_ID].unwrapped()
        with torch.no_grad():
            dist = policy.get_train_action_dist_cls().from_logits(
                policy.forward_target(batch)[TARGET_NETWORK_ACTION_DIST_INPUTS])
            target_logp = dist.logp(batch[Columns.ACTIONS])
        targets, mask = vtrace_value_targets(
            values=values.detach(), rewards=batch[Columns.REWARDS], terminateds=batch[Columns.TERMINATEDS],
            loss_mask=batch[Columns.LOSS_MASK], target_logp=target_logp, behaviour_logp=batch[Columns.ACTION_LOGP],
            gamma=config.gamma, trajectory_len=config.get_rollout_fragment_length(),
            clip_rho_threshold=config.vtrace_clip_rho_threshold, clip_pg_rho_threshold=config.vtrace_clip_pg_rho_threshold)
        values_tm = make_time_major(values, trajectory_len=config.get_rollout_fragment_length())
        loss = 0.5 * torch.sum(torch.pow(values_tm - targets, 2.0) * mask) / torch.sum(mask)
        self.metrics.log_value((PHI_MODULE_ID, PHI_VF_LOSS), loss.detach(), window=1)
        # + 0 x the policy head's output: with several learners, torch DDP needs every parameter of
        # the module it wraps in the backward graph (V_phi's policy head is never trained).
        return config.vf_loss_coeff * loss + 0.0 * fwd_out[Columns.ACTION_DIST_INPUTS].sum()

    def _update_module_kl_coeff(self, module_id, config) -> None:
        if module_id == DEFAULT_MODULE_ID:  # V_phi has no policy loss, hence no KL to adapt to
            super()._update_module_kl_coeff(module_id, config)

    # ----- when a kappa-iteration ends (module docstring)
    def set_kappa_schedule(self, phases_state: dict) -> None:
        """A copy of the algorithm's phase machine (its plan of kappa-iteration ends)."""
        self._kappa_schedule = KappaPhaseMachine.from_state(phases_state)

    def before_gradient_based_update(self, *, timesteps) -> None:
        super().before_gradient_based_update(timesteps=timesteps)
        self._kappa_updates += 1
        self.close_kappa_iterations(self._agreed_env_steps(int(timesteps.get(NUM_ENV_STEPS_SAMPLED_LIFETIME, 0))))

    def _agreed_env_steps(self, env_steps_sampled: int) -> int:
        """The largest env-step count carried by this update on any learner (module docstring): all
        learners call this once per update, in the order of their DDP updates."""
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()
                and torch.distributed.get_world_size() > 1):
            return env_steps_sampled
        count = torch.tensor([env_steps_sampled], dtype=torch.int64, device=self._device)
        torch.distributed.all_reduce(count, op=torch.distributed.ReduceOp.MAX)
        return int(count.item())

    def close_kappa_iterations(self, env_steps_sampled: int) -> int:
        """Closes the kappa-iterations that end by `env_steps_sampled` and are still open (one
        closing step covers several: copying twice is copying once). Returns the number closed."""
        if self._kappa_schedule is None:
            return self._kappa_closed
        ended = self._kappa_schedule.iterations_ended_by(env_steps_sampled // self.config.total_train_batch_size)
        if ended > self._kappa_closed:
            self.end_kappa_iteration()
            self._kappa_closed = ended
            self._kappa_closings.append((self._kappa_updates, ended, self._snapshot_checksum()))
        self.metrics.log_value((DEFAULT_MODULE_ID, KAPPA_CLOSED), self._kappa_closed, window=1)
        return self._kappa_closed

    def kappa_closings(self) -> list[tuple[int, int, float]]:
        """Every kappa-iteration close on this learner: (the update it preceded, iterations closed
        by then, a checksum of the snapshot it left). Learners that agree have equal lists."""
        return list(self._kappa_closings)

    def _snapshot_checksum(self) -> float:
        with torch.no_grad():
            return float(sum(p.double().sum() for p in self.module[self.shaping_module_id].unwrapped().parameters()))

    def get_state(self, components=None, *, not_components=None, **kwargs):
        state = super().get_state(components, not_components=not_components, **kwargs)
        state[KAPPA_CLOSED] = self._kappa_closed
        return state

    def set_state(self, state) -> None:
        super().set_state(state)
        if KAPPA_CLOSED in state:
            self._kappa_closed = int(state[KAPPA_CLOSED])


def vtrace_value_targets(*, values, rewards, terminateds, loss_mask, target_logp, behaviour_logp, gamma: float,
                         trajectory_len: int, clip_rho_threshold: float, clip_pg_rho_threshold: float):
    """V-trace value targets v_s (time-major) and the time-major loss mask, laid out and
    bootstrapped exactly as RLlib's APPO loss does for V_theta."""
    def tm(x):
        return make_time_major(x, trajectory_len=trajectory_len)

    mask = tm(loss_mask.float())
    values_tm = tm(values)
    bootstrap = torch.cat([values_tm[0][1:], values_tm[0][0:1]], dim=0)
    discounts = (1.0 - tm(terminateds).float()) * gamma * mask
    vs, _ = vtrace_torch(target_action_log_probs=tm(target_logp), behaviour_action_log_probs=tm(behaviour_logp),
                         discounts=discounts, rewards=tm(rewards), values=values_tm, bootstrap_values=bootstrap,
                         clip_rho_threshold=clip_rho_threshold, clip_pg_rho_threshold=clip_pg_rho_threshold)
    return vs, mask
