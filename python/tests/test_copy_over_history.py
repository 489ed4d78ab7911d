"""copy_ over a tensor with history gives the old history a zero gradient
that does not depend on the incoming gradient, as PyTorch's CopyBackwards
(zeros_like): under create_graph it has no history, so a second backward
leaves the leaf's .grad None (fuzz seed 803077)."""


def test_copy_over_history_zero_grad_has_no_history(jg, torch):
    def prog(T):
        C0 = T.tensor([0.75], requires_grad=True)
        x1 = T.tensor([1.5])
        v5 = C0.clone()
        v6 = v5[0:1]
        v5.copy_(x1)
        v9 = v6.matmul(v5)
        (g,) = T.autograd.grad(v9, [C0], create_graph=True)
        rg = g.requires_grad
        if rg:
            (g * g).sum().backward()
        return [g.tolist(), rg, None if C0.grad is None else C0.grad.tolist()]

    assert prog(jg) == prog(torch)
