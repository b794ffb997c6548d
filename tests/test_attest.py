"""Certificates as attestations, against Debian's loopback `docker-registry` (2.8: no referrers API, so the
fallback tag): an exported image is pushed, a signed certificate of it attested (with its SBOM), listed and
verified by `lockgen certs docker://`, the wire format read back with plain HTTP, the envelope verified by
an independent DSSE implementation (securesystemslib), tampering refused, attesting twice idempotent, and
credentials met through Basic and bearer-token challenges."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lockgen.adapters.node import signing
from lockgen.model.certificate import Check, CertificateBody, Hardware, Subject
from tests.conftest import loopback_registry, run_cli
from tests.test_export import make_lock, run_export

pytestmark = pytest.mark.slow  # every test here builds a venv, an image or a registry first

EMPTY_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"  # image-spec: the `{}` blob


class Wire:
    """Plain HTTP to the registry, written here from the distribution-spec, not with lockgen's client."""

    def __init__(self, host: str) -> None:
        self.base = f"http://{host}/v2"

    def get(self, path: str, accept: str = "*/*") -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(
                urllib.request.Request(f"{self.base}/{path}", headers={"Accept": accept})
            ) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def json(self, path: str) -> dict:
        status, body = self.get(
            path, "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json"
        )
        assert status == 200, (path, status, body[:200])
        return json.loads(body)

    def put_blob(self, repository: str, data: bytes) -> dict:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        opened = urllib.request.urlopen(
            urllib.request.Request(f"{self.base}/{repository}/blobs/uploads/", data=b"", method="POST")
        )
        location = opened.headers["Location"]
        urllib.request.urlopen(
            urllib.request.Request(
                f"{location}{'&' if '?' in location else '?'}digest={digest}",
                data=data,
                method="PUT",
                headers={"Content-Type": "application/octet-stream"},
            )
        )
        return {"digest": digest, "size": len(data)}

    def put_manifest(self, repository: str, reference: str, data: bytes, media_type: str) -> None:
        urllib.request.urlopen(
            urllib.request.Request(
                f"{self.base}/{repository}/manifests/{reference}",
                data=data,
                method="PUT",
                headers={"Content-Type": media_type},
            )
        )

    def attach(self, repository: str, image: dict, envelope: bytes) -> str:
        """A DSSE referrer of `image` as another tool would push it: artifact manifest and fallback index entry."""
        layer = {"mediaType": "application/vnd.dsse.envelope.v1+json", **self.put_blob(repository, envelope)}
        config = {"mediaType": "application/vnd.oci.empty.v1+json", **self.put_blob(repository, b"{}")}
        annotations = {"in-toto.io/predicate-type": "https://lockgen.dev/certificate/v1"}
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "artifactType": layer["mediaType"],
                "config": config,
                "layers": [layer],
                "subject": image,
                "annotations": annotations,
            }
        ).encode()
        digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
        self.put_manifest(repository, digest, manifest, "application/vnd.oci.image.manifest.v1+json")
        tag = "sha256-" + image["digest"].split(":")[1]
        index = self.json(f"{repository}/manifests/{tag}")
        index["manifests"].append(
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": digest,
                "size": len(manifest),
                "artifactType": layer["mediaType"],
                "annotations": annotations,
            }
        )
        self.put_manifest(repository, tag, json.dumps(index).encode(), "application/vnd.oci.image.index.v1+json")
        return digest

    def image(self, repository: str, tag: str) -> dict:
        status, body = self.get(f"{repository}/manifests/{tag}", "application/vnd.oci.image.manifest.v1+json")
        assert status == 200
        return {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": "sha256:" + hashlib.sha256(body).hexdigest(),
            "size": len(body),
        }

    def envelope(self, repository: str, artifact: str) -> bytes:
        manifest = self.json(f"{repository}/manifests/{artifact}")
        return self.get(f"{repository}/blobs/{manifest['layers'][0]['digest']}")[1]


def make_certificate(
    path: Path, key: Path, *, image_digest: str | None = None, lock_sha256: str | None = None, passed: bool = True
) -> Path:
    """A certificate as `lockgen verify` writes one (canonical file, Ed25519 over the body), of an image or a lock."""
    body = CertificateBody(
        created="2026-12-01T12:00:00Z",
        tool="lockgen 0.1.0",
        arch="cpu",
        mode="quick",
        subject=Subject(
            target="h100", lock_sha256=lock_sha256, image_digest=image_digest, python="/opt/env/bin/python"
        ),
        hardware=Hardware(
            gpu_names=(),
            gpu_count=0,
            compute_capability=None,
            driver=None,
            interconnect="none",
            topology="",
            host_platform="linux-64",
        ),
        stack={"torch": "2.13.0"},
        checks=(Check(category="stack", name="probe", passed=passed, detail="ran"),),
        figures={"gemm": {"fp32": {"value": 0.5, "unit": "TFLOP/s"}}},
        telemetry={},
        kernel_sha256={"single": "0" * 64},
        passed=passed,
        duration_s=1.0,
    )
    data = body.model_dump(mode="json", by_alias=True)
    path.write_text(signing.render({"certificate": data, "signature": signing.sign(data, key)}))
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    """A registry holding two lockgen images (`team/img:sm90`, and `team/other:sm90` of another lock), a key
    pair and a second one, and the first image attested with a certificate of it and its SBOM."""
    folder = tmp_path_factory.mktemp("attest")
    with pytest.MonkeyPatch.context() as patch, loopback_registry(folder) as host:
        lock, other_lock = make_lock(folder, "1.0"), make_lock(folder, "1.1")
        digest = run_export(lock, folder / "img", folder / "home", patch)
        other = run_export(other_lock, folder / "other-img", folder / "home", patch)
        for layout, repository in ((folder / "img", "team/img"), (folder / "other-img", "team/other")):
            pushed = run_cli("push", str(layout), f"docker://{host}/{repository}:sm90", "--insecure")
            assert pushed.returncode == 0, pushed.stderr
        for name in ("key", "stranger"):
            assert run_cli("keygen", "--out", str(folder / name)).returncode == 0
        certificate = make_certificate(folder / "img.cert.json", folder / "key", image_digest=digest)
        attested = run_cli(
            "attest",
            f"docker://{host}/team/img:sm90",
            str(certificate),
            "--key",
            str(folder / "key"),
            "--sbom",
            str(folder / "img" / "sbom.cdx.json"),
            "--insecure",
        )
        assert attested.returncode == 0, attested.stderr
        yield {
            "host": host,
            "folder": folder,
            "digest": digest,
            "other": other,
            "lock": lock,
            "certificate": certificate,
            "artifacts": attested.stdout.split(),
            "wire": Wire(host),
        }


def test_attest_then_certs_lists_and_verifies_it(world: dict) -> None:
    host, folder = world["host"], world["folder"]
    assert len(world["artifacts"]) == 2  # the certificate's envelope, the SBOM
    listed = run_cli("certs", f"docker://{host}/team/img:sm90", "--key", str(folder / "key.pub"), "--insecure")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("2026-12-01T12:00:00Z cpu    CPU PASS")
    assert (
        f"docker://{host}/team/img@{world['artifacts'][0]}" in lines[0] and "[image; signature valid (key " in lines[0]
    )
    by_digest = run_cli("certs", f"docker://{host}/team/img@{world['digest']}", "--insecure", "--json")
    entries = json.loads(by_digest.stdout)
    assert by_digest.returncode == 0 and len(entries) == 1
    assert entries[0]["verified"] and entries[0]["signature"] == "signature not checked (no --key)"
    assert entries[0]["binding"] == "image" and entries[0]["arch"] == "cpu"


def test_the_wire_format_is_an_oci_1_1_referrer_listed_by_the_fallback_tag(world: dict) -> None:
    wire, digest = world["wire"], world["digest"]
    assert wire.get(f"team/img/referrers/{digest}")[0] == 404  # registry 2.8: no referrers API
    index = wire.json(f"team/img/manifests/sha256-{digest.split(':')[1]}")
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    assert [e["digest"] for e in index["manifests"]] == world["artifacts"]
    assert [e["artifactType"] for e in index["manifests"]] == [
        "application/vnd.dsse.envelope.v1+json",
        "application/vnd.cyclonedx+json",
    ]
    assert index["manifests"][0]["annotations"] == {"in-toto.io/predicate-type": "https://lockgen.dev/certificate/v1"}
    image = wire.image("team/img", "sm90")
    for entry in index["manifests"]:
        manifest = wire.json(f"team/img/manifests/{entry['digest']}")
        assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
        assert manifest["artifactType"] == entry["artifactType"] == manifest["layers"][0]["mediaType"]
        assert manifest["config"] == {
            "mediaType": "application/vnd.oci.empty.v1+json",
            "digest": EMPTY_DIGEST,
            "size": 2,
        }
        assert manifest["subject"] == image and len(manifest["layers"]) == 1
    sbom = wire.json(f"team/img/manifests/{world['artifacts'][1]}")["layers"][0]["digest"]
    assert wire.get(f"team/img/blobs/{sbom}")[1] == (world["folder"] / "img" / "sbom.cdx.json").read_bytes()


def test_an_independent_dsse_implementation_verifies_the_envelope(world: dict) -> None:
    """securesystemslib's DSSE Envelope and Ed25519 key, not lockgen's code, check the signature over the PAE."""
    from cryptography.hazmat.primitives.serialization import load_pem_public_key
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import SSlibKey

    raw = world["wire"].envelope("team/img", world["artifacts"][0])
    document = json.loads(raw)
    assert document["payloadType"] == "application/vnd.in-toto+json" and len(document["signatures"]) == 1
    public = load_pem_public_key((world["folder"] / "key.pub").read_bytes())
    key = SSlibKey.from_crypto(public, keyid=document["signatures"][0]["keyid"])
    envelope = Envelope.from_dict(json.loads(raw))
    assert list(envelope.verify([key], 1)) == [key.keyid]
    statement = json.loads(envelope.payload)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://lockgen.dev/certificate/v1"
    assert statement["subject"] == [
        {"name": f"{world['host']}/team/img", "digest": {"sha256": world["digest"].split(":")[1]}}
    ]
    assert statement["predicate"] == json.loads(world["certificate"].read_text())["certificate"]
    changed = Envelope.from_dict(json.loads(raw))
    changed.payload = changed.payload.replace(b'"passed":true', b'"passed":fals', 1)
    with pytest.raises(VerificationError):
        changed.verify([key], 1)


def test_attesting_again_pushes_the_same_bytes_and_adds_no_entry(world: dict) -> None:
    host, folder, wire = world["host"], world["folder"], world["wire"]
    envelope = wire.envelope("team/img", world["artifacts"][0])
    again = run_cli(
        "attest",
        f"docker://{host}/team/img@{world['digest']}",
        str(world["certificate"]),
        "--key",
        str(folder / "key"),
        "--insecure",
    )
    assert again.returncode == 0, again.stderr
    assert (
        again.stdout.split() == world["artifacts"][:1]
    )  # Ed25519 is deterministic: the same envelope, the same manifest
    assert wire.envelope("team/img", world["artifacts"][0]) == envelope
    index = wire.json(f"team/img/manifests/sha256-{world['digest'].split(':')[1]}")
    assert [e["digest"] for e in index["manifests"]] == world["artifacts"]


def _fresh_image(world: dict, repository: str) -> str:
    pushed = run_cli("push", str(world["folder"] / "img"), f"docker://{world['host']}/{repository}:sm90", "--insecure")
    assert pushed.returncode == 0, pushed.stderr
    attested = run_cli(
        "attest",
        f"docker://{world['host']}/{repository}:sm90",
        str(world["certificate"]),
        "--key",
        str(world["folder"] / "key"),
        "--insecure",
    )
    assert attested.returncode == 0, attested.stderr
    return attested.stdout.strip()


def _changed_payload(envelope: bytes) -> bytes:
    document = json.loads(envelope)
    payload = base64.b64decode(document["payload"]).replace(b'"arch":"cpu"', b'"arch":"cpv"', 1)
    return json.dumps({**document, "payload": base64.b64encode(payload).decode()}).encode()


@pytest.mark.parametrize(
    "case, reason",
    [
        ("payload", "its signature does not verify with key "),
        ("key", "its signature does not verify with key "),
        ("subject", "the statement's subject is sha256:"),
    ],
)
def test_a_forged_or_mismatched_attestation_is_refused(world: dict, case: str, reason: str) -> None:
    host, folder, wire = world["host"], world["folder"], world["wire"]
    repository = f"team/forged-{case}"
    good = _fresh_image(world, repository)
    public = folder / "key.pub"
    if case == "payload":
        wire.attach(repository, wire.image(repository, "sm90"), _changed_payload(wire.envelope(repository, good)))
    elif case == "key":
        public = folder / "stranger.pub"
    else:  # a valid attestation of the other image, copied onto this one
        other_cert = make_certificate(folder / "other.cert.json", folder / "key", image_digest=world["other"])
        copied = run_cli(
            "attest", f"docker://{host}/team/other:sm90", str(other_cert), "--key", str(folder / "key"), "--insecure"
        )
        assert copied.returncode == 0, copied.stderr
        wire.attach(repository, wire.image(repository, "sm90"), wire.envelope("team/other", copied.stdout.strip()))
    listed = run_cli("certs", f"docker://{host}/{repository}:sm90", "--key", str(public), "--insecure")
    assert listed.returncode == 1 and "Traceback" not in listed.stderr
    refused = [line for line in listed.stdout.splitlines() if line.startswith("REFUSED ")]
    assert len(refused) == 1 and reason in refused[0], listed.stdout
    if case == "key":
        assert f"@{good}: " in refused[0] and "(it names key " in refused[0]
    else:
        assert f"@{good}  [image; signature valid" in listed.stdout  # the real one still verifies
    errors = [line for line in listed.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "1 of " in errors[0] and listed.stderr.splitlines()[-1].startswith("hint:")


def test_attest_refuses_before_pushing_anything(world: dict) -> None:
    host, folder, wire = world["host"], world["folder"], world["wire"]
    repository = "team/refusals"
    pushed = run_cli("push", str(folder / "img"), f"docker://{host}/{repository}:sm90", "--insecure")
    assert pushed.returncode == 0
    fallback = f"{repository}/manifests/sha256-{world['digest'].split(':')[1]}"
    other_image = make_certificate(folder / "for-other.cert.json", folder / "key", image_digest=world["other"])
    other_lock = make_certificate(folder / "other-lock.cert.json", folder / "key", lock_sha256="ab" * 32)
    for args, expected in [
        ((str(other_image), "--key", str(folder / "key")), "the certificate covers image sha256:"),
        ((str(other_lock), "--key", str(folder / "key")), "the certificate covers lock sha256 abababab"),
        ((str(world["certificate"]), "--key", str(folder / "stranger")), "the certificate is signed by key "),
        (
            (
                str(world["certificate"]),
                "--key",
                str(folder / "key"),
                "--sbom",
                str(folder / "other-img" / "sbom.cdx.json"),
            ),
            "is not the SBOM of docker://",
        ),
    ]:
        refused = run_cli("attest", f"docker://{host}/{repository}:sm90", *args, "--insecure")
        errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
        assert refused.returncode == 1 and len(errors) == 1 and expected in errors[0], refused.stderr
        assert refused.stderr.splitlines()[-1].startswith("hint:") and "Traceback" not in refused.stderr
        assert wire.get(fallback)[0] == 404 and refused.stdout == ""
    usage = run_cli("attest", f"{host}/{repository}:sm90", str(world["certificate"]), "--key", str(folder / "key"))
    assert usage.returncode == 1 and "error: `" in usage.stderr and "is not a registry reference" in usage.stderr
    missing = run_cli("certs", f"docker://{host}/team/none:x", "--insecure")
    assert missing.returncode == 1 and "error: there is no image at docker://" in missing.stderr


def test_a_bare_metal_certificate_binds_through_the_image_lock(world: dict) -> None:
    host, folder = world["host"], world["folder"]
    repository = "team/bare-metal"
    assert run_cli("push", str(folder / "img"), f"docker://{host}/{repository}:sm90", "--insecure").returncode == 0
    from lockgen.digests import file_digest

    certificate = make_certificate(folder / "bare.cert.json", folder / "key", lock_sha256=file_digest(world["lock"]))
    attested = run_cli(
        "attest", f"docker://{host}/{repository}:sm90", str(certificate), "--key", str(folder / "key"), "--insecure"
    )
    assert attested.returncode == 0, attested.stderr
    statement = json.loads(
        base64.b64decode(json.loads(world["wire"].envelope(repository, attested.stdout.strip()))["payload"])
    )
    assert statement["subject"] == [{"name": "_", "digest": {"sha256": file_digest(world["lock"])}}]
    listed = run_cli("certs", f"docker://{host}/{repository}:sm90", "--key", str(folder / "key.pub"), "--insecure")
    assert listed.returncode == 0 and "[lock; signature valid" in listed.stdout, listed.stdout + listed.stderr


def test_require_pass_admits_only_a_verified_passing_certificate_of_the_arch(world: dict) -> None:
    """The gate `lockgen fleet kubernetes` puts before a training pod: `certs docker://REF --key --require-pass
    ARCH`."""
    host, folder, public = world["host"], world["folder"], str(world["folder"] / "key.pub")
    image = f"docker://{host}/team/img@{world['digest']}"
    assert run_cli("certs", image, "--key", public, "--require-pass", "cpu", "--insecure").returncode == 0
    other_arch = run_cli("certs", image, "--key", public, "--require-pass", "SM_90", "--insecure")
    assert other_arch.returncode == 1 and "passed on sm90 (it carries: cpu PASS)" in other_arch.stderr, (
        other_arch.stderr
    )
    assert "hint:" in other_arch.stderr and "Traceback" not in other_arch.stderr
    repository = "team/failed"
    assert run_cli("push", str(folder / "img"), f"docker://{host}/{repository}:sm90", "--insecure").returncode == 0
    failed = make_certificate(folder / "failed.cert.json", folder / "key", image_digest=world["digest"], passed=False)
    assert (
        run_cli(
            "attest", f"docker://{host}/{repository}:sm90", str(failed), "--key", str(folder / "key"), "--insecure"
        ).returncode
        == 0
    )
    refused = run_cli(
        "certs",
        f"docker://{host}/{repository}@{world['digest']}",
        "--key",
        public,
        "--require-pass",
        "cpu",
        "--insecure",
    )
    assert refused.returncode == 1 and "(it carries: cpu FAIL)" in refused.stderr, refused.stderr
    unsigned = run_cli("certs", image, "--require-pass", "cpu", "--insecure")
    assert unsigned.returncode == 2 and "--require-pass judges an image's signed attestations" in unsigned.stderr


class _Gate(BaseHTTPRequestHandler):
    """A registry front that demands credentials (Basic, or a bearer token from its /token realm) and
    forwards authorized requests to the loopback registry behind it."""

    upstream = ""
    scheme = "bearer"
    seen_authorization: list[str] = []

    def log_message(self, *_: object) -> None:
        pass

    def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        basic = "Basic " + base64.b64encode(b"robot:s3cret-pass").decode()
        given = self.headers.get("Authorization", "")
        self.seen_authorization.append(given)
        if self.path.startswith("/token"):
            ok = given == basic and "scope=repository%3Ateam%2Fgated" in self.path
            return self._reply(200 if ok else 401, json.dumps({"token": "tkn-4711"}).encode() if ok else b"")
        if given != (basic if self.scheme == "basic" else "Bearer tkn-4711"):
            port = self.server.server_address[1]
            challenge = (
                'Basic realm="gate"'
                if self.scheme == "basic"
                else "Bearer "
                f'realm="http://127.0.0.1:{port}/token",service="gate",scope="repository:team/gated:pull,push"'
            )
            return self._reply(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', {"WWW-Authenticate": challenge})
        length = int(self.headers.get("Content-Length") or 0)
        request = urllib.request.Request(
            f"http://{self.upstream}{self.path}",
            data=self.rfile.read(length) if length else None,
            method=self.command,
            headers={k: v for k, v in self.headers.items() if k in ("Accept", "Content-Type", "Content-Length")},
        )
        try:
            with urllib.request.urlopen(request) as answer:
                status, headers, body = answer.status, answer.headers, answer.read()
        except urllib.error.HTTPError as error:
            status, headers, body = error.code, error.headers, error.read()
        keep = {
            k: v.replace(self.upstream, f"127.0.0.1:{self.server.server_address[1]}")
            for k, v in headers.items()
            if k in ("Content-Type", "Location", "Docker-Content-Digest", "OCI-Subject")
        }
        self._reply(status, body, keep)

    do_GET = do_HEAD = do_PUT = do_POST = _handle


@pytest.mark.parametrize("scheme, where", [("bearer", "REGISTRY_AUTH_FILE"), ("basic", "docker config")])
def test_credentials_meet_the_registry_challenge_and_never_show(
    world: dict, tmp_path: Path, scheme: str, where: str
) -> None:
    gate = type("Gate", (_Gate,), {"upstream": world["host"], "scheme": scheme, "seen_authorization": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), gate)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    front = f"127.0.0.1:{server.server_address[1]}"
    pushed = run_cli("push", str(world["folder"] / "img"), f"docker://{world['host']}/team/gated:sm90", "--insecure")
    assert pushed.returncode == 0, pushed.stderr
    home = tmp_path / "home"
    isolated = {
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "REGISTRY_AUTH_FILE": "",
    }
    try:
        refused = run_cli("certs", f"docker://{front}/team/gated:sm90", "--insecure", env=isolated)
        assert (
            refused.returncode == 1
            and "answered 401 (UNAUTHORIZED)" in refused.stderr
            and "skopeo login" in refused.stderr
        )
        entry = {"auth": base64.b64encode(b"robot:s3cret-pass").decode()}
        if where == "REGISTRY_AUTH_FILE":
            auth_file = tmp_path / "auth.json"
            auth_file.write_text(json.dumps({"auths": {f"{front}/team": entry, front: {"auth": "bm90OnRoaXM="}}}))
            environment = {**isolated, "REGISTRY_AUTH_FILE": str(auth_file)}
        else:
            (home / ".docker").mkdir(parents=True)
            (home / ".docker" / "config.json").write_text(json.dumps({"auths": {f"https://{front}/v1/": entry}}))
            environment = isolated
        attested = run_cli(
            "attest",
            f"docker://{front}/team/gated:sm90",
            str(world["certificate"]),
            "--key",
            str(world["folder"] / "key"),
            "--insecure",
            env=environment,
        )
        assert attested.returncode == 0, attested.stderr
        listed = run_cli(
            "certs",
            f"docker://{front}/team/gated:sm90",
            "--key",
            str(world["folder"] / "key.pub"),
            "--insecure",
            env=environment,
        )
        assert listed.returncode == 0 and "[image; signature valid" in listed.stdout, listed.stderr
        assert f"docker://{front}/team/gated@{attested.stdout.strip()}" in listed.stdout
        for output in (refused, attested, listed):
            assert "s3cret" not in output.stdout + output.stderr and "tkn-4711" not in output.stdout + output.stderr
        assert any(a.startswith("Bearer " if scheme == "bearer" else "Basic ") for a in gate.seen_authorization)
    finally:
        server.shutdown()
        server.server_close()


def test_the_pure_parts_follow_their_specifications() -> None:
    """DSSE's PAE test vector, the distribution-spec's referrers-tag table, the merge that keeps other tools'
    entries and refuses a tag that is not an index, and references lockgen refuses to guess at."""
    from lockgen.core.certificate.attestation import merged_referrers, pae, read_envelope, referrers_tag
    from lockgen.core.image.image_reference import parse_reference
    from lockgen.errors import LockFormatError, UserError

    assert (
        pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert referrers_tag("sha256:" + "a" * 64) == "sha256-" + "a" * 64
    assert referrers_tag("sha512:" + "a" * 128) == "sha512-" + "a" * 64
    assert (
        referrers_tag(
            "test+algorithm+using+algorithm+separators+and+lots+of+characters+to+excercise+overall+truncation:"
            "alsoSome=InTheEncodedSectionToShowHyphenReplacementAndLotsAndLotsOfCharactersToExcerciseEncodedTruncation"
        )
        == "test-algorithm-using-algorithm-s-alsoSome-InTheEncodedSectionToShowHyphenReplacementAndLotsAndLot"
    )
    foreign = {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": "sha256:" + "1" * 64,
        "size": 9,
        "artifactType": "application/vnd.dev.sigstore.bundle.v0.3+json",
    }
    ours = {**foreign, "digest": "sha256:" + "2" * 64, "artifactType": "application/vnd.dsse.envelope.v1+json"}
    existing = json.dumps(
        {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [foreign]}
    ).encode()
    merged = merged_referrers(existing, ours, "sha256-x")
    assert json.loads(merged)["manifests"] == [foreign, ours] and merged_referrers(merged, ours, "sha256-x") is None
    with pytest.raises(LockFormatError, match="holds something other than an image index"):
        merged_referrers(b'{"schemaVersion":2,"config":{}}', ours, "sha256-x")
    urlsafe = json.dumps(
        {
            "payload": base64.urlsafe_b64encode(b"\xfb\xff").decode().rstrip("="),
            "payloadType": "t",
            "signatures": [{"sig": "AA"}],
        }
    ).encode()
    assert read_envelope(urlsafe).payload == b"\xfb\xff"  # DSSE: verifiers accept URL-safe base64, padded or not
    assert parse_reference("docker://localhost:5000/a/b@sha256:" + "f" * 64).reference == "sha256:" + "f" * 64
    for text in (
        "docker://team/img:tag",
        "docker://reg.example/Img:x",
        "docker://reg.example/img@sha256:short",
        "img:tag",
    ):
        with pytest.raises(UserError):
            parse_reference(text)
    # `$` matches before a final newline: a reference ending in one passed, and errors echoed it on two lines
    for text in (
        "docker://reg.example/img:tag\n",
        "docker://reg.example/img\n",
        "docker://reg.example/img@sha256:" + "f" * 64 + "\n",
        "docker://reg.example\n/img",
    ):
        with pytest.raises(UserError) as refused:
            parse_reference(text)
        assert "\n" not in refused.value.message


def test_push_attest_pushes_and_attaches_in_one_go(world: dict) -> None:
    host, folder = world["host"], world["folder"]
    pushed = run_cli(
        "push",
        str(folder / "img"),
        f"docker://{host}/team/together:sm90",
        "--insecure",
        "--attest",
        str(world["certificate"]),
        "--key",
        str(folder / "key"),
    )
    assert pushed.returncode == 0 and pushed.stdout.strip() == world["digest"], pushed.stderr
    listed = run_cli("certs", f"docker://{host}/team/together:sm90", "--key", str(folder / "key.pub"), "--insecure")
    assert listed.returncode == 0 and "[image; signature valid (key " in listed.stdout, listed.stdout + listed.stderr
    half = run_cli(
        "push",
        str(folder / "img"),
        f"docker://{host}/team/together:sm90",
        "--insecure",
        "--attest",
        str(world["certificate"]),
    )
    assert half.returncode == 2 and "--attest and --key go together" in half.stderr


@pytest.mark.parametrize(
    "bad", ["no certificate", "another image's certificate", "a stranger's key", "another lock's SBOM"]
)
def test_push_attest_refuses_before_the_first_byte_is_pushed(world: dict, bad: str) -> None:
    """push --attest pushed the image and only then read the certificate (found by an attack battery): a refused
    attestation left the tag in the registry. Whatever attaching would refuse is refused first; nothing is pushed."""
    host, folder = world["host"], world["folder"]
    certificate, key, sbom = world["certificate"], folder / "key", folder / "img" / "sbom.cdx.json"
    if bad == "no certificate":
        certificate = folder / "no-such.cert.json"
    elif bad == "another image's certificate":
        certificate = make_certificate(folder / "other.cert.json", folder / "key", image_digest=world["other"])
    elif bad == "a stranger's key":
        key = folder / "stranger"
    else:
        sbom = folder / "other-img" / "sbom.cdx.json"
    repository = f"team/refused-{bad.split()[1].replace(chr(39), '')}"
    done = run_cli(
        "push",
        str(folder / "img"),
        f"docker://{host}/{repository}:sm90",
        "--insecure",
        "--attest",
        str(certificate),
        "--key",
        str(key),
        "--sbom",
        str(sbom),
    )
    assert (
        done.returncode == 1 and "error:" in done.stderr and "hint:" in done.stderr and "Traceback" not in done.stderr
    ), done.stderr
    assert "pushing" not in done.stderr, done.stderr
    status, _ = world["wire"].get(f"{repository}/manifests/sm90", "application/vnd.oci.image.manifest.v1+json")
    assert status == 404, f"{bad}: the image was pushed"
