"""The Ascend SoCs the CANN rules and the simulator tell apart: a family per SoC name as
aclrtGetSocName reports it, and the simulated SoC that `--soc` picks per family."""
from __future__ import annotations

# family -> the SoC CANN-SIM simulates for it (CANN_SIM_SOC); ggml-cann builds "310P"
# with ASCEND_310P, every other SoC (Atlas A2 / A3) without
SIMULATED = {"910B": "Ascend910B3", "310P": "Ascend310P3"}
FAMILIES = tuple(SIMULATED)
DEFAULT = "910B"


def family(soc_name: str) -> str:
    """"310P" for the Atlas inference series (Ascend310P*), "910B" for the others."""
    return "310P" if soc_name.startswith("Ascend310P") else DEFAULT


def parse(text: str) -> list[str]:
    """--soc's comma list of families, each once; ValueError names a bad one."""
    out = []
    for item in (x.strip().upper() for x in text.split(",")):
        if item not in SIMULATED:
            raise ValueError(f"unknown SoC {item!r}: one of {', '.join(FAMILIES)}")
        if item not in out:
            out.append(item)
    if not out:
        raise ValueError("--soc names no SoC")
    return out
