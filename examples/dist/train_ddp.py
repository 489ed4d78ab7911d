"""Data-parallel training in Python: `mpirun -np 2 python examples/dist/train_ddp.py`
(make demo-dist).  A small classifier, DistributedDataParallel over it,
DistributedSampler giving each process its share of every batch.

Each process also trains the one-process reference that DDP is bitwise equal
to (docs/distributed.md): the same micro-batches' gradients accumulated in
rank order, then averaged; at the end it checks the parameters on every rank.
"""
import argparse

import jitgrad as torch
import jitgrad.distributed as dist
from jitgrad import nn
from jitgrad.nn.parallel import DistributedDataParallel as DDP
from jitgrad.utils.data import DataLoader, DistributedSampler, TensorDataset

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=3)
ap.add_argument("--batch", type=int, default=32, help="global batch (all processes)")
ap.add_argument("--compile", action="store_true", help="run the model through jitgrad.compile")
args = ap.parse_args()

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
assert args.batch % world == 0, "the processes must divide the global batch"

torch.manual_seed(0)  # the same data on every rank
n = 256
x = torch.randn(n, 2)
y = ((x[:, 0] * x[:, 1]) > 0).long()  # XOR-like quadrants
data = TensorDataset(x, y)

torch.manual_seed(1 + rank)  # different initial weights: DDP broadcasts rank 0's
model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 2))
ddp = DDP(model)
ref = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 2))
ref.load_state_dict(model.state_dict())
fwd = torch.compile(ddp) if args.compile else ddp
ref_fwd = torch.compile(ref) if args.compile else ref
opt = torch.optim.SGD(ddp.parameters(), lr=0.2, momentum=0.9)
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.2, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()

steps = 0
for epoch in range(args.epochs):
    for start in range(0, n, args.batch):
        batch = torch.utils.data.Subset(data, list(range(start, start + args.batch)))
        # this process's share of the global batch
        (xb, yb), = DataLoader(batch, batch_size=args.batch,
                               sampler=DistributedSampler(batch, shuffle=False))
        opt.zero_grad()
        loss = loss_fn(fwd(xb), yb)
        loss.backward()
        opt.step()
        # the reference: every rank's share, in one process, in rank order
        ref_opt.zero_grad()
        for r in range(world):
            (xr, yr), = DataLoader(batch, batch_size=args.batch, sampler=DistributedSampler(
                batch, num_replicas=world, rank=r, shuffle=False))
            loss_fn(ref_fwd(xr), yr).backward()
        with torch.no_grad():
            for p in ref.parameters():
                p.grad.div_(world)
        ref_opt.step()
        steps += 1
    mean = loss.detach().clone()
    dist.all_reduce(mean, dist.ReduceOp.AVG)
    if rank == 0:
        print(f"epoch {epoch}  loss {mean.item():.4f} (mean over {world} processes)")

same = all(p.detach().numpy().tobytes() == q.detach().numpy().tobytes()
           for p, q in zip(model.parameters(), ref.parameters()))
flag = torch.tensor([1.0 if same else 0.0])
dist.all_reduce(flag)
if rank == 0:
    verdict = "EQUAL" if flag.item() == world else "DIFFER FROM"
    print(f"{world} processes, {steps} steps: parameters {verdict} the 1-process run over the "
          f"same {world} micro-batches (bitwise, on every rank)")
    st = ddp.reduction_stats()
    print(f"last step: {st['n_buckets']} bucket(s), reductions waited "
          f"{1e6 * st['wait_seconds']:.0f} us after backward")
dist.destroy_process_group()
raise SystemExit(0 if flag.item() == world else 1)
