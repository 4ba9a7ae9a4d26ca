/**
 * What the report's machine can do, so the words follow it: no GPU claims on a CPU run, and a
 * CPU-only torch build named first (gpusight check calls it critical).
 */
import type { GpusightReport } from '../report';

/** torch's version when it is built for neither CUDA nor ROCm; null otherwise (or no torch). */
export function cpuOnlyBuild(report: GpusightReport): string | null {
  const t = report.machine.torch;
  if (!t || t.cuda || t.hip) {
    return null;
  }
  return t.version;
}

/** Whether the run could have used a GPU: one is visible and torch can reach it. */
export function gpuInUse(report: GpusightReport): boolean {
  const t = report.machine.torch;
  if (cpuOnlyBuild(report) !== null || !report.machine.gpus.length) {
    return false;
  }
  return t?.cuda_available !== false;
}
