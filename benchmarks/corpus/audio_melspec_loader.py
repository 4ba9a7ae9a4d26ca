"""torchaudio log-mel features computed per item in the training process: the GPU waits on them.

Loop: a keyword-spotting style classifier: a Dataset of synthetic 4-second 16 kHz waveforms
(a class-dependent tone with harmonics and noise, from a generator seeded with the index) whose
``__getitem__`` computes ``torchaudio.transforms.MelSpectrogram`` (n_fft 400, hop 160, 64 mels)
then ``AmplitudeToDB`` and SpecAugment's ``FrequencyMasking`` and ``TimeMasking`` on the CPU.
A small 2D CNN (conv-BN-ReLU-pool blocks, global pooling, linear head) trains on the
[1, 64, 401] log-mels at batch 64 with AdamW; the DataLoader has ``num_workers=0``.

Held back: the input pipeline. 64 STFTs and mel projections per step run in the training
process between steps while the GPU, with only a small CNN to run, waits for each batch.

--fix: ``num_workers=8`` and ``pin_memory=True`` (``persistent_workers`` too).

Without torchaudio (the CPU smoke-test environment) the same features are computed with
``torch.stft`` and an HTK mel filterbank built here, and a note says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from _corpus import Clock, parser, pick_device
from torch import nn
from torch.utils.data import DataLoader, Dataset

try:
    import torchaudio
except ImportError:  # only the CPU smoke test runs without it
    torchaudio = None

LIBRARY = "torchaudio"
LABEL = "torchaudio MelSpectrogram + SpecAugment per item with 0 workers, small CNN: loader-bound"
EXPECTED = {"bottleneck": "input_pipeline", "pick": "loader_together"}
FIX = "DataLoader num_workers=8, pin_memory=True (persistent_workers=True)"
# The script's own switches for the settings a what-if row sets ("{}": the row's value).
TRUTH_ARGS = {
    "set_num_workers": ["-j", "{}"],
    "set_persistent_workers": ["--persistent-workers"],
    "set_pin_memory": ["--pin-memory"],
    "set_prefetch_factor": ["--prefetch-factor", "{}"],
    "set_batch_size": ["-b", "{}"],
}

SAMPLE_RATE = 16_000
SECONDS = 4.0
N_FFT = 400
HOP = 160
N_MELS = 64


def _hz_to_mel(f: float) -> float:
    return 2595.0 * math.log10(1.0 + f / 700.0)


def _mel_filterbank(n_freqs: int, n_mels: int, sample_rate: int) -> torch.Tensor:
    """Triangular HTK filters, [n_freqs, n_mels], unnormalized (torchaudio's defaults)."""
    freqs = torch.linspace(0, sample_rate // 2, n_freqs)
    mels = torch.linspace(_hz_to_mel(0.0), _hz_to_mel(sample_rate / 2), n_mels + 2)
    pts = 700.0 * (10 ** (mels / 2595.0) - 1.0)
    diff = pts[1:] - pts[:-1]
    slopes = pts.unsqueeze(0) - freqs.unsqueeze(1)
    down = -slopes[:, :-2] / diff[:-1]
    up = slopes[:, 2:] / diff[1:]
    return torch.clamp(torch.minimum(down, up), min=0.0)


class _FallbackFeatures(nn.Module):
    """The torchaudio pipeline's stand-in: power STFT, mel projection, dB (80 dB range), one
    frequency and one time mask of random width."""

    def __init__(self, freq_mask: int, time_mask: int) -> None:
        super().__init__()
        self.register_buffer("window", torch.hann_window(N_FFT))
        self.register_buffer("fb", _mel_filterbank(N_FFT // 2 + 1, N_MELS, SAMPLE_RATE))
        self.freq_mask = freq_mask
        self.time_mask = time_mask

    @staticmethod
    def _mask(spec: torch.Tensor, param: int, dim: int) -> torch.Tensor:
        width = int(torch.randint(0, param, (1,)))
        start = int(torch.randint(0, spec.shape[dim] - width + 1, (1,)))
        spec.narrow(dim, start, width).zero_()
        return spec

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        spec = torch.stft(wave, N_FFT, HOP, window=self.window, return_complex=True)
        power = spec.abs().pow(2)  # [channel, freq, time]
        mel = torch.matmul(power.transpose(-1, -2), self.fb).transpose(-1, -2)
        db = 10.0 * torch.log10(torch.clamp(mel, min=1e-10))
        db = torch.maximum(db, db.amax() - 80.0)  # AmplitudeToDB's top_db
        db = self._mask(db, self.freq_mask, dim=-2)
        return self._mask(db, self.time_mask, dim=-1)


def build_features(
    freq_mask: int = 15, time_mask: int = 40
) -> Callable[[torch.Tensor], torch.Tensor]:
    if torchaudio is None:
        print("note: torchaudio is not installed; log-mels come from torch.stft instead")
        return _FallbackFeatures(freq_mask, time_mask)
    t = torchaudio.transforms
    return nn.Sequential(
        t.MelSpectrogram(sample_rate=SAMPLE_RATE, n_fft=N_FFT, hop_length=HOP, n_mels=N_MELS),
        t.AmplitudeToDB(stype="power", top_db=80.0),
        t.FrequencyMasking(freq_mask_param=freq_mask),
        t.TimeMasking(time_mask_param=time_mask),
    )


class SyntheticSpeechCommands(Dataset[tuple[torch.Tensor, int]]):
    """4-second clips: a tone whose pitch is the label, two harmonics and noise, drawn from a
    generator seeded with the index, turned into augmented log-mels on fetch."""

    def __init__(
        self, length: int, classes: int, features: Callable[[torch.Tensor], torch.Tensor]
    ) -> None:
        self.length = length
        self.classes = classes
        self.features = features
        self.t = torch.arange(int(SAMPLE_RATE * SECONDS)) / SAMPLE_RATE

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(index)
        label = index % self.classes
        f0 = 110.0 * 2 ** (label / 4) * (1 + 0.02 * float(torch.randn(1, generator=g)))
        phase = 2 * math.pi * self.t * f0
        wave = torch.sin(phase) + 0.5 * torch.sin(2 * phase) + 0.25 * torch.sin(3 * phase)
        wave = 0.3 * wave + 0.05 * torch.randn(self.t.shape, generator=g)
        return self.features(wave.unsqueeze(0)), label


class AudioCNN(nn.Module):
    def __init__(self, classes: int, width: int = 32) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 1
        for c_out in (width, width * 2, width * 4, width * 8):
            layers += [
                nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
                nn.BatchNorm2d(c_out),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
            ]
            c_in = c_out
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean(dim=(-2, -1)))


def main() -> None:
    p = parser(__doc__, iters=40)
    p.add_argument("-b", "--batch-size", type=int, default=None, help="64 on cuda, 8 on cpu")
    p.add_argument("-j", "--num-workers", type=int, default=0)
    p.add_argument("--persistent-workers", action="store_true", help="keep workers across epochs")
    p.add_argument("--pin-memory", action="store_true", help="pin the loader's batches")
    p.add_argument("--prefetch-factor", type=int, default=None, help="batches ahead per worker")
    p.add_argument("--lr", type=float, default=1e-3)
    args = p.parse_args()
    dev = pick_device(args.device)
    cuda = dev.type == "cuda"
    batch_size = args.batch_size or (64 if cuda else 8)
    workers = 8 if args.fix else args.num_workers
    classes = 12

    dataset = SyntheticSpeechCommands(length=50_000, classes=classes, features=build_features())
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=workers,
        pin_memory=(args.fix or args.pin_memory) and cuda,
        persistent_workers=(args.fix or args.persistent_workers) and workers > 0,
        prefetch_factor=args.prefetch_factor if workers > 0 else None,
        drop_last=True,
    )
    model = AudioCNN(classes).to(dev)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-2)
    criterion = nn.CrossEntropyLoss()

    model.train()
    step = 0
    with Clock("audio_melspec_loader", args, dev) as clock:
        while step < args.iters:
            for mels, labels in loader:
                mels = mels.to(dev, non_blocking=True)
                labels = labels.to(dev, non_blocking=True)
                loss = criterion(model(mels), labels)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                clock.mark(len(mels))
                step += 1
                if step >= args.iters:
                    break
        clock.done()


if __name__ == "__main__":
    main()
