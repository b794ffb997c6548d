"""The numerics fingerprint (issue 48): the kernel's digests are stable across processes on the CPU, nodes of
one key whose digests differ are named with the digests and the likely cause (`fleet status`, `cert compare`),
and a pinned reference judges a node alone (`verify --expect-numerics`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from pydantic import ValidationError

from lockgen.core.certificate.numerics import NumericsReference, compare_pair, likely_cause, reference_check
from lockgen.core.certificate.numerics_votes import CountedFingerprint, Member, NumericsDifference, OddFingerprints
from lockgen.model.fingerprint import KEY_FIELDS, fingerprint_of, plain_fingerprint
from lockgen.model.json_values import JsonObject
from lockgen.model.certificate import Certificate, CertificateBody, Numerics, NumericsKey
from tests.conftest import run_cli

EVIDENCE = Path(__file__).resolve().parent.parent / "envs" / "examples" / "numerics-fingerprint"
DIGESTS = ("adamw_bf16", "conv_bf16", "gemm_bf16", "gemm_fp16", "gemm_fp32", "gemm_fp8", "gemm_tf32")


def odd_nodes(latest: Sequence[tuple[str, CertificateBody]]) -> tuple[list[NumericsDifference], int]:
    """The oracle of a fleet's numerics (the fleet status counts kept fingerprints instead, `fleet_status`): the
    nodes whose digests differ from their key's majority, from each node's latest certificate held whole (in node
    order), and how many nodes were compared. Nodes alike are counted once per fingerprint and stack object, as a
    status's rows share them."""
    counted: list[CountedFingerprint] = []
    index_of: dict[tuple[int, int], int] = {}
    members: list[Member] = []
    for node, body in latest:
        if body.numerics is None:
            continue
        stack: JsonObject = body.stack
        index = index_of.setdefault((id(body.numerics), id(stack)), len(counted))
        if index == len(counted):
            counted.append(CountedFingerprint(fingerprint_of(body.numerics), stack, 0))
        counted[index] = CountedFingerprint(counted[index].numerics, stack, counted[index].nodes + 1)
        members.append((node, index))
    judged = OddFingerprints(counted)
    return judged.differences(members), judged.compared


def _device_body(name: str = "node1-quick") -> CertificateBody:
    return Certificate.model_validate(json.loads((EVIDENCE / f"{name}.cert.json").read_text())).certificate


TEMPLATE = _device_body()


def _body(
    digests: dict[str, str],
    settings: dict[str, str] | None = None,
    foreign: list[str] | None = None,
    environment: str | None = "e" * 64,
) -> CertificateBody:
    """The H100 certificate with these digests, settings and foreign libraries, and the environment digest."""
    assert TEMPLATE.numerics is not None
    key = TEMPLATE.numerics.key.model_copy(update={"environment_digest": environment})
    stack = {**TEMPLATE.stack, "settings": settings or {}, "libraries": {"foreign": foreign or []}}
    return TEMPLATE.model_copy(update={"numerics": Numerics(key=key, digests=digests), "stack": stack})


def _digests(seed: int) -> dict[str, str]:
    return {name: f"{seed:02d}{index:062d}" for index, name in enumerate(DIGESTS)}


TEXT_OR_NOT = st.one_of(st.none(), st.text(max_size=4), st.integers(0, 3), st.booleans())


@settings(max_examples=300, deadline=None)
@given(
    key=st.dictionaries(st.sampled_from((*KEY_FIELDS, "extra")), TEXT_OR_NOT, max_size=9),
    digests=st.one_of(
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 2)), TEXT_OR_NOT), st.lists(st.text())
    ),
    more=st.sampled_from([{}, {"more": 1}]),
    whole=st.booleans(),
)
def test_a_kept_fingerprint_is_read_exactly_when_the_model_accepts_it(
    key: dict, digests: object, more: dict, whole: bool
) -> None:
    """`fleet status` reads a kept verdict's fingerprint without the models (`plain_fingerprint`): of the values
    marshal reads back (dicts, lists, text, numbers, None: no subclasses), it accepts exactly those `Numerics`
    accepts (a key of NumericsKey's fields, those with a default may be absent; text only; nothing more), and reads
    them as the model's fingerprint reads (`fingerprint_of`)."""
    assert KEY_FIELDS == tuple(NumericsKey.model_fields)
    if whole:  # a key the model would accept, before anything else is drawn into it
        key = {name: f"{name}-1" for name in KEY_FIELDS} | key
    value = {"key": key, "digests": digests, **more}
    try:
        model: Numerics | None = Numerics.model_validate(value)
    except ValidationError:
        model = None
    try:
        plain = plain_fingerprint(value)
    except ValueError:
        plain = None
    assert (model is None) == (plain is None), value
    if model is not None and plain is not None:
        assert plain == fingerprint_of(model) and plain.as_json() == model.model_dump()


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(3, 9), odd=st.integers(0, 8), digest=st.sampled_from(DIGESTS))
def test_the_node_whose_one_digest_differs_is_named_with_it(nodes: int, odd: int, digest: str) -> None:
    odd %= nodes
    latest = []
    for node in range(nodes):
        digests = _digests(1)
        if node == odd:
            digests[digest] = "f" * 64
        latest.append((f"n{node}", _body(digests)))
    found, compared = odd_nodes(latest)
    assert compared == nodes
    assert [(d.node, d.digests) for d in found] == [(f"n{odd}", (digest,))]
    assert found[0].against == (f"the {nodes - 1} other nodes of its key" if nodes > 2 else "the other node of its key")
    assert "hardware" in found[0].cause  # same settings, libraries and software: nothing else explains it


@settings(max_examples=30, deadline=None)
@given(digest=st.sampled_from(DIGESTS))
def test_two_nodes_that_differ_are_both_named_with_no_majority(digest: str) -> None:
    other = _digests(1) | {digest: "f" * 64}
    found, compared = odd_nodes([("a", _body(_digests(1))), ("b", _body(other))])
    assert compared == 2 and [(d.node, d.digests) for d in found] == [("a", (digest,)), ("b", (digest,))]
    assert all("no value has a majority" in d.against and "--expect-numerics" in d.against for d in found)


@settings(max_examples=40, deadline=None)
@given(kinds=st.lists(st.integers(0, 3), min_size=2, max_size=12))
def test_nodes_sharing_one_fingerprint_object_are_judged_as_nodes_with_copies(kinds: list[int]) -> None:
    """`odd_nodes` works out what depends on a fingerprint alone once per object (a fleet status's rows share
    one among nodes alike): the same nodes, digests, peers and causes as when every node holds its own copy."""
    variants = [
        _body(_digests(1)),
        _body(_digests(1) | {"gemm_tf32": "f" * 64}, settings={"NVIDIA_TF32_OVERRIDE": "0"}),
        _body(_digests(1) | {"gemm_bf16": "e" * 64}, foreign=["/opt/other/libcublas.so.13"]),
        _body(_digests(2)),
    ]
    shared = [(f"n{index}", variants[kind]) for index, kind in enumerate(kinds)]
    copies = [(node, body.model_copy(deep=True)) for node, body in shared]
    assert odd_nodes(shared) == odd_nodes(copies)


@settings(max_examples=80, deadline=None)
@given(
    fleet=st.lists(
        st.tuples(st.integers(0, 5), st.dictionaries(st.sampled_from(DIGESTS), st.sampled_from("abc"), max_size=3)),
        min_size=1,
        max_size=14,
    )
)
def test_counted_fingerprints_name_the_nodes_a_vote_per_node_names(fleet: list) -> None:
    """`odd_nodes` counts the nodes of each fingerprint (`OddFingerprints`: what a fleet of 100,000 holds) and
    names from those counts exactly whom a plain vote over every node names: per digest the value more than half
    the nodes hold; a node named with the digests it is outvoted on (and against how many agreeing nodes), or,
    where some digest has no majority, every node with those digests. Nodes repeat (a node with two locks of one
    key): its other entries are not its peers."""
    variants = {seed: _body(_digests(seed % 2)) for seed in range(6)}  # alike in pairs: one object each
    latest, plain = [], []
    for index, (seed, changed) in enumerate(fleet):
        digests = _digests(seed % 2) | {name: value * 64 for name, value in changed.items()}
        body = variants[seed] if not changed else _body(digests)
        node = f"n{index // 2:02d}"  # two entries a node: a node twice in one key
        latest.append((node, body))
        plain.append((node, digests))
    found, compared = odd_nodes(latest)
    expected = []
    if len(plain) >= 2:
        majority = {}
        for name in DIGESTS:
            votes = [digests[name] for _, digests in plain]
            value = max(sorted(set(votes)), key=votes.count)
            majority[name] = value if 2 * votes.count(value) > len(votes) else None
        disputed = tuple(name for name in DIGESTS if majority[name] is None)
        for node, digests in plain:
            outvoted = tuple(name for name in DIGESTS if majority[name] not in (None, digests[name]))
            if outvoted:
                agreeing = sum(
                    other != node and all(theirs[name] == majority[name] for name in outvoted)
                    for other, theirs in plain
                )
                expected.append((node, outvoted, f" {agreeing} other" if agreeing != 1 else "the other node"))
            elif disputed:
                expected.append((node, disputed, "no value has a majority"))
    assert compared == (len(plain) if len(plain) >= 2 else 0)
    assert [(d.node, d.digests) for d in found] == [(node, digests) for node, digests, _ in expected]
    assert all(said in d.against for d, (_, _, said) in zip(found, expected))


def test_nodes_of_another_key_are_never_compared() -> None:
    """Another driver is another key: its other bits are by design; a node alone in its key is not judged."""
    other_driver = _body(_digests(2))
    assert other_driver.numerics is not None
    moved = other_driver.model_copy(
        update={
            "numerics": other_driver.numerics.model_copy(
                update={"key": other_driver.numerics.key.model_copy(update={"driver": "575.57.08"})}
            )
        }
    )
    found, compared = odd_nodes([("a", _body(_digests(1))), ("b", _body(_digests(1))), ("c", moved)])
    assert found == [] and compared == 2
    assert (
        "not compared" in compare_pair(_body(_digests(1)), moved).line()
        and "driver: 580.159.04 vs 575.57.08" in compare_pair(_body(_digests(1)), moved).note
    )


def test_the_likely_cause_in_order() -> None:
    healthy = _body(_digests(1))
    assert healthy.numerics is not None
    tf32 = _body(_digests(1), settings={"NVIDIA_TF32_OVERRIDE": "0"})
    assert (
        likely_cause(tf32.stack, healthy.numerics, [healthy.stack])
        == "a setting differs: NVIDIA_TF32_OVERRIDE=0 here, unset on the others"
    )
    assert (
        likely_cause(healthy.stack, healthy.numerics, [tf32.stack, healthy.stack])
        == "a setting differs: NVIDIA_TF32_OVERRIDE unset here, NVIDIA_TF32_OVERRIDE=0 on some others"
    )
    cached = _body(_digests(1), settings={"CUDA_CACHE_PATH": "/tmp/jc"})  # session 30's H100 lease: no numerics
    assert likely_cause(tf32.stack, healthy.numerics, [cached.stack, healthy.stack]) == (
        "a setting differs: NVIDIA_TF32_OVERRIDE=0 here, unset on the others; CUDA_CACHE_PATH unset here, "
        "CUDA_CACHE_PATH=/tmp/jc on some others"
    )  # the setting known to change numerics first, whatever the names' order
    assert "a setting that changes numerics is set: NVIDIA_TF32_OVERRIDE=0" in likely_cause(
        tf32.stack, healthy.numerics, []
    )  # no peer at all (a bare reference's cause is `unrecorded_cause`'s)
    preloaded = _body(_digests(1), foreign=["/tmp/libx.so"])
    assert "/tmp/libx.so" in likely_cause(preloaded.stack, healthy.numerics, [healthy.stack])
    undigested = _body(_digests(1), environment=None)
    assert undigested.numerics is not None and "no digest" in likely_cause(
        undigested.stack, undigested.numerics, [healthy.stack]
    )
    assert "silent data corruption" in likely_cause(healthy.stack, healthy.numerics, [healthy.stack])


def test_a_pinned_reference_judges_a_node_alone() -> None:
    body = _body(_digests(1))
    assert body.numerics is not None
    same = NumericsReference(body.numerics, None, "`ref.json`")
    assert reference_check(body.numerics, body.stack, [same]).passed
    changed = NumericsReference(
        body.numerics.model_copy(update={"digests": _digests(1) | {"conv_bf16": "f" * 64}}), None, "`ref.json`"
    )
    check = reference_check(body.numerics, body.stack, [changed])
    assert not check.passed and "digest conv_bf16 differs from the reference of `ref.json`" in check.detail
    elsewhere = NumericsReference(
        body.numerics.model_copy(update={"key": body.numerics.key.model_copy(update={"cublas": "12.9.1"})}),
        None,
        "`ref.json`",
    )
    check = reference_check(body.numerics, body.stack, [changed, elsewhere][1:])
    assert not check.passed and "cublas: 12.9.1 vs 13.1.0" in check.detail
    assert not reference_check(None, body.stack, [same]).passed


@pytest.mark.slow
def test_the_device_evidence_agrees_and_names_the_tf32_node(tmp_path: Path) -> None:
    """The certificates made on the lent H100: five healthy runs, one with NVIDIA_TF32_OVERRIDE=0, whose
    TF32 digest alone differs; fleet status names it and the setting, cert compare too."""
    folder = tmp_path / "certs"
    folder.mkdir()
    for path in EVIDENCE.glob("*.cert.json"):
        shutil.copy(path, folder / path.name)
    status = run_cli("fleet", "status", str(folder), "--json")
    report = json.loads(status.stdout)
    assert status.returncode == 1 and report["numerics"]["compared"] == 6
    [odd] = report["numerics"]["differ"]
    assert (
        odd["node"] == "node4-tf32-off" and odd["digests"] == ["gemm_tf32"] and "NVIDIA_TF32_OVERRIDE=0" in odd["cause"]
    )
    text = run_cli("fleet", "status", str(folder))
    assert "NUMERICS node4-tf32-off: digest gemm_tf32 differs from the 5 other nodes of its key" in text.stdout
    assert "1 of 6 nodes compute different bits" in text.stderr
    pub = str(EVIDENCE / "numerics-signing.pub")
    differs = run_cli(
        "cert", "compare", str(folder / "node1-quick.cert.json"), str(folder / "node4-tf32-off.cert.json"), "--key", pub
    )
    assert (
        differs.returncode == 1
        and "numerics: digest gemm_tf32 differs from A's; likely cause: a setting differs: NVIDIA_TF32_OVERRIDE=0 "
        "here, unset on the others"
        in differs.stdout
    )
    same = run_cli(
        "cert",
        "compare",
        str(folder / "node1-quick.cert.json"),
        str(folder / "node2-quick.cert.json"),
        "--key",
        pub,
        "--noise",
        "0.5",
    )
    assert same.returncode == 0 and "numerics: the same bits" in same.stdout


@pytest.mark.slow
def test_an_unreadable_reference_is_refused_before_the_kernel(tmp_path: Path) -> None:
    bad = tmp_path / "ref.json"
    bad.write_text('{"key": {}}')
    result = run_cli(
        "verify", "--arch", "cpu", "--quick", "--expect-numerics", str(bad), "--out", str(tmp_path / "x.cert.json")
    )
    assert (
        result.returncode == 1
        and result.stderr.startswith("error:")
        and "hint:" in result.stderr
        and "Traceback" not in result.stderr
    )
    assert not (tmp_path / "x.cert.json").exists()


def _cpu_fingerprint() -> dict:
    """The kernel's fingerprint on the CPU (`verify.determinism`, as `python -m verify` runs it), in a process of its
    own."""
    code = (
        "import json, torch, verify.determinism as d, verify.schema as s;"
        " print(json.dumps(s.as_json(d.deterministic_work(torch.device('cpu'), False).fingerprint)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
def test_the_cpu_fingerprint_is_stable_across_two_processes() -> None:
    first, second = _cpu_fingerprint(), _cpu_fingerprint()
    assert "error" not in first and set(first["digests"]) == {"gemm_fp32", "gemm_bf16", "conv_bf16", "adamw_bf16"}
    assert (
        first["digests"] == second["digests"] and first["work"] == second["work"] == "lockgen.numerics/1 cpu gemm 256"
    )
