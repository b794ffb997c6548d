"""Resolve against a channel of real tiny packages built by the tests: gating, build selection, CUDA ranges."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lockgen.api import resolve as api
from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.errors import TargetError, UnsatisfiableError


def write_stack(folder: Path, channel: Path, deps: str, targets: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "stack.toml"
    path.write_text(
        f'[stack]\nname = "tiny"\nchannels = ["{channel.as_uri()}"]\n\n[dependencies]\n{deps}\n\n{targets}\n'
    )
    return path


def picked(stack: Path, target: str, name: str) -> str:
    lock = load_lock(stack.parent / "locks" / f"{target}.conda-lock.yml")
    found = [p for p in lock.package if p.name == name]
    return f"{found[0].version} {found[0].build}" if found else ""


TARGETS = """
[targets.cpu]
arch = "cpu"
[targets.a100-r535]
arch = "sm80"
driver = "535.104.05"
[targets.a100-r550]
arch = "sm80"
driver = "550.54.15"
[targets.b200]
arch = "sm100"
driver = "575.57.08"
"""


def test_each_target_gets_the_build_its_hardware_and_driver_allow(tmp_path: Path, gpu_channel: Path) -> None:
    stack = write_stack(tmp_path, gpu_channel, 'pytorch = "*"\nplain-lib = "*"', TARGETS)
    api.resolve(stack)
    assert picked(stack, "cpu", "pytorch") == "2.6.0 cpu_h1_0"
    assert picked(stack, "cpu", "cuda-version") == ""
    assert picked(stack, "a100-r535", "pytorch") == "2.5.0 cuda118_h1_0"  # driver runs 12.2: cuda124 is out
    assert picked(stack, "a100-r550", "pytorch") == "2.5.0 cuda124_h1_0"
    assert picked(stack, "a100-r550", "cuda-version") == "12.4 h0_3"
    assert picked(stack, "b200", "pytorch") == "2.6.0 cuda129_h1_0"
    lock = load_lock(stack.parent / "locks" / "b200.conda-lock.yml")
    assert lock.meta("virtual-packages.linux-64").startswith("__archspec=1=x86_64 __cuda=12.9=0 __cuda_arch=10.0=sm100")
    assert all(p.hash.sha256 and p.url.startswith("file://") for p in lock.package)


def test_virtual_package_gating(tmp_path: Path, gpu_channel: Path) -> None:
    stack = write_stack(tmp_path, gpu_channel, 'gpu-tool = "*"', TARGETS)
    api.resolve(stack, targets=["a100-r550"])
    assert picked(stack, "a100-r550", "gpu-tool") == "1.0 h0_0"
    with pytest.raises(UnsatisfiableError) as caught:
        api.resolve(stack, targets=["cpu"])
    assert "target `cpu` on linux-64" in caught.value.message and "__cuda" in caught.value.message


def test_build_string_selection_is_checked_against_the_target(tmp_path: Path, gpu_channel: Path) -> None:
    stack = write_stack(tmp_path, gpu_channel, 'pytorch = { version = "2.*", build = "cpu*" }', TARGETS)
    api.resolve(stack, targets=["cpu"])
    assert picked(stack, "cpu", "pytorch") == "2.6.0 cpu_h1_0"
    with pytest.raises(UnsatisfiableError):
        api.resolve(stack, targets=["b200"])  # a CPU-only pytorch on a GPU target is refused


def test_sm100_with_a_cuda_12_8_driver_finds_no_native_build(tmp_path: Path, gpu_channel: Path) -> None:
    stack = write_stack(
        tmp_path, gpu_channel, 'pytorch = "*"', '[targets.b200]\narch = "sm100"\ndriver = "570.86.10"\n'
    )
    with pytest.raises(TargetError) as caught:
        api.resolve(stack)
    assert "no pytorch build" in caught.value.message and "native sm100 kernels" in caught.value.message
    assert "allow-ptx-jit" in caught.value.hint and "575.51.03" in caught.value.hint
    assert not (stack.parent / "locks").exists()


def test_allow_ptx_jit_admits_a_ptx_build(tmp_path: Path, gpu_channel: Path) -> None:
    stack = write_stack(
        tmp_path,
        gpu_channel,
        'pytorch = "*"',
        '[targets.b200]\narch = "sm100"\ndriver = "570.86.10"\nallow-ptx-jit = true\n',
    )
    api.resolve(stack)
    assert picked(stack, "b200", "pytorch") == "2.5.0 cuda124_h1_0"


def test_cuda_pin(tmp_path: Path, gpu_channel: Path) -> None:
    stack = write_stack(
        tmp_path, gpu_channel, 'pytorch = "*"', '[targets.a100]\narch = "sm80"\ndriver = "575.57.08"\ncuda = "11.8"\n'
    )
    api.resolve(stack)
    assert picked(stack, "a100", "pytorch") == "2.5.0 cuda118_h1_0"
    assert picked(stack, "a100", "cuda-version") == "11.8 h0_3"
    # conda-forge's CUDA 11.8 builds reach sm90 only through PTX: a pinned 11.8 H100 target has no build
    stack.write_text(stack.read_text().replace('arch = "sm80"', 'arch = "sm90"'))
    with pytest.raises(TargetError, match=re.escape("native sm90 kernels with CUDA 11.8..11.8")):
        api.resolve(stack)


def test_http_channel_from_a_local_server(tmp_path: Path, gpu_channel: Path, http_channel) -> None:
    url = http_channel(gpu_channel)
    stack = write_stack(tmp_path, gpu_channel, 'pytorch = "*"', TARGETS)
    stack.write_text(stack.read_text().replace(gpu_channel.as_uri(), url))
    api.resolve(stack, targets=["a100-r550"])
    lock = load_lock(stack.parent / "locks" / "a100-r550.conda-lock.yml")
    assert picked(stack, "a100-r550", "pytorch") == "2.5.0 cuda124_h1_0"
    assert all(p.url.startswith(url) for p in lock.package)
    assert lock.meta("index.%s/linux-64" % url).startswith("closure-sha256:")


def test_channel_credentials_never_reach_the_lock(tmp_path: Path, gpu_channel: Path, http_channel) -> None:
    url = http_channel(gpu_channel)
    stack = write_stack(tmp_path, gpu_channel, 'pytorch = "*"', TARGETS)
    stack.write_text(stack.read_text().replace(gpu_channel.as_uri(), url.replace("http://", "http://user:s3cr3tPW@")))
    api.resolve(stack, targets=["a100-r550"])
    text = (stack.parent / "locks" / "a100-r550.conda-lock.yml").read_text()
    assert "s3cr3tPW" not in text and "user:" not in text
    assert f"lockgen.index.{url}/linux-64" in text


@pytest.mark.parametrize(
    "written",
    ["https://user:pw@example.org/chan", "https://example.org/t/tk-123/chan", "https://example.org/chan?token=abc&x=1"],
)
def test_every_credential_form_is_scrubbed(written: str) -> None:
    from lockgen.adapters.conda.channels import Channel, index_key
    from lockgen.core.credentials import scrub_url, scrub_text

    for text in (
        scrub_url(written),
        index_key(Channel(written, written, None, ""), "linux-64"),
        scrub_text(f"GET {written}/repodata.json failed"),
    ):
        assert "pw" not in text and "tk-123" not in text and "abc" not in text
