"""The Atari path: DeepMind preprocessing, uint8 frames in replay, the Nature CNN, kappa updates."""

import numpy as np
import torch

from kappa_rllib import KappaPIDQNConfig, presets
from kappa_rllib.envs import make_env


def test_preprocessed_frames_are_84x84x4_uint8_channels_last():
    env = make_env("ALE/Breakout-v5")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    assert env.observation_space.shape == (84, 84, 4)
    obs, reward, *_ = env.step(1)
    assert -1.0 <= reward <= 1.0
    # the last frame of the stack is the newest: shifting the stack moves frames 1..3 to 0..2
    obs2, *_ = env.step(0)
    np.testing.assert_array_equal(obs2[..., :3], obs[..., 1:])


def test_kappa_pi_dqn_trains_on_breakout_frames(ray_local):
    torch.set_num_threads(1)
    config = presets.apply(KappaPIDQNConfig(), presets.load(presets.preset_for("ALE/Breakout-v5")))
    config.environment("ALE/Breakout-v5").training(
        kappa=0.5, c_fa=0.5, total_env_steps=256, num_steps_sampled_before_learning_starts=64,
        env_steps_per_iteration=256, replay_buffer_config={"type": "UniformReplayBuffer", "capacity": 512},
    ).debugging(seed=0)
    algo = config.build_algo()
    result = algo.train()
    kappa = result["kappa"]
    assert kappa["phase"] == "done" and kappa["env_steps"] == 256
    # updates at env steps 64, 68, ..., 256: learning starts once 64 transitions are stored
    assert kappa["theta_updates"] == (256 - 64) // 4 + 1 and kappa["phi_updates"] > 0
    stored = algo.local_replay_buffer.get_state()["arrays"]["obs"]
    assert stored.dtype == np.uint8 and stored.shape == (256, 84, 84, 4)
    assert np.isfinite(result["learners"]["default_policy"]["qf_loss"])
    algo.stop()
