"""PyG GIN on synthetic molecules, positional encodings computed per graph in the main process.

The loop: synthetic molecule-like graphs (10-40 atoms: a chain backbone with a few ring closures,
atom types as node features, bond types as one-hot edge attributes) held as a list of ``Data``;
a ``Dataset`` whose ``__getitem__`` adds positional encodings per graph (a random-walk encoding
over bond-weighted transitions and Laplacian eigenvectors, with torch ops on the dense adjacency),
batched 32 graphs at a time by ``torch_geometric.loader.DataLoader`` and fed to a 4-layer
``GINConv`` model (an MLP per layer, sum pooling, a linear head) trained with Adam.

What holds the GPU back: ``--workers`` defaults to 0, so the per-graph encodings (a chain of small
matmuls and an ``eigh`` each, 32 graphs a step) run in the training process between steps and the
GPU waits for every batch: the input pipeline.

--fix: ``--workers 8`` with ``persistent_workers=True``: the same per-graph work in eight loader
processes, ahead of the GPU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _corpus import Clock, parser, pick_device
from torch import nn
from torch.utils.data import Dataset
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GINConv, global_add_pool

LIBRARY = "torch_geometric"
LABEL = "PyG GIN on molecules, per-graph positional encodings with num_workers=0: input-bound"
EXPECTED = {"bottleneck": "input_pipeline", "pick": "workers"}
FIX = "--workers 8 (DataLoader num_workers=8, persistent_workers=True)"

NUM_ATOM_TYPES = 9
NUM_BOND_TYPES = 4
WALK_LENGTH = 20
NUM_EIGVECS = 8
NUM_TASKS = 2


def make_molecules(count: int, seed: int = 0) -> list[Data]:
    """Chains of 10-40 atoms with ring closures; bonds carry a one-hot type."""
    g = torch.Generator().manual_seed(seed)
    mols = []
    for _ in range(count):
        n = int(torch.randint(10, 41, (1,), generator=g))
        atoms = torch.randint(0, NUM_ATOM_TYPES, (n,), generator=g)
        src = torch.arange(n - 1)
        dst = src + 1
        rings = max(1, n // 8)
        ring_src = torch.randint(0, n, (rings,), generator=g)
        ring_dst = (ring_src + torch.randint(4, 7, (rings,), generator=g)).clamp(max=n - 1)
        keep = ring_dst > ring_src + 2
        src = torch.cat([src, ring_src[keep]])
        dst = torch.cat([dst, ring_dst[keep]])
        bonds = torch.randint(0, NUM_BOND_TYPES, (src.numel(),), generator=g)
        edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
        edge_attr = F.one_hot(torch.cat([bonds, bonds]), NUM_BOND_TYPES).float()
        y = torch.tensor([[float(atoms.eq(0).sum() > n // 9), float(keep.sum() > 1)]])
        mols.append(Data(atoms=atoms, edge_index=edge_index, edge_attr=edge_attr, y=y, num_nodes=n))
    return mols


def positional_encoding(data: Data) -> torch.Tensor:
    """Random-walk return probabilities over bond-order weighted steps, plus Laplacian
    eigenvectors: [num_nodes, WALK_LENGTH + NUM_EIGVECS]."""
    n = data.num_nodes
    order = data.edge_attr @ torch.tensor([1.0, 2.0, 3.0, 1.5])  # single/double/triple/aromatic
    adj = torch.zeros(n, n)
    adj[data.edge_index[0], data.edge_index[1]] = order
    deg = adj.sum(1)
    trans = adj / deg.clamp(min=1e-6).unsqueeze(1)
    walk = trans
    rw = [walk.diagonal()]
    for _ in range(WALK_LENGTH - 1):
        walk = walk @ trans
        rw.append(walk.diagonal())
    inv_sqrt = deg.clamp(min=1e-6).rsqrt()
    lap = torch.eye(n) - inv_sqrt.unsqueeze(1) * adj * inv_sqrt.unsqueeze(0)
    _, vecs = torch.linalg.eigh(lap)
    eig = vecs[:, 1 : NUM_EIGVECS + 1]
    if eig.shape[1] < NUM_EIGVECS:
        eig = F.pad(eig, (0, NUM_EIGVECS - eig.shape[1]))
    return torch.cat([torch.stack(rw, dim=1), eig], dim=1)


class MoleculeDataset(Dataset):
    def __init__(self, mols: list[Data]) -> None:
        self.mols = mols

    def __len__(self) -> int:
        return len(self.mols)

    def __getitem__(self, idx: int) -> Data:
        mol = self.mols[idx]
        x = torch.cat([F.one_hot(mol.atoms, NUM_ATOM_TYPES).float(), positional_encoding(mol)], 1)
        return Data(x=x, edge_index=mol.edge_index, edge_attr=mol.edge_attr, y=mol.y)


def mlp(in_dim: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(in_dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, hidden)
    )


class GIN(nn.Module):
    def __init__(self, in_dim: int, hidden: int, num_layers: int, num_tasks: int) -> None:
        super().__init__()
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        for i in range(num_layers):
            self.convs.append(GINConv(mlp(in_dim if i == 0 else hidden, hidden), train_eps=True))
            self.norms.append(nn.BatchNorm1d(hidden))
        self.head = nn.Sequential(
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, num_tasks)
        )

    def forward(
        self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor
    ) -> torch.Tensor:
        for conv, norm in zip(self.convs, self.norms, strict=True):
            x = norm(conv(x, edge_index)).relu()
        return self.head(global_add_pool(x, batch))


def main() -> None:
    p = parser(__doc__, iters=400)
    p.add_argument("--batch-size", type=int, default=32, help="graphs per batch")
    p.add_argument("--workers", type=int, default=0, help="DataLoader num_workers")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--num-layers", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--num-graphs", type=int, default=None, help="dataset size")
    args = p.parse_args()
    dev = pick_device(args.device)
    if args.fix:
        # 8 loader processes on the 16-core GPU host; 2 where a CPU run shares its cores.
        args.workers = 8 if dev.type == "cuda" else 2
    torch.manual_seed(0)

    dataset = MoleculeDataset(make_molecules(args.num_graphs or 4000))
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        persistent_workers=args.workers > 0,
        pin_memory=dev.type == "cuda",
    )
    in_dim = NUM_ATOM_TYPES + WALK_LENGTH + NUM_EIGVECS
    model = GIN(in_dim, args.hidden, args.num_layers, NUM_TASKS).to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    step = 0
    with Clock("pyg_gin_molecules", args, dev) as clock:
        while step < args.iters:
            model.train()
            for batch in loader:
                batch = batch.to(dev, non_blocking=True)
                optimizer.zero_grad()
                out = model(batch.x, batch.edge_index, batch.batch)
                loss = F.binary_cross_entropy_with_logits(out, batch.y)
                loss.backward()
                optimizer.step()
                step += 1
                clock.mark(batch.num_graphs)
                if step >= args.iters:
                    break
        clock.done()


if __name__ == "__main__":
    main()
