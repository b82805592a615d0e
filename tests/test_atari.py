"""The Atari path as the paper ran it: DeepMind preprocessing with fire-on-reset and an
episodic-life signal, raw full-game scores reported, rewards clipped for learning only,
uint8 frames in replay, and the Nature-DQN network."""

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from ray.rllib.core import DEFAULT_MODULE_ID

from kappa_rllib import KappaPIDQNConfig, presets, report
from kappa_rllib.algorithms.kappa_dqn.torch.kappa_dqn_torch_learner import learning_rewards
from kappa_rllib.envs import LifeLossSignal, make_env


def atari_config():
    return presets.apply(KappaPIDQNConfig(), presets.load(presets.preset_for("ALE/Breakout-v5")))


def test_preprocessed_frames_are_84x84x4_uint8_channels_last():
    env = make_env("ALE/Breakout-v5")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    assert env.observation_space.shape == (84, 84, 4)
    obs, *_ = env.step(1)
    # the last frame of the stack is the newest: shifting the stack moves frames 1..3 to 0..2
    obs2, *_ = env.step(0)
    np.testing.assert_array_equal(obs2[..., :3], obs[..., 1:])


def test_breakout_game_keeps_going_across_lost_lives():
    """5 lives: 4 `life_lost` signals, then one terminal at game over; the game is never reset
    in between, and the rewards are the game's (a brick row scores 1, 4 or 7)."""
    env = make_env("ALE/Breakout-v5")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    lost, rewards, steps = 0, [], 0
    while True:
        _, reward, terminated, truncated, info = env.step(int(rng.integers(4)))
        steps += 1
        lost += info["life_lost"]
        rewards.append(reward)
        if terminated or truncated:
            break
    assert terminated and lost == 4 and info["lives"] == 0
    assert set(rewards) <= {0.0, 1.0, 4.0, 7.0}


class ScriptedLivesGame(gym.Env):
    """A scripted 'Atari' game: every internal frame-step scores 3 (> 1, so clipping shows);
    a life is lost at internal steps 10 and 20 and the game ends at step 30 (3 lives).

    Through `LifeLossSignal`: a new game fires (internal steps 1-2), agent steps cover internal
    steps 3..30, each lost life adds a no-op, FIRE and action 2 inside the agent's step. So a
    game is 22 agent steps, life losses at agent steps 8 and 15, and a raw score of 28 x 3 = 84.
    """

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def get_action_meanings(self):
        return ["NOOP", "FIRE", "RIGHT"]

    def _obs(self):
        return np.full(4, self.t / 30.0, np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {"lives": 3}

    def step(self, action):
        self.t += 1
        lives = 3 - self.t // 10
        return self._obs(), 3.0, self.t >= 30, False, {"lives": lives}


SCRIPTED_ID = "kappa_rllib_test/ScriptedLivesGame-v0"
gym.register(SCRIPTED_ID, entry_point=lambda: LifeLossSignal(ScriptedLivesGame()))


def test_life_loss_signal_on_the_scripted_game():
    env = gym.make(SCRIPTED_ID)
    env.reset()
    out = [env.step(0) for _ in range(22)]
    assert [i for i, o in enumerate(out, start=1) if o[4]["life_lost"]] == [8, 15]
    assert [o[2] for o in out] == [False] * 21 + [True]
    assert sum(o[1] for o in out) == 84.0
    assert out[7][1] == 12.0  # the step that lost a life: its own 3 plus no-op, FIRE, 2


def test_reported_score_is_the_raw_full_game_and_learning_sees_life_loss_terminals(ray_local, tmp_path):
    config = (
        KappaPIDQNConfig()
        .environment(SCRIPTED_ID, clip_rewards=True)
        .training(kappa=0.5, c_fa=0.5, total_env_steps=88, num_steps_sampled_before_learning_starts=22,
                  env_steps_per_iteration=88, episodic_life=True, train_batch_size=8,
                  replay_buffer_config={"type": "UniformReplayBuffer", "capacity": 100})
        .rl_module(model_config={"fcnet_hiddens": [8], "head_fcnet_hiddens": []})
        .env_runners(num_envs_per_env_runner=1)  # one stream, so the stored order is the game's
        .debugging(seed=0)
    )
    algo = config.build_algo()
    result = algo.train()
    assert result["env_runners"]["episode_return_mean"] == 84.0  # raw, per full game
    assert result["env_runners"]["episode_len_mean"] == 22
    assert result["env_runners"]["episode_returns"] == [84.0] * 4  # every game, for the report's score
    stored = algo.local_replay_buffer.transitions()
    game = np.zeros(22)
    game[[7, 14, 21]] = 1.0  # life losses, then game over
    np.testing.assert_array_equal(stored["terminateds"], np.tile(game, 4))
    assert set(stored["rewards"].tolist()) == {3.0, 12.0}  # raw in replay
    # `kappa-rllib report` scores the run from what Tune writes: the raw full-game total.
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "params.json").write_text(json.dumps(config.to_dict(), default=str))
    (trial / "result.json").write_text(json.dumps(result, default=str) + "\n")
    [run] = report.load_runs(tmp_path)
    assert run.score == 84.0 and run.episode_returns == [84.0] * 4 and run.variant == "kappa-pi"
    algo.stop()


def test_learning_rewards_are_clipped_only_when_asked():
    r = torch.tensor([12.0, 3.0, 0.0, -0.5, -4.0])
    torch.testing.assert_close(learning_rewards(atari_config(), r), torch.tensor([1.0, 1.0, 0.0, -1.0, -1.0]))
    torch.testing.assert_close(learning_rewards(KappaPIDQNConfig(), r), r)
    clip2 = KappaPIDQNConfig().environment(clip_rewards=2.0)
    torch.testing.assert_close(learning_rewards(clip2, r), torch.tensor([2.0, 2.0, 0.0, -0.5, -2.0]))


def test_episodic_life_needs_an_env_that_reports_life_loss(ray_local):
    config = KappaPIDQNConfig().environment("CartPole-v1").training(
        kappa=0.5, c_fa=0.5, total_env_steps=64, env_steps_per_iteration=64, episodic_life=True,
        num_steps_sampled_before_learning_starts=16)
    algo = config.build_algo()
    with pytest.raises(ValueError, match="episodic_life=True needs an env whose step info has 'life_lost'"):
        algo.train()
    algo.stop()


def test_q_network_is_nature_dqn():
    """Mnih et al. 2015: 32x8x8/4, 64x4x4/2, 64x3x3/1 with valid padding, 3,136 -> 512 -> actions."""
    config = atari_config().environment("ALE/Breakout-v5")
    module = config.build_learner(env=make_env("ALE/Breakout-v5")).module[DEFAULT_MODULE_ID].unwrapped()
    shapes = [tuple(p.shape) for n, p in module.named_parameters() if not n.startswith("_target")]
    assert shapes == [(32, 4, 8, 8), (32,), (64, 32, 4, 4), (64,), (64, 64, 3, 3), (64,),
                      (512, 3136), (512,), (4, 512), (4,)]
    assert sum(int(np.prod(s)) for s in shapes) == 1_686_180


def test_kappa_pi_dqn_trains_on_breakout_frames(ray_local):
    torch.set_num_threads(1)
    config = atari_config()
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
    buf = algo.local_replay_buffer
    assert buf.compact and buf._frames.nbytes < buf._frames.written * 84 * 84 / 4  # compressed
    assert buf._frames.written <= 256 + 4 * 8  # about one stored 84x84 frame per env step
    stored = buf.transitions()["obs"]
    assert stored.dtype == np.uint8 and stored.shape == (256, 84, 84, 4)
    assert np.isfinite(result["learners"]["default_policy"]["qf_loss"])
    algo.stop()


def test_runners_that_send_frames_train_exactly_as_runners_that_send_stacks(ray_local):
    """`send_frames` (the default): the remote EnvRunners send each frame-stacked segment as its frames, each once
    (an env step's 84x84 bytes, not its 4-frame stack), and the replay stores them as they came: the same replay
    (rows, frame ids, frames) and the same weights as runners that send stacks."""
    torch.set_num_threads(1)

    def run(send_frames):
        config = atari_config()
        config.environment("ALE/Breakout-v5").training(
            kappa=0.5, c_fa=0.5, total_env_steps=256, num_steps_sampled_before_learning_starts=64,
            env_steps_per_iteration=128, replay_buffer_config={"type": "UniformReplayBuffer", "capacity": 512},
            send_frames=send_frames,
        ).debugging(seed=0)
        assert config.num_env_runners >= 1  # (remote runners: the frames cross processes)
        algo = config.build_algo()
        sent = algo.env_runner_group.foreach_env_runner(
            lambda runner: runner.sample(num_timesteps=8, global_env_steps=0), local_env_runner=False)[0]
        assert all(("frames" in seg) == send_frames and ("obs" in seg) != send_frames for seg in sent)
        algo.train()
        algo.train()
        out = {f"{m}/{k}": v.copy() for m, w in algo.learner_group.get_weights().items() for k, v in w.items()}
        out["counts"] = np.array([algo.counters["theta_updates"], algo.counters["phi_updates"]])
        replay = algo.local_replay_buffer.get_state()
        algo.stop()
        return out, replay

    frames, frames_replay = run(True)
    stacks, stacks_replay = run(False)
    assert frames["counts"][0] > 0 and frames["counts"][1] > 0
    for key, value in stacks.items():
        np.testing.assert_array_equal(frames[key], value, err_msg=key)
    assert frames_replay["arrays"] == stacks_replay["arrays"] and frames_replay["frames"] == stacks_replay["frames"]


def test_the_replay_ring_on_the_learners_device_trains_exactly_as_the_lz4_replay(ray_local):
    """`replay_frames_on_device=True` (on this CPU learner, the ring a GPU learner gets by default: frames
    uncompressed where the learner trains, minibatches gathered there) makes the same weights as the LZ4 replay
    in host memory, with the learner thread too (the next chunk's minibatches gathered from the ring while the
    last ones train); and a checkpoint the LZ4 run wrote, restored into a ring run, goes on as it goes on restored
    into an LZ4 run (a restore samples afresh from new envs, so not as the uninterrupted run)."""
    torch.set_num_threads(1)

    def run(on_device, checkpoint=None, **training):
        config = atari_config()
        config.environment("ALE/Breakout-v5").training(
            kappa=0.5, c_fa=0.5, total_env_steps=256, num_steps_sampled_before_learning_starts=64,
            env_steps_per_iteration=128, replay_buffer_config={"type": "UniformReplayBuffer", "capacity": 512},
            replay_frames_on_device=on_device, **training,
        ).debugging(seed=0)
        algo = config.build_algo()
        saved = None
        if checkpoint is None:
            algo.train()
            saved = algo.save_to_path()
        else:
            algo.restore_from_path(checkpoint)
        algo.train()
        frames = algo.local_replay_buffer._frames.frames
        assert torch.is_tensor(frames) if on_device else isinstance(frames, list)  # the ring / LZ4 blocks
        out = {f"{m}/{k}": v.copy() for m, w in algo.learner_group.get_weights().items() for k, v in w.items()}
        out["counts"] = np.array([algo.counters["theta_updates"], algo.counters["phi_updates"]])
        algo.stop()  # (before the next run: the fixture's CPUs hold one run's EnvRunners)
        return out, saved

    def same(got, expected):
        assert got["counts"][0] > 0 and got["counts"][1] > 0
        for key, value in expected.items():
            np.testing.assert_array_equal(got[key], value, err_msg=key)

    lz4, checkpoint = run(False)
    same(run(True, learner_thread=True)[0], lz4)
    same(run(True, checkpoint)[0], run(False, checkpoint)[0])
