"""PyTorch's "learning PyTorch with examples" programs (polynomial fits with
tensors and autograd, a custom autograd.Function, nn.Module + SGD,
nn.Sequential + RMSprop) run with only the import changed and give
PyTorch's losses (issue 11's acceptance style; deterministic inits)."""
import math

import pytest

import jitgrad


def autograd_tensors(torch, steps):
    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)
    a, b, c, d = (torch.full((), v, requires_grad=True) for v in (0.1, -0.2, 0.3, 0.05))
    losses = []
    for _ in range(steps):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum()
        losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            for p in (a, b, c, d):
                p -= 1e-6 * p.grad
                p.grad = None
    return losses


def custom_function(torch, steps):
    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)
    a, b, c, d = (torch.full((), v, requires_grad=True) for v in (0.0, -1.0, 0.0, 0.3))
    losses = []
    for _ in range(steps):
        y_pred = a + b * LegendrePolynomial3.apply(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            for p in (a, b, c, d):
                p -= 5e-6 * p.grad
                p.grad = None
    return losses


def module_sgd(torch, steps):
    class Polynomial3(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.tensor(0.1))
            self.b = torch.nn.Parameter(torch.tensor(-0.2))
            self.c = torch.nn.Parameter(torch.tensor(0.3))
            self.d = torch.nn.Parameter(torch.tensor(0.05))

        def forward(self, x):
            return self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3

    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)
    model = Polynomial3()
    criterion = torch.nn.MSELoss(reduction="sum")
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=0.9)
    losses = []
    for _ in range(steps):
        loss = criterion(model(x), y)
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert repr(model) == "Polynomial3()"
    return losses


def sequential_rmsprop(torch, steps):
    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)
    xx = x.unsqueeze(-1).pow(torch.tensor([1, 2, 3]))
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[0.2, -0.1, 0.05]]))
        model[0].bias.fill_(0.1)
    loss_fn = torch.nn.MSELoss(reduction="sum")
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(steps):
        loss = loss_fn(model(xx), y)
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return losses


@pytest.mark.parametrize("program", [autograd_tensors, custom_function, module_sgd,
                                     sequential_rmsprop])
def test_tutorial_losses_match_torch(program):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    want = program(torch, 200)
    got = program(jitgrad, 200)
    for step, (g, w) in enumerate(zip(got, want)):
        assert abs(g - w) <= 1e-4 * abs(w), (step, g, w)
    assert got[-1] < got[0]


def test_fill_like_torch():
    torch = pytest.importorskip("torch")
    for T in (torch, jitgrad):
        w = T.zeros(2, 3, requires_grad=True)
        with T.no_grad():
            assert w.fill_(0.5) is w
        x = w * 2
        x.fill_(T.tensor(3.0))
        x.sum().backward()
        assert w.grad.tolist() == [[0.0] * 3] * 2
        assert x.tolist() == [[3.0] * 3] * 2
        with pytest.raises(RuntimeError, match="0-dimension value tensor"):
            T.zeros(2).fill_(T.ones(2))
