"""DistributedDataParallel: one model replica per process (mpirun), the
gradients averaged across processes while backward runs.  The work is done
in C (src/dist, jg_dist_ddp): docs/distributed.md."""
from ... import _C
from ... import distributed as _dist
from ..modules import Module


class DistributedDataParallel(Module):
    """DistributedDataParallel(module, device_ids=None, output_device=None,
    dim=0, broadcast_buffers=True, process_group=None, bucket_cap_mb=25,
    find_unused_parameters=False, check_reduction=False,
    gradient_as_bucket_view=False, static_graph=False, deterministic=True)

    At construction rank 0's parameters and buffers are broadcast to every
    rank.  In each backward the parameters' gradients are packed, as they
    become final, into buckets of at most bucket_cap_mb MiB (reverse
    registration order) whose reductions start at once; backward returns
    after all completed, with every .grad the average over the ranks,
    bitwise equal on every rank.  deterministic=True (default) sums in rank
    order; False uses MPI's own sum (faster on large worlds, its order may
    vary).  find_unused_parameters=False makes a parameter that got no
    gradient an error on every rank; True lets it contribute zeros (a
    parameter no rank used keeps no gradient).  A backward that fails on one
    rank raises on every rank, no .grad changed."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=25,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, deterministic=True):
        super().__init__()
        if device_ids is not None or output_device is not None:
            raise ValueError("DistributedDataParallel device_ids and output_device arguments "
                             "only work with single-device/multiple-device GPU modules; "
                             "jitgrad runs on the CPU: leave them None")
        if process_group is not None:
            raise ValueError("DistributedDataParallel: only the default process group is "
                             "supported")
        if not _dist.is_initialized():
            raise RuntimeError("Default process group has not been initialized, please make "
                               "sure to call init_process_group.")
        if not isinstance(bucket_cap_mb, (int, float)) or bucket_cap_mb <= 0:
            raise ValueError(f"bucket_cap_mb must be a positive number, got {bucket_cap_mb!r}")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = bool(find_unused_parameters)
        self.deterministic = bool(deterministic)
        self.bucket_cap_mb = bucket_cap_mb
        self.dim = dim
        params = list(module.parameters())
        seen = set()
        for p in params:
            if id(p) in seen:
                raise ValueError("DistributedDataParallel: a parameter is registered twice")
            seen.add(id(p))
        # (the C object broadcasts the parameters from rank 0 and hooks them)
        self._ddp = _C._dist_ddp_new(params, max(1, int(bucket_cap_mb * 1024 * 1024)),
                                     self.deterministic, self.find_unused_parameters, False)
        self._sync_buffers()

    def _sync_buffers(self):
        if _dist.get_world_size() > 1:
            for b in self.module.buffers():
                _dist.broadcast(b, 0)

    def forward(self, *inputs, **kwargs):
        if self.broadcast_buffers:
            self._sync_buffers()
        return self.module(*inputs, **kwargs)

    def reduction_stats(self):
        """What the last backward did: n_buckets, launched_during_backward
        (buckets whose reduction started before backward's computations
        ended), and MPI_Wtime stamps first_ready, first_launch, last_ready,
        compute_end, reduce_end; wait_seconds = reduce_end - compute_end (the
        reduction not hidden under backward)."""
        return _C._dist_ddp_stats(self._ddp)
