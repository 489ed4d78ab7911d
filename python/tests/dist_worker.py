"""Run by test_distributed.py under mpirun: data-parallel checks of
jitgrad.distributed and DistributedDataParallel.  Exit 0 = pass.
    dist_worker.py ddp [eager|compiled]  parameters bitwise equal on every rank
        and to one process accumulating the ranks' micro-batches in rank
        order, after every step; the first bucket starts during backward
    dist_worker.py fail     rank 1 raises mid-backward: every rank raises,
        no .grad changes, the next step works
    dist_worker.py unused   find_unused_parameters False (error) / True
"""
import sys

import jitgrad as torch
import jitgrad.distributed as dist
from jitgrad import nn
from jitgrad.nn.parallel import DistributedDataParallel as DDP
from jitgrad.utils.data import DataLoader, DistributedSampler, TensorDataset

BATCH, STEPS = 12, 3


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))


def data():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(STEPS * BATCH, 4, generator=g)
    y = torch.randn(STEPS * BATCH, 3, generator=g)
    return TensorDataset(x, y)


def bits(t):
    return t.detach().numpy().tobytes()


def check_ddp(mode):
    rank, n = dist.get_rank(), dist.get_world_size()
    model = make_model(100 + rank)  # different per rank: DDP broadcasts rank 0's
    ddp = DDP(model, bucket_cap_mb=100 / 2**20)  # ~100-byte buckets: several
    ref = make_model(0)
    ref.load_state_dict(model.state_dict())
    fwd = torch.compile(ddp) if mode == "compiled" else ddp
    ref_fwd = torch.compile(ref) if mode == "compiled" else ref
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ds = data()
    # each step's global batch: BATCH consecutive samples; rank r's
    # micro-batch: what DistributedSampler gives it (r, r + n, ...)
    for step in range(STEPS):
        sub = torch.utils.data.Subset(ds, list(range(step * BATCH, (step + 1) * BATCH)))
        sampler = DistributedSampler(sub, shuffle=False)
        (x, y), = list(DataLoader(sub, batch_size=BATCH, sampler=sampler))
        opt.zero_grad()
        nn.functional.mse_loss(fwd(x), y).backward()
        st = ddp.reduction_stats()
        assert st["launched_during_backward"] >= 1, st
        assert st["n_buckets"] > 1 and st["first_launch"] < st["last_ready"], st
        # one process: the same micro-batches, gradients accumulated in rank
        # order, then averaged
        ref_opt.zero_grad()
        for r in range(n):
            idx = DistributedSampler(sub, num_replicas=n, rank=r, shuffle=False)
            (xr, yr), = list(DataLoader(sub, batch_size=BATCH, sampler=idx))
            nn.functional.mse_loss(ref_fwd(xr), yr).backward()
        with torch.no_grad():
            for p in ref.parameters():
                p.grad.div_(n)
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            assert bits(p.grad) == bits(q.grad), f"step {step}: {name}.grad differs"
        opt.step()
        ref_opt.step()
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            assert bits(p) == bits(q), f"step {step}: {name} differs from one process"
            mine = p.detach().clone()
            dist.broadcast(mine, 0)
            assert bits(mine) == bits(p), f"step {step}: {name} differs from rank 0's"
    if rank == 0:
        print(f"ddp {mode} np {n}: parameters equal to one process after {STEPS} steps; "
              f"{st['n_buckets']} buckets, first started "
              f"{1e6 * (st['last_ready'] - st['first_launch']):.1f} us before the last "
              "gradient was ready")


class Boom(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        raise ValueError(f"injected failure on rank {dist.get_rank()}")


def check_fail():
    rank = dist.get_rank()
    model = make_model(3)
    ddp = DDP(model, bucket_cap_mb=100 / 2**20)
    x = torch.randn(4, 4)
    h = model[1](model[0](x))
    if rank == 1:
        h = Boom.apply(h)
    loss = model[2](h).sum()
    try:
        loss.backward()
    except ValueError as e:
        assert rank == 1 and "injected failure on rank 1" in str(e), e
    except RuntimeError as e:
        assert rank != 1 and "backward failed on rank 1" in str(e), e
    else:
        raise AssertionError("backward did not fail")
    assert all(p.grad is None for p in model.parameters())
    ddp(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    if rank == 0:
        print("fail: every rank raised; the next step worked")


def check_unused():
    rank = dist.get_rank()
    for find in (False, True):
        model = make_model(3)
        extra = nn.Linear(2, 2)
        model.add_module("unused", extra)
        ddp = DDP(model, find_unused_parameters=find)
        out = ddp.module[2](ddp.module[1](ddp.module[0](torch.randn(2, 4)))).sum()
        try:
            out.backward()
        except RuntimeError as e:
            assert not find and "find_unused_parameters=True" in str(e), e
        else:
            assert find
            assert extra.weight.grad is None  # no rank used it: no gradient
            assert model[0].weight.grad is not None
    if rank == 0:
        print("unused: ok")


if __name__ == "__main__":
    dist.init_process_group("mpi")
    what = sys.argv[1]
    if what == "ddp":
        check_ddp(sys.argv[2] if len(sys.argv) > 2 else "eager")
    elif what == "fail":
        check_fail()
    elif what == "unused":
        check_unused()
    dist.barrier()
    dist.destroy_process_group()
