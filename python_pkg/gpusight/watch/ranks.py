"""``gpusight run`` under ``torchrun``: every rank watches itself, rank 0 merges the reports.

``torchrun --nproc-per-node=N -m gpusight run [--json out.json] train.py`` starts N processes,
each with ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` set. Each one runs the script under its own
watch, tags its report with who it was (``run.kernels['dist_*']``: rank, host, CUDA device,
run id) and writes it; rank 0 then waits for the others' files (a barrier through the file
system, which still works when the script has destroyed its process group or a rank died)
and writes one merged ``kind="distributed"`` report (``rules/distributed.py``).

Where the rank files go, first match wins:

* ``--json`` with ``{rank}`` in it: each rank's report there, the merged one at ``{rank}`` ->
  ``merged``;
* ``$GPUSIGHT_RANK_DIR``: ``rank<r>.json`` in that directory (a shared one for several nodes);
* ``--json out.json``: ``out.rank<r>.json`` beside it, the merged report in ``out.json``;
* otherwise a directory in the system's temp dir named after the run (summary on stderr only).

Each rank removes its own old file when it starts, and rank 0 takes only files of this run
(``TORCHELASTIC_RUN_ID``, master address and port, restart count), so a stale file from an
earlier run is never merged. Ranks on other nodes write to their own disks unless
``GPUSIGHT_RANK_DIR`` is shared; ``gpusight merge`` merges copied files later.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..report import Report

ENV_DIR = "GPUSIGHT_RANK_DIR"
DEFAULT_TIMEOUT_S = 120.0
_POLL_S = 0.2


@dataclass(frozen=True)
class RankEnv:
    rank: int
    world_size: int
    local_rank: int | None
    local_world_size: int | None
    run_id: str


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def rank_env(environ: Mapping[str, str] | None = None) -> RankEnv | None:
    """The launcher's rank variables, or None outside a job of two or more processes."""
    env = os.environ if environ is None else environ
    rank, world = _int(env.get("RANK")), _int(env.get("WORLD_SIZE"))
    if rank is None or world is None or world < 2 or not 0 <= rank < world:
        return None
    run_id = "|".join(
        env.get(k, "")
        for k in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT")
    )
    return RankEnv(
        rank=rank,
        world_size=world,
        local_rank=_int(env.get("LOCAL_RANK")),
        local_world_size=_int(env.get("LOCAL_WORLD_SIZE")),
        run_id=run_id,
    )


def rank_paths(
    env: RankEnv, json_arg: str | None, environ: Mapping[str, str] | None = None
) -> tuple[str, str | None]:
    """(pattern of the rank files with ``{rank}``, path of the merged report or None)."""
    envs = os.environ if environ is None else environ
    if json_arg and "{rank}" in json_arg:
        return json_arg, json_arg.replace("{rank}", "merged")
    shared = envs.get(ENV_DIR)
    if shared:
        return os.path.join(shared, "rank{rank}.json"), json_arg
    if json_arg:
        base = json_arg[: -len(".json")] if json_arg.endswith(".json") else json_arg
        return base + ".rank{rank}.json", json_arg
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", env.run_id).strip("_") or "run"
    return os.path.join(tempfile.gettempdir(), f"gpusight-ranks-{safe}", "rank{rank}.json"), None


def rank_file(pattern: str, rank: int) -> Path:
    return Path(pattern.replace("{rank}", str(rank)))


def cuda_device(torch: Any) -> int | None:
    """The CUDA device the process worked on; None if it never started CUDA (not started here)."""
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            return int(torch.cuda.current_device())
    except Exception:
        pass
    return None


def _backend(torch: Any) -> str | None:
    try:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return str(dist.get_backend())
    except Exception:
        pass
    return None


def tag(
    report: Report,
    env: RankEnv,
    *,
    started_at: float,
    torch: Any = None,
    backend: str | None = None,
) -> Report:
    """Mark a rank's report with who made it (``run.kernels['dist_*']``) and retitle it."""
    if report.run is None:
        report.run = {"steps": 0, "step_time_ms": 0.0}
    kernels = report.run.setdefault("kernels", {})
    kernels.update(
        {
            "dist_rank": env.rank,
            "dist_world_size": env.world_size,
            "dist_local_rank": env.local_rank,
            "dist_local_world_size": env.local_world_size,
            "dist_host": platform.node() or None,
            "dist_cuda_device": cuda_device(torch),
            "dist_started_at": round(started_at, 3),
            "dist_finished_at": round(time.time(), 3),
            "dist_run_id": env.run_id,
            "dist_backend": backend or _backend(torch),
        }
    )
    report.title = f"{report.title or 'run'} (rank {env.rank} of {env.world_size})"
    return report


def write_report(report: Report, path: Path) -> Path:
    """Validate and write atomically (a reader polling for the file never sees half of it).

    Where jsonschema is missing (a bare GPU image with gpusight on PYTHONPATH) the report is
    written unvalidated rather than lost."""
    data = report.to_dict()
    try:
        from ..report_schema import validate

        validate(data)
    except ModuleNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    from ..atomic_write import write_text

    return write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def begin(env: RankEnv, json_arg: str | None) -> float:
    """Before the script runs: remove this rank's file of an earlier run (so that rank 0 cannot
    mistake it for this run's); the wall-clock start."""
    pattern, _ = rank_paths(env, json_arg)
    try:
        rank_file(pattern, env.rank).unlink()
    except OSError:
        pass
    return time.time()


def collect(
    pattern: str,
    env: RankEnv,
    timeout_s: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[int, dict[str, Any]]:
    """Wait (up to ``timeout_s``) for every rank's file of this run; what arrived, by rank."""
    from ..rules.distributed import rank_info

    deadline = time.monotonic() + max(0.0, timeout_s)
    got: dict[int, dict[str, Any]] = {}
    while True:
        for r in range(env.world_size):
            if r in got:
                continue
            try:
                data = json.loads(rank_file(pattern, r).read_text("utf-8"))
            except (OSError, ValueError):
                continue  # not written yet
            if isinstance(data, dict) and rank_info(data).get("run_id") == env.run_id:
                got[r] = data
        if len(got) == env.world_size or time.monotonic() >= deadline:
            return got
        sleep(_POLL_S)


def finish(
    report: Report,
    env: RankEnv,
    *,
    json_arg: str | None,
    started_at: float,
    torch: Any,
    label: str | None,
    quiet: bool,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    summary: Callable[[Report, Any], None] | None = None,
) -> Report | None:
    """Tag and write this rank's report; on rank 0 also wait, merge and write the merged one.

    Returns the merged report on rank 0, None on the others."""
    pattern, merged_path = rank_paths(env, json_arg)
    tag(report, env, started_at=started_at, torch=torch)
    own = rank_file(pattern, env.rank)
    try:
        write_report(report, own)
    except Exception as exc:
        print(f"gpusight run: rank {env.rank}: could not write {own}: {exc}", file=sys.stderr)
    if env.rank != 0:
        return None
    got = collect(pattern, env, timeout_s)
    from ..rules.distributed import merge_reports

    notes = []
    if len(got) < env.world_size:
        notes.append(
            f"waited {timeout_s:.0f} s for the other ranks' reports in {own.parent} "
            f"(pattern {os.path.basename(pattern)}); merged the {len(got)} that came"
        )
    got.setdefault(0, report.to_dict())
    merged = merge_reports(
        [got[r] for r in sorted(got)], world_size=env.world_size, label=label, notes=notes
    )
    if merged_path:
        try:
            write_report(merged, Path(merged_path))
        except Exception as exc:
            print(f"gpusight run: could not write {merged_path}: {exc}", file=sys.stderr)
    if not quiet and summary is not None:
        summary(merged, sys.stderr)
        print(f"  rank reports: {pattern}", file=sys.stderr)
    return merged


def add_idle_gpus(report: Report, torch: Any) -> Report:
    """One process on a machine with several GPUs: ``dist.idle_gpus`` when some did nothing."""
    from ..rules.distributed import single_process_idle

    if report.finding("dist.idle_gpus") is not None:
        return report
    try:
        found = single_process_idle(report.to_dict(), device=cuda_device(torch))
    except Exception:  # a diagnosis bug must not cost the user the report
        return report
    if found is not None:
        report.findings.append(found)
    return report


__all__ = [
    "ENV_DIR",
    "RankEnv",
    "add_idle_gpus",
    "begin",
    "collect",
    "finish",
    "rank_env",
    "rank_paths",
    "tag",
    "write_report",
]
