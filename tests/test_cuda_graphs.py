"""kappa-DQN's gradient step as a CUDA graph (torch/gradient_step.py): which settings take the graph,
and, on a GPU, N replayed updates equal N eager updates from the same state and minibatches, across
target copies and kappa-iteration boundaries, and after a checkpoint restore (captured again).
The GPU tests skip where no CUDA device is present; the CPU path is the eager step, which the
fused-update tests (test_kappa_dqn_targets.py) check against RLlib's own DQN."""

import numpy as np
import pytest
import torch

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from kappa_rllib import KappaPIDQNConfig, KappaVIDQNConfig, presets
from kappa_rllib.algorithms.kappa_dqn.torch.gradient_step import GraphedTDStep, graph_unsupported_reason
from kappa_rllib.envs import make_env
from kappa_rllib.algorithms.kappa_dqn.learner_program import COPY_THETA_TO_PHI, TDUpdates, num_updates
from kappa_rllib.variant import PHI_MODULE_ID

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
ENV = "ALE/Breakout-v5"
SIZE = 32  # the Atari preset's minibatch


def atari_config(config_cls=KappaPIDQNConfig, **training):
    config = presets.apply(config_cls(), presets.load(presets.preset_for(ENV))).environment(ENV)
    return config.training(kappa=0.84, c_fa=0.05, **training)


@pytest.mark.parametrize("change, reason", [
    ({}, None),
    ({"cuda_graphs": False}, "cuda_graphs=False"),
    ({"lr": [[0, 1e-4], [1000, 1e-5]]}, "an lr schedule"),
    ({"grad_clip_by": "value"}, "grad_clip_by='value'"),
])
def test_which_settings_take_the_graph(change, reason):
    config = atari_config(**change)
    assert graph_unsupported_reason(config, torch.device("cuda", 0)) == reason
    assert graph_unsupported_reason(config, torch.device("cpu")) == (
        "cuda_graphs=False" if change.get("cuda_graphs") is False else "the learner is on the CPU")
    assert graph_unsupported_reason(atari_config().learners(num_learners=2), torch.device("cuda", 0)) \
        == "more than one learner (DDP)"


def test_a_cpu_learner_steps_eagerly():
    learner = atari_config().build_learner(env=make_env(ENV))
    assert learner._graph_off == "the learner is on the CPU"
    learner.update(training_data=TrainingData(batch=frames_batch(2, seed=0)),
                   fused_update={"program": [TDUpdates(DEFAULT_MODULE_ID, 2, (1,))], "minibatch_size": SIZE})
    assert learner._graphs == {}


def frames_batch(num_minibatches: int, seed: int) -> MultiAgentBatch:
    """Random Atari-shaped transitions (uint8 84x84x4 frames), a tenth of them terminal."""
    rng = np.random.default_rng(seed)
    n = num_minibatches * SIZE
    data = {
        Columns.OBS: rng.integers(0, 256, size=(n, 84, 84, 4), dtype=np.uint8),
        Columns.NEXT_OBS: rng.integers(0, 256, size=(n, 84, 84, 4), dtype=np.uint8),
        Columns.ACTIONS: rng.integers(0, 4, size=n),
        Columns.REWARDS: rng.choice([0.0, 1.0, 4.0], size=n).astype(np.float32),
        Columns.TERMINATEDS: (rng.random(n) < 0.1).astype(np.float32),
    }
    return MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch(data)}, env_steps=n)


def gpu_learner(config_cls, graphs: bool, state=None):
    config = atari_config(config_cls, cuda_graphs=graphs).learners(num_gpus_per_learner=1)
    learner = config.build_learner(env=make_env(ENV))
    if state is not None:
        learner.set_state(state)
    return learner


def run(learner, runs, seed):
    k = num_updates(runs)
    return learner.update(training_data=TrainingData(batch=frames_batch(k, seed)),
                          fused_update={"program": runs, "minibatch_size": SIZE})


def weights(learner):
    return {(mid, key): np.asarray(v) for mid in (DEFAULT_MODULE_ID, PHI_MODULE_ID)
            for key, v in learner.module[mid].get_state().items()}


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-4, atol=1e-6, err_msg=str(key))


# kappa-PI: Q_theta updates with two target copies, the evaluation phase (Q_phi, with its own
# copy), the next iteration; kappa-VI: an iteration's end (phi <- theta) between Q_theta runs.
PROGRAMS = {
    KappaPIDQNConfig: [[TDUpdates(DEFAULT_MODULE_ID, 6, (2, 5)), TDUpdates(PHI_MODULE_ID, 4, (1,))],
                       [TDUpdates(DEFAULT_MODULE_ID, 3, (2,))]],
    KappaVIDQNConfig: [[TDUpdates(DEFAULT_MODULE_ID, 5, (2,)), COPY_THETA_TO_PHI], [TDUpdates(DEFAULT_MODULE_ID, 3, (1,))]],
}


@cuda
@pytest.mark.parametrize("config_cls", [KappaPIDQNConfig, KappaVIDQNConfig])
def test_graph_replayed_updates_equal_eager_updates(config_cls):
    torch.backends.cudnn.deterministic = True
    eager = gpu_learner(config_cls, graphs=False)
    graphed = gpu_learner(config_cls, graphs=True, state=eager.get_state())
    assert graphed._graph_off is None and eager._graph_off == "cuda_graphs=False"
    before = weights(eager)
    assert_same_weights(weights(graphed), before)
    for part, runs in enumerate(PROGRAMS[config_cls]):
        results = [run(learner, runs, seed=part) for learner in (eager, graphed)]
        assert_same_weights(weights(graphed), weights(eager))
        for module_id in results[0]:
            for key in ("num_updates", "qf_loss"):
                if key in results[0][module_id]:
                    a, b = (r[module_id][key] for r in results)
                    a, b = (x.peek() if hasattr(x, "peek") else x for x in (a, b))
                    assert a == pytest.approx(b, rel=1e-4, nan_ok=True), (module_id, key)
    assert isinstance(graphed._graphs[DEFAULT_MODULE_ID], GraphedTDStep)
    # the updates moved the networks (the comparison is not between two untouched copies)
    after = weights(eager)
    assert any(not np.allclose(after[key], before[key]) for key in after if key[0] == DEFAULT_MODULE_ID)
    # the graphs keep Adam's state in step with the eager optimizer's
    for module_id in (DEFAULT_MODULE_ID, PHI_MODULE_ID):
        a, b = (l.get_optimizer(module_id).state_dict()["state"] for l in (eager, graphed))
        for index in a:
            for name in ("exp_avg", "exp_avg_sq", "step"):
                if name in a[index]:
                    torch.testing.assert_close(b[index][name], a[index][name], rtol=1e-4, atol=1e-8)


@cuda
def test_a_restored_learner_captures_again_and_goes_on_as_the_uninterrupted_one():
    torch.backends.cudnn.deterministic = True
    first, second = PROGRAMS[KappaPIDQNConfig]
    uninterrupted = gpu_learner(KappaPIDQNConfig, graphs=True)
    run(uninterrupted, first, seed=0)
    checkpoint = uninterrupted.get_state()
    restored = gpu_learner(KappaPIDQNConfig, graphs=True, state=checkpoint)
    assert restored._graphs == {}
    for learner in (uninterrupted, restored):
        run(learner, second, seed=1)
    assert isinstance(restored._graphs[DEFAULT_MODULE_ID], GraphedTDStep)
    assert_same_weights(weights(restored), weights(uninterrupted))
