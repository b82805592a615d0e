"""CartPole that raises inside the trial's own code, for tests/test_faults.py.

`gymnasium.make("crash_env:KappaCrash-v0")` imports this module in each Ray worker (tests/ on
PYTHONPATH). The env raises at its `CRASH_AT_STEP`-th step of a process; with KAPPA_CRASH_ONCE set to
a file path it raises only while that file does not exist, and creates it: a transient error. With
KAPPA_EXIT_TWICE set to a folder, the process instead exits (`os._exit`, as when the OOM killer strikes or
the node goes) at that step, the first two times over all processes: a marker file in the folder counts them."""

import os
from pathlib import Path

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv

CRASH_AT_STEP = 300


class CrashingCartPole(CartPoleEnv):
    steps = 0  # per process: every EnvRunner of the trial counts its own

    def step(self, action):
        CrashingCartPole.steps += 1
        exits = os.environ.get("KAPPA_EXIT_TWICE")
        if exits and CrashingCartPole.steps == CRASH_AT_STEP:
            done = sorted(Path(exits).glob("exit_*"))
            if len(done) < 2:
                (Path(exits) / f"exit_{len(done)}").touch()
                os._exit(1)
            return super().step(action)
        once = os.environ.get("KAPPA_CRASH_ONCE")
        if CrashingCartPole.steps == CRASH_AT_STEP and not (once and Path(once).exists()):
            if once:
                Path(once).touch()
            raise RuntimeError(f"crash_env: a deliberate error at step {CRASH_AT_STEP}")
        return super().step(action)


gym.register("KappaCrash-v0", entry_point=CrashingCartPole, max_episode_steps=500)
