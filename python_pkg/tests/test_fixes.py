"""Fix snippets: each renders to code that parses; values cannot break out; the torch ones work."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys

import pytest
from gpusight.fixes import SNIPPETS, placeholders, render
from gpusight.report import Finding

try:  # other layers add their snippets on import; check the whole catalogue, whatever ran first
    from gpusight.fixes import workload  # noqa: F401
except ImportError:
    pass


@pytest.mark.parametrize("snippet_id", sorted(SNIPPETS))
def test_snippet_renders_to_valid_code(snippet_id: str) -> None:
    snippet = SNIPPETS[snippet_id]
    assert placeholders(snippet) == set(snippet.example), "example must fill every placeholder"
    code = render(snippet_id, **snippet.example)
    assert "{" not in code.replace("${", "") or snippet.language == "python"
    if snippet.language == "python":
        ast.parse(code)
    else:
        bash = shutil.which("bash")
        if bash is None:
            pytest.skip("no bash")
        done = subprocess.run([bash, "-n"], input=code, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_python_values_stay_literals() -> None:
    hostile = "0'; import shutil; shutil.rmtree('/') #"
    tree = ast.parse(render("env.visible_devices", devices=hostile))
    assign = next(n for n in tree.body if isinstance(n, ast.Assign))
    assert ast.literal_eval(assign.value) == hostile


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_shell_values_are_quoted() -> None:
    code = render("torch.install", python="/opt/my env/bin/python; rm -rf ~", index="cu128")
    assert "'/opt/my env/bin/python; rm -rf ~' -m pip install torch" in code
    done = subprocess.run(["bash", "-n"], input=code, capture_output=True, text=True)
    assert done.returncode == 0


def test_unknown_snippet_and_missing_value() -> None:
    with pytest.raises(KeyError, match=r"no fix snippet 'nope'; known: .*torch\.enable_tf32"):
        render("nope")
    with pytest.raises(KeyError, match="needs index"):
        render("torch.install_cuda", python="python3")


def test_torch_snippets_do_what_they_say() -> None:
    """Run the settings snippets in a fresh torch (from the opposite state) and read back."""
    code = (
        "import json, torch\n"
        "from gpusight.fixes import render\n"
        "from gpusight.probes.torch_info import read_settings\n"
        "from gpusight.rules.environment import tf32_matmul, tf32_cudnn\n"
        "torch.backends.cudnn.allow_tf32 = False\n"
        "torch.use_deterministic_algorithms(True)\n"
        "torch.backends.cudnn.deterministic = True\n"
        "torch.autograd.set_detect_anomaly(True)\n"
        "for sid in ('torch.enable_tf32', 'torch.cudnn_benchmark', 'torch.deterministic_off',\n"
        "            'torch.anomaly_off'):\n"
        "    exec(render(sid), {})\n"
        "s, errors = read_settings(torch)\n"
        "print(json.dumps([tf32_matmul(s), tf32_cudnn(s), s, errors]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    matmul, conv, s, errors = json.loads(out.stdout)
    assert errors == {}  # the snippet does not leave torch's TF32 APIs in a mixed state
    assert matmul is True and conv is True
    assert s["cudnn.benchmark"] is True
    assert s["deterministic_algorithms"] is False and s["cudnn.deterministic"] is False
    assert s["anomaly_enabled"] is False


def test_launch_blocking_snippet_unsets_it() -> None:
    env_code = render("env.launch_blocking")
    code = (
        "import os\n"
        "os.environ['CUDA_LAUNCH_BLOCKING'] = '1'\n"
        f"exec({env_code!r}, {{}})\n"
        "print('CUDA_LAUNCH_BLOCKING' in os.environ)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_findings_carry_their_snippet() -> None:
    """Every finding the rules make with a snippet names one in the catalogue, code filled."""
    from gpusight.doctor import report_from_facts
    from gpusight.probes.facts import GpuProcessFact
    from test_rules_environment import h200

    facts = h200(
        power_limit_w=400.0,
        clock_event_reasons=["hw_thermal_slowdown"],
        pcie_width=8,
        mig_mode=True,
        processes=[GpuProcessFact(pid=1)],
    )
    facts.system.shm_bytes = 1 << 20
    facts.system.env["CUDA_LAUNCH_BLOCKING"] = "1"
    findings: list[Finding] = report_from_facts(facts).findings
    with_snippet = [f for f in findings if f.fix.snippet_id]
    assert len(with_snippet) >= 7
    for f in with_snippet:
        assert f.fix.snippet_id in SNIPPETS
        assert f.fix.language == SNIPPETS[str(f.fix.snippet_id)].language
        assert f.fix.code and "{" not in f.fix.code.replace("${", "").replace("{}", "")
