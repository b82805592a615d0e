"""From command-line options to one validated AlgorithmConfig per run (`train`, `compare`)."""

from __future__ import annotations

from kappa_rllib import defaults
from kappa_rllib.cli.common import ALGORITHMS, KAPPA_ALGORITHMS, KAPPA_ONE, UsageError, family, non_negative_int, \
    number, one_line, positive_int
from kappa_rllib.cli.ray_session import add_ray_options
from kappa_rllib.variant import PHI_FITS, PHI_TARGETS


def _family_defaults(key: str, fmt=str) -> str:
    return (f"DQN family {fmt(defaults.DQN[key])}, TRPO family {fmt(defaults.TRPO[key])}, "
            f"PPO family {fmt(defaults.PPO[key])}, APPO family {fmt(defaults.APPO[key])}")


def add_run_arguments(p) -> None:
    """The options of one run, shared by `train` and `compare`."""
    p.add_argument("--env", help="gymnasium id, e.g. CartPole-v1 or ALE/Breakout-v5 (required)")
    p.add_argument("--kappa", type=number("kappa"), default=None,
                   help=f"kappa in [0, 1] (kappa-* algorithms); default: {_family_defaults('kappa')}")
    p.add_argument("--lambda", dest="lambda_", type=number("lambda"), default=None,
                   help="GAE lambda in [0, 1] (required by --algo gae)")
    p.add_argument("--c-fa", type=number("c-fa"), default=None,
                   help=f"C_FA in (0, 1): sets N_kappa; default: {_family_defaults('c_fa')} (the paper's)")
    p.add_argument("--total-steps", type=positive_int, default=None,
                   help=f"T, total env steps; default: the env preset's (CartPole: 50,000), else the paper's: "
                        f"{_family_defaults('total_env_steps', lambda v: f'{v:,}')}")
    p.add_argument("--naive-schedule", action="store_true", help="N_kappa = T (paper's naive baseline)")
    p.add_argument("--phi-fit", choices=PHI_FITS, default=None,
                   help="kappa-pi-trpo: fit V_phi on every batch (default, the authors' code) or once per "
                        "kappa-iteration (Alg. 7 read literally)")
    p.add_argument("--phi-target", choices=PHI_TARGETS, default=None,
                   help="kappa-pi-trpo: V_phi's target bootstraps with V_phi at a time-limit truncation and the "
                        "batch end (default), or ends at a truncation and bootstraps with the shaping snapshot "
                        "(the authors' code)")
    p.add_argument("--dry-run", action="store_true",
                   help="check the settings, print the resolved schedule (N_kappa, T_kappa) and exit; Ray is not started")
    p.add_argument("--seed", type=non_negative_int, default=0)
    p.add_argument("--config", help="YAML preset (sections training/rl_module/env_runners); "
                   "default: the packaged preset for the env, if any")
    p.add_argument("--gamma", type=number("gamma"), default=None)
    p.add_argument("--num-env-runners", type=non_negative_int, default=None,
                   help="remote EnvRunners (0: sample in the driver); default: the preset's (Atari: 2), else 0")
    p.add_argument("--eval-every", type=non_negative_int, default=0,
                   help="RLlib's periodic evaluation every N training iterations (default 0: none): --eval-episodes "
                        "episodes on an evaluation EnvRunner of its own, greedy unless --eval-epsilon; under "
                        "evaluation/ in result.json, never in training's env steps, replay or kappa schedule")
    p.add_argument("--eval-episodes", type=positive_int, default=10, help="episodes per evaluation (default 10)")
    p.add_argument("--eval-epsilon", type=number("eval-epsilon"), default=None,
                   help="DQN family: evaluate epsilon-greedily with this epsilon (DeepMind's Atari evaluation: 0.05)")
    add_ray_options(p)
    p.add_argument("--output", default="results", help="parent folder of the run folder")
    p.add_argument("--checkpoint-every", type=non_negative_int, default=10,
                   help="write a checkpoint every N training iterations (atomically; 0: only at the end); default 10")
    p.add_argument("--keep-checkpoints", type=positive_int, default=2,
                   help="how many of the newest checkpoints to keep (default 2)")
    p.add_argument("--torch-threads", type=positive_int, default=1,
                   help="torch intra-op threads in the driver (1 is fastest for small nets on few cores)")


def config_class(algo: str):
    import kappa_rllib as k

    return {
        "kappa-pi-dqn": k.KappaPIDQNConfig, "kappa-vi-dqn": k.KappaVIDQNConfig, "dqn": k.KappaPIDQNConfig,
        "kappa-pi-trpo": k.KappaPITRPOConfig, "kappa-vi-trpo": k.KappaVITRPOConfig,
        "trpo": k.TRPOConfig, "gae": k.TRPOConfig,
        "kappa-pi-ppo": k.KappaPIPPOConfig, "kappa-vi-ppo": k.KappaVIPPOConfig, "ppo": k.KappaPIPPOConfig,
        "kappa-pi-appo": k.KappaPIAPPOConfig, "kappa-vi-appo": k.KappaVIAPPOConfig, "appo": k.KappaPIAPPOConfig,
    }[algo]


# An RLlib Algorithm class of this package -> its command-line name (`train file`).
ALGO_NAMES = {"KappaPIDQN": "kappa-pi-dqn", "KappaVIDQN": "kappa-vi-dqn", "KappaPITRPO": "kappa-pi-trpo",
              "KappaVITRPO": "kappa-vi-trpo", "TRPO": "trpo", "KappaPIPPO": "kappa-pi-ppo", "KappaVIPPO": "kappa-vi-ppo",
              "KappaPIAPPO": "kappa-pi-appo", "KappaVIAPPO": "kappa-vi-appo"}


def make_config(algo: str, args):
    """The validated AlgorithmConfig for one run; raises UsageError on bad settings.

    dqn is kappa-PI-DQN with kappa = 1 (exactly DQN), appo kappa-PI-APPO with kappa = 1 (exactly
    APPO), ppo kappa-PI-PPO with kappa = 1 (exactly PPO
    with lambda = 1); trpo is TRPO with lambda = 1 (the paper's kappa = 1 baseline); gae is TRPO with
    GAE(gamma, lambda) advantages.
    """
    from kappa_rllib import envs, presets

    if algo not in ALGORITHMS:
        raise UsageError(f"unknown --algo {algo!r}; choose from {', '.join(ALGORITHMS)}")
    if algo == "gae" and args.lambda_ is None:
        raise UsageError("--algo gae needs --lambda (e.g. --lambda 0.84)")
    if args.command == "train" and algo != "gae" and args.lambda_ is not None:
        raise UsageError(f"--lambda applies to --algo gae only, not {algo}")
    try:
        envs.check_env_id(args.env)
    except ValueError as e:
        raise UsageError(f"--env: {e}") from None
    config = config_class(algo)()
    preset_path = args.config or presets.preset_for(args.env, family(algo))
    try:
        preset = presets.load(preset_path) if preset_path else {}
        # remote EnvRunners: --num-env-runners, else the preset's (Atari: 2), else 0 (sample in the
        # driver), never RLlib's own default (PPO's and APPO's 2 would not fit --num-cpus 1)
        num_env_runners = args.num_env_runners
        if num_env_runners is None:
            num_env_runners = preset.get("env_runners", {}).get("num_env_runners", 0)
        if preset_path:
            presets.apply(config, preset)
        config.environment(args.env)
        if algo in KAPPA_ALGORITHMS or algo in KAPPA_ONE:
            # An omitted flag leaves the algorithm's (or its env preset's) own default.
            config.training(kappa=1.0 if algo in KAPPA_ONE else args.kappa, c_fa=args.c_fa,
                            total_env_steps=args.total_steps, naive_schedule=args.naive_schedule or None)
        else:
            if args.naive_schedule:
                raise ValueError(f"--naive-schedule applies to kappa algorithms, not {algo}")
            config.training(total_env_steps=args.total_steps)
        for flag, setting in (("--phi-fit", "phi_fit"), ("--phi-target", "phi_target")):
            if getattr(args, setting) is not None:
                if algo != "kappa-pi-trpo":
                    raise ValueError(f"{flag} applies to --algo kappa-pi-trpo only, not {algo}")
                config.training(**{setting: getattr(args, setting)})
        if algo == "gae":
            config.training(lambda_=args.lambda_)
        if args.gamma is not None:
            config.training(gamma=args.gamma)
        config.env_runners(num_env_runners=num_env_runners)
        config.debugging(seed=args.seed)
        _set_evaluation(config, algo, args)
        config.validate()
    except (ValueError, TypeError, OSError) as e:
        raise UsageError(one_line(e)) from None
    return config, preset_path


def _set_evaluation(config, algo: str, args) -> None:
    """--eval-every / --eval-episodes / --eval-epsilon as RLlib's `config.evaluation(...)`."""
    every, epsilon = getattr(args, "eval_every", 0), getattr(args, "eval_epsilon", None)
    if epsilon is not None and (family(algo) != "dqn" or not every):
        raise ValueError("--eval-epsilon applies to the DQN family with --eval-every N" if every else
                         "--eval-epsilon needs --eval-every N")
    if not every:
        return
    if epsilon is not None and not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"--eval-epsilon must be in [0, 1], got {epsilon}")
    overrides = {"explore": False} if epsilon is None else {"explore": True, "epsilon": [(0, epsilon)]}
    config.evaluation(evaluation_interval=every, evaluation_duration=args.eval_episodes,
                      evaluation_duration_unit="episodes", evaluation_config=overrides)


def describe(algo: str, config, args) -> str:
    """The resolved schedule of one run, as printed before it starts (and by --dry-run)."""
    if hasattr(config, "kappa"):
        unit = "batches" if config.schedule_length != config.total_env_steps else "env steps"
        n = config.num_kappa_iterations
        schedule = (f"kappa {config.kappa}, C_FA {config.c_fa}, N_kappa {n}, "
                    f"T_kappa {config.schedule_length // n} {unit}, ")
        if getattr(config, "kappa_variant", "") == "pi" and hasattr(config, "phi_fit"):
            schedule += f"phi_fit {config.phi_fit}, phi_target {config.phi_target}, "
    else:
        schedule = f"lambda {config.lambda_}, "
    return (f"env {args.env}, {schedule}gamma {config.gamma}, T {config.total_env_steps} env steps, "
            f"{config.num_env_runners} remote EnvRunners")
