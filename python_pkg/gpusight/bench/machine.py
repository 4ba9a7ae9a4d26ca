"""The report's ``machine`` section for a bench report.

The environment doctor owns the probing: its ``machine(probes.collect())`` is used. Should that
fail (a probe bug must not cost the benchmarks), a minimal machine from the standard library and
torch alone. A caller that already ran the doctor passes its machine to ``build_report`` instead.
"""

from __future__ import annotations

from typing import Any

from ..machine_facts import build_machine


def machine_info() -> dict[str, Any]:
    try:
        from .. import doctor, probes

        return doctor.machine(probes.collect())
    except Exception:
        return minimal_machine()


def minimal_machine() -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return build_machine(None)
    return build_machine(torch)
