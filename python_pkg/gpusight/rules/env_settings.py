"""Environment rules for torch flags as found (TF32, cudnn.benchmark, determinism, anomaly
detection) and TensorFlow beside torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..fixes import fix
from ..probes.facts import Facts, Scalar
from ..report import CheckStatus, Finding, Impact
from .env_checks import EnvironmentResult, _ev
from .env_versions import _gpu_caps, vstr

# TF32 Tensor Cores: compute capability 8.0 (Ampere) and newer.
TF32_MIN_CAPABILITY = (8, 0)


def _first_precision(settings: Mapping[str, Scalar], keys: Sequence[str]) -> bool | None:
    # torch >= 2.9 fp32_precision: the op's own value, else its backend's, else the global
    # one; 'none' means inherit. 'tf32' and 'bf16' both let float32 use Tensor Cores.
    for key in keys:
        v = settings.get(key)
        if isinstance(v, str) and v != "none":
            return v != "ieee"
    return None


def tf32_matmul(settings: Mapping[str, Scalar]) -> bool | None:
    """Do float32 matmuls (cuBLAS) use TF32 Tensor Cores under these settings?"""
    new = _first_precision(
        settings, ("cuda.matmul.fp32_precision", "cuda.fp32_precision", "fp32_precision")
    )
    if new is not None:
        return new
    legacy = settings.get("cuda.matmul.allow_tf32")
    if isinstance(legacy, bool):
        return legacy
    precision = settings.get("float32_matmul_precision")
    return precision != "highest" if isinstance(precision, str) else None


def tf32_cudnn(settings: Mapping[str, Scalar]) -> bool | None:
    """Do float32 convolutions (cuDNN) use TF32?"""
    new = _first_precision(
        settings, ("cudnn.conv.fp32_precision", "cudnn.fp32_precision", "fp32_precision")
    )
    if new is not None:
        return new
    legacy = settings.get("cudnn.allow_tf32")
    return legacy if isinstance(legacy, bool) else None


def _settings_rules(facts: Facts, out: EnvironmentResult) -> None:
    t = facts.torch
    if not t.importable:
        for cid, label in (
            ("torch.tf32", "TF32"),
            ("torch.cudnn_benchmark", "cudnn.benchmark"),
            ("torch.deterministic", "deterministic algorithms"),
            ("torch.anomaly", "autograd anomaly detection"),
        ):
            out.check(cid, label, "not_checked", "torch is not importable")
        return
    s = t.settings
    for key, err in sorted(t.errors.items()):
        if key.startswith("settings."):
            out.notes.append(f"torch setting {key.removeprefix('settings.')} unreadable: {err}")
    _tf32_check(facts, s, out)
    _cudnn_benchmark_check(facts, s, out)
    deterministic_check(s, out)
    anomaly_check(s, out)


def _tf32_check(facts: Facts, s: Mapping[str, Scalar], out: EnvironmentResult) -> None:
    """``cfg.tf32_disabled``: TF32 off for float32 matmuls or convolutions on a GPU that has it."""
    t = facts.torch
    matmul, conv = tf32_matmul(s), tf32_cudnn(s)
    ampere = [(n, c, i) for n, c, i in _gpu_caps(facts) if c >= TF32_MIN_CAPABILITY]
    state = f"matmul {_onoff(matmul)}, cuDNN {_onoff(conv)}"
    state_ev = [
        _ev("matmul TF32 (cuBLAS)", matmul),
        _ev("torch.get_float32_matmul_precision()", s.get("float32_matmul_precision")),
        _ev("torch.backends.cuda.matmul.allow_tf32", s.get("cuda.matmul.allow_tf32")),
        _ev("torch.backends.cudnn.allow_tf32", s.get("cudnn.allow_tf32")),
    ]
    if "cuda.matmul.fp32_precision" in s:
        state_ev.append(
            _ev("torch.backends.cuda.matmul.fp32_precision", s.get("cuda.matmul.fp32_precision"))
        )
    if matmul is False or conv is False:
        if ampere:
            name, cap, idx = ampere[0]
            what = " and ".join(
                w
                for w, off in (("matmuls", matmul is False), ("convolutions", conv is False))
                if off
            )
            out.check(
                "torch.tf32",
                "TF32",
                "warn",
                state,
                finding=Finding(
                    id="cfg.tf32_disabled",
                    severity="warn",
                    title=f"TF32 is off for float32 {what} on {name} (sm_{cap[0]}{cap[1]})",
                    detail=(
                        "On compute capability 8.0 and newer, float32 matmuls and convolutions "
                        "can run on Tensor Cores in TF32. torch leaves it off for matmuls by "
                        "default, so float32 models run on the much slower CUDA-core path. "
                        "Irrelevant for work already in bf16/fp16 (autocast)."
                    ),
                    evidence=[*state_ev, _ev("GPU", name), _ev("compute capability", vstr(cap))],
                    impact=Impact(
                        basis="estimated",
                        text=(
                            "Float32 matmul throughput rises several-fold with TF32 (spec "
                            "sheets: A100 156 vs 19.5 TFLOPS, H100/H200 ~495 vs ~67)."
                        ),
                    ),
                    fix=fix(
                        "Allow TF32 once at start-up (results differ from float32 in the "
                        "last bits).",
                        "torch.enable_tf32",
                    ),
                    gpu_index=idx if t.devices else None,
                ),
            )
        else:
            out.check(
                "torch.tf32",
                "TF32",
                "info",
                state,
                "TF32 needs a GPU of compute capability 8.0 or newer; none found, so it makes "
                "no difference here",
            )
    else:
        out.check("torch.tf32", "TF32", "pass", state)


def _cudnn_benchmark_check(facts: Facts, s: Mapping[str, Scalar], out: EnvironmentResult) -> None:
    """``cfg.cudnn_benchmark_off``: cuDNN picks convolution algorithms by heuristic on a GPU."""
    t = facts.torch
    bench = s.get("cudnn.benchmark")
    gpu = bool(_gpu_caps(facts)) and t.cuda_available
    if bench is False and gpu:
        out.check(
            "torch.cudnn_benchmark",
            "cudnn.benchmark",
            "info",
            "off",
            finding=Finding(
                id="cfg.cudnn_benchmark_off",
                severity="info",
                title="cudnn.benchmark is off: convolutions use cuDNN's heuristic algorithm",
                detail=(
                    "For convolutional models with fixed input shapes, letting cuDNN time its "
                    "algorithms once often finds a faster one. No effect on models without "
                    "convolutions; costly when shapes change every step."
                ),
                evidence=[_ev("torch.backends.cudnn.benchmark", False)],
                impact=Impact(basis="none", text="Depends on the model: measure it."),
                fix=fix("Turn it on for fixed-shape convnets.", "torch.cudnn_benchmark"),
            ),
        )
    else:
        out.check(
            "torch.cudnn_benchmark",
            "cudnn.benchmark",
            "pass" if bench else "info",
            _onoff(bench if isinstance(bench, bool) else None),
            None if bench or gpu else "only matters for convolutions on a GPU",
        )


def deterministic_check(s: Mapping[str, Scalar], out: EnvironmentResult) -> None:
    """``cfg.deterministic``: deterministic algorithms forced on."""
    det = s.get("deterministic_algorithms") is True or s.get("cudnn.deterministic") is True
    if det:
        out.check(
            "torch.deterministic",
            "deterministic algorithms",
            "warn",
            "on",
            finding=Finding(
                id="cfg.deterministic",
                severity="warn",
                title="Deterministic algorithms are forced on",
                detail=(
                    "torch.use_deterministic_algorithms(True) or cudnn.deterministic=True swaps "
                    "fast kernels (atomics-based scatter/index_add, cuDNN autotuned "
                    "convolutions) for slower reproducible ones, and makes some ops raise."
                ),
                evidence=[
                    _ev(
                        "torch.are_deterministic_algorithms_enabled()",
                        s.get("deterministic_algorithms"),
                    ),
                    _ev("warn_only", s.get("deterministic_warn_only")),
                    _ev("torch.backends.cudnn.deterministic", s.get("cudnn.deterministic")),
                ],
                impact=Impact(basis="none", text="Model-dependent: measure it."),
                fix=fix(
                    "Keep determinism for runs that must reproduce; turn it off otherwise.",
                    "torch.deterministic_off",
                ),
            ),
        )
    else:
        out.check("torch.deterministic", "deterministic algorithms", "pass", "off")


def anomaly_check(s: Mapping[str, Scalar], out: EnvironmentResult) -> None:
    """``cfg.anomaly_detection``: autograd anomaly detection on."""
    if s.get("anomaly_enabled") is True:
        out.check(
            "torch.anomaly",
            "autograd anomaly detection",
            "warn",
            "on",
            finding=Finding(
                id="cfg.anomaly_detection",
                severity="warn",
                title="Autograd anomaly detection is on",
                detail=(
                    "torch.autograd.set_detect_anomaly(True) records a Python traceback for "
                    "every op in the forward pass and checks every backward result for NaN: "
                    "a debugging mode that slows training many times over."
                ),
                evidence=[
                    _ev("torch.is_anomaly_enabled()", True),
                    _ev("check_nan", s.get("anomaly_check_nan")),
                ],
                impact=Impact(basis="estimated", text="Often several times slower per step."),
                fix=fix("Turn it off outside debugging.", "torch.anomaly_off"),
            ),
        )
    else:
        out.check("torch.anomaly", "autograd anomaly detection", "pass", "off")


def _onoff(v: bool | None) -> str:
    return "?" if v is None else ("on" if v else "off")


def _tensorflow_rules(facts: Facts, out: EnvironmentResult) -> None:
    tf = facts.tensorflow
    if not tf.installed:
        out.check("tensorflow.gpus", "TensorFlow", "not_checked", str(tf.why))
    elif tf.gpus is None:
        out.check("tensorflow.gpus", "TensorFlow", "not_checked", str(tf.why))
    else:
        torch_n = facts.torch.device_count if facts.torch.cuda_available else 0
        status: CheckStatus = "warn" if torch_n and not tf.gpus else "info"
        out.check(
            "tensorflow.gpus",
            "TensorFlow",
            status,
            f"{tf.version}: {len(tf.gpus)} GPU(s)",
            "TensorFlow sees no GPU although torch does: its CUDA libraries do not match"
            if status == "warn"
            else None,
        )
