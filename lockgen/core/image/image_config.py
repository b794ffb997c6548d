"""The OCI image config of an exported environment, pure: the environment at `/opt/env` first on PATH,
NVIDIA runtime variables for CUDA locks, labels naming the lock and environment, a non-root user, the
stack's `[image]` settings as the lock records them (entrypoint, cmd, env, workdir, user, exposed ports,
labels, volumes; `services` make the entrypoint the environment's Python running lockgen's service launcher,
and no cmd), and a base image's own settings kept where they do not conflict."""

from __future__ import annotations

import json
import re
from typing import Any, cast

from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.core.gpu.package_data import data_bytes
from lockgen.digests import canonical_json
from lockgen.model.lock import Lock
from lockgen.model.oci_documents import OciConfig, RunSettings
from lockgen.model.oci import (
    ARCHITECTURE,
    ENVIRONMENT_LABEL,
    IMAGE_PREFIX,
    LOCK_LABEL,
    PREFIX_LABEL,
    SERVICE_LAUNCHER,
    SERVICES_FILE,
)

_PREFIX_SEGMENT = re.compile(r"^[A-Za-z0-9._+@-]+$")


def is_environment_prefix(path: str) -> bool:
    """Whether `path` can be where an image's environment lives: absolute and normalised (no `.`, `..`, empty
    or trailing segment), of characters that a shebang, a placeholder patch and a tar name all carry as they
    are. An image's label names it, so a team export and a check take it only when it is."""
    segments = path.split("/")[1:] if path.startswith("/") else []
    return bool(segments) and all(_PREFIX_SEGMENT.fullmatch(s) and s not in (".", "..") for s in segments)


_CUDA_RUNTIME_PACKAGES = ("cuda-version", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12")


def _environment_variables(lock: Lock, platform: str, prefix: str) -> list[str]:
    packages = {p.name: p for p in lock.packages_for(platform)}
    env = [f"PATH={prefix}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", f"CONDA_PREFIX={prefix}"]
    cuda = next((packages[name] for name in _CUDA_RUNTIME_PACKAGES if name in packages), None)
    if LockgenMeta(lock).arch not in ("", "cpu") and cuda is not None:
        major_minor = ".".join(cuda.version.split(".")[:2])
        env += [
            "NVIDIA_VISIBLE_DEVICES=all",
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            f"NVIDIA_REQUIRE_CUDA=cuda>={major_minor}",
        ]
    return env


def _locked_settings(lock: Lock) -> dict[str, Any]:
    """The stack's `[image]` settings as the lock records them (none: empty)."""
    image = LockgenMeta(lock).image
    return json.loads(image) if image else {}


def service_files(lock: Lock) -> dict[str, bytes]:
    """The files `[image] services` put in the environment (prefix-relative path -> bytes): lockgen's launcher
    and the services it starts, as the lock states them; none without services. Export writes them and
    conformance checks an image's against them."""
    services = _locked_settings(lock).get("services")
    if not services:
        return {}
    return {SERVICE_LAUNCHER: data_bytes("service_launcher.py"), SERVICES_FILE: canonical_json(services)}


def image_config(
    lock: Lock,
    platform: str,
    lock_digest: str,
    env_digest: str,
    diff_ids: list[str],
    base: OciConfig | None = None,
    prefix: str = IMAGE_PREFIX,
) -> OciConfig:
    """The config blob's content for `lock` on `platform` over layers `diff_ids` (base layers first), the
    environment at `prefix`; a base's own run settings kept where the lock's do not replace them (a null one
    as none)."""
    env = _environment_variables(lock, platform, prefix)
    labels = {
        "org.opencontainers.image.title": f"{LockgenMeta(lock).stack or 'lockgen'} {LockgenMeta(lock).target}".strip(),
        "org.opencontainers.image.description": "made by lockgen export from a lock",
        LOCK_LABEL: lock_digest,
        ENVIRONMENT_LABEL: f"sha256:{env_digest}",
        "dev.lockgen.target": LockgenMeta(lock).target,
        "dev.lockgen.arch": LockgenMeta(lock).arch,
        PREFIX_LABEL: prefix,
    }
    inherited: RunSettings = base.get("config", {}) if base is not None else {}
    settings = _locked_settings(lock)
    for line in inherited.get("Env") or []:
        key = line.split("=", 1)[0]
        if key == "PATH":  # a lockgen base image's PATH already starts with the environment
            inherited_path = line.split("=", 1)[1]
            env[0] = (
                f"PATH={inherited_path}"
                if inherited_path.startswith(f"{prefix}/bin:")
                else f"PATH={prefix}/bin:{inherited_path}"
            )
        elif not any(e.startswith(key + "=") for e in env) and key not in settings.get("env", {}):
            env.append(line)
    env += [f"{key}={value}" for key, value in sorted(settings.get("env", {}).items())]
    kept = {key: value for key, value in inherited.items() if key not in ("Env", "Labels", "User")}
    config = cast(RunSettings, kept)  # and the base's settings lockgen does not name (`Healthcheck`, …), as written
    config["User"] = settings.get("user", "1000:1000")
    config["Env"] = env
    config["WorkingDir"] = settings.get("workdir") or inherited.get("WorkingDir", "/")
    config["Labels"] = {**(inherited.get("Labels") or {}), **settings.get("labels", {}), **labels}
    if settings.get("entrypoint") is not None:
        config["Entrypoint"] = list(settings["entrypoint"])
    if settings.get("cmd") is not None:
        config["Cmd"] = list(settings["cmd"])
    if settings.get("services"):  # the launcher starts them all; a base image's cmd would be its arguments
        config["Entrypoint"] = [f"{prefix}/bin/python", f"{prefix}/{SERVICE_LAUNCHER}"]
        config.pop("Cmd", None)
    if settings.get("exposed-ports"):
        config["ExposedPorts"] = {
            **inherited.get("ExposedPorts", {}),
            **{port: {} for port in settings["exposed-ports"]},
        }
    if settings.get("volumes"):
        config["Volumes"] = {**inherited.get("Volumes", {}), **{volume: {} for volume in settings["volumes"]}}
    return {
        "created": "1970-01-01T00:00:00Z",
        "architecture": ARCHITECTURE[platform],
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
