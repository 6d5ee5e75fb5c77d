"""What every benchmark records beside its figures: the repository root, the machine it ran on,
and the json + md pair it writes."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def microarchitecture(cpuinfo: str | None = None) -> str:
    """AMD Zen generation from /proc/cpuinfo's family and model (the model name says only "AMD
    EPYC" on these machines); vendor, family and model otherwise."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return "unknown"
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    vendor = fields.get("vendor_id", "")
    family_text, model_text = fields.get("cpu family"), fields.get("model")
    if not family_text or not model_text:
        return "unknown"
    family, model = int(family_text), int(model_text)
    if vendor == "AuthenticAMD":
        if family == 26:
            return f"AMD Zen 5 (family {family}, model {model})"
        if family == 25:
            zen = "Zen 4" if model >= 0x10 else "Zen 3"
            return f"AMD {zen} (family {family}, model {model})"
    return f"{vendor} family {family} model {model}"


def cpu_name() -> str:
    # Imported here: precision.py is light, but the lent GPU machine imports this module too.
    from amp_pipeline.components.amp.precision import cpu_name as name

    return name()


def machine() -> dict:
    from amp_pipeline.components.amp.precision import cpu_flags

    flags = cpu_flags()
    return {
        "cpu": cpu_name(),
        "microarchitecture": microarchitecture(),
        "cores": os.cpu_count(),
        "bf16_flags": sorted(f for f in flags if "bf16" in f or f.startswith("amx")),
        "avx512": sorted(f for f in flags if f.startswith("avx512")),
        "python": platform.python_version(),
    }


def write_report(out: Path, name: str, record: dict, lines: list[str]) -> None:
    """`<out>/<name>.json` (the record) and `<name>.md` (the table), and the table printed."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(record, indent=2))
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
