"""`lockgen fleet kubernetes`, offline (there is no cluster here): every manifest validates against the
Kubernetes OpenAPI schemas (kubernetes-validate, strict, for 1.30 and the newest it bundles), the invariants
the certification rests on hold (one pod per node, the GPU product's node selector, non-root, the GPU
limit, NODE_NAME from the downward API, the lock carried in), the DaemonSet's loop keeps no stale
certificate when run with a stand-in lockgen, the bytes are the same from two folders, and bad input is one
`error:` and one `hint:` line with nothing written."""

from __future__ import annotations

import copy
import os
import re
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from lockgen.cli.app import app
from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.slow  # the module renders and schema-checks a fleet first

LOCK = REPO / "envs" / "examples" / "h200-system" / "locks" / "h200.conda-lock.yml"
DIGEST = "sha256:" + "5e" * 32
IMAGE = f"docker://registry.example:5000/team/train@{DIGEST}"
LOCKGEN_IMAGE = "registry.example:5000/tools/lockgen@sha256:" + "0f" * 32
PRODUCT = "NVIDIA-H100-80GB-HBM3"
VERSIONS = ("1.30", kubernetes_validate.latest_version())
GPU_ARGS = (
    "--image",
    IMAGE,
    "--lockgen-image",
    LOCKGEN_IMAGE,
    "--arch",
    "sm90",
    "--gpu-product",
    PRODUCT,
    "--nodes",
    "4",
    "--lock",
    str(LOCK),
    "--certs-claim",
    "lockgen-certs",
    "--key-secret",
    "lockgen-signing",
    "--registry-auth-secret",
    "registry-pull",
    "--namespace",
    "gpu-validation",
)
CPU_ARGS = (
    "--image",
    IMAGE,
    "--lockgen-image",
    LOCKGEN_IMAGE,
    "--arch",
    "cpu",
    "--nodes",
    "2",
    "--certs-claim",
    "lockgen-certs",
    "--name",
    "ci-cpu",
)
LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def generate(out: Path, *args: str) -> dict[str, list[dict]]:
    done = run_cli("fleet", "kubernetes", *args, "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    return {
        name: list(yaml.safe_load_all(Path(path).read_text())) for name, path in yaml.safe_load(done.stdout).items()
    }


@pytest.fixture(scope="module")
def gpu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    return generate(tmp_path_factory.mktemp("gpu"), *GPU_ARGS)


@pytest.fixture(scope="module")
def cpu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    return generate(tmp_path_factory.mktemp("cpu"), *CPU_ARGS)


def the(documents: list[dict], kind: str) -> dict:
    [found] = [d for d in documents if d["kind"] == kind]
    return found


def as_pod(gate: dict) -> dict:
    """The gate fragment merged into a training pod, as its README says to."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "namespace": "team"},
        "spec": {**gate, "containers": [{"name": "train", "image": "registry.example:5000/team/train@" + DIGEST}]},
    }


def pod_spec(manifest: dict) -> dict:
    return manifest["spec"]["template"]["spec"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("which", ["gpu", "cpu"])
def test_every_manifest_validates_against_the_kubernetes_schemas(
    which: str, version: str, request: pytest.FixtureRequest
) -> None:
    written = request.getfixturevalue(which)
    documents = written["job"] + written["daemonset"] + [as_pod(written["gate"][0])]
    assert {d["kind"] for d in documents} == (
        {"ConfigMap", "Job", "DaemonSet", "Pod"} if which == "gpu" else {"Job", "DaemonSet", "Pod"}
    )
    for document in documents:
        kubernetes_validate.validate(document, version, strict=True)


def test_the_schema_check_is_not_vacuous(gpu: dict) -> None:
    """A misspelt field and a count given as text are what a strict schema check must refuse."""
    misspelt, as_text = copy.deepcopy(the(gpu["job"], "Job")), copy.deepcopy(the(gpu["job"], "Job"))
    pod_spec(misspelt)["nodeSelectors"] = pod_spec(misspelt).pop("nodeSelector")
    as_text["spec"]["parallelism"] = "4"
    for broken in (misspelt, as_text):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(broken, VERSIONS[0], strict=True)


def test_the_job_certifies_each_node_once_as_non_root_with_its_gpus(gpu: dict) -> None:
    job = the(gpu["job"], "Job")
    spec, pod = job["spec"], pod_spec(job)
    assert spec["parallelism"] == spec["completions"] == 4 and spec["completionMode"] == "Indexed"
    assert spec["backoffLimitPerIndex"] == 0 and "backoffLimit" not in spec and pod["restartPolicy"] == "Never"
    [rule] = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert rule["topologyKey"] == "kubernetes.io/hostname"
    assert rule["labelSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": PRODUCT}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] == 1000
    [container] = pod["containers"]
    assert container["securityContext"]["runAsNonRoot"] and not container["securityContext"]["allowPrivilegeEscalation"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 8}  # the default: an 8-GPU node
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    args = container["args"]
    assert container["command"] == ["lockgen"] and args[:5] == ["verify", "--arch", "sm90", "--image", IMAGE]
    assert args[args.index("--gpus") + 1] == "8" and "--quick" not in args
    assert args[args.index("--out") + 1] == "/certs/$(NODE_NAME).cert.json"  # Kubernetes expands $(NODE_NAME) in args
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["certs"] == "/certs" and volumes["certs"]["persistentVolumeClaim"] == {"claimName": "lockgen-certs"}
    assert args[args.index("--key") + 1].startswith(mounts["signing-key"] + "/")
    assert volumes["signing-key"]["secret"]["secretName"] == "lockgen-signing"
    lock_arg = args[args.index("--lock") + 1]
    assert lock_arg == f"{mounts['lock']}/{LOCK.name}"
    config_map = the(gpu["job"], "ConfigMap")
    assert volumes["lock"]["configMap"]["name"] == config_map["metadata"]["name"]
    assert config_map["data"] == {LOCK.name: LOCK.read_text()}  # the lock's bytes, conformance runs against them
    assert env["REGISTRY_AUTH_FILE"]["value"].startswith(mounts["registry-auth"] + "/")
    assert all(d["metadata"]["namespace"] == "gpu-validation" for d in gpu["job"] + gpu["daemonset"])


def test_a_cpu_fleet_requests_no_gpu(cpu: dict) -> None:
    for manifest in (the(cpu["job"], "Job"), the(cpu["daemonset"], "DaemonSet")):
        pod = pod_spec(manifest)
        container = pod["containers"][0]
        assert "resources" not in container and "nodeSelector" not in pod
        assert "--gpus" not in (container.get("args") or container["command"][-1])
        assert not any(e["name"] == "NVIDIA_DRIVER_CAPABILITIES" for e in container["env"])
    assert the(cpu["job"], "Job")["metadata"]["name"] == "ci-cpu-certify"


def test_the_daemonset_watches_every_node_with_quick_runs_features_and_a_readiness_verdict(gpu: dict) -> None:
    daemonset = the(gpu["daemonset"], "DaemonSet")
    pod = pod_spec(daemonset)
    assert (
        daemonset["spec"]["selector"]["matchLabels"].items()
        <= daemonset["spec"]["template"]["metadata"]["labels"].items()
    )
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": PRODUCT} and "restartPolicy" not in pod  # Always
    [container] = pod["containers"]
    script = container["command"][2]
    assert container["command"][:2] == ["sh", "-c"] and "while true; do" in script and "sleep 3600" in script
    assert "--quick" in script and '--emit "nfd=$features"' in script and "--valid-for 180m" in script
    assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0
    probe = container["readinessProbe"]["exec"]["command"]
    assert probe[:2] == ["sh", "-c"] and "lockgen cert export" in probe[2] and "--format npd" in probe[2]
    assert "--key /keys/signing.pub" in probe[2]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["node-features"]["hostPath"]["path"] == "/etc/kubernetes/node-feature-discovery/features.d"
    assert container["securityContext"]["runAsUser"] == 1000 and container["resources"]["limits"] == {
        "nvidia.com/gpu": 8
    }
    [init] = pod["initContainers"]
    assert init["securityContext"]["runAsUser"] == 0 and init["securityContext"]["capabilities"] == {
        "drop": ["ALL"],
        "add": ["CHOWN"],
    }
    assert [m["name"] for m in init["volumeMounts"]] == ["node-features"]  # the one root step touches nothing else


def test_the_monitor_loop_keeps_no_stale_certificate(gpu: dict, tmp_path: Path) -> None:
    """The loop, with a stand-in lockgen: a run that writes a certificate makes it current; a run that writes
    none (lockgen refused before the kernel) removes the last certificate and the node features."""
    script = the(gpu["daemonset"], "DaemonSet")["spec"]["template"]["spec"]["containers"][0]["command"][2]
    certs, features, tools = tmp_path / "certs", tmp_path / "features.d", tmp_path / "bin"
    for folder in (certs, features, tools):
        folder.mkdir()
    script = script.replace("/certs/", f"{certs}/").replace("/features.d/", f"{features}/")
    (tools / "lockgen").write_text(
        '#!/bin/sh\n[ -n "$WRITES" ] || exit 1\nwhile [ $# -gt 0 ]; do case "$1" in --out) echo cert > "$2";; '
        '--emit) echo features > "${2#nfd=}";; esac; shift; done\n'
    )
    (tools / "sleep").write_text("#!/bin/sh\nkill -TERM $PPID\n")  # one round of the loop
    for tool in ("lockgen", "sleep"):
        (tools / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "NODE_NAME": "gpu-7"}
    subprocess.run(["sh", "-c", script], env={**env, "WRITES": "1"}, timeout=30)
    current, feature_file = certs / "gpu-7.quick.cert.json", features / "lockgen-sm90"
    assert current.read_text() == "cert\n" and feature_file.read_text() == "features\n"
    assert sorted(p.name for p in certs.iterdir()) == ["gpu-7.quick.cert.json"]
    subprocess.run(["sh", "-c", script], env=env, timeout=30)
    assert not current.exists() and not feature_file.exists()


def test_the_gate_checks_the_pinned_image_with_the_public_key_only(gpu: dict) -> None:
    [gate] = gpu["gate"]
    [init] = gate["initContainers"]
    assert init["command"] == ["lockgen"]
    assert init["args"] == ["certs", IMAGE, "--key", "/keys/signing.pub", "--require-pass", "sm90"]
    assert init["image"] == LOCKGEN_IMAGE and init["securityContext"]["runAsNonRoot"]
    volumes = {v["name"]: v for v in gate["volumes"]}
    assert volumes["lockgen-signing-pub"] == {
        "name": "lockgen-signing-pub",
        "configMap": {"name": "lockgen-sm90-signing-pub"},
    }
    assert not any(
        "lockgen-signing" == v.get("secret", {}).get("secretName") for v in gate["volumes"]
    )  # no private key


def test_the_same_inputs_give_the_same_bytes_from_two_folders(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "k8s", tmp_path / "b" / "elsewhere"
    generate(first, *GPU_ARGS)
    generate(second, *GPU_ARGS)
    names = sorted(p.name for p in first.iterdir())
    assert names == ["certify-job.yaml", "gate-init-container.yaml", "monitor-daemonset.yaml"]
    assert names == sorted(p.name for p in second.iterdir())
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes()
        assert str(tmp_path) not in (first / name).read_text()


def _bad_value(draw: st.DrawFn) -> tuple[str, str]:
    flag = draw(
        st.sampled_from(
            [
                "--gpu-product",
                "--nodes",
                "--name",
                "--namespace",
                "--image",
                "--interval",
                "--gpus-per-node",
                "--certs-claim",
                "--lockgen-image",
            ]
        )
    )
    if flag == "--gpu-product":
        value = draw(
            st.one_of(st.text(min_size=1, max_size=70), st.from_regex(r"[A-Za-z0-9]{64,80}", fullmatch=True)).filter(
                lambda text: not LABEL_VALUE.fullmatch(text)
            )
        )
    elif flag == "--nodes":
        value = str(draw(st.integers(-(10**6), 0)))
    elif flag == "--gpus-per-node":
        value = str(draw(st.integers(-64, 0)))
    elif flag == "--interval":
        value = str(draw(st.one_of(st.integers(-10, 59), st.integers(7 * 24 * 3600 + 1, 10**9))))
    elif flag == "--image":
        value = draw(
            st.sampled_from(
                [
                    IMAGE.split("@")[0] + ":latest",
                    IMAGE.removeprefix("docker://"),
                    IMAGE[:-1],
                    "docker://team/train@" + DIGEST,
                ]
            )
        )
    elif flag == "--lockgen-image":
        value = draw(st.sampled_from(["docker://" + LOCKGEN_IMAGE, "has space", "-x"]))
    else:  # an object name: never a DNS-1123 subdomain; for --name and --namespace, also too long a label
        invalid = st.text(min_size=1, max_size=20).filter(lambda text: not SUBDOMAIN.fullmatch(text))
        too_long = st.from_regex(r"[a-z]{41,70}" if flag == "--name" else r"[a-z]{64,70}", fullmatch=True)
        value = draw(invalid if flag == "--certs-claim" else st.one_of(invalid, too_long))
    return flag, value


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=st.composite(_bad_value)())
def test_bad_input_is_one_error_and_hint_and_writes_nothing(bad: tuple[str, str], tmp_path: Path) -> None:
    flag, value = bad
    args = list(GPU_ARGS)
    if flag in args:
        del args[args.index(flag) : args.index(flag) + 2]
    out = tmp_path / "never" / str(abs(hash(bad)))
    result = CliRunner().invoke(app, ["fleet", "kubernetes", *args, f"{flag}={value}", "--out", str(out)])
    lines = result.stderr.splitlines()
    assert result.exit_code == 1, (flag, value, result.exit_code, result.stderr, result.exception)
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), (
        flag,
        value,
        result.stderr,
    )
    assert not out.exists()


def test_a_malformed_command_line_is_a_usage_error(tmp_path: Path) -> None:
    without_claim = [a for a in GPU_ARGS if a not in ("--certs-claim", "lockgen-certs")]
    for args, says in (([*GPU_ARGS, "--nodes", "two"], "--nodes"), (without_claim, "--certs-claim")):
        result = CliRunner().invoke(app, ["fleet", "kubernetes", *args, "--out", str(tmp_path / "out")])
        assert result.exit_code == 2 and says in result.stderr and not (tmp_path / "out").exists(), result.stderr


def test_a_lock_that_cannot_be_carried_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    big = tmp_path / "big.conda-lock.yml"
    big.write_text("# padding\n" * 110_000)
    for lock, says in ((big, "more than a ConfigMap holds"), (tmp_path / "missing.yml", "cannot read the lock")):
        args = list(GPU_ARGS)
        args[args.index("--lock") + 1] = str(lock)
        result = CliRunner().invoke(app, ["fleet", "kubernetes", *args, "--out", str(tmp_path / "out")])
        assert result.exit_code == 1 and says in result.stderr and "hint: " in result.stderr, result.stderr
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "change, says",
    [
        ({"--arch": "cpu", "--gpus-per-node": "8"}, "--gpus-per-node asks for GPUs, and the arch is cpu"),
        ({"--gpu-product": None}, "need the GPU model of the nodes"),
        ({"--arch": "sm42"}, "unknown arch `sm42`"),
    ],
)
def test_the_arch_decides_what_gpus_are_asked_for(change: dict, says: str, tmp_path: Path) -> None:
    args = list(GPU_ARGS)
    for flag, value in change.items():
        if flag in args:
            del args[args.index(flag) : args.index(flag) + 2]
        if value is not None:
            args += [flag, value]
    result = CliRunner().invoke(app, ["fleet", "kubernetes", *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 1 and says in result.stderr and not (tmp_path / "out").exists(), result.stderr
