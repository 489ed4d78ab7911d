"""Errors: the same exception type and message under PyTorch and jitgrad."""
import pytest

from scenarios import det


def bad_functions(T):
    class BadCount(T.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, flag):
            return q * k * v

        @staticmethod
        def backward(ctx, g):
            return g, g

    class BadShape(T.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, g[:3]

    class BadNonTensor(T.autograd.Function):
        @staticmethod
        def forward(ctx, a, flag):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    class BadType(T.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return 3

    class Raises(T.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom in backward")

    class RaisesFwd(T.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            raise KeyError("boom in forward")

        @staticmethod
        def backward(ctx, g):
            return g

    class SavesInput(T.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * a

    return locals()


def e_bad_count(T):
    q = det(T, 4, seed=1)
    bad_functions(T)["BadCount"].apply(q, q, q, True).sum().backward()


def e_bad_shape(T):
    a = det(T, 4, seed=1)
    bad_functions(T)["BadShape"].apply(a, a * 1).sum().backward()


def e_bad_non_tensor(T):
    a = det(T, 4, seed=1)
    bad_functions(T)["BadNonTensor"].apply(a, 3).sum().backward()


def e_bad_type(T):
    a = det(T, 4, seed=1)
    bad_functions(T)["BadType"].apply(a).sum().backward()


def e_user_exception_backward(T):
    a = det(T, 4, seed=1)
    bad_functions(T)["Raises"].apply(a).sum().backward()


def e_user_exception_forward(T):
    a = det(T, 4, seed=1)
    bad_functions(T)["RaisesFwd"].apply(a)


def e_saved_modified(T):
    a = det(T, 4, seed=1)
    b = a * 1
    y = bad_functions(T)["SavesInput"].apply(b)
    b.mul_(2)
    y.sum().backward()


def e_backward_twice(T):
    a = det(T, 4, seed=1)
    y = (a.exp() * 2).sum()
    y.backward()
    y.backward()


def e_inplace_leaf(T):
    a = det(T, 4, seed=1)
    a += 1


def e_non_scalar_backward(T):
    a = det(T, 4, seed=1)
    (a * 2).backward()


def e_no_grad_backward(T):
    a = det(T, 4, seed=1, requires_grad=False)
    (a * 2).sum().backward()


def e_broadcast(T):
    det(T, 3, seed=1) + det(T, 4, seed=2)


def e_dim_range(T):
    det(T, 2, 3, seed=1).sum(2)


def e_int_requires_grad(T):
    T.tensor([1, 2]).requires_grad_()


def e_item_many(T):
    det(T, 4, seed=1).item()


def e_numpy_requires_grad(T):
    det(T, 4, seed=1).numpy()


def e_unused_input(T):
    a, b = det(T, 3, seed=1), det(T, 3, seed=2)
    T.autograd.grad((a * 2).sum(), [a, b])


def e_view_incompatible(T):
    det(T, 2, 3, seed=1).t().view(-1)


def e_non_leaf_requires_grad(T):
    (det(T, 3, seed=1) * 2).requires_grad = False


def e_reshape_bad(T):
    det(T, 2, 3, seed=1).reshape(4, 2)


def e_index_out_of_range(T):
    det(T, 2, 3, seed=1)[5]


def e_grad_outputs_count(T):
    a = det(T, 3, seed=1)
    T.autograd.grad([a.sum(), (a * 2).sum()], [a], [None])


def e_cross_entropy_reduction(T):
    T.nn.functional.cross_entropy(det(T, 2, 3, seed=1), T.tensor([0, 1]), reduction="avg")


def e_cross_entropy_target_bounds(T):
    # -100 is only ignored while it is the ignore_index
    T.nn.functional.cross_entropy(det(T, 2, 3, seed=1), T.tensor([0, -100]), ignore_index=0)


CASES = {k[2:]: v for k, v in dict(globals()).items() if k.startswith("e_")}

# Messages that embed PyTorch-internal names (tensor type names, node names
# with PyTorch's numbering): only the stable leading part is compared.
PREFIX = {
    "saved_modified": "one of the variables needed for gradient computation has been modified "
                      "by an inplace operation",
    "backward_twice": "Trying to backward through the graph a second time",
    "bad_shape": "Function BadShapeBackward returned an invalid gradient at index 1 - got [3] "
                 "but expected shape compatible with [4]",
}


def outcome(T, fn):
    with pytest.raises(Exception) as info:
        fn(T)
    return type(info.value), str(info.value).strip().strip("'\"")


@pytest.mark.parametrize("name", sorted(CASES))
def test_error_matches_torch(torch, jg, name):
    want_t, want_m = outcome(torch, CASES[name])
    got_t, got_m = outcome(jg, CASES[name])
    assert got_t is want_t, (got_t, got_m, want_t, want_m)
    if name in PREFIX:
        assert want_m.startswith(PREFIX[name]), want_m
        assert got_m.startswith(PREFIX[name]), got_m
    else:
        assert got_m == want_m
