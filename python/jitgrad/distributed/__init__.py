"""jitgrad.distributed: data-parallel training over MPI (PyTorch's
torch.distributed surface for the "mpi" backend).  Start the processes with
mpirun (`mpirun -np 2 python train.py`); docs/distributed.md.

Reductions are deterministic by default: every rank's values are gathered and
summed in rank order, so results are bitwise the same on every rank and every
run (deterministic=False: MPI's own sum)."""
import datetime as _datetime

from .. import _C

__all__ = ["ReduceOp", "is_available", "init_process_group", "is_initialized", "get_rank",
           "get_world_size", "all_reduce", "broadcast", "barrier", "destroy_process_group",
           "get_backend"]


class ReduceOp:
    """The reductions all_reduce offers."""
    SUM = "sum"
    AVG = "avg"


def is_available():
    """True when jitgrad was built with MPI (libopenmpi-dev at build time)."""
    return _C._dist_available()


def _need_mpi():
    if not is_available():
        raise RuntimeError("jitgrad.distributed: this jitgrad was built without MPI; install "
                           "libopenmpi-dev openmpi-bin (scripts/deps.sh test) and rebuild")


def init_process_group(backend="mpi", init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None):
    """Joins the processes mpirun started (MPI_COMM_WORLD).  Only the "mpi"
    backend exists; world_size and rank, when given, must match MPI's.
    timeout (a datetime.timedelta): how long a collective may wait for the
    other ranks before every rank is aborted (default 300 s, or the
    JITGRAD_DIST_TIMEOUT environment variable)."""
    if str(backend).lower() != "mpi":
        raise RuntimeError(f"jitgrad.distributed: backend {backend!r} is not supported; only "
                           "'mpi' is (start the processes with mpirun)")
    _need_mpi()
    if timeout is not None:
        if not isinstance(timeout, _datetime.timedelta):
            raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got "
                            f"{type(timeout).__name__}")
        _C._dist_set_timeout(timeout.total_seconds())
    _C._dist_init()
    if world_size not in (-1, None) and world_size != _C._dist_world_size():
        got = _C._dist_world_size()
        _C._dist_finalize()
        raise ValueError(f"init_process_group: world_size={world_size} but mpirun started "
                         f"{got} process(es)")
    if rank not in (-1, None) and rank != _C._dist_rank():
        got = _C._dist_rank()
        _C._dist_finalize()
        raise ValueError(f"init_process_group: rank={rank} but MPI gave this process rank {got}")


def is_initialized():
    return is_available() and _C._dist_is_initialized()


def _check_group(group):
    if group is not None:
        raise ValueError("jitgrad.distributed: only the default group (group=None) is supported")


def get_backend(group=None):
    _check_group(group)
    _need_mpi()
    _C._dist_rank()  # (raises before init)
    return "mpi"


def get_rank(group=None):
    _check_group(group)
    _need_mpi()
    return _C._dist_rank()


def get_world_size(group=None):
    _check_group(group)
    _need_mpi()
    return _C._dist_world_size()


def _check_sync(async_op):
    if async_op:
        raise ValueError("jitgrad.distributed: async_op=True is not supported (collectives "
                         "complete before returning)")


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False, deterministic=True):
    """In place: tensor becomes the sum (or average) of every rank's tensor."""
    _check_group(group)
    _check_sync(async_op)
    _need_mpi()
    if op not in (ReduceOp.SUM, ReduceOp.AVG):
        raise ValueError(f"all_reduce: unsupported op {op!r} (ReduceOp.SUM or ReduceOp.AVG)")
    _C._dist_all_reduce(tensor, op == ReduceOp.AVG, bool(deterministic))


def broadcast(tensor, src, group=None, async_op=False):
    """In place: every rank's tensor becomes rank src's."""
    _check_group(group)
    _check_sync(async_op)
    _need_mpi()
    _C._dist_broadcast(tensor, int(src))


def barrier(group=None, async_op=False, device_ids=None):
    _check_group(group)
    _check_sync(async_op)
    _need_mpi()
    _C._dist_barrier()


def destroy_process_group(group=None):
    """Leaves the group (finalizes MPI if init_process_group started it;
    MPI cannot be started again in the same process)."""
    _check_group(group)
    _need_mpi()
    _C._dist_finalize()
