"""cluster/: the launcher files pass Ray's own validator, the KubeRay manifests carry what KubeRay needs,
versions agree with the pin, nothing is exposed publicly, token auth is on, and every grid a job runs loads.

No cloud, SSH machines or Kubernetes here: these are the checks `ray up` / the KubeRay operator would do
first (tests/test_cluster.py runs Ray itself, as separate processes).
"""

import re
import shlex
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "cluster"
LAUNCHER_FILES = ["aws.yaml", "onprem.yaml"]
KUBERAY_FILES = sorted(p.name for p in (CLUSTER / "kuberay").glob("ray*.yaml"))


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def ray_pin() -> str:
    (pin,) = [d for d in _pyproject()["project"]["dependencies"] if d.startswith("ray[")]
    return pin.split("==")[1]


def image(flavour: str) -> str:
    return f"kappa-rllib:{_pyproject()['project']['version']}-ray{ray_pin()}-{flavour}"


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def test_the_cluster_extra_pins_the_same_ray_with_jobs_and_client():
    extras = _pyproject()["project"]["optional-dependencies"]
    assert f"ray[default,client]=={ray_pin()}" in extras["cluster"]
    assert "kappa-rllib[cluster]" in extras["test"]  # the tests submit jobs and use Ray Client


# ----------------------------------------------------------------------------------- launcher
def prepared(name: str) -> dict:
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = prepare_config(load(CLUSTER / name))  # what `ray up` runs before touching a provider
    validate_config(config)
    return config


@pytest.mark.parametrize("name", LAUNCHER_FILES)
def test_launcher_config_passes_rays_validator(name):
    config = prepared(name)
    assert config["head_node_type"] in config["available_node_types"]


def test_rays_validator_rejects_a_broken_launcher_config():
    from ray.autoscaler._private.util import prepare_config, validate_config

    broken = load(CLUSTER / "aws.yaml")
    broken["available_node_types"]["cpu_workers"]["max_worker"] = 4  # misspelt key
    with pytest.raises(jsonschema.ValidationError, match="max_worker"):
        validate_config(prepare_config(broken))
    broken = load(CLUSTER / "aws.yaml")
    broken["max_workers"] = 1  # fewer than the node types' min_workers
    broken["available_node_types"]["cpu_workers"]["min_workers"] = 2
    with pytest.raises(ValueError, match="max_workers"):
        validate_config(prepare_config(broken))


def test_aws_has_an_autoscaling_cpu_group_and_an_optional_gpu_learner_type():
    nodes = prepared("aws.yaml")["available_node_types"]
    assert nodes["head"]["resources"] == {"CPU": 0}  # trials run on workers
    cpu, gpu = nodes["cpu_workers"], nodes["gpu_learners"]
    assert cpu["min_workers"] == 0 < cpu["max_workers"]
    assert gpu["min_workers"] == 0 < gpu["max_workers"]  # started only on GPU demand
    assert gpu["node_config"]["InstanceType"].startswith(("g", "p"))  # a GPU instance family
    assert gpu["docker"]["worker_image"].endswith("/" + image("gpu"))


@pytest.mark.parametrize("name", LAUNCHER_FILES)
def test_launcher_images_match_the_pin(name):
    config = load(CLUSTER / name)
    assert config["docker"]["image"].endswith("/" + image("cpu"))
    for node_type in config.get("available_node_types", {}).values():
        worker_image = node_type.get("docker", {}).get("worker_image")
        assert worker_image is None or worker_image.endswith("/" + image("gpu"))


@pytest.mark.parametrize("name", LAUNCHER_FILES)
def test_launcher_keeps_endpoints_private_and_token_auth_on(name):
    config = prepared(name)
    head, workers = config["head_start_ray_commands"], config["worker_start_ray_commands"]
    (head_start,) = [c for c in head if "ray start" in c]
    assert "--dashboard-host=127.0.0.1" in head_start and "0.0.0.0" not in " ".join(head + workers)
    assert all("RAY_AUTH_MODE=token ray start" in c for c in head + workers if "ray start" in c)
    assert config["file_mounts"] == {"~/.ray/auth_token": "~/.ray/auth_token"}  # the token on every node
    rules = config["provider"].get("security_group", {}).get("IpPermissions", [])
    assert not any(r.get("CidrIp") == "0.0.0.0/0" for rule in rules for r in rule.get("IpRanges", []))


# ----------------------------------------------------------------------------------- KubeRay
def cluster_spec(manifest: dict) -> dict:
    return manifest["spec"]["rayClusterSpec"] if manifest["kind"] == "RayJob" else manifest["spec"]


def groups(spec: dict):
    yield "head", spec["headGroupSpec"]
    for group in spec["workerGroupSpecs"]:
        yield group["groupName"], group


@pytest.mark.parametrize("name", KUBERAY_FILES)
def test_kuberay_manifest_has_the_required_fields_and_the_pinned_ray(name):
    manifest = load(CLUSTER / "kuberay" / name)
    assert manifest["apiVersion"] == "ray.io/v1" and manifest["kind"] in ("RayCluster", "RayJob")
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", manifest["metadata"]["name"])  # a DNS-1123 name
    spec = cluster_spec(manifest)
    assert spec["rayVersion"] == ray_pin()
    assert spec["authOptions"] == {"mode": "token"}
    assert spec["headGroupSpec"]["rayStartParams"].get("dashboard-host", "") != "0.0.0.0"
    assert "serviceType" not in spec["headGroupSpec"] or spec["headGroupSpec"]["serviceType"] == "ClusterIP"
    names = set()
    for group_name, group in groups(spec):
        assert "rayStartParams" in group
        containers = group["template"]["spec"]["containers"]
        assert containers and all(c["name"] and c["image"] for c in containers)
        gpus = containers[0]["resources"]["limits"].get("nvidia.com/gpu", 0)
        assert containers[0]["image"] == image("gpu" if gpus else "cpu"), group_name
        if group_name != "head":
            assert group_name not in names
            names.add(group_name)
            assert 0 <= group["minReplicas"] <= group["replicas"] <= group["maxReplicas"], group_name


KUBERAY_SCHEMA_VERSION = "v1.5.1"  # the oldest KubeRay with authOptions (tests/data/kuberay/README.md)


def _strict(schema):
    """Unknown fields become errors (the API server would drop them silently: a typo would go unnoticed)."""
    if isinstance(schema, dict):
        if (schema.get("type") == "object" and "properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
        for key, value in schema.items():
            for child in (value.values() if key == "properties" else [value]):
                if isinstance(child, (dict, list)):
                    _strict(child)
    elif isinstance(schema, list):
        for child in schema:
            _strict(child)
    return schema


def kuberay_validator(kind: str):
    import gzip
    import json

    path = ROOT / "tests" / "data" / "kuberay" / f"{kind.lower()}-{KUBERAY_SCHEMA_VERSION}.schema.json.gz"
    return jsonschema.Draft7Validator(_strict(json.loads(gzip.decompress(path.read_bytes()))))


@pytest.mark.parametrize("name", KUBERAY_FILES)
def test_kuberay_manifest_matches_kuberays_own_crd_schema(name):
    manifest = load(CLUSTER / "kuberay" / name)
    errors = [f"{'.'.join(map(str, e.path))}: {e.message[:200]}"
              for e in kuberay_validator(manifest["kind"]).iter_errors(manifest)]
    assert not errors, errors


def test_kuberay_schema_check_catches_typos_and_bad_values():
    manifest = load(CLUSTER / "kuberay" / "rayjob-mujoco-table2.yaml")
    manifest["spec"]["backofLimit"] = 2
    manifest["spec"]["rayClusterSpec"]["authOptions"]["mode"] = "tokens"
    manifest["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["minReplica"] = 0
    messages = sorted(e.message for e in kuberay_validator("RayJob").iter_errors(manifest))
    assert len(messages) == 3
    assert any("'backofLimit' was unexpected" in m for m in messages)
    assert any("'minReplica' was unexpected" in m for m in messages)
    assert any("'tokens' is not one of ['disabled', 'token']" in m for m in messages)


def test_kuberay_cluster_autoscales_cpu_workers_and_offers_gpu_learners():
    spec = load(CLUSTER / "kuberay" / "ray-cluster.yaml")["spec"]
    assert spec["enableInTreeAutoscaling"] is True
    by_name = dict(groups(spec))
    assert by_name["cpu-workers"]["minReplicas"] < by_name["cpu-workers"]["maxReplicas"]
    gpu = by_name["gpu-learners"]
    assert gpu["minReplicas"] == 0 and gpu["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]


RAYJOBS = [n for n in KUBERAY_FILES if n.startswith("rayjob")]


@pytest.mark.parametrize("name", RAYJOBS)
def test_rayjob_entrypoint_is_a_valid_tune_command_on_the_shared_volume(name):
    from kappa_rllib import experiments
    from kappa_rllib.cli import build_parser

    manifest = load(CLUSTER / "kuberay" / name)
    assert manifest["kind"] == "RayJob" and manifest["spec"]["shutdownAfterJobFinishes"] is True
    argv = shlex.split(manifest["spec"]["entrypoint"])
    assert argv[0] == "kappa-rllib"
    args = build_parser().parse_args(argv[1:])
    assert args.command == "tune" and args.resume  # a retried job continues from the shared storage
    assert args.file.startswith("/opt/kappa-rllib/")  # where docker/Dockerfile copies tune_configs/
    grid_file = ROOT / Path(args.file).relative_to("/opt/kappa-rllib")
    for grid in experiments.load_file(str(grid_file)):
        grid.validate()
    spec = cluster_spec(manifest)
    pvc = load(CLUSTER / "kuberay" / "results-pvc.yaml")
    assert "ReadWriteMany" in pvc["spec"]["accessModes"]
    for group_name, group in groups(spec):  # the storage is the shared volume on every node
        pod = group["template"]["spec"]
        mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
        volume = {v["name"]: v for v in pod["volumes"]}[mounts[args.storage]]
        assert volume["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"], group_name


def test_the_cluster_readme_commands_parse_and_name_existing_files():
    from kappa_rllib.cli import build_parser

    text = (CLUSTER / "README.md").read_text()
    blocks = "\n".join(re.findall(r"```bash\n(.*?)```", text, flags=re.S)).replace("\\\n", " ")
    commands = re.findall(r"kappa-rllib ((?:tune|report|train|evaluate) [^\n#]*)", blocks)
    assert len(commands) >= 7
    for command in commands:
        args = build_parser().parse_args(shlex.split(command))
        if args.command == "tune":
            assert (ROOT / args.file.removeprefix("/opt/kappa-rllib/")).is_file(), command
    for path in re.findall(r"`((?:cluster|docker|tune_configs|tests)/[\w./-]+)`", text):
        assert (ROOT / path).exists(), path
