"""The fix snippets: one template per snippet id, filled with the numbers a finding found.

Python templates use ``{name!r}`` where a literal goes, so any value stays valid Python (``{name}``
where gpusight writes the code itself: a measured what-if's DataLoader arguments); shell
templates get their values shell-quoted by ``render``. Tests render each with its example
values and check the result parses (``ast.parse`` / ``bash -n``); the TF32 one is also run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Language = Literal["python", "shell"]
Param = str | int | float


@dataclass(frozen=True)
class Snippet:
    id: str
    language: Language
    template: str
    example: dict[str, Param] = field(default_factory=dict)
    """Values that fill every placeholder; tests render with them."""
    finding_id: str | None = None
    """The finding whose fix it is, where one finding owns it (the measured what-if's)."""
    text: str = ""
    """One sentence: what the code does (a measured what-if's fix text)."""
    needs: tuple[str, ...] = ("torch",)
    """The names the code reads that a training script has (tests give them)."""
    cpu_runnable: bool = True
    """Running it on a CPU means something (tests run it)."""

    def fill(self, **values: Param) -> str:
        """The template filled, its example's values where ``values`` has none (Python only:
        shell values are quoted by ``fixes.render``)."""
        return self.template.format(**{**self.example, **values})


_S = [
    Snippet(
        "torch.install",
        "shell",
        "# Install torch into this interpreter. Pick the cuXYZ index your driver supports\n"
        "# (nvidia-smi shows 'CUDA Version'); https://pytorch.org/get-started/locally/ lists\n"
        "# the indexes for each torch release.\n"
        "{python} -m pip install torch --index-url https://download.pytorch.org/whl/{index}\n",
        {"python": "/usr/bin/python3", "index": "cu128"},
    ),
    Snippet(
        "torch.install_cuda",
        "shell",
        "# Replace this torch with a CUDA build, in the same interpreter, then restart the\n"
        "# kernel or process. Reinstall torchvision/torchaudio from the same index if you use\n"
        "# them. https://pytorch.org/get-started/locally/ lists each release's indexes.\n"
        "{python} -m pip uninstall -y torch\n"
        "{python} -m pip install torch --index-url https://download.pytorch.org/whl/{index}\n",
        {"python": "/usr/bin/python3", "index": "cu128"},
    ),
    Snippet(
        "nvidia.driver_update",
        "shell",
        "# The driver must support CUDA {cuda} or newer (branch R{branch} or later). Install it\n"
        "# from your distribution or https://www.nvidia.com/Download/index.aspx, then reboot,\n"
        "# and check what it supports:\n"
        "nvidia-smi --query-gpu=driver_version --format=csv,noheader\n",
        {"cuda": "12.8", "branch": "570"},
    ),
    Snippet(
        "env.visible_devices",
        "python",
        "import os\n"
        "\n"
        "# CUDA reads this once, when it starts: set it before torch first touches CUDA\n"
        "# (top of the script, or restart the kernel and run this first).\n"
        "os.environ['CUDA_VISIBLE_DEVICES'] = {devices!r}\n",
        {"devices": "0"},
    ),
    Snippet(
        "env.launch_blocking",
        "python",
        "import os\n"
        "\n"
        "# CUDA_LAUNCH_BLOCKING=1 makes every kernel launch wait for the kernel to finish: a\n"
        "# debugging aid. CUDA reads it once, when it starts: drop it before the first CUDA\n"
        "# call (restart the kernel if CUDA is already up), or `unset CUDA_LAUNCH_BLOCKING`.\n"
        "os.environ.pop('CUDA_LAUNCH_BLOCKING', None)\n",
    ),
    Snippet(
        "docker.shm_size",
        "shell",
        "# DataLoader workers pass batches through /dev/shm; Docker gives a container 64 MB.\n"
        "docker run --gpus all --shm-size={size} IMAGE\n"
        "# or share the host's IPC namespace, and with it the host's /dev/shm:\n"
        "docker run --gpus all --ipc=host IMAGE\n"
        "# Kubernetes: mount an emptyDir with medium: Memory at /dev/shm.\n",
        {"size": "16g"},
    ),
    Snippet(
        "nvidia.power_limit",
        "shell",
        "# Put GPU {index}'s power limit back to its default (needs root; resets at reboot):\n"
        "sudo nvidia-smi -i {index} -pl {watts}\n",
        {"index": 0, "watts": 700},
    ),
    Snippet(
        "nvidia.watch_throttle",
        "shell",
        "# Watch temperature, clocks and clock-event reasons while the job runs (every 5 s):\n"
        "nvidia-smi -i {index} -q -d TEMPERATURE,PERFORMANCE -l 5\n",
        {"index": 0},
    ),
    Snippet(
        "nvidia.pcie_link",
        "shell",
        "# Read the link while the job runs (an idle GPU drops to a lower generation on purpose):\n"
        "nvidia-smi -i {index} --format=csv -l 1 --query-gpu="
        "pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max\n",
        {"index": 0},
    ),
    Snippet(
        "nvidia.mig_disable",
        "shell",
        "# MIG splits GPU {index} into isolated instances; a process sees only one. To give one\n"
        "# job the whole GPU (needs root and no processes on it; may need a GPU reset):\n"
        "sudo nvidia-smi -i {index} -mig 0\n",
        {"index": 0},
    ),
    Snippet(
        "nvidia.list_processes",
        "shell",
        "# Who else is on the GPU, and how much memory each holds:\n"
        "nvidia-smi -i {index} --query-compute-apps=pid,process_name,used_memory --format=csv\n",
        {"index": 0},
    ),
    Snippet(
        "toolkit.cuda_home",
        "shell",
        "# Only for compiling CUDA extensions: build against torch's CUDA ({version}).\n"
        "export CUDA_HOME=/usr/local/cuda-{version}\n"
        'export PATH="$CUDA_HOME/bin:$PATH"\n',
        {"version": "12.8"},
    ),
    Snippet(
        "torch.enable_tf32",
        "python",
        "import torch\n"
        "\n"
        "# TF32 Tensor Cores for float32 matmuls and convolutions (sm >= 8.0): 10 mantissa bits\n"
        "# instead of 23 inside the product, float32 in and out; fine for most training.\n"
        "torch.set_float32_matmul_precision('high')\n"
        "torch.backends.cudnn.allow_tf32 = True\n",
    ),
    Snippet(
        "torch.cudnn_benchmark",
        "python",
        "import torch\n"
        "\n"
        "# cuDNN times its convolution algorithms once per input shape and keeps the fastest:\n"
        "# a gain when shapes repeat, a re-tune for every new shape.\n"
        "torch.backends.cudnn.benchmark = True\n",
    ),
    Snippet(
        "torch.deterministic_off",
        "python",
        "import torch\n"
        "\n"
        "# Deterministic kernels are slower (and some ops raise). Keep them for the runs that\n"
        "# must reproduce bit for bit.\n"
        "torch.use_deterministic_algorithms(False)\n"
        "torch.backends.cudnn.deterministic = False\n",
    ),
    Snippet(
        "torch.anomaly_off",
        "python",
        "import torch\n"
        "\n"
        "# Anomaly detection records a traceback for every autograd op and checks every result\n"
        "# for NaN: a debugging aid that slows training severely.\n"
        "torch.autograd.set_detect_anomaly(False)\n",
    ),
]

SNIPPETS: dict[str, Snippet] = {s.id: s for s in _S}
