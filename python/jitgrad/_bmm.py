"""bmm and baddbmm (torch.bmm, torch.baddbmm and the Tensor methods): batched
matmul of 3-D tensors with PyTorch's argument checks, composed of the library's
matmul, mul and add.  Integer batches give float32, as matmul does."""
from . import _C

_SCALAR_NAMES = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int",
                 "bool": "Bool"}


def _scalar_name(dtype):
    name = str(dtype).split(".")[-1]
    return _SCALAR_NAMES.get(name, name)


def _check(batch1, batch2):
    for name, t in (("batch1", batch1), ("batch2", batch2)):
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"bmm(): argument '{'input' if name == 'batch1' else 'mat2'}' "
                            f"must be Tensor, not {type(t).__name__}")
        if t.dim() != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    want = [batch1.shape[0], batch1.shape[2]]
    got = [batch2.shape[0], batch2.shape[1]]
    if want != got:
        raise RuntimeError("Expected size for first two dimensions of batch2 tensor to be: "
                           f"{want} but got: {got}.")
    if batch1.dtype != batch2.dtype:
        raise RuntimeError(f"expected scalar type {_scalar_name(batch1.dtype)} but found "
                           f"{_scalar_name(batch2.dtype)}")


def bmm(input, mat2, *, out=None):
    if out is not None:
        raise TypeError("bmm(): jitgrad does not support out=")
    _check(input, mat2)
    return input.matmul(mat2)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (batch1 @ batch2); input broadcasts to the
    product's shape; with beta == 0 input is not read (NaN in it is ignored)."""
    if out is not None:
        raise TypeError("baddbmm(): jitgrad does not support out=")
    _check(batch1, batch2)
    prod = batch1.matmul(batch2)
    if alpha != 1:
        prod = prod * alpha
    base = input.to(prod.dtype).expand(*prod.shape)
    if beta == 0:
        return prod
    if beta != 1:
        base = base * beta
    return base + prod

