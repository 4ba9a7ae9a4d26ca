"""How the GPUs are linked -> checklist rows ("GPU 0 ↔ 1: NVLink x18 (NVSwitch)") and the
link's bandwidth ceiling for collectives. Pure: reads ``probes.topology`` facts only.

NVLink bandwidth per link and direction, by generation: NVLink 1 (P100) 20 GB/s; NVLink 2-4
(V100, A100, H100/H200) 25 GB/s; NVLink 5 (B200) 50 GB/s; GA102's bridge (RTX 3090, A6000)
runs 4 links of 14.0625 GB/s. A GPU's NVLink bandwidth is its active links times that: an
H200 SXM has 18 links, 450 GB/s per direction, which is the most an all-reduce's bus bandwidth
(nccl-tests' busbw) can approach.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..probes.topology import GpuLinks, GpuPair, TopologyFacts
from ..report import Check, CheckStatus

# Per link and direction (GB/s), by compute capability; the major alone where minors agree.
NVLINK_GBPS_BY_CAPABILITY: dict[tuple[int, int], float] = {(8, 6): 14.0625}
NVLINK_GBPS_BY_MAJOR: dict[int, float] = {6: 20.0, 7: 25.0, 8: 25.0, 9: 25.0, 10: 50.0}
# nvmlDeviceGetNvLinkVersion's enum (NVML_NVLINK_VERSION_*): 7 is NVLink 5.0.
NVLINK_GBPS_BY_NVML_VERSION: dict[int, float] = {1: 20.0, 7: 50.0}

ANCESTOR_TEXT = {
    "internal": "same board",
    "single": "one PCIe switch",
    "multiple": "several PCIe switches",
    "hostbridge": "host bridge",
    "node": "across host bridges in one NUMA node",
    "system": "across CPU sockets",
}


def nvlink_link_gbps(capability: tuple[int, int] | None, nvml_version: int | None) -> float | None:
    """One NVLink link's bandwidth per direction (GB/s) for a GPU of this generation."""
    if capability is not None:
        rate = NVLINK_GBPS_BY_CAPABILITY.get(capability)
        if rate is None:
            rate = NVLINK_GBPS_BY_MAJOR.get(capability[0])
        if rate is not None:
            return rate
    if nvml_version is not None:
        return NVLINK_GBPS_BY_NVML_VERSION.get(nvml_version)
    return None


def nvlink_gbps(gpu: GpuLinks) -> float | None:
    """The GPU's NVLink bandwidth per direction: active links x per-link rate (None: unknown)."""
    rate = nvlink_link_gbps(gpu.capability, gpu.link_version)
    if not gpu.links_active or rate is None:
        return None
    return gpu.links_active * rate


@dataclass(frozen=True)
class PairLink:
    a: int
    b: int
    kind: str
    """``nvlink`` (direct), ``nvswitch``, ``pcie`` or ``unknown``."""
    links: int | None
    gbps: float | None
    """NVLink bandwidth per direction between the two (None for PCIe or when unknown)."""
    text: str


def _via_switch(g: GpuLinks) -> bool:
    return any(kind == "switch" for kind, _ in g.remote)


def pair_link(pair: GpuPair, gpus: Sequence[GpuLinks]) -> PairLink:
    by_index = {g.index: g for g in gpus}
    a, b = by_index.get(pair.a), by_index.get(pair.b)
    if a is not None and b is not None and pair.direct_links > 0:
        rate = nvlink_link_gbps(a.capability, a.link_version)
        gbps = pair.direct_links * rate if rate is not None else None
        return PairLink(
            pair.a, pair.b, "nvlink", pair.direct_links, gbps, f"NVLink x{pair.direct_links}"
        )
    if a is not None and b is not None and _via_switch(a) and _via_switch(b):
        links = min(a.links_active or 0, b.links_active or 0) or None
        ga, gb = nvlink_gbps(a), nvlink_gbps(b)
        gbps = min(ga, gb) if ga is not None and gb is not None else None
        count = f" x{links}" if links else ""
        return PairLink(pair.a, pair.b, "nvswitch", links, gbps, f"NVLink{count} (NVSwitch)")
    if pair.nvlink_p2p:
        return PairLink(pair.a, pair.b, "nvlink", None, None, "NVLink")
    if pair.common_ancestor is not None:
        where = ANCESTOR_TEXT.get(pair.common_ancestor, pair.common_ancestor)
        return PairLink(pair.a, pair.b, "pcie", None, None, f"PCIe ({where})")
    return PairLink(pair.a, pair.b, "unknown", None, None, "unknown")


def _row(link: PairLink, pair: GpuPair | None, label: str, check_id: str) -> Check:
    value = link.text
    if link.gbps is not None:
        value += f", {link.gbps:g} GB/s per direction"
    status: CheckStatus
    if link.kind in ("nvlink", "nvswitch"):
        status, detail = (
            "pass",
            (
                "Collectives between these GPUs run over NVLink; the all-reduce bus bandwidth can "
                "approach the NVLink figure."
            ),
        )
    elif link.kind == "pcie":
        ancestor = pair.common_ancestor if pair is not None else None
        status = "warn" if ancestor == "system" else "info"
        detail = (
            "No NVLink between these GPUs: collectives go over PCIe"
            + (", through the CPUs' interconnect (slowest)" if ancestor == "system" else "")
            + ". Data-parallel training with large gradients will wait on them."
        )
    else:
        status = "not_checked"
        detail = (pair.why if pair is not None and pair.why else None) or "NVML did not say"
    return Check(check_id, label, status, value, detail)


def topology_checks(topo: TopologyFacts | None) -> list[Check]:
    """One row per pair of GPUs (one row in all when many GPUs are linked alike)."""
    if topo is None or not topo.available:
        return []
    gpus = topo.gpus
    if len(gpus) == 1:
        return [Check("topo.gpus", "GPU links", "info", "one GPU: no GPU-to-GPU links to check")]
    links = [(pair, pair_link(pair, gpus)) for pair in topo.pairs]
    if len(gpus) > 4 and links and len({(ln.text, ln.gbps) for _, ln in links}) == 1:
        pair, link = links[0]
        label = f"GPUs 0-{len(gpus) - 1} (every pair)"
        return [_row(link, pair, label, "topo.all")]
    return [
        _row(ln, pair, f"GPU {pair.a} ↔ {pair.b}", f"topo.gpu{pair.a}_gpu{pair.b}")
        for pair, ln in links
    ]


def with_topology(checks: Sequence[Check], topo: TopologyFacts | None) -> list[Check]:
    """``checks`` with the topology rows placed after the last per-GPU row."""
    rows = topology_checks(topo)
    out = list(checks)
    last_gpu = max((i for i, c in enumerate(out) if c.id.startswith("gpu")), default=len(out) - 1)
    out[last_gpu + 1 : last_gpu + 1] = rows
    return out


def collective_ceiling(
    topo: TopologyFacts | None, indices: Sequence[int] | None = None
) -> tuple[float | None, str]:
    """The bus-bandwidth ceiling of an all-reduce over these GPUs (NVML indices; default all)
    and where it comes from: the slowest GPU's NVLink bandwidth when NVLink joins them all."""
    if topo is None or not topo.available:
        return None, f"GPU links unknown: {topo.why if topo is not None else 'not probed'}"
    want = set(indices) if indices is not None else {g.index for g in topo.gpus}
    gpus = [g for g in topo.gpus if g.index in want]
    pairs = [p for p in topo.pairs if p.a in want and p.b in want]
    if len(gpus) < 2 or not pairs:
        return None, "fewer than two GPUs"
    links = [pair_link(p, topo.gpus) for p in pairs]
    if any(ln.kind not in ("nvlink", "nvswitch") for ln in links):
        kinds = sorted({ln.text for ln in links})
        return None, f"not every pair is on NVLink ({', '.join(kinds)}): PCIe sets the ceiling"
    per_gpu = [nvlink_gbps(g) for g in gpus]
    if any(v is None for v in per_gpu):
        return None, "NVLink per-link rate unknown for this GPU"
    low = min(v for v in per_gpu if v is not None)
    g = min(gpus, key=lambda g: nvlink_gbps(g) or 0.0)
    rate = nvlink_link_gbps(g.capability, g.link_version)
    return low, (
        f"NVLink: {g.links_active} active links x {rate:g} GB/s per direction = {low:g} GB/s per "
        f"GPU ({g.name}, read through NVML); an all-reduce's bus bandwidth approaches it"
    )
