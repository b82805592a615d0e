"""The TRPO family's fast paths are the same maths as RLlib's: the closed-form Fisher-vector products
against double backprop of the KL, and the EnvRunner's numpy actor against RLlib's module and
distribution classes (its actions' log-probabilities are the current policy's)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from kappa_rllib import TRPOConfig
from kappa_rllib.algorithms.trpo.torch.natural_gradient import fisher_vector_product, flat_grad
from kappa_rllib.algorithms.trpo.torch.trpo_torch_learner import actor_dist_inputs, policy_parameters
from kappa_rllib.env_runner import RawTransitionEnvRunner
from kappa_rllib.mlp_policy import CATEGORICAL, GAUSSIAN, MLPJacobian, NumpyActor, policy_chain

# (env, activation, hidden layers): Gaussian and categorical policies, tanh and ReLU, depth 1 to 3
POLICIES = [
    ("Hopper-v5", "tanh", [64, 64]),
    ("InvertedPendulum-v5", "relu", [32]),
    ("CartPole-v1", "tanh", [64, 64]),
    ("Acrobot-v1", "relu", [16, 24, 8]),
]


def policy_module(env_id, activation, hiddens, seed=0):
    config = TRPOConfig().environment(env_id).rl_module(
        model_config={"fcnet_hiddens": hiddens, "fcnet_activation": activation, "vf_share_layers": False}
    ).debugging(seed=seed)
    learner = config.build_learner(env=gym.make(env_id))
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    with torch.no_grad():  # away from initialisation: a non-zero mean, a log-std other than 0
        for p in policy_parameters(module):
            p.add_(0.3 * torch.randn_like(p))
    return module


def random_obs(env_id, n, seed=0):
    shape = gym.make(env_id).observation_space.shape
    return torch.as_tensor(np.random.default_rng(seed).normal(size=(n,) + shape), dtype=torch.float32)


def double_backprop_fvp(module, params, obs, damping):
    """The textbook product: d/dtheta [ (d mean KL(pi_old || pi_theta) / dtheta) . v ] + damping v."""
    dist_cls = module.get_train_action_dist_cls()
    with torch.no_grad():
        old = dist_cls.from_logits(actor_dist_inputs(module, obs))

    def fvp(v):
        kl = old.kl(dist_cls.from_logits(actor_dist_inputs(module, obs))).mean()
        grad_kl = flat_grad(kl, params, create_graph=True)
        return flat_grad(grad_kl @ v, params) + damping * v

    return fvp


@pytest.mark.parametrize("env_id, activation, hiddens", POLICIES)
def test_closed_form_fisher_vector_products_equal_double_backprop(env_id, activation, hiddens):
    module = policy_module(env_id, activation, hiddens)
    params = policy_parameters(module)
    dist_cls = module.get_train_action_dist_cls()
    obs = random_obs(env_id, 300)
    chain = policy_chain(module, dist_cls)
    assert chain is not None and chain.dist == (GAUSSIAN if "Pendulum" in env_id or "Hopper" in env_id else CATEGORICAL)
    with torch.no_grad():
        old_inputs = actor_dist_inputs(module, obs)
    reference = double_backprop_fvp(module, params, obs, damping=0.1)
    closed_form = fisher_vector_product(params, old_inputs, dist_cls, 0.1,
                                        jacobian=MLPJacobian(chain, params, obs))
    gauss_newton = fisher_vector_product(params, old_inputs, dist_cls, 0.1,
                                         dist_inputs=lambda: actor_dist_inputs(module, obs))
    generator = torch.Generator().manual_seed(1)
    for _ in range(3):
        v = torch.randn(sum(p.numel() for p in params), generator=generator)
        expected = reference(v)
        scale = expected.abs().max()
        torch.testing.assert_close(closed_form(v) / scale, expected / scale, atol=2e-6, rtol=0)
        torch.testing.assert_close(gauss_newton(v) / scale, expected / scale, atol=2e-6, rtol=0)
    # and the damping is added once, not scaled by the batch: F 0 = 0
    zero = torch.zeros(sum(p.numel() for p in params))
    assert torch.count_nonzero(closed_form(zero)) == 0


@pytest.mark.parametrize("env_id, activation, hiddens", POLICIES[:3])
def test_mlp_jacobian_products_equal_autograd(env_id, activation, hiddens):
    """J v against torch.func.jvp and J^T u against a backward pass, on the policy's own forward."""
    module = policy_module(env_id, activation, hiddens)
    params = policy_parameters(module)
    obs = random_obs(env_id, 50, seed=3)
    jac = MLPJacobian(policy_chain(module), params, obs)
    names = [n for n, p in module.named_parameters() if any(p is q for q in params)]
    by_name = dict(module.named_parameters())
    assert [by_name[n] for n in names] == params  # policy_parameters' order is the module's

    generator = torch.Generator().manual_seed(2)
    v = torch.randn(sum(p.numel() for p in params), generator=generator)
    pieces = list(torch.split(v, [p.numel() for p in params]))
    pieces = [piece.view_as(p) for piece, p in zip(pieces, params)]

    def actor(*flat):  # z(s) as a function of the policy parameters
        return torch.func.functional_call(module, dict(zip(names, flat)), ({Columns.OBS: obs},),
                                          strict=False)[Columns.ACTION_DIST_INPUTS]

    detached = tuple(p.detach() for p in params)
    _, jv = torch.func.jvp(actor, detached, tuple(pieces))
    torch.testing.assert_close(jac.jvp(v), jv, atol=1e-5, rtol=1e-5)
    u = torch.randn(jv.shape, generator=generator)
    z = actor_dist_inputs(module, obs)
    expected = flat_grad(z, params, grad_outputs=u)
    torch.testing.assert_close(jac.vjp(u), expected, atol=1e-5, rtol=1e-5)


def test_policies_that_are_not_a_plain_chain_take_rllib_paths():
    """A layer-normed actor is not a chain: no numpy actor, and the Fisher product falls back."""
    config = TRPOConfig().environment("CartPole-v1").rl_module(
        model_config={"fcnet_hiddens": [16], "fcnet_activation": "tanh", "vf_share_layers": False,
                      "fcnet_use_layernorm": True})
    module = config.build_learner(env=gym.make("CartPole-v1")).module[DEFAULT_MODULE_ID].unwrapped()
    assert policy_chain(module) is None
    assert NumpyActor.of(module, module.get_exploration_action_dist_cls()) is None
    # the autograd Gauss-Newton route still equals double backprop there
    params, obs = policy_parameters(module), random_obs("CartPole-v1", 100)
    with torch.no_grad():
        old_inputs = actor_dist_inputs(module, obs)
    gauss_newton = fisher_vector_product(params, old_inputs, module.get_train_action_dist_cls(), 0.1,
                                         dist_inputs=lambda: actor_dist_inputs(module, obs))
    v = torch.randn(sum(p.numel() for p in params), generator=torch.Generator().manual_seed(0))
    expected = double_backprop_fvp(module, params, obs, 0.1)(v)
    torch.testing.assert_close(gauss_newton(v) / expected.abs().max(), expected / expected.abs().max(),
                               atol=2e-6, rtol=0)


@pytest.mark.parametrize("env_id, activation, hiddens", POLICIES)
def test_numpy_actor_samples_the_policy_and_reports_its_log_probabilities(env_id, activation, hiddens):
    module = policy_module(env_id, activation, hiddens)
    dist_cls = module.get_exploration_action_dist_cls()
    actor = NumpyActor.of(module, dist_cls)
    obs = random_obs(env_id, 8, seed=4)
    with torch.no_grad():
        inputs = module._forward_exploration({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
    rllib_dist = dist_cls.from_logits(inputs)
    rng = np.random.default_rng(0)
    actions, logp = actor.act(obs.numpy(), rng, explore=True)
    # the log-probability of each drawn action is the policy's (RLlib's distribution class)
    np.testing.assert_allclose(logp, rllib_dist.logp(torch.as_tensor(actions)).numpy(), rtol=1e-5, atol=1e-5)
    # the greedy action is RLlib's deterministic one
    greedy, none = actor.act(obs.numpy(), rng, explore=False)
    assert none is None
    np.testing.assert_allclose(greedy, rllib_dist.to_deterministic().sample().numpy(), rtol=1e-5, atol=1e-5)
    # the draws follow the distribution: 20k draws for the first observation
    many = np.repeat(obs[:1].numpy(), 20_000, axis=0)
    draws, _ = actor.act(many, rng, explore=True)
    if actor.dist == GAUSSIAN:
        loc, log_std = inputs[0].chunk(2)
        np.testing.assert_allclose(draws.mean(0), loc.numpy(), atol=5 * log_std.exp().max().item() / np.sqrt(20_000))
        np.testing.assert_allclose(draws.std(0), log_std.exp().numpy(), rtol=0.03)
    else:
        probs = torch.softmax(inputs[0], -1).numpy()
        freq = np.bincount(draws, minlength=len(probs)) / len(draws)
        np.testing.assert_allclose(freq, probs, atol=5 * np.sqrt(probs * (1 - probs) / len(draws)).max() + 1e-9)


@pytest.mark.parametrize("env_id", ["Hopper-v5", "CartPole-v1"])
def test_a_sampled_batch_carries_the_current_policys_log_probabilities(env_id):
    """After a weight change through `set_state` (RLlib's sync), the EnvRunner's sampled actions'
    log-probabilities equal those of the weights it was sent, by RLlib's own forward pass."""
    config = TRPOConfig().environment(env_id).debugging(seed=0)
    runner = RawTransitionEnvRunner(config=config)
    assert runner._numpy_actor is not None
    state = runner.get_state(components="rl_module")
    module_state = state["rl_module"]  # the single module's weights
    new = {k: (np.asarray(v) + 0.2 * np.random.default_rng(5).normal(size=np.shape(v))).astype(np.float32)
           for k, v in module_state.items()}
    runner.set_state({"rl_module": {DEFAULT_MODULE_ID: new}})
    segments = runner.sample(num_timesteps=300, global_env_steps=0)
    module = runner.module
    for k, v in new.items():  # the module holds the sent weights
        np.testing.assert_array_equal(module.state_dict()[k].numpy(), v)
    dist_cls = module.get_exploration_action_dist_cls()
    for seg in segments:
        obs = torch.as_tensor(seg[Columns.OBS][:-1])
        with torch.no_grad():
            dist = dist_cls.from_logits(module._forward_exploration({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS])
            expected = dist.logp(torch.as_tensor(seg[Columns.ACTIONS])).numpy()
        np.testing.assert_allclose(seg[Columns.ACTION_LOGP], expected, rtol=1e-5, atol=1e-5)
    assert sum(len(s[Columns.REWARDS]) for s in segments) == 300
    runner.stop()


def test_a_subclassed_distribution_takes_the_generic_routes_and_its_fisher_product_is_exact():
    """A subclass of RLlib's TorchCategorical with a temperature (as RLlib's own example
    TorchCategoricalWithTemp: softmax(z / T)) is not the distribution the closed forms assume: no
    numpy actor (it would draw from softmax(z)), no closed-form H (relative FVP error 0.57 at T = 3);
    the autograd route gives double backprop's product."""
    from ray.rllib.core.distribution.torch.torch_distribution import TorchCategorical

    from kappa_rllib.algorithms.trpo.torch.natural_gradient import kl_input_hessian

    class CategoricalWithTemp(TorchCategorical):
        def __init__(self, logits=None, probs=None, temperature: float = 3.0):
            super().__init__(logits=logits / temperature)

    module = policy_module("CartPole-v1", "tanh", [64, 64])
    params, obs = policy_parameters(module), random_obs("CartPole-v1", 200)
    assert policy_chain(module, CategoricalWithTemp) is None
    assert NumpyActor.of(module, CategoricalWithTemp) is None
    with torch.no_grad():
        old_inputs = actor_dist_inputs(module, obs)
    assert kl_input_hessian(CategoricalWithTemp, old_inputs) is None
    with torch.no_grad():
        old = CategoricalWithTemp.from_logits(old_inputs)

    def mean_kl():
        return old.kl(CategoricalWithTemp.from_logits(actor_dist_inputs(module, obs))).mean()

    fvp = fisher_vector_product(params, old_inputs, CategoricalWithTemp, 0.1,
                                jacobian=MLPJacobian(policy_chain(module), params, obs),
                                dist_inputs=lambda: actor_dist_inputs(module, obs), mean_kl=mean_kl)
    v = torch.randn(sum(p.numel() for p in params), generator=torch.Generator().manual_seed(0))
    grad_kl = flat_grad(mean_kl(), params, create_graph=True)
    expected = flat_grad(grad_kl @ v, params) + 0.1 * v
    scale = expected.abs().max()
    torch.testing.assert_close(fvp(v) / scale, expected / scale, atol=2e-6, rtol=0)
