"""Kubernetes manifests for certifying GPU nodes, as data: a `Job` that certifies N nodes once (one pod
per node, one certificate per node on a PersistentVolumeClaim), a `DaemonSet` that re-certifies every
matching node with `--quick` on an interval (the certificate on the claim, Node Feature Discovery's features
file on the node, a readiness probe that fails while the last certificate failed), and a pod-spec fragment
whose init container gates a training pod on a passing, signed certificate attached to its image.

The pods run `--lockgen-image` (an image with lockgen and skopeo), not the image under test: inside it,
`lockgen verify --image docker://IMAGE@DIGEST` pulls the image under test, checks every blob and layer,
and runs the kernel in the image's own `/opt/env`, as `verify --image` does on a host. The certificate
then records the image digest, so `lockgen attest` can attach it to that image.

Every value is checked here before any manifest is made (label values, object names, the digest); the
manifests are plain data, rendered as YAML by `adapters/kubernetes_yaml.py`."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from lockgen.core.image.image_reference import ImageReference
from lockgen.errors import UserError
from lockgen.model.json_values import JsonObject, JsonValue

GPUS_PER_NODE_DEFAULT = 8  # an HGX/DGX node: eight H100/H200/B200 on one baseboard
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # what GPU Feature Discovery labels a node with
GPU_RESOURCE = "nvidia.com/gpu"  # what the NVIDIA device plugin advertises
FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"  # NFD's `local` source
CONFIGMAP_LIMIT_BYTES = 1_000_000  # Kubernetes refuses a ConfigMap over 1 MiB; leave room for its metadata
IMAGE_UID = 1000  # `lockgen export` images run as 1000:1000; the pods here do too
INTERVAL_MIN_S, INTERVAL_MAX_S = 60, 7 * 24 * 3600
NAME_MAX = 40  # room for `-certify`/`-monitor`, a Job's index and the pod name's random suffix within 63

_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_CONFIGMAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_CONTAINER_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")


@dataclass(frozen=True)
class CertifyFleet:
    """What the pods certify and with what: the image under test, lockgen's image, the nodes they select,
    and the cluster objects (claim, secrets) they mount, which the cluster's operator makes."""

    name: str
    namespace: str
    image: ImageReference  # the image under test, pinned by digest
    lockgen_image: str  # an image with `lockgen` and `skopeo` on PATH (and `sh`, for the DaemonSet's loop)
    arch: str
    gpu_product: str | None  # None only for `cpu` (a test cluster without GPUs)
    gpus_per_node: int | None  # None for `cpu`: no GPU is requested
    nodes: int
    lock_name: str | None  # the lock's file name, a key of the `NAME-lock` ConfigMap
    certs_claim: str
    key_secret: str | None  # a Secret holding `signing.key` and `signing.pub` (lockgen keygen's pair)
    registry_auth_secret: str | None  # a kubernetes.io/dockerconfigjson Secret, for skopeo and lockgen certs
    interval_s: int

    @property
    def pinned_image(self) -> str:
        """`docker://HOST/REPO@sha256:HEX`: what the pods certify and the gate checks, never a moving tag."""
        return f"docker://{self.image.name}@{self.image.digest}"


def check_fleet(fleet: CertifyFleet) -> None:
    """Refuses, with one error and a hint each, every value the manifests could not carry or Kubernetes
    would refuse; called before any manifest is built."""
    if fleet.image.digest is None:
        raise UserError(
            f"`{fleet.image}` names a tag, which can move between the certificate and the pods",
            f"pin it: {fleet.image.at('sha256:<digest>')} (lockgen push prints the digest)",
        )
    if not _DNS_LABEL.fullmatch(fleet.name) or len(fleet.name) > NAME_MAX:
        raise UserError(
            f"--name {fleet.name!r} is not a Kubernetes object name of at most {NAME_MAX} characters",
            "use lowercase letters, digits and `-`, starting and ending with a letter or digit",
        )
    if not _DNS_LABEL.fullmatch(fleet.namespace):
        raise UserError(
            f"--namespace {fleet.namespace!r} is not a namespace name",
            "use at most 63 lowercase letters, digits and `-`, starting and ending with a letter or digit",
        )
    for flag, value in (
        ("--certs-claim", fleet.certs_claim),
        ("--key-secret", fleet.key_secret),
        ("--registry-auth-secret", fleet.registry_auth_secret),
    ):
        if value is not None and (not _DNS_SUBDOMAIN.fullmatch(value) or len(value) > 253):
            raise UserError(
                f"{flag} {value!r} is not a Kubernetes object name",
                "use lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit",
            )
    if not _CONTAINER_IMAGE.fullmatch(fleet.lockgen_image) or fleet.lockgen_image.startswith("docker://"):
        raise UserError(
            f"--lockgen-image {fleet.lockgen_image!r} is not a container image reference",
            "name it as Kubernetes does, without docker://: registry.example/tools/lockgen@sha256:...",
        )
    if fleet.arch == "cpu":
        if fleet.gpus_per_node is not None:
            raise UserError("--gpus-per-node asks for GPUs, and the arch is cpu", "leave it out for --arch cpu")
    else:
        if fleet.gpu_product is None:
            raise UserError(
                f"the {fleet.arch} pods need the GPU model of the nodes to run on",
                f"pass --gpu-product, the value of the node label {GPU_PRODUCT_LABEL} (kubectl get nodes -L "
                "nvidia.com/gpu.product)",
            )
        if fleet.gpus_per_node is None or fleet.gpus_per_node < 1:
            raise UserError(
                f"--gpus-per-node {fleet.gpus_per_node} requests no GPU", "pass 1 or more (the node's GPUs)"
            )
    if fleet.gpu_product is not None and not _LABEL_VALUE.fullmatch(fleet.gpu_product):
        raise UserError(
            f"--gpu-product {fleet.gpu_product!r} is not a Kubernetes label value",
            "pass the node's nvidia.com/gpu.product label as it is, e.g. NVIDIA-H100-80GB-HBM3 (at most 63 "
            "letters, digits, `-`, `_` and `.`)",
        )
    if fleet.nodes < 1:
        raise UserError(f"--nodes {fleet.nodes} certifies nothing", "pass --nodes 1 or more")
    if not INTERVAL_MIN_S <= fleet.interval_s <= INTERVAL_MAX_S:
        raise UserError(
            f"--interval {fleet.interval_s} s is not a re-certification interval",
            f"pass {INTERVAL_MIN_S} (a quick run's length) to {INTERVAL_MAX_S} (a week) seconds; default 3600",
        )
    if fleet.lock_name is not None and not _CONFIGMAP_KEY.fullmatch(fleet.lock_name):
        raise UserError(
            f"the lock's file name `{fleet.lock_name}` cannot be a ConfigMap key",
            "rename the lock to letters, digits, `-`, `_` and `.`",
        )


def lock_config_map(fleet: CertifyFleet, lock_text: str) -> JsonObject:
    """The ConfigMap that carries the lock into the pods (mounted at /lock): conformance runs against it."""
    assert fleet.lock_name is not None
    if len(lock_text.encode("utf-8")) > CONFIGMAP_LIMIT_BYTES:
        raise UserError(
            f"the lock `{fleet.lock_name}` is over {CONFIGMAP_LIMIT_BYTES} bytes, more than a ConfigMap holds",
            "certify against the image's own lock label instead: leave out --lock",
        )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(fleet, f"{fleet.name}-lock", "lock"),
        "data": {fleet.lock_name: lock_text},
    }


def _labels(fleet: CertifyFleet, component: str) -> JsonObject:
    return {
        "app.kubernetes.io/name": "lockgen",
        "app.kubernetes.io/instance": fleet.name,
        "app.kubernetes.io/component": component,
    }


def _metadata(fleet: CertifyFleet, name: str, component: str) -> JsonObject:
    return {"name": name, "namespace": fleet.namespace, "labels": _labels(fleet, component)}


def _verify_args(fleet: CertifyFleet, quick: bool) -> list[str]:
    """`lockgen verify`'s arguments inside the pod, without --out and --emit."""
    args = ["verify", "--arch", fleet.arch, "--image", fleet.pinned_image]
    if fleet.lock_name:
        args += ["--lock", f"/lock/{fleet.lock_name}"]
    if fleet.key_secret:
        args += ["--key", "/keys/signing.key"]
    if fleet.gpus_per_node is not None:
        args += ["--gpus", str(fleet.gpus_per_node)]
    if quick:
        args.append("--quick")
    return args


def _environment(fleet: CertifyFleet) -> list[JsonValue]:
    env: list[JsonValue] = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "HOME", "value": "/scratch"},
        {"name": "LOCKGEN_HOME", "value": "/scratch/lockgen"},
        {"name": "TMPDIR", "value": "/scratch"},  # the image under test is pulled and unpacked here
    ]
    if fleet.gpus_per_node is not None:  # nvidia-smi and NVML for the hardware fingerprint and telemetry
        env.append({"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"})
    if fleet.registry_auth_secret:
        env.append({"name": "REGISTRY_AUTH_FILE", "value": "/registry-auth/.dockerconfigjson"})
    return env


def _container_security() -> JsonObject:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": IMAGE_UID,
        "runAsGroup": IMAGE_UID,
    }


def _mounts_and_volumes(fleet: CertifyFleet) -> tuple[list[JsonValue], list[JsonValue]]:
    mounts: list[JsonValue] = [
        {"name": "certs", "mountPath": "/certs"},
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "shm", "mountPath": "/dev/shm"},
    ]
    volumes: list[JsonValue] = [
        {"name": "certs", "persistentVolumeClaim": {"claimName": fleet.certs_claim}},
        {"name": "scratch", "emptyDir": {}},
        {"name": "shm", "emptyDir": {"medium": "Memory"}},  # NCCL's shared memory: a container's /dev/shm is 64 MiB
    ]
    if fleet.lock_name:
        mounts.append({"name": "lock", "mountPath": "/lock", "readOnly": True})
        volumes.append({"name": "lock", "configMap": {"name": f"{fleet.name}-lock"}})
    if fleet.key_secret:
        mounts.append({"name": "signing-key", "mountPath": "/keys", "readOnly": True})
        volumes.append(
            {
                "name": "signing-key",
                "secret": {
                    "secretName": fleet.key_secret,
                    "defaultMode": 0o440,
                    "items": [{"key": key, "path": key} for key in ("signing.key", "signing.pub")],
                },
            }
        )
    if fleet.registry_auth_secret:
        mounts.append({"name": "registry-auth", "mountPath": "/registry-auth", "readOnly": True})
        volumes.append(
            {"name": "registry-auth", "secret": {"secretName": fleet.registry_auth_secret, "defaultMode": 0o440}}
        )
    return mounts, volumes


def _pod_spec(fleet: CertifyFleet, container: JsonObject, volumes: list[JsonValue]) -> JsonObject:
    spec: JsonObject = {
        "containers": [container],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": IMAGE_UID,
            "runAsGroup": IMAGE_UID,
            "fsGroup": IMAGE_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "volumes": volumes,
    }
    if fleet.gpu_product is not None:
        spec["nodeSelector"] = {GPU_PRODUCT_LABEL: fleet.gpu_product}
    if fleet.gpus_per_node is not None:
        container["resources"] = {"limits": {GPU_RESOURCE: fleet.gpus_per_node}}
    return spec


def certify_job(fleet: CertifyFleet) -> JsonObject:
    """The Job: N pods at once, never two on one node (a required anti-affinity on the hostname), each
    certifying its node and writing `/certs/NODE.cert.json` and `/certs/NODE.junit.xml` on the claim.
    Indexed, with `backoffLimitPerIndex: 0`: a node's pod is never retried, and a node that fails does not
    stop the others (a Job-wide `backoffLimit: 0` would terminate every running pod at the first failure)."""
    mounts, volumes = _mounts_and_volumes(fleet)
    container: JsonObject = {
        "name": "certify",
        "image": fleet.lockgen_image,
        "command": ["lockgen"],
        "args": [
            *_verify_args(fleet, quick=False),
            "--out",
            "/certs/$(NODE_NAME).cert.json",
            "--emit",
            "junit=/certs/$(NODE_NAME).junit.xml",
        ],
        "env": _environment(fleet),
        "securityContext": _container_security(),
        "volumeMounts": mounts,
    }
    spec = _pod_spec(fleet, container, volumes)
    spec["restartPolicy"] = "Never"
    spec["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": _labels(fleet, "certify")}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(fleet, f"{fleet.name}-certify", "certify"),
        "spec": {
            "completionMode": "Indexed",
            "completions": fleet.nodes,
            "parallelism": fleet.nodes,
            "backoffLimitPerIndex": 0,
            "template": {"metadata": {"labels": _labels(fleet, "certify")}, "spec": spec},
        },
    }


def monitor_script(fleet: CertifyFleet) -> str:
    """The DaemonSet's loop: certify with --quick, keep the certificate only when one was written (a run
    that wrote none removes the last one and the node features, so nothing stale says the node passed),
    then sleep the interval. The NFD features expire after three intervals without a run."""
    features = f"/features.d/{fleet.name}"
    valid_for = f"{-(-3 * fleet.interval_s // 60)}m"
    verify = " ".join(shlex.quote(word) for word in ["lockgen", *_verify_args(fleet, quick=True)])
    return "\n".join(
        [
            'cert="/certs/$NODE_NAME.quick.cert.json"',
            'next="/certs/.$NODE_NAME.quick.next.cert.json"',
            f"features={shlex.quote(features)}",
            "while true; do",
            '  rm -f "$next"',
            f'  {verify} --out "$next" --emit "nfd=$features" --valid-for {valid_for}',
            '  if [ -s "$next" ]; then mv -f "$next" "$cert"; else rm -f "$cert" "$features"; fi',
            f"  sleep {fleet.interval_s}",
            "done",
            "",
        ]
    )


def monitor_daemon_set(fleet: CertifyFleet) -> JsonObject:
    """The DaemonSet: one pod on every node with the GPU product, re-certifying it every interval. Its
    readiness probe is `lockgen cert export CERT --format npd`: unready while the last certificate failed,
    is missing or does not verify. An init container (the one root step) lets uid 1000 write NFD's
    features.d, which NFD creates as root 0755."""
    mounts, volumes = _mounts_and_volumes(fleet)
    mounts.append({"name": "node-features", "mountPath": "/features.d"})
    volumes.append({"name": "node-features", "hostPath": {"path": FEATURES_DIR, "type": "DirectoryOrCreate"}})
    probe = 'exec lockgen cert export "/certs/$NODE_NAME.quick.cert.json" --format npd' + (
        " --key /keys/signing.pub" if fleet.key_secret else ""
    )
    container: JsonObject = {
        "name": "monitor",
        "image": fleet.lockgen_image,
        "command": ["sh", "-c", monitor_script(fleet)],
        "env": _environment(fleet),
        "securityContext": _container_security(),
        "volumeMounts": mounts,
        "readinessProbe": {
            "exec": {"command": ["sh", "-c", probe]},
            "periodSeconds": 60,
            "timeoutSeconds": 30,
            "failureThreshold": 1,
            "successThreshold": 1,
        },
    }
    spec = _pod_spec(fleet, container, volumes)
    spec["initContainers"] = [
        {
            "name": "features-dir",
            "image": fleet.lockgen_image,
            "command": ["sh", "-c", f"chgrp {IMAGE_UID} /features.d && chmod g+w /features.d"],
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "runAsNonRoot": False,
                "runAsUser": 0,
                "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
            },
            "volumeMounts": [{"name": "node-features", "mountPath": "/features.d"}],
        }
    ]
    selector = _labels(fleet, "monitor")
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _metadata(fleet, f"{fleet.name}-monitor", "monitor"),
        "spec": {"selector": {"matchLabels": selector}, "template": {"metadata": {"labels": selector}, "spec": spec}},
    }


def gate_fragment(fleet: CertifyFleet) -> JsonObject:
    """A piece of a training pod's spec (`initContainers` and `volumes` to merge in): the init container
    lists the attestations attached to the pinned image and exits 1 unless one verifies with the public
    key and is a passing certificate of the arch, so the pod's containers never start on an uncertified
    image. The public key comes from the ConfigMap `NAME-signing-pub` (no private key in a training pod)."""
    mounts: list[JsonValue] = [{"name": "lockgen-signing-pub", "mountPath": "/keys", "readOnly": True}]
    volumes: list[JsonValue] = [{"name": "lockgen-signing-pub", "configMap": {"name": f"{fleet.name}-signing-pub"}}]
    env: list[JsonValue] = []
    if fleet.registry_auth_secret:
        mounts.append({"name": "lockgen-registry-auth", "mountPath": "/registry-auth", "readOnly": True})
        volumes.append({"name": "lockgen-registry-auth", "secret": {"secretName": fleet.registry_auth_secret}})
        env.append({"name": "REGISTRY_AUTH_FILE", "value": "/registry-auth/.dockerconfigjson"})
    container: JsonObject = {
        "name": "lockgen-gate",
        "image": fleet.lockgen_image,
        "command": ["lockgen"],
        "args": ["certs", fleet.pinned_image, "--key", "/keys/signing.pub", "--require-pass", fleet.arch],
        "securityContext": _container_security(),
        "volumeMounts": mounts,
    }
    if env:
        container["env"] = env
    return {"initContainers": [container], "volumes": volumes}
