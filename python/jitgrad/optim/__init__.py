"""jitgrad.optim: torch.optim's optimizers and learning-rate schedulers."""
from . import lr_scheduler  # noqa: F401
from .algorithms import SGD, Adadelta, Adagrad, Adam, AdamW, RMSprop  # noqa: F401
from .composed import ASGD, NAdam, RAdam, Adamax, Rprop  # noqa: F401
from .lbfgs import LBFGS  # noqa: F401
from .optimizer import Optimizer  # noqa: F401

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adagrad", "RMSprop", "Adadelta", "NAdam",
           "RAdam", "Adamax", "Rprop", "ASGD", "LBFGS", "lr_scheduler"]
