"""A graph network fed one small graph a batch, each batch a dict of node features, edges and
the graph each node belongs to (the structure PyG's ``Batch`` holds).

At one graph of 30 nodes a step, every step is a few dozen tiny kernels: the GPU waits for
their launches. The script counts graphs. Fix: 64 graphs a batch (the collate joins them, and
the step does 64x the work for about the same launches).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import Steps, parse_args, pick_device
from torch import nn
from torch.utils.data import DataLoader, Dataset

LABEL = "graph batches of one graph (dict batches: x, edge_index, batch)"
EXPECTED = {"bottleneck": "launch_overhead", "finding": "load.small_batch"}
REQUIRES_CUDA = True
NODES, FEATURES, CLASSES = 30, 32, 4


class Graphs(Dataset[dict[str, torch.Tensor]]):
    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        src = torch.randint(0, NODES, (90,), generator=g)
        dst = torch.randint(0, NODES, (90,), generator=g)
        return {
            "x": torch.randn(NODES, FEATURES, generator=g),
            "edge_index": torch.stack([src, dst]),
            "y": torch.tensor(i % CLASSES),
        }


def collate(graphs: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Graphs joined into one: edges renumbered, each node tagged with its graph."""
    offsets = [i * NODES for i in range(len(graphs))]
    return {
        "x": torch.cat([g["x"] for g in graphs]),
        "edge_index": torch.cat(
            [g["edge_index"] + o for g, o in zip(graphs, offsets, strict=True)], dim=1
        ),
        "batch": torch.arange(len(graphs)).repeat_interleave(NODES),
        "y": torch.stack([g["y"] for g in graphs]),
    }


class GraphConv(nn.Module):
    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d_in, d_out)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        src, dst = edge_index
        msg = torch.zeros_like(x).index_add_(0, dst, x[src])
        deg = torch.zeros(x.shape[0], device=x.device).index_add_(
            0, dst, torch.ones_like(dst, dtype=x.dtype)
        )
        return self.lin((x + msg) / (1 + deg).unsqueeze(1))


class GCN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList([GraphConv(FEATURES, 64), GraphConv(64, 64), GraphConv(64, 64)])
        self.head = nn.Linear(64, CLASSES)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor,
                graphs: int) -> torch.Tensor:  # fmt: skip
        for conv in self.convs:
            x = F.relu(conv(x, edge_index))
        pooled = torch.zeros(graphs, x.shape[1], device=x.device).index_add_(0, batch, x)
        return self.head(pooled / NODES)


def main() -> None:
    args = parse_args(__doc__, iters=60)
    dev = pick_device(args.device)
    graphs = args.batch or (64 if args.fix else 1)
    loader = DataLoader(Graphs(), batch_size=graphs, collate_fn=collate)
    torch.manual_seed(0)
    model = GCN().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with Steps("graph_batches", args, dev, graphs) as steps:
        for i, data in enumerate(loader):
            if i >= args.iters:
                break
            data = {k: v.to(dev) for k, v in data.items()}
            # The batch says how many graphs it holds (PyG's ``Batch.num_graphs``), host-side.
            out = model(data["x"], data["edge_index"], data["batch"], data["y"].shape[0])
            loss = F.cross_entropy(out, data["y"])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps.mark()


if __name__ == "__main__":
    main()
