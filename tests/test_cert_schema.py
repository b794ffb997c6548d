"""One certificate schema: the kernel's records (`verify/schema.py`, standard-library dataclasses) and their
pydantic mirrors (`lockgen/model/certificate.py`) agree field for field (names, types, which are required,
defaults), and what the kernel writes the model reads and writes back byte for byte, as it does every committed
example certificate (their signatures are over those bytes)."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

import verify.schema as kernel
from lockgen.adapters.node import signing
from lockgen.api.steps.certificate_steps import read_certificate
from lockgen.model import certificate as model
from tests.conftest import REPO, run_cli
from verify.results import Results

MIRRORED = ("Check", "Spread", "GpuDuring", "CudnnChoice", "KernelShare", "Figure", "KernelNumerics")
EXAMPLES = sorted((REPO / "envs" / "examples").rglob("*.cert.json"))
SIGNED = REPO / "envs" / "examples" / "h200-system" / "h200-full.cert.json"


def shape(annotation: object) -> str:
    """A type as text, classes by name: `Figure | None` reads the same of the kernel's class and the model's."""
    origin = typing.get_origin(annotation)
    if origin is None:
        return getattr(annotation, "__name__", repr(annotation))
    name = "Union" if origin in (typing.Union, types.UnionType) else getattr(origin, "__name__", repr(origin))
    return f"{name}[{', '.join(shape(arg) for arg in typing.get_args(annotation))}]"


def kernel_fields(record: type) -> list[tuple[str, str, bool, object]]:
    hints = typing.get_type_hints(record)
    return [
        (
            f.name,
            shape(hints[f.name]),
            f.default is dataclasses.MISSING,
            None if f.default is dataclasses.MISSING else f.default,
        )
        for f in dataclasses.fields(record)
    ]


def model_fields(mirror: type[BaseModel]) -> list[tuple[str, str, bool, object]]:
    hints = typing.get_type_hints(mirror)  # Annotated's strictness left out: the type is what is compared
    return [
        (name, shape(hints[name]), info.is_required(), None if info.is_required() else info.default)
        for name, info in mirror.model_fields.items()
    ]


@pytest.mark.parametrize("name", MIRRORED)
def test_the_model_mirrors_the_kernels_record_field_for_field(name: str) -> None:
    assert model_fields(getattr(model, name)) == kernel_fields(getattr(kernel, name))


def test_every_record_of_the_kernel_schema_is_mirrored() -> None:
    records = {
        name
        for name, value in vars(kernel).items()
        if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == kernel.__name__
    }
    assert records - {"FigureRef"} == set(MIRRORED)


def _kernel_run() -> Results:
    """Figures of every kind the kernel writes: not run with a reason, counts and bursts, the GPU's state during
    a step, cuDNN's switches and the kernels that took the time."""
    results = Results()
    results.check("performance", "gemm_throughput", True, "ran")
    results.check("correctness", "conv_bf16", False, "relative error 1e-02", 0.01)
    results.figure(kernel.GRAPHS_BF16_REPLAY, kernel.Figure(None, "ms", reason="CUDA graphs need a GPU"))
    results.figure(kernel.gemm("bf16"), kernel.Figure(791.23456, "TFLOP/s", size=8192, bursts=(790.1, 791.2)))
    busy = kernel.Spread(0.0, 99.0, 24.3)
    during = kernel.GpuDuring(util=busy, power_w=kernel.Spread(294.1, 571.4, 394.7), clock_limits_seen=("sw",))
    step = kernel.Figure(24.5, "ms", batch=8, sequence=512, steps_ms=(24.53, 24.54), gpu=during, host_issue_ms=3.2)
    results.figure(kernel.TRAINING_BF16_STEP, step)
    shares = (kernel.KernelShare("void at::native::col2im_kernel", 0.323),)
    cudnn = kernel.CudnnChoice(True, False, True, fault="untuned")
    results.figure(kernel.conv("bf16"), kernel.Figure(120.0, "TFLOP/s", blocks=4, cudnn=cudnn, kernels=shares))
    results.figure(kernel.allreduce_latency(8), kernel.Figure(30.1, "us", batches_us=(30.0, 30.2)))
    results.phase("total", 12.345678)
    return results


def test_what_the_kernel_writes_the_model_reads_and_writes_back_byte_for_byte() -> None:
    results = _kernel_run()
    written = json.loads(json.dumps({"checks": results.checks_json(), "figures": results.figures_json()}))
    figures = {
        group: {name: model.Figure.model_validate(entry) for name, entry in entries.items()}
        for group, entries in written["figures"].items()
    }
    back = {group: {n: f.model_dump(mode="json") for n, f in entries.items()} for group, entries in figures.items()}
    assert signing.render(back) == signing.render(written["figures"])
    checks = [model.Check.model_validate(c).model_dump(mode="json") for c in written["checks"]]
    assert checks == written["checks"]
    assert written["figures"]["graphs"]["bf16_replay_step_ms"] == {
        "value": None,
        "unit": "ms",
        "reason": "CUDA graphs need a GPU",
    }  # a field left None is left out, but the value
    assert written["figures"]["gemm"]["bf16"]["value"] == 791.2346  # rounded to 4 decimals, as before


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_example_certificates_checks_and_figures_read_and_write_back_byte_for_byte(path: Path) -> None:
    """(Their other parts: a certificate older than a field, `numerics`, is read with it null.)"""
    document = json.loads(path.read_text())
    body = model.Certificate.model_validate(document).certificate
    written = body.model_dump(mode="json", by_alias=True, include={"checks", "figures"})
    original = {part: document["certificate"][part] for part in ("checks", "figures")}
    assert signing.render(written) == signing.render(original)


def test_a_figure_field_the_schema_does_not_name_is_refused() -> None:
    with pytest.raises(ValidationError):
        model.Figure.model_validate({"value": 1.0, "unit": "x", "speed": 2})
    with pytest.raises(TypeError):
        kernel.Figure(1.0, "x", speed=2)  # type: ignore[call-arg]


@pytest.mark.parametrize("value", ["12", True, float("nan"), float("inf"), 10**400])
def test_a_figure_value_that_is_not_a_finite_number_is_refused_by_name(value: object) -> None:
    body = {"gemm": {"bf16": {"value": value, "unit": "TFLOP/s"}}}
    with pytest.raises(ValidationError, match=r"figure gemm/bf16 is .*, not a finite number"):
        model.KernelReport.from_json(
            {"schema": "s", "kind": "single", "checks": [], "figures": body, "telemetry": {}, "duration_s": 1.0}
        )


def test_a_figure_unit_that_is_not_text_is_refused_by_name() -> None:
    body = {"gemm": {"bf16": {"value": 1.0, "unit": 7}}}
    with pytest.raises(ValidationError, match="figure gemm/bf16 has unit '7', not text"):
        model.KernelReport.from_json(
            {"schema": "s", "kind": "single", "checks": [], "figures": body, "telemetry": {}, "duration_s": 1.0}
        )


@pytest.mark.parametrize("field,value", [("size", 8192.0), ("unit", 3), ("bursts", ["1.0"])])
def test_a_figure_field_of_another_json_type_is_refused(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        model.Figure.model_validate({"value": 1.0, "unit": "x", field: value})


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_example_certificate_reads_under_the_strict_records(path: Path) -> None:
    """The committed certificates, whole (hardware, subject, numerics, the body's own fields), pass the strict
    records that a signed edit below does not."""
    read_certificate(path, None)


def _drop(record: dict, name: str) -> None:
    del record[name]


SIGNED_EDITS = [
    ("certificate.checks.0.passed", lambda body: body["checks"][0].update(passed="yes")),
    ("certificate.checks.0.passed", lambda body: body["checks"][0].update(passed=1)),
    ("certificate.checks.0.value", lambda body: body["checks"][0].update(value="12")),
    ("certificate.checks.0.detail", lambda body: body["checks"][0].update(detail=12)),
    ("certificate.checks.0.extra", lambda body: body["checks"][0].update(extra="x")),
    ("certificate.checks.0.passed", lambda body: _drop(body["checks"][0], "passed")),
    ("certificate.hardware.gpu_count", lambda body: body["hardware"].update(gpu_count="1")),
    ("certificate.hardware.gpu_count", lambda body: body["hardware"].update(gpu_count=1.0)),
    ("certificate.hardware.gpu_names.0", lambda body: body["hardware"].update(gpu_names=[7])),
    ("certificate.hardware.driver", lambda body: _drop(body["hardware"], "driver")),
    ("certificate.hardware.cooling", lambda body: body["hardware"].update(cooling="air")),
    ("certificate.subject.python", lambda body: body["subject"].update(python=3.12)),
    ("certificate.duration_s", lambda body: body.update(duration_s="12.5")),
    ("certificate.passed", lambda body: body.update(passed="true")),
    ("certificate.distributed.world_size", lambda body: body.update(distributed={"world_size": "8"})),
]


@pytest.mark.slow
@pytest.mark.parametrize("field,edit", SIGNED_EDITS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SIGNED_EDITS)])
def test_a_signed_certificate_of_another_json_type_or_shape_is_refused_naming_the_field(
    tmp_path: Path, field: str, edit: Callable[[dict], None]
) -> None:
    """A signature proves who wrote the bytes, not that they are a certificate: `"passed": "yes"` read as true,
    text read as a number, a missing or an extra field are refused by `cert verify`, one error naming the field."""
    key, public = signing.keygen(tmp_path / "keys" / "k")
    document = json.loads(SIGNED.read_text())
    edit(document["certificate"])
    document["signature"] = signing.sign(document["certificate"], key)
    path = tmp_path / "edited.cert.json"
    path.write_text(signing.render(document))
    result = run_cli("cert", "verify", str(path), "--key", str(public))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("error: ") and f"at {field}," in lines[0], result.stderr
    assert len(lines) == 2 and lines[1].startswith("hint: "), result.stderr
