"""Recurrent layers (PyTorch 1.13's nn.RNN / LSTM / GRU and their cells),
composed of library ops: one matmul per layer and direction projects the
whole input sequence, then each step adds the hidden projection and applies
the gates in the order of PyTorch's CPU cells (aten/src/ATen/native/RNN.cpp),
so results agree with PyTorch to rounding and compile traces the unrolled
loop like any other ops."""
import math
import numbers
import warnings

from .. import _C
from .._opsshape import cat, stack
from . import functional as F
from . import init
from .modules import Module, _check_device, _empty
from .parameter import Parameter
from .utils.rnn import PackedSequence

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _check_same_dtype(input, weight):
    # jitgrad's matmul promotes mixed dtypes; PyTorch's RNN kernels refuse them
    if input.dtype != weight.dtype:
        raise RuntimeError("mat1 and mat2 must have the same dtype")


# ---- one step of each cell, PyTorch's order of operations
def _rnn_step(xp, h, w_hh, b_hh, relu):
    pre = F.linear(h, w_hh, b_hh) + xp
    return pre.relu() if relu else pre.tanh()


def _lstm_step(xp, h, c, w_hh, b_hh):
    gates = F.linear(h, w_hh, b_hh) + xp
    i, f, g, o = gates.chunk(4, -1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    c = f * c + i * g
    return o * c.tanh(), c


def _gru_step(xp, h, w_hh, b_hh):
    ir, iz, in_ = xp.chunk(3, -1)
    hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = (hr + ir).sigmoid()
    z = (hz + iz).sigmoid()
    n = (in_ + hn * r).tanh()
    return (h - n) * z + n


def _step(mode, xp, h, c, w_hh, b_hh):
    if mode == "LSTM":
        return _lstm_step(xp, h, c, w_hh, b_hh)
    if mode == "GRU":
        return _gru_step(xp, h, w_hh, b_hh), None
    return _rnn_step(xp, h, w_hh, b_hh, mode == "RNN_RELU"), None


def _run_direction(mode, x, h, c, w_ih, w_hh, b_ih, b_hh, reverse):
    """x (L, N, in) -> outputs (L, N, H) in time order, last h (and c)."""
    xs = F.linear(x, w_ih, b_ih).unbind(0)  # the input projection, once per sequence
    steps = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    outs = [None] * len(xs)
    for t in steps:
        h, c = _step(mode, xs[t], h, c, w_hh, b_hh)
        outs[t] = h
    return stack(outs, 0), h, c


def _run_direction_packed(mode, x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, batch_sizes):
    """Packed x (sum(batch_sizes), in): step t holds the first batch_sizes[t]
    sequences (sorted by decreasing length). Forward, a sequence's state is
    set aside when it ends; in reverse, a sequence joins at its last step
    with its initial state (PyTorch's PackedLayer / ReversedPackedLayer)."""
    xs = F.linear(x, w_ih, b_ih).split(batch_sizes, 0)
    outs = [None] * len(xs)
    lstm = mode == "LSTM"
    if not reverse:
        h, c = h0, c0
        done_h, done_c = [], []
        for t, b in enumerate(batch_sizes):
            if b < h.size(0):
                done_h.append(h[b:])
                h = h[:b]
                if lstm:
                    done_c.append(c[b:])
                    c = c[:b]
            h, c = _step(mode, xs[t], h, c, w_hh, b_hh)
            outs[t] = h
        h = cat([h] + done_h[::-1], 0) if done_h else h
        if lstm and done_c:
            c = cat([c] + done_c[::-1], 0)
    else:
        b = batch_sizes[-1]
        h, c = h0[:b], (c0[:b] if lstm else None)
        for t in range(len(xs) - 1, -1, -1):
            b = batch_sizes[t]
            if b > h.size(0):
                h = cat([h, h0[h.size(0):b]], 0)
                if lstm:
                    c = cat([c, c0[c.size(0):b]], 0)
            h, c = _step(mode, xs[t], h, c, w_hh, b_hh)
            outs[t] = h
    return cat(outs, 0), h, c


class RNNBase(Module):
    """PyTorch's RNNBase: parameters weight_ih_l{k}[_reverse], weight_hh_...,
    bias_ih_..., bias_hh_... of shapes (gates * hidden, in) / (gates * hidden,
    hidden) / (gates * hidden,), each U(-1/sqrt(hidden), 1/sqrt(hidden))."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        super().__init__()
        if device is not None:
            _check_device(device)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or \
                isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size > 0:
            raise NotImplementedError("jitgrad: nn.LSTM(proj_size > 0) is not supported "
                                      "(LSTM with projections); use proj_size=0")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size = _GATES[mode] * hidden_size
        num_directions = 2 if bidirectional else 1
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else hidden_size * num_directions
                suffix = "_reverse" if direction == 1 else ""
                names = [f"weight_ih_l{layer}{suffix}", f"weight_hh_l{layer}{suffix}"]
                shapes = [(gate_size, layer_input), (gate_size, hidden_size)]
                if bias:
                    names += [f"bias_ih_l{layer}{suffix}", f"bias_hh_l{layer}{suffix}"]
                    shapes += [(gate_size,), (gate_size,)]
                for name, shape in zip(names, shapes):
                    setattr(self, name, Parameter(_empty(shape, dtype)))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self):
        """A no-op, as PyTorch's is off cuDNN."""

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def check_input(self, input, batch_sizes=None):
        expected = 2 if batch_sizes is not None else 3
        if input.dim() != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError("input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.size(-1)}")

    def get_expected_hidden_size(self, input, batch_sizes=None):
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        return (self.num_layers * num_directions, mini_batch, self.hidden_size)

    def check_hidden_size(self, hx, expected, msg="Expected hidden size {}, got {}"):
        if tuple(hx.shape) != expected:
            raise RuntimeError(msg.format(expected, list(hx.shape)))

    def check_forward_args(self, input, hidden, batch_sizes=None):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    def _prepare(self, input, hx):
        """PyTorch's shape handling: an unbatched (L, H) input gets a batch dim
        of 1 (hx too); returns input, hx, is_batched, batch_dim."""
        is_batched = input.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if not is_batched:
            input = input.unsqueeze(batch_dim)
        if self.mode == "LSTM":
            if hx is not None:
                if is_batched:
                    if hx[0].dim() != 3 or hx[1].dim() != 3:
                        raise RuntimeError("For batched 3-D input, hx and cx should also be 3-D "
                                           f"but got ({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
                else:
                    if hx[0].dim() != 2 or hx[1].dim() != 2:
                        raise RuntimeError("For unbatched 2-D input, hx and cx should also be "
                                           f"2-D but got ({hx[0].dim()}-D, {hx[1].dim()}-D) "
                                           "tensors")
                    hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        elif hx is not None:
            if not is_batched and hx.dim() != 2:
                raise RuntimeError("For unbatched 2-D input, hx should also be 2-D but got "
                                   f"{hx.dim()}-D tensor")
            if is_batched and hx.dim() != 3:
                raise RuntimeError("For batched 3-D input, hx should also be 3-D but got "
                                   f"{hx.dim()}-D tensor")
            if not is_batched:
                hx = hx.unsqueeze(1)
        if hx is None and input.dim() == 3:
            num_directions = 2 if self.bidirectional else 1
            batch = input.size(0) if self.batch_first else input.size(1)
            zeros = _C.zeros(self.num_layers * num_directions, batch, self.hidden_size,
                             dtype=input.dtype)
            hx = (zeros, zeros) if self.mode == "LSTM" else zeros
        return input, hx, is_batched, batch_dim

    def _run(self, input, h0, c0, batch_sizes=None):
        """input (L, N, in) (already time-major), or packed data with its
        batch_sizes (a list); returns output, h_n, c_n."""
        if batch_sizes is None and input.size(0) == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        _check_same_dtype(input, self._flat_weights[0])
        num_directions = 2 if self.bidirectional else 1
        hs = h0.unbind(0)
        cs = c0.unbind(0) if c0 is not None else None
        h_n, c_n = [], []
        x = input
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                x = F.dropout(x, self.dropout, True)
            outs = []
            for d in range(num_directions):
                k = layer * num_directions + d
                names = self._all_weights[k]
                w_ih, w_hh = getattr(self, names[0]), getattr(self, names[1])
                b_ih, b_hh = (getattr(self, names[2]), getattr(self, names[3])) if self.bias \
                    else (None, None)
                c0k = cs[k] if cs else None
                if batch_sizes is None:
                    out, h, c = _run_direction(self.mode, x, hs[k], c0k, w_ih, w_hh, b_ih, b_hh,
                                               d == 1)
                else:
                    out, h, c = _run_direction_packed(self.mode, x, hs[k], c0k, w_ih, w_hh, b_ih,
                                                      b_hh, d == 1, batch_sizes)
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if num_directions == 1 else cat(outs, -1)
        return x, stack(h_n, 0), (stack(c_n, 0) if c0 is not None else None)

    def _forward_packed(self, packed, hx):
        """A PackedSequence in, one out (PyTorch's sorted_indices order inside;
        h_n back in the caller's order)."""
        data, batch_sizes, sorted_indices, unsorted_indices = packed
        sizes = [int(b) for b in batch_sizes.tolist()]
        lstm = self.mode == "LSTM"
        if hx is None:
            num_directions = 2 if self.bidirectional else 1
            zeros = _C.zeros(self.num_layers * num_directions, sizes[0], self.hidden_size,
                             dtype=data.dtype)
            hx = (zeros, zeros) if lstm else zeros
        elif sorted_indices is not None:
            hx = tuple(h.index_select(1, sorted_indices) for h in hx) if lstm else \
                hx.index_select(1, sorted_indices)
        self.check_forward_args(data, hx, batch_sizes)
        output, h_n, c_n = self._run(data, *(hx if lstm else (hx, None)), batch_sizes=sizes)
        if unsorted_indices is not None:
            h_n = h_n.index_select(1, unsorted_indices)
            c_n = c_n.index_select(1, unsorted_indices) if lstm else None
        output = PackedSequence(output, batch_sizes, sorted_indices, unsorted_indices)
        return (output, (h_n, c_n)) if lstm else (output, h_n)

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        input, hx, is_batched, batch_dim = self._prepare(input, hx)
        self.check_forward_args(input, hx)
        h0, c0 = hx if self.mode == "LSTM" else (hx, None)
        x = input.transpose(0, 1) if self.batch_first else input
        output, h_n, c_n = self._run(x, h0, c0)
        if self.batch_first:
            output = output.transpose(0, 1)
        if not is_batched:
            output = output.squeeze(batch_dim)
            h_n = h_n.squeeze(1)
            c_n = c_n.squeeze(1) if c_n is not None else None
        return (output, (h_n, c_n)) if self.mode == "LSTM" else (output, h_n)


class RNN(RNNBase):
    """Elman RNN: h_t = tanh|relu(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'")
        super().__init__(mode, *args, **kwargs)


class LSTM(RNNBase):
    """LSTM, gates i, f, g, o; forward(input, (h0, c0)) -> output, (h_n, c_n)."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input, batch_sizes=None):
        return self.get_expected_hidden_size(input, batch_sizes)

    def check_forward_args(self, input, hidden, batch_sizes=None):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")


class GRU(RNNBase):
    """GRU, gates r, z, n with n = tanh(W_in x + b_in + r * (W_hn h + b_hn))."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


# ---- cells
class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        if device is not None:
            _check_device(device)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(_empty((num_chunks * hidden_size, input_size), dtype))
        self.weight_hh = Parameter(_empty((num_chunks * hidden_size, hidden_size), dtype))
        if bias:
            self.bias_ih = Parameter(_empty((num_chunks * hidden_size,), dtype))
            self.bias_hh = Parameter(_empty((num_chunks * hidden_size,), dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prepare(self, input, hx, pair):
        name = type(self).__name__
        assert input.dim() in (1, 2), \
            f"{name}: Expected input to be 1-D or 2-D but received {input.dim()}-D tensor"
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            zeros = _C.zeros(input.size(0), self.hidden_size, dtype=input.dtype)
            hx = (zeros, zeros) if pair else zeros
        elif not is_batched:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0)) if pair else hx.unsqueeze(0)
        # PyTorch's checks (RNN.cpp); an LSTM cell labels both states hidden0
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} "
                               f"expected {self.input_size}")
        for h in (hx if pair else (hx,)):
            if input.size(0) != h.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden0 "
                                   f"batch size {h.size(0)}")
            if h.size(1) != self.hidden_size:
                raise RuntimeError(f"hidden0 has inconsistent hidden_size: got {h.size(1)}, "
                                   f"expected {self.hidden_size}")
        _check_same_dtype(input, self.weight_ih)
        return input, hx, is_batched

    def _input_projection(self, input):
        return F.linear(input, self.weight_ih, self.bias_ih)


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        input, hx, is_batched = self._prepare(input, hx, False)
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        ret = _rnn_step(self._input_projection(input), hx, self.weight_hh, self.bias_hh,
                        self.nonlinearity == "relu")
        return ret if is_batched else ret.squeeze(0)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        input, hx, is_batched = self._prepare(input, hx, True)
        h, c = _lstm_step(self._input_projection(input), hx[0], hx[1], self.weight_hh,
                          self.bias_hh)
        return (h, c) if is_batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        input, hx, is_batched = self._prepare(input, hx, False)
        ret = _gru_step(self._input_projection(input), hx, self.weight_hh, self.bias_hh)
        return ret if is_batched else ret.squeeze(0)
