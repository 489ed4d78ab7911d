"""In-place masked fills on tensors without history write (the in-place
path cast the bool mask to self's dtype, and the kernel then read no mask:
`logits[logits < v[:, [-1]]] = -inf` in a GPT's top-k sampling changed
nothing)."""
import pytest


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_masked_fill_inplace_without_history_like_torch(jg, torch, dtype):
    def prog(T):
        x = T.tensor([[5, -2, 7, 1], [0, 3, -4, 6]], dtype=getattr(T, dtype))
        y = x.clone()
        x.masked_fill_(x < 2, 9)
        y[y > 4] = -1
        z = x.clone()
        z[z == 9] = 0
        return [x.tolist(), y.tolist(), z.tolist()]

    assert prog(jg) == prog(torch)


def test_top_k_filter_like_torch(jg, torch):
    def prog(T):
        logits = T.tensor([[0.5, 2.0, -1.0, 3.0], [1.0, -2.0, 4.0, 0.0]])
        v, _ = T.topk(logits, 2)
        logits[logits < v[:, [-1]]] = -float("inf")
        return logits.tolist()

    assert prog(jg) == prog(torch)
