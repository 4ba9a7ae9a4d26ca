"""Facts from NVML about how the GPUs are linked: NVLink per GPU, and per pair of GPUs the PCIe
common ancestor and whether NVLink joins them (directly or through NVSwitch).

Calls: ``nvmlDeviceGetNvLinkState`` / ``...RemotePciInfo`` / ``...RemoteDeviceType`` /
``...Version`` per link, ``nvmlDeviceGetTopologyCommonAncestor`` and ``nvmlDeviceGetP2PStatus``
per pair. GPUs without NVLink answer "Not Supported": that GPU then has no links, not an
error. Like every probe this never judges (``rules/topology.py`` does) and never raises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# nvmlGpuTopologyLevel_t -> a name (nvidia-smi topo -m calls them X, PIX, PXB, PHB, NODE, SYS).
TOPOLOGY_LEVELS = {
    0: "internal",
    10: "single",
    20: "multiple",
    30: "hostbridge",
    40: "node",
    50: "system",
}
REMOTE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "switch"}
_MAX_LINKS = 18  # NVLink links per GPU on Hopper and Blackwell; older pynvml lack the constant


@dataclass
class GpuLinks:
    """One GPU's NVLink links as NVML sees them (NVML order, all GPUs of the host)."""

    index: int
    name: str
    bus_id: str | None = None
    capability: tuple[int, int] | None = None
    links_active: int | None = None
    """Active NVLink links; 0 for a GPU without NVLink; None when unreadable."""
    link_version: int | None = None
    """``nvmlDeviceGetNvLinkVersion`` of the first active link, as NVML returns it."""
    remote: list[tuple[str, str | None]] = field(default_factory=list)
    """Per active link: (remote device type: gpu/switch/ibmnpu/unknown, remote PCI bus id)."""
    why: str | None = None


@dataclass
class GpuPair:
    a: int
    b: int
    common_ancestor: str | None = None
    """Deepest PCIe point the two share: internal, single, multiple, hostbridge, node, system."""
    nvlink_p2p: bool | None = None
    """NVML's P2P status over NVLink (None: unreadable)."""
    direct_links: int = 0
    """Links of ``a`` whose far end is ``b`` itself."""
    why: str | None = None


@dataclass
class TopologyFacts:
    available: bool
    why: str | None = None
    gpus: list[GpuLinks] = field(default_factory=list)
    pairs: list[GpuPair] = field(default_factory=list)


def bus_key(bus_id: Any) -> tuple[int, int, int, int] | None:
    """'00000000:18:00.0' / b'0000:18:00.0' -> (domain, bus, device, function), for comparing
    ids that NVML pads differently."""
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode("ascii", "replace")
    if not isinstance(bus_id, str):
        return None
    text = bus_id.strip().lower().rstrip("\x00")
    try:
        domain, bus, rest = text.split(":")
        dev, fn = rest.split(".")
        return int(domain, 16), int(bus, 16), int(dev, 16), int(fn, 16)
    except ValueError:
        return None


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _links(pynvml: Any, h: Any, gpu: GpuLinks) -> None:
    active = 0
    errors: list[str] = []
    limit = int(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", _MAX_LINKS))
    for link in range(limit):
        try:
            state = pynvml.nvmlDeviceGetNvLinkState(h, link)
        except Exception as exc:  # Not Supported (no NVLink), or past this GPU's last link
            errors.append(str(exc))
            continue
        if not state:
            continue
        active += 1
        if gpu.link_version is None:
            try:
                gpu.link_version = int(pynvml.nvmlDeviceGetNvLinkVersion(h, link))
            except Exception:
                pass
        kind, remote_bus = "unknown", None
        try:
            kind = REMOTE_TYPES.get(int(pynvml.nvmlDeviceGetNvLinkRemoteDeviceType(h, link)), kind)
        except Exception:
            pass
        try:
            remote_bus = _text(pynvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId)
        except Exception:
            pass
        gpu.remote.append((kind, remote_bus))
    gpu.links_active = active
    if not active and errors and len(errors) == limit:
        gpu.why = f"no NVLink: {errors[0]}"


def _gpu(pynvml: Any, index: int) -> tuple[GpuLinks, Any]:
    h = pynvml.nvmlDeviceGetHandleByIndex(index)
    gpu = GpuLinks(index=index, name="?")
    try:
        gpu.name = _text(pynvml.nvmlDeviceGetName(h))
    except Exception:
        pass
    try:
        gpu.bus_id = _text(pynvml.nvmlDeviceGetPciInfo(h).busId)
    except Exception:
        pass
    try:
        cap = pynvml.nvmlDeviceGetCudaComputeCapability(h)
        gpu.capability = (int(cap[0]), int(cap[1]))
    except Exception:
        pass
    _links(pynvml, h, gpu)
    return gpu, h


def _pair(pynvml: Any, a: GpuLinks, ha: Any, b: GpuLinks, hb: Any) -> GpuPair:
    pair = GpuPair(a=a.index, b=b.index)
    why: list[str] = []
    try:
        level = int(pynvml.nvmlDeviceGetTopologyCommonAncestor(ha, hb))
        pair.common_ancestor = TOPOLOGY_LEVELS.get(level, f"level {level}")
    except Exception as exc:
        why.append(f"common ancestor: {exc}")
    try:
        index = getattr(pynvml, "NVML_P2P_CAPS_INDEX_NVLINK", 2)
        ok = getattr(pynvml, "NVML_P2P_STATUS_OK", 0)
        pair.nvlink_p2p = int(pynvml.nvmlDeviceGetP2PStatus(ha, hb, index)) == ok
    except Exception as exc:
        why.append(f"NVLink P2P status: {exc}")
    target = bus_key(b.bus_id)
    if target is not None:
        pair.direct_links = sum(
            1 for kind, bus in a.remote if kind == "gpu" and bus_key(bus) == target
        )
    pair.why = "; ".join(why) or None
    return pair


def probe() -> TopologyFacts:
    try:
        import pynvml
    except ImportError:
        return TopologyFacts(False, "nvidia-ml-py is not installed (pip install nvidia-ml-py)")
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return TopologyFacts(False, f"NVML failed to initialise: {exc}")
    try:
        facts = TopologyFacts(available=True)
        try:
            count = int(pynvml.nvmlDeviceGetCount())
        except Exception as exc:
            facts.why = f"NVML could not count GPUs: {exc}"
            return facts
        handles: list[Any] = []
        for i in range(count):
            try:
                gpu, h = _gpu(pynvml, i)
            except Exception as exc:  # a lost GPU costs its own links only
                gpu, h = GpuLinks(index=i, name="?", why=f"no handle: {exc}"), None
            facts.gpus.append(gpu)
            handles.append(h)
        for i in range(count):
            for j in range(i + 1, count):
                if handles[i] is None or handles[j] is None:
                    facts.pairs.append(GpuPair(i, j, why="GPU not readable"))
                    continue
                facts.pairs.append(
                    _pair(pynvml, facts.gpus[i], handles[i], facts.gpus[j], handles[j])
                )
        return facts
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
