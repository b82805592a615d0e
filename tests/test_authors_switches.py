"""The switches that reproduce the authors' kappa-VI-TRPO where it differs from ours (docs/paper-settings.md,
"kappa-VI: the authors' code"), each checked in closed form on a short trajectory:

* `truncation_as_terminal`: gym 0.14's `done` at the time limit: nothing bootstrapped after a truncation, and
  the shaping term gamma (1 - kappa) V_phi(s_n) zero there too (their `nonterminal = 1 - episode_starts[t+1]`);
* `copy_phi_after_first_batch`: V_phi <- V_theta after the run's first batch as well (their copy at
  `iters_so_far % interval == 0`, iteration 0 included);
* `orthogonal_init`: OpenAI baselines' initialisation (orthogonal, gains sqrt(2) / 0.01 / 1.0, zero biases).
"""

import numpy as np
import pytest
import torch

from ray.rllib.core import DEFAULT_MODULE_ID

from kappa_rllib import KappaPITRPOConfig, KappaVITRPOConfig, TRPOConfig
from kappa_rllib.variant import PHI_MODULE_ID

from test_trpo import GAMMA, KAPPA, hand_made_chunks, kappa_learner, make_learner


def by_definition(rewards, v_phi, v_theta_last, ends, gamma, kappa):
    """R_j(kappa, V_phi) one sum per j: r_t + gamma (1 - kappa) V_phi(s_{t+1}), the last V_phi(s_n) and the
    bootstrap (gamma kappa)^(n-j) V_theta(s_n) both dropped where the chunk `ends`."""
    n = len(rewards)
    out = []
    for j in range(n):
        total = 0.0
        for t in range(j, n):
            v_next = 0.0 if (ends and t == n - 1) else v_phi[t + 1]
            total += (gamma * kappa) ** (t - j) * (rewards[t] + gamma * (1 - kappa) * v_next)
        if not ends:
            total += (gamma * kappa) ** (n - j) * v_theta_last
        out.append(total)
    return np.array(out)


@pytest.mark.parametrize("as_terminal", [False, True])
def test_kappa_vi_returns_end_at_a_truncation_only_with_truncation_as_terminal(as_terminal):
    """The truncated chunk of `hand_made_chunks` (3 steps) is bootstrapped by default and ends as at a fall with
    the switch; the terminated chunk and the batch-end chunk are the same either way."""
    learner = kappa_learner(config_cls=KappaVITRPOConfig, truncation_as_terminal=as_terminal)
    with torch.no_grad():  # V_phi apart from V_theta, and far from 0, so that each dropped term shows
        for p in learner.module[PHI_MODULE_ID].unwrapped().vf.parameters():
            p.add_(0.5)
    chunks = hand_made_chunks()
    for chunk, v in zip(chunks, learner.chunk_values(chunks)):
        out = learner.advantages_and_targets(chunk, v)
        ends = chunk["terminated"] or (as_terminal and chunk["truncated"])
        want = by_definition(chunk["rewards"], v[PHI_MODULE_ID], v[DEFAULT_MODULE_ID][-1], ends, GAMMA, KAPPA)
        np.testing.assert_allclose(out["value_targets"], want, rtol=1e-10)
        if chunk["truncated"]:  # the two readings differ there by the bootstrap and the shaping term
            other = by_definition(chunk["rewards"], v[PHI_MODULE_ID], v[DEFAULT_MODULE_ID][-1], not ends, GAMMA, KAPPA)
            assert np.abs(want - other).min() > 1e-3


def test_trpo_and_gae_returns_end_at_a_truncation_with_truncation_as_terminal():
    """The baselines follow the same switch: TRPO's return sum_t gamma^(t-j) r_t stops at the truncation."""
    for lam in (1.0, 0.9):
        learner = make_learner(TRPOConfig().environment("CartPole-v1")
                               .training(gamma=GAMMA, lambda_=lam, truncation_as_terminal=True).debugging(seed=0))
        chunk = hand_made_chunks()[1]
        assert chunk["truncated"] and not chunk["terminated"]
        (v,) = learner.chunk_values([chunk])
        out = learner.advantages_and_targets(chunk, v)
        r, n = chunk["rewards"], len(chunk["rewards"])
        np.testing.assert_allclose(out["value_targets"],
                                   [sum(GAMMA ** (t - j) * r[t] for t in range(j, n)) for j in range(n)], rtol=1e-10)


def test_kappa_pi_rho_ends_at_a_truncation_with_truncation_as_terminal():
    from kappa_rllib.algorithms.kappa_trpo.torch.kappa_trpo_torch_learner import PHI_VALUE_TARGETS

    learner = kappa_learner(truncation_as_terminal=True)
    chunk = hand_made_chunks()[1]
    (v,) = learner.chunk_values([chunk])
    r, n = chunk["rewards"], len(chunk["rewards"])
    np.testing.assert_allclose(learner.advantages_and_targets(chunk, v)[PHI_VALUE_TARGETS],
                               [sum(GAMMA ** (t - j) * r[t] for t in range(j, n)) for j in range(n)], rtol=1e-10)


def value_params(algo, module_id):
    state = algo.learner_group.get_state()["learner"]["rl_module"][module_id]
    return {k: np.asarray(w) for k, w in state.items() if k.startswith(("encoder.critic_encoder", "vf"))}


@pytest.mark.parametrize("switch", [False, True])
def test_copy_phi_after_first_batch_copies_once_more_after_batch_one(ray_local, switch):
    """kappa-VI at N_kappa = 3 over 9 batches (T_kappa = 3): V_phi <- V_theta after batches 3, 6, 9 (Algorithm 8),
    and with the switch after batch 1 too. Read after each batch: V_phi equals V_theta exactly where it was just
    copied, and stays the copy (or its initial weights) until the next one."""
    config = (KappaVITRPOConfig().environment("CartPole-v1")
              .training(kappa=0.9, c_fa=0.75, total_env_steps=9 * 64, train_batch_size=64,
                        copy_phi_after_first_batch=switch)
              .debugging(seed=0))
    config.validate()
    assert config.num_kappa_iterations == 3
    algo = config.build_algo()
    try:
        initial, last_copy = value_params(algo, PHI_MODULE_ID), None
        for batch in range(1, 10):
            algo.train()
            theta, phi = value_params(algo, DEFAULT_MODULE_ID), value_params(algo, PHI_MODULE_ID)
            copied = batch % 3 == 0 or (switch and batch == 1)
            same = all(np.array_equal(theta[k.replace(PHI_MODULE_ID, DEFAULT_MODULE_ID)], phi[k]) for k in phi)
            assert same == copied, batch
            if copied:
                last_copy = phi
            else:
                expect = initial if last_copy is None else last_copy
                assert all(np.array_equal(expect[k], phi[k]) for k in phi), batch
    finally:
        algo.stop()


def test_copy_phi_after_first_batch_is_refused_for_kappa_pi():
    with pytest.raises(ValueError, match="copy_phi_after_first_batch=True applies to kappa-VI-TRPO only"):
        KappaPITRPOConfig().environment("CartPole-v1").training(copy_phi_after_first_batch=True).validate()
    with pytest.raises(ValueError, match="copy_phi_after_first_batch must be True or False"):
        KappaVITRPOConfig().environment("CartPole-v1").training(copy_phi_after_first_batch=1).validate()


@pytest.mark.parametrize("setting", ["truncation_as_terminal", "orthogonal_init"])
def test_the_switches_take_booleans_only(setting):
    with pytest.raises(ValueError, match=f"{setting} must be True or False"):
        TRPOConfig().environment("CartPole-v1").training(**{setting: "yes"}).validate()


def test_orthogonal_init_gives_every_layer_the_authors_gain():
    """W W^T = gain^2 I on the short side of each weight matrix (an orthogonal matrix times its gain), biases 0:
    sqrt(2) on the hidden layers, 0.01 on the policy mean's output, 1.0 on the value output; V_phi too."""
    learner = kappa_learner(config_cls=KappaVITRPOConfig, orthogonal_init=True)
    for module_id in (DEFAULT_MODULE_ID, PHI_MODULE_ID):
        module = learner.module[module_id].unwrapped()
        heads = {id(m): gain for part, gain in ((module.pi, 0.01), (module.vf, 1.0))
                 for m in [[x for x in part.modules() if isinstance(x, torch.nn.Linear)][-1]]}
        layers = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
        assert len(layers) == 6  # actor 2 + critic 2 hidden, pi and vf outputs
        for layer in layers:
            w = layer.weight.detach().double()
            gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
            gain = heads.get(id(layer), 2 ** 0.5)
            torch.testing.assert_close(gram, gain ** 2 * torch.eye(gram.shape[0], dtype=torch.float64),
                                       rtol=0, atol=1e-5 * max(1.0, gain ** 2))
            assert torch.count_nonzero(layer.bias) == 0
    default = kappa_learner(config_cls=KappaVITRPOConfig).module[DEFAULT_MODULE_ID].unwrapped()
    assert torch.count_nonzero(next(m for m in default.modules() if isinstance(m, torch.nn.Linear)).bias) > 0
