"""A click-through recommender with 806 small parameter tensors, stepped by a per-parameter Adam.

The loop: 200 categorical features, each with its own ``nn.Embedding(1000, 16)`` and its own
``Linear(16, 16)`` tower, and 100 dense features, each with a ``Linear(1, 16)``; the 300 feature
vectors are concatenated into a top MLP (4800 -> 512 -> 256 -> 1) trained on binary
cross-entropy at batch 512. Batches come from an in-memory feature store as a dict of tensors
(``{"sparse": [B, 200], "dense": [B, 100], "label": [B]}``) and the model is called
``model(batch)``. The optimizer is ``torch.optim.Adam(model.parameters(), foreach=False)``.

What holds the GPU back: every tensor in the step is small, and the single-tensor Adam runs its
update as a handful of separate kernels for each of the 806 parameters, thousands of launches a
step on top of the per-feature forward and backward: the host's launch rate sets the pace
(launch overhead), with the GPU mostly idle.

--fix: ``Adam(..., fused=True)`` on CUDA (``foreach=True`` on the CPU), the update of all the
parameters in a few multi-tensor kernels; the model and data are the same. The what-if's
``fused_optimizer`` knob builds the script's own Adam with ``fused=True`` in a re-run.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _corpus import Clock, parser, pick_device
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler

LIBRARY = "torch"
LABEL = "recommender with 806 small params and Adam(foreach=False): launch-bound optimizer"
EXPECTED = {"bottleneck": "launch_overhead", "pick": "fused_optimizer"}
FIX = "Adam(fused=True) on CUDA (foreach=True on CPU) instead of foreach=False"

NUM_SPARSE = 200
NUM_DENSE = 100
CARDINALITY = 1000
EMB_DIM = 16


class FeatureStore(Dataset):
    """Rows of a click log held in memory; indexed by a list of row ids, it returns a batch."""

    def __init__(self, rows: int, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.sparse = torch.randint(0, CARDINALITY, (rows, NUM_SPARSE), generator=g)
        self.dense = torch.randn(rows, NUM_DENSE, generator=g).abs().log1p()
        # Clicks depend on a few features so that the loss can fall.
        score = (self.sparse[:, :8] % 7 == 0).float().sum(1) + self.dense[:, :4].sum(1)
        self.label = (score > score.median()).float()

    def __len__(self) -> int:
        return len(self.label)

    def __getitem__(self, rows: list[int]) -> dict[str, torch.Tensor]:
        idx = torch.as_tensor(rows)
        return {"sparse": self.sparse[idx], "dense": self.dense[idx], "label": self.label[idx]}


class Recommender(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(
            nn.Embedding(CARDINALITY, EMB_DIM) for _ in range(NUM_SPARSE)
        )
        self.towers = nn.ModuleList(nn.Linear(EMB_DIM, EMB_DIM) for _ in range(NUM_SPARSE))
        self.dense_proj = nn.ModuleList(nn.Linear(1, EMB_DIM) for _ in range(NUM_DENSE))
        self.top = nn.Sequential(
            nn.Linear((NUM_SPARSE + NUM_DENSE) * EMB_DIM, 512),
            nn.ReLU(),
            nn.Linear(512, 256),
            nn.ReLU(),
            nn.Linear(256, 1),
        )

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        sparse, dense = batch["sparse"], batch["dense"]
        feats = [
            F.relu(tower(emb(sparse[:, i])))
            for i, (emb, tower) in enumerate(zip(self.embeddings, self.towers, strict=True))
        ]
        feats += [proj(dense[:, i : i + 1]) for i, proj in enumerate(self.dense_proj)]
        return self.top(torch.cat(feats, dim=1)).squeeze(1)


def main() -> None:
    p = parser(__doc__, iters=120)
    p.add_argument("--batch-size", type=int, default=None, help="rows per step (512; 128 on CPU)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--rows", type=int, default=None, help="rows in the feature store")
    args = p.parse_args()
    dev = pick_device(args.device)
    cuda = dev.type == "cuda"
    args.batch_size = args.batch_size or (512 if cuda else 128)
    torch.manual_seed(0)

    store = FeatureStore(args.rows or (65536 if cuda else 8192))
    # Whole batches in one gather: the sampler hands the store a list of row ids.
    sampler = BatchSampler(RandomSampler(store), batch_size=args.batch_size, drop_last=True)
    loader = DataLoader(store, sampler=sampler, batch_size=None, pin_memory=cuda)

    model = Recommender().to(dev)
    if args.fix:
        opt_kwargs = {"fused": True} if cuda else {"foreach": True}
    else:
        opt_kwargs = {"foreach": False}
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, **opt_kwargs)
    print(f"{sum(1 for _ in model.parameters())} parameter tensors, Adam({opt_kwargs})")

    step = 0
    with Clock("recsys_many_params", args, dev) as clock:
        while step < args.iters:
            model.train()
            for batch in loader:
                batch = {k: v.to(dev, non_blocking=True) for k, v in batch.items()}
                optimizer.zero_grad(set_to_none=True)
                logits = model(batch)
                loss = F.binary_cross_entropy_with_logits(logits, batch["label"])
                loss.backward()
                optimizer.step()
                step += 1
                clock.mark(batch["label"].numel())
                if step >= args.iters:
                    break
        clock.done()


if __name__ == "__main__":
    main()
