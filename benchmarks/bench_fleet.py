"""Benchmark `lockgen fleet status FOLDER --key PUB --json` (and `--html`) at fleet size (issue 48's anchor: 10,000
valid signed certificates in <= 2 s and <= 200 MB; 100,000 without memory growing with the count).

N certificates are written into a temporary folder, each signed with Ed25519 as `lockgen verify --key` signs
(`--form file`, the default: over the file's own bytes up to the body's end, `signing.signed_file`; `--form
canonical`: the older form, over the canonical JSON of the body; the file is the canonical rendering either way):
the H100 certificate of `envs/examples/numerics-fingerprint/` with its node (the file's name), its time, its bf16
GEMM figure and, on one node in 500, its TF32 digest changed. The command runs in a child process, with a
LOCKGEN_HOME of its own: a first run (no kept verdict: every certificate parsed and verified, and its verdict kept)
then a repeated run (every verdict kept: each file read and hashed); their wall time, CPU time (user + system) and
peak RSS (`ru_maxrss` of the child, from `resource.getrusage(RUSAGE_CHILDREN)` in a fresh measuring process each
run) are printed, medians of `--runs` runs, beside the anchor's targets and the floor's (a bare reader that parses
and verifies every file: of the older form, `json.loads` and the canonical JSON encoded again; of a file signed
over its own bytes, the signature over the bytes and the body's `json.loads`).

    python benchmarks/bench_fleet.py [--counts 1000 10000 100000] [--runs 3] [--html] [--against TREE]
                                     [--form file|canonical] [--against-form file|canonical]
    python benchmarks/bench_fleet.py --smoke                    (200 certificates, one run, not judged: CI)

`--against TREE` (a checkout or `git archive` of another lockgen) runs that tree's `lockgen fleet status` on the
same fleet in the same rounds, alternating with this tree's (each with its own LOCKGEN_HOME, run from that tree's
folder so `python -m lockgen` is its own), and prints the ratios this tree / TREE; with `--against-form canonical`
TREE reads the same certificates signed in the older form (a lockgen before the form signed over the file's own
bytes refuses that form).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import add_smoke, median

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO / "envs" / "examples" / "numerics-fingerprint" / "node1-quick.cert.json"
TARGET_WALL_S, TARGET_RSS_MB, TARGET_COUNT = 2.0, 200.0, 10_000
CREATED, GEMM, TF32 = (
    "2026-12-06T10:51:02Z",
    "788.12345678",
    "6112472e99ff98a80d261e2df115d6b223b3e1bfbf97758c7b22bb87da22dd92",
)


def _templates() -> tuple[str, str]:
    """The canonical file text and the canonical body JSON of the template certificate, with placeholders of
    fixed width where each certificate differs (so filling them in keeps both canonical)."""
    from lockgen.adapters.node.signing import render
    from lockgen.digests import canonical_json

    body = json.loads(TEMPLATE.read_text())["certificate"]
    body["created"] = CREATED
    body["figures"]["gemm"]["bf16"]["value"] = float(GEMM)
    assert body["numerics"]["digests"]["gemm_tf32"] == TF32
    return render(
        {"certificate": body, "signature": {"algorithm": "ed25519", "key_id": "K" * 16, "value": "S" * 88}}
    ), canonical_json(body).decode()


def _file_template(private_key: Path) -> str:
    """The template certificate signed over its own bytes (`signing.signed_file`), its signature's value to be
    replaced: the same placeholders as `_templates`."""
    from lockgen.adapters.node.signing import signed_file

    body = json.loads(_templates()[1])
    return signed_file(body, private_key)


def write_fleet(folder: Path, count: int, private_key: Path, form: str = "file") -> None:
    """`count` signed certificates under `folder` (100 nodes a sub-folder, as several `--certs` folders), each
    signed over its own bytes (`form` "file", what `lockgen verify --key` writes) or over its body's canonical
    JSON ("canonical", the older form)."""
    from cryptography.hazmat.primitives import serialization

    from lockgen.adapters.node.signing import key_id

    key = serialization.load_pem_private_key(private_key.read_bytes(), None)
    identity = key_id(key.public_key())  # type: ignore[union-attr]
    text, canonical = _templates()
    text = text.replace("K" * 16, identity)
    framed = _file_template(private_key)
    head = framed[: framed.rindex(',\n  "signature": ')]  # what the signature is over: the file up to the body's end
    frame = framed[len(head) :]
    value = frame[frame.rindex('"value": "') + 10 :][:88]
    for node in range(count):
        # in November: never after the clock of whoever runs it (a status refuses a certificate from the future)
        created = f"2026-11-{1 + node % 28:02d}T{node % 24:02d}:{node % 60:02d}:{(node // 60) % 60:02d}Z"
        gemm = f"{780 + node % 100 + 0.12345678:.8f}"  # as many characters as GEMM, and its own shortest repr
        tf32 = "f" * 64 if node % 500 == 499 else TF32
        if form == "file":
            signed = head.replace(CREATED, created).replace(GEMM, gemm).replace(TF32, tf32)
            signature = base64.b64encode(key.sign(signed.encode())).decode()  # type: ignore[union-attr]
            document = signed + frame.replace(value, signature)
        else:
            filled = canonical.replace(CREATED, created).replace(GEMM, gemm).replace(TF32, tf32)
            signature = base64.b64encode(key.sign(filled.encode())).decode()  # type: ignore[union-attr]
            document = (
                text.replace(CREATED, created).replace(GEMM, gemm).replace(TF32, tf32).replace("S" * 88, signature)
            )
        assert len(signature) == 88
        part = folder / f"rack{node // 100:04d}"
        if node % 100 == 0:
            part.mkdir(parents=True)
        (part / f"node{node:06d}.cert.json").write_text(document)


FLOOR = """
import base64, json, os, sys
from pathlib import Path
from cryptography.hazmat.primitives import serialization
key = serialization.load_pem_public_key(Path(sys.argv[2]).read_bytes())
FILE = sys.argv[3] == "file"
paths = sorted(Path(sys.argv[1]).rglob("*.cert.json"))
cores, share, children = len(os.sched_getaffinity(0)), 0, []
for other in range(1, cores):
    pid = os.fork()
    if pid == 0:
        share, children = other, []
        break
    children.append(pid)
for path in paths[share::cores]:
    data = path.read_bytes()
    if FILE:  # signed over its own bytes: the signature over them, then the body parsed
        end = data.rindex(b',\\n  "signature": ')
        key.verify(base64.b64decode(data[end:].split(b'"value": "')[1][:88]), data[:end])
        json.loads(data[len(b'{\\n  "certificate": ') : end])
        continue
    document = json.loads(data)
    body = json.dumps(document["certificate"], sort_keys=True, separators=(",", ":")).encode()
    key.verify(base64.b64decode(document["signature"]["value"]), body)
if share:
    os._exit(0)
for pid in children:
    os.waitpid(pid, 0)
"""

MEASURE = """
import resource, subprocess, sys, time
started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
print(done.returncode, wall, cpu, after.ru_maxrss / 1024, done.stderr.decode()[-300:].replace(chr(10), " | "))
"""


def measured(command: list[str], env: dict[str, str], tree: Path = REPO) -> tuple[int, float, float, float, str]:
    """(exit code, wall s, CPU s, peak RSS MB of the command's largest process) of one run, measured by a fresh
    process whose only child is the command (RUSAGE_CHILDREN's maxrss is then the command's own), run in `tree`
    (`python -m lockgen` imports the lockgen of the folder it runs in)."""
    line = subprocess.run(
        [sys.executable, "-c", MEASURE, *command], capture_output=True, text=True, check=True, env=env, cwd=tree
    ).stdout
    code, wall, cpu, rss, tail = line.rstrip("\n").split(" ", 4)
    return int(code), float(wall), float(cpu), float(rss), tail


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--html", action="store_true", help="also time --html and print the page's size")
    parser.add_argument("--against", type=Path, help="another lockgen tree, run on the same fleet in the same rounds")
    parser.add_argument(
        "--against-form",
        choices=("file", "canonical"),
        help="the form of the fleet TREE reads (default: --form's; `canonical` for a tree that predates the other)",
    )
    parser.add_argument(
        "--form",
        choices=("file", "canonical"),
        default="file",
        help="what each signature is over: the file's own bytes (what lockgen verify --key writes), or the body's "
        "canonical JSON (the older form)",
    )
    add_smoke(parser)
    args = parser.parse_args()
    counts, runs = ([200], 1) if args.smoke else (args.counts, args.runs)
    print(
        f"lockgen fleet status FOLDER --key PUB --json on {os.cpu_count()} cores (load average "
        f"{os.getloadavg()[0]:.1f}); certificates signed over "
        + ("their own bytes" if args.form == "file" else "their body's canonical JSON")
    )
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as scratch:
        root = Path(scratch)
        home = root / "home"  # its own LOCKGEN_HOME: the kept verdicts are removed before each first run
        env = {**os.environ, "NO_COLOR": "1", "LOCKGEN_HOME": str(home)}
        env.pop("LOCKGEN_REPARSE", None)
        key = root / "signing"
        subprocess.run(
            [sys.executable, "-m", "lockgen", "keygen", "--out", str(key)], check=True, env=env, capture_output=True
        )
        for count in counts:
            folder = root / f"fleet-{count}"
            started = time.perf_counter()
            write_fleet(folder, count, key, args.form)
            size = sum(path.stat().st_size for path in folder.rglob("*.cert.json"))
            print(f"{count} certificates, {size / 1e6:.0f} MB, written in {time.perf_counter() - started:.1f} s")
            theirs = folder  # the fleet the other tree reads: this one, or the same certificates in another form
            if args.against is not None and (args.against_form or args.form) != args.form:
                theirs = root / f"fleet-{count}-{args.against_form}"
                write_fleet(theirs, count, key, args.against_form)
            command = [sys.executable, "-m", "lockgen", "fleet", "status", str(folder), "--key", f"{key}.pub", "--json"]
            variants = [("--json", command)] + (
                [("--json --html", [*command, "--html", str(root / "fleet.html")])] if args.html else []
            )
            floor = [sys.executable, "-c", FLOOR, str(folder), f"{key}.pub", args.form]
            for name, argv in variants:
                first, repeated, floors = [], [], []
                other: dict[str, list[tuple[int, float, float, float, str]]] = {"first run": [], "repeated run": []}
                for _ in range(runs):  # alternating, so all see the same load
                    shutil.rmtree(home / "kept", ignore_errors=True)
                    first.append(measured(argv, env))  # no kept verdict: every certificate parsed and verified
                    repeated.append(measured(argv, env))  # every verdict kept: each file read and hashed
                    if args.against is not None:  # the other tree, its own home, in the same round
                        shutil.rmtree(root / "home-against", ignore_errors=True)
                        against = {**env, "LOCKGEN_HOME": str(root / "home-against")}
                        their_argv = [str(theirs) if part == str(folder) else part for part in argv]
                        other["first run"].append(measured(their_argv, against, args.against.resolve()))
                        other["repeated run"].append(measured(their_argv, against, args.against.resolve()))
                    floors.append(measured(floor, env))
                    if floors[-1][0] != 0:
                        raise SystemExit(f"the floor exited {floors[-1][0]}: {floors[-1][4]}")
                floor_wall, floor_cpu = (median([r[i] for r in floors]) or 0.0 for i in (1, 2))
                for when, results in (("first run", first), ("repeated run", repeated)):
                    code, _, _, _, tail = results[-1]
                    if code != (
                        1 if count >= 500 else 0
                    ):  # one node in 500 computes other TF32 bits: the status names it and exits 1
                        raise SystemExit(f"fleet status exited {code}: {tail}")
                    wall, cpu, rss = (median([r[i] for r in results]) or 0.0 for i in (1, 2, 3))
                    verdict = (
                        ""
                        if args.smoke or count != TARGET_COUNT
                        else f" (targets {TARGET_WALL_S} s, {TARGET_RSS_MB:.0f} MB: "
                        f"{'within' if wall <= TARGET_WALL_S and rss <= TARGET_RSS_MB else 'OVER'})"
                    )
                    print(
                        f"  {name}, {when}: wall {wall:.2f} s, CPU {cpu:.2f} s (/ 2 cores: {cpu / 2:.2f} s), "
                        f"peak RSS {rss:.0f} MB, "
                        f"{1e6 * wall / count:.0f} us a certificate, median of {runs}{verdict}"
                    )
                    print(f"    lockgen / floor: CPU {cpu / floor_cpu:.2f}, wall {wall / floor_wall:.2f}")
                    if other[when]:
                        code_b, *_, tail_b = other[when][-1]
                        if code_b != code:
                            raise SystemExit(f"{args.against}'s fleet status exited {code_b}: {tail_b}")
                        wall_b, cpu_b, rss_b = (median([r[i] for r in other[when]]) or 0.0 for i in (1, 2, 3))
                        print(
                            f"    {args.against}: wall {wall_b:.2f} s, CPU {cpu_b:.2f} s, peak RSS {rss_b:.0f} MB; "
                            f"this tree / it: wall {wall / wall_b:.2f}, CPU {cpu / cpu_b:.2f}"
                        )
                print(f"  floor (read, parse, Ed25519 verify): wall {floor_wall:.2f} s, CPU {floor_cpu:.2f} s")
                if "--html" in argv:
                    print(f"  the HTML page: {(root / 'fleet.html').stat().st_size / 1e6:.2f} MB")
            subprocess.run(["rm", "-rf", str(folder), str(theirs)], check=True)


if __name__ == "__main__":
    main()
