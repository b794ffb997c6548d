"""Re-expresses shared/reference/gpu-matrix.json as lockgen/data/gpu_facts.json (run by test_facts_data)."""

import json
import re


def convert(path):
    """The packaged facts, as derived from the sourced matrix at `path`."""
    src = json.load(open(path))
    return _convert(src)


def citation(source):
    """A source as a user can follow it: the document, URL and section, without the research tools'
    own notes (search corpora, lookup ids) the matrix keeps beside them."""
    source = re.sub(r"; search corpus '[^']*'", "", source)
    source = re.sub(r" - full transcription read via find_string/read_file id \d+", "", source)
    source = re.sub(r" \(find_string[^)]*\)", "", source)
    source = re.sub(r"; read via find_string/read_file id \d+ - a verbatim copy of the upstream table", "", source)
    return source.replace("https://pypi.example/simple", "PyPI")


def _convert(src):
    def lead(s):
        return re.search(r"\d+\.\d+", s).group(0) if s else None

    def srcs(*leaves):
        out = []
        for leaf in leaves:
            s = leaf.get("source")
            s = citation(s) if s else s
            if s and s not in out:
                out.append(s)
        return out

    archs = {}
    for key, a in src["archs"].items():
        if key == "sm101_sm110":
            entries = [("sm101", "10.1", "12.8", "12.9"), ("sm110", "11.0", "13.0", None)]
        else:
            cc = a["compute_capability"]["value"]
            first = a["first_cuda_sass"]["value"]
            last = a["last_cuda"]["value"]
            entries = [(key, cc, lead(first), lead(last) if last else None)]
        for name, cc, first, last in entries:
            archs[name] = {
                "compute_capability": cc,
                "family": a["family"]["value"],
                "gpus": a["typical_gpus"]["value"],
                "first_cuda": first,
                "last_cuda": last,
                "tensor_cores": {
                    k.replace("_tensor_core", ""): a[k]["value"]
                    for k in ("tf32_tensor_core", "bf16_tensor_core", "fp8_tensor_core", "fp4_tensor_core")
                    if k in a
                },
                "inferred": any(
                    a[k].get("inferred", False) for k in ("first_cuda_sass", "last_cuda", "compute_capability")
                ),
                "sources": srcs(a["compute_capability"], a["first_cuda_sass"], a["last_cuda"], a["typical_gpus"]),
            }
    cuda = {}
    for ver, t in src["cuda_driver"]["toolkits"].items():
        if not (t.get("toolkit_driver_linux_x86_64") or {}).get("value"):
            continue
        if not re.match(r">=\d", t["toolkit_driver_linux_x86_64"]["value"]):
            continue
        cuda[ver] = {
            "min_driver": t["toolkit_driver_linux_x86_64"]["value"].lstrip(">="),
            "sources": srcs(t["toolkit_driver_linux_x86_64"]),
        }
    compat = {}
    for major, leaf in src["cuda_driver"]["minor_version_compat_min_driver_linux"].items():
        m = re.search(r">=\s*(\d+(?:\.\d+)*)", leaf["value"]).group(1)
        if major == "13.x":
            m = "580.65.06"
        compat[major.split(".")[0]] = {"min_driver": m, "note": leaf["value"], "sources": srcs(leaf)}
    cf = []
    for k, leaf in src["conda_forge_pytorch"]["arch_list_by_cuda_compiler_version"].items():
        plat = "linux-aarch64" if "aarch64" in k else None
        if "tegra" in k:  # Jetson-only variant, not a datacenter target
            continue
        versions = re.findall(r"\d+\.\d+", k)
        if "12.[0-6]" in k:
            versions = ["12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6"]
        if "12.[89]" in k:
            versions = ["12.8", "12.9"]
        for v in versions:
            if any(c["cuda"] == v and c["platform"] == plat for c in cf):
                continue
            cf.append({"cuda": v, "platform": plat, "arch_list": leaf["value"], "sources": srcs(leaf)})
    official = {}
    official_aarch64 = {}  # download.pytorch.org's linux-aarch64 (sbsa) builds, by release and variant
    for tv, p in src["pytorch"].items():
        lists = p.get("torch_cuda_arch_list", {})
        for cu, leaf in lists.items():
            if not isinstance(leaf, dict) or "value" not in leaf:
                continue
            official.setdefault(tv, {})[cu] = {
                "arch_list": leaf["value"],
                "sources": srcs(leaf),
                "inferred": leaf.get("inferred", False),
            }
        arm_lists = (p.get("linux_aarch64") or {}).get("torch_cuda_arch_list") or {}
        if isinstance(arm_lists.get("value"), dict):
            for cu, arch_list in arm_lists["value"].items():
                official_aarch64.setdefault(tv, {})[cu] = {
                    "arch_list": arch_list,
                    "sources": srcs(arm_lists),
                    "inferred": bool(arm_lists.get("inferred", False)),
                }
    out = {
        "about": "GPU, CUDA, driver and PyTorch facts used by lockgen's target rules. Re-expressed from the sourced "
        "matrix "
        "shared/reference/gpu-matrix.json (horizon: "
        + src["meta"]["snapshot_horizon"]["value"][:120]
        + "...). Every entry keeps its sources.",
        "rules": [r["value"] for r in src["rules"][:2]],
        "archs": archs,
        "cuda_toolkits": cuda,
        "minor_version_compat": compat,
        "conda_forge_pytorch_arch_lists": cf,
        "pytorch_official_arch_lists": official,
        "pytorch_official_aarch64_arch_lists": official_aarch64,
    }

    # PyPI: the variant each release publishes on pypi.org per platform, with its arch list
    pypi = []
    for tv, p in src["pytorch"].items():
        default = (p.get("pypi_default") or {}).get("value")
        if default and re.fullmatch(r"cu\d+", default):
            lists = p.get("torch_cuda_arch_list", {})
            entry = lists.get(default) if isinstance(lists, dict) else None
            pypi.append(
                {
                    "torch": tv,
                    "platform": "linux-64",
                    "variant": default,
                    "arch_list": entry["value"] if isinstance(entry, dict) else None,
                    "inferred": bool((p.get("pypi_default") or {}).get("inferred")),
                    "sources": srcs(p["pypi_default"]) + (srcs(entry) if isinstance(entry, dict) else []),
                }
            )
        arm = p.get("linux_aarch64") or {}
        value = (arm.get("pypi") or {}).get("value")
        if not value:
            continue
        variant = "cpu" if value.startswith("CPU") else value
        lists = (arm.get("torch_cuda_arch_list") or {}).get("value")
        arch_list = lists.get(variant) if isinstance(lists, dict) else (lists if variant != "cpu" else None)
        pypi.append(
            {
                "torch": tv,
                "platform": "linux-aarch64",
                "variant": variant,
                "arch_list": arch_list,
                "inferred": bool(arm["pypi"].get("inferred")) or "assumed" in value,
                "sources": srcs(arm["pypi"])
                + (srcs(arm["torch_cuda_arch_list"]) if arm.get("torch_cuda_arch_list") else []),
            }
        )
    out["pytorch_pypi_wheels"] = pypi
    return out


ADDITIONS = __import__("pathlib").Path(__file__).with_name("facts_additions.json")


def packaged(matrix_path, additions_path=ADDITIONS):
    """lockgen/data/gpu_facts.json: the matrix re-expressed, then the sourced additions and corrections read
    since (tests/facts_additions.json): PyPI wheel rows replaced or added by (torch, platform), official lists
    corrected, CUDA update
    drivers, the floors of CUDA toolkits the matrix has none for, conda-forge variant lists, the pytorch channel's own
    lists, download.pytorch.org's aarch64 lists read again,
    Jetson driver branches, the CUDA rules NVIDIA states for its own packages (cuda-bindings), the last driver branch
    of each retired architecture, and what could not be verified."""
    out = convert(matrix_path)
    add = json.load(open(additions_path))
    out["about"] += " Then " + add["about"]
    out["valid_as_of"] = add["valid_as_of"]
    rows = {(w["torch"], w["platform"]): w for w in out["pytorch_pypi_wheels"]}
    for wheel in add["pytorch_pypi_wheels"]:
        rows[(wheel["torch"], wheel["platform"])] = {k: v for k, v in wheel.items() if v is not None or k != "toolkit"}
    out["pytorch_pypi_wheels"] = sorted(
        rows.values(), key=lambda w: (tuple(int(p) for p in w["torch"].split(".")), w["platform"])
    )
    for cuda, updates in add["cuda_toolkit_updates"].items():
        out["cuda_toolkits"][cuda]["updates"] = updates
    for cuda, sources in add["cuda_toolkit_sources"].items():
        out["cuda_toolkits"][cuda]["sources"] = sources
    for cuda, floor in add["cuda_toolkit_floors"].items():  # toolkits the matrix has no driver row for
        assert cuda not in out["cuda_toolkits"], f"the matrix now has CUDA {cuda}'s floor: drop the addition"
        out["cuda_toolkits"][cuda] = floor
    for torch, by_tag in add["pytorch_official_arch_lists"].items():
        out["pytorch_official_arch_lists"].setdefault(torch, {}).update(by_tag)
    for torch, by_tag in add["pytorch_official_aarch64_arch_lists"].items():
        for tag, entry in by_tag.items():
            known = out["pytorch_official_aarch64_arch_lists"].setdefault(torch, {}).get(tag)
            if (
                known is not None and known["arch_list"] == entry["arch_list"]
            ):  # the same list, read again: one more source
                entry = {
                    **known,
                    "sources": known["sources"] + [s for s in entry["sources"] if s not in known["sources"]],
                    "inferred": known["inferred"] and entry["inferred"],
                }
            out["pytorch_official_aarch64_arch_lists"][torch][tag] = entry
    out["conda_forge_pytorch_arch_lists"] += add["conda_forge_pytorch_arch_lists"]
    out["pytorch_channel_arch_lists"] = add["pytorch_channel_arch_lists"]
    out["tegra_drivers"] = add["tegra_drivers"]
    out["package_cuda_rules"] = add["package_cuda_rules"]
    out["last_driver_branches"] = add["last_driver_branches"]
    out["unverifiable"] = add["unverifiable"]
    return out


if __name__ == "__main__":  # python -m tests.facts_conversion SHARED_MATRIX: rewrites the packaged facts
    import sys

    target = __import__("pathlib").Path(__file__).resolve().parent.parent / "lockgen" / "data" / "gpu_facts.json"
    target.write_text(json.dumps(packaged(sys.argv[1]), indent=1, ensure_ascii=False))
