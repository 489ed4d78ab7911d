"""Step time of data-parallel training (run under mpirun by bench/dist/run.sh).

    mpirun -np N python bench/dist/ddp_bench.py {mlp,transformer} [--batch 64]

One step = forward + backward (with DDP's reductions) + SGD step on this
rank's share of a global batch of --batch samples.  Rank 0 prints one JSON
line: the median step time, and from DDP's stats how long the reductions
took from the first bucket's start to their end and how much of that was
exposed after backward's computations ended (wait)."""
import argparse
import json
import statistics
import time

import jitgrad as torch
import jitgrad.distributed as dist
from jitgrad import nn
from jitgrad.nn.parallel import DistributedDataParallel as DDP

ap = argparse.ArgumentParser()
ap.add_argument("model", choices=["mlp", "transformer"])
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--warmup", type=int, default=5)
ap.add_argument("--bucket-mb", type=float, default=25)
ap.add_argument("--nondeterministic", action="store_true")
args = ap.parse_args()

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
per = args.batch // world
torch.manual_seed(0)
if args.model == "mlp":  # the MLP example, wider
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    x = torch.randn(per, 256)
    y = torch.randint(0, 10, (per,))

    def loss_of():
        return nn.functional.cross_entropy(ddp(x), y)
else:  # a small transformer encoder (the GPT example's block size)
    d, seq = 128, 32
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0,
                                                             batch_first=True), 2)
    x = torch.randn(per, seq, d)

    def loss_of():
        return ddp(x).pow(2).mean()
ddp = DDP(model, bucket_cap_mb=args.bucket_mb, deterministic=not args.nondeterministic)
opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
n_bytes = sum(p.numel() * 4 for p in model.parameters())
times, spans, waits = [], [], []
for step in range(args.warmup + args.steps):
    dist.barrier()
    t0 = time.perf_counter()
    opt.zero_grad()
    loss_of().backward()
    opt.step()
    t1 = time.perf_counter()
    st = ddp.reduction_stats()
    if step >= args.warmup:
        times.append(t1 - t0)
        spans.append(st["reduce_end"] - st["first_launch"])
        waits.append(st["wait_seconds"])
if rank == 0:
    span, wait = statistics.median(spans), statistics.median(waits)
    print(json.dumps({"model": args.model, "np": world, "global_batch": args.batch,
                      "param_bytes": n_bytes, "buckets": st["n_buckets"],
                      "step_ms": 1e3 * statistics.median(times),
                      "reduce_span_ms": 1e3 * span, "reduce_wait_ms": 1e3 * wait,
                      "hidden": 0.0 if span <= 0 else max(0.0, 1 - wait / span)}))
dist.destroy_process_group()
