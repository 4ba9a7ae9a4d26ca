"""PyG graph classification with a 3-layer GCN, one small graph per batch.

The loop: a synthetic in-memory list of ``Data`` graphs (30 nodes, random undirected edges, 64
node features, one class label each) batched by ``torch_geometric.loader.DataLoader``, a model of
three ``GCNConv`` layers, ``global_mean_pool`` and a linear head, called as
``model(batch.x, batch.edge_index, batch.batch)``, trained with Adam on cross-entropy.

What holds the GPU back: ``--batch-size`` defaults to 1, so every step is one 30-node graph. Each
kernel does next to nothing and the step's time is the host launching some hundred of them
(message passing, normalisation, backward, Adam): launch overhead. Growing the batch here means
more graphs per ``Batch`` (PyG concatenates node features and offsets ``edge_index``); repeating
tensors along dim 0 would be wrong, since ``edge_index`` is ``[2, E]``.

--fix: ``--batch-size 64``, 64 graphs per step; the model and the training are the same.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _corpus import Clock, parser, pick_device
from torch import nn
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GCNConv, global_mean_pool

LIBRARY = "torch_geometric"
LABEL = "PyG GCN graph classification, batch of 1 graph (30 nodes): launch-bound"
EXPECTED = {"bottleneck": "launch_overhead", "pick": "batch"}
FIX = "--batch-size 64 (64 graphs per PyG Batch instead of 1)"

NUM_NODES = 30
NUM_FEATURES = 64
NUM_CLASSES = 4


def make_graphs(count: int, seed: int = 0) -> list[Data]:
    """Random graphs whose label depends on their features, so the loss has something to learn."""
    g = torch.Generator().manual_seed(seed)
    graphs = []
    for _ in range(count):
        x = torch.randn(NUM_NODES, NUM_FEATURES, generator=g)
        num_edges = int(torch.randint(40, 90, (1,), generator=g))
        src = torch.randint(0, NUM_NODES, (num_edges,), generator=g)
        dst = torch.randint(0, NUM_NODES, (num_edges,), generator=g)
        keep = src != dst
        src, dst = src[keep], dst[keep]
        # Both directions: GCN expects an undirected graph.
        edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
        y = torch.tensor([int(x[:, :NUM_CLASSES].mean(0).argmax())])
        graphs.append(Data(x=x, edge_index=edge_index, y=y))
    return graphs


class GCN(nn.Module):
    def __init__(self, in_channels: int, hidden: int, num_classes: int) -> None:
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden)
        self.conv2 = GCNConv(hidden, hidden)
        self.conv3 = GCNConv(hidden, hidden)
        self.lin = nn.Linear(hidden, num_classes)

    def forward(
        self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor
    ) -> torch.Tensor:
        x = self.conv1(x, edge_index).relu()
        x = self.conv2(x, edge_index).relu()
        x = self.conv3(x, edge_index)
        x = global_mean_pool(x, batch)
        x = F.dropout(x, p=0.5, training=self.training)
        return self.lin(x)


def main() -> None:
    p = parser(__doc__, iters=1500)
    p.add_argument("--batch-size", type=int, default=1, help="graphs per batch")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--num-graphs", type=int, default=None, help="dataset size")
    args = p.parse_args()
    if args.fix:
        args.batch_size = 64
    dev = pick_device(args.device)
    torch.manual_seed(0)

    num_graphs = args.num_graphs or (4096 if dev.type == "cuda" else 512)
    dataset = make_graphs(num_graphs)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)

    model = GCN(NUM_FEATURES, args.hidden, NUM_CLASSES).to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-4)

    step = 0
    epoch = 0
    with Clock("pyg_gcn_graph_batches", args, dev) as clock:
        while step < args.iters:
            epoch += 1
            model.train()
            # Kept on the device: a float() per step would add a sync to every graph.
            total_loss = torch.zeros((), device=dev)
            seen = 0
            for batch in loader:
                batch = batch.to(dev)
                optimizer.zero_grad()
                out = model(batch.x, batch.edge_index, batch.batch)
                loss = F.cross_entropy(out, batch.y)
                loss.backward()
                optimizer.step()
                total_loss += loss.detach() * batch.num_graphs
                seen += batch.num_graphs
                step += 1
                clock.mark(batch.num_graphs)
                if step >= args.iters:
                    break
            print(f"epoch {epoch:03d} graphs {seen} loss {float(total_loss) / max(seen, 1):.4f}")
        clock.done()


if __name__ == "__main__":
    main()
