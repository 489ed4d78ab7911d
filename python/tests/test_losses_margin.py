"""F.pairwise_distance, F.pdist, nn.CosineSimilarity / PairwiseDistance,
the margin / embedding / likelihood losses (margin_ranking, hinge_embedding,
soft_margin, multilabel_soft_margin, cosine_embedding, triplet_margin,
triplet_margin_with_distance, poisson_nll, gaussian_nll, multi_margin,
multilabel_margin) with their modules and nn.NLLLoss2d, F.bilinear /
nn.Bilinear and F.embedding_bag / nn.EmbeddingBag against PyTorch 1.13:
values and gradients (float32, float64) in every reduction mode, the
keyword and deprecated arguments, reprs, PyTorch's errors, and a compiled
(interp, c) training step == eager bitwise."""
import math
import warnings

import pytest

DTYPES = [("float64", 1e-12), ("float32", 3e-5)]
REDUCTIONS = ["none", "mean", "sum"]


def vals(t):
    return t.detach().reshape(-1).tolist()


def close(a, b, tol):
    a, b = vals(a), vals(b)
    return len(a) == len(b) and all(
        (x == y) or (math.isnan(x) and math.isnan(y)) or abs(x - y) <= tol * (1 + abs(y))
        for x, y in zip(a, b))


def both(jg, torch, data, dtype=None, grad=False):
    """The same values as a jitgrad and a torch tensor (data: a torch tensor
    or a list)."""
    t = data if isinstance(data, torch.Tensor) else torch.tensor(data)
    if dtype is not None:
        t = t.to(getattr(torch, dtype))
    t = t.detach().clone()
    jdt = {torch.float32: jg.float32, torch.float64: jg.float64, torch.int64: jg.int64,
           torch.bool: jg.bool}[t.dtype]
    j = jg.tensor(t.tolist(), dtype=jdt).reshape(tuple(t.shape))
    if grad:
        t.requires_grad_(True)
        j.requires_grad_(True)
    return j, t


def randn(jg, torch, shape, seed, dtype, grad=True):
    g = torch.Generator().manual_seed(seed)
    return both(jg, torch, torch.randn(tuple(shape), generator=g, dtype=getattr(torch, dtype)),
                grad=grad)


def check(jg, torch, jf, tf, jins, tins, tol, seed=99):
    """jf(*jins) against tf(*tins): shape, dtype, values, and the gradients of
    every input that requires grad for a random upstream gradient."""
    jy, ty = jf(*jins), tf(*tins)
    assert tuple(jy.shape) == tuple(ty.shape)
    assert str(jy.dtype).split(".")[1] == str(ty.dtype).split(".")[1]
    assert close(jy, ty, tol), (vals(jy)[:6], vals(ty)[:6])
    wants = [t for t in tins if isinstance(t, torch.Tensor) and t.requires_grad]
    haves = [j for j in jins if isinstance(j, jg.Tensor) and j.requires_grad]
    if not wants:
        return jy, ty
    jgo, tgo = randn(jg, torch, tuple(ty.shape), seed, str(ty.dtype).split(".")[1], grad=False)
    tgr = torch.autograd.grad((ty * tgo).sum(), wants)
    jgr = jg.autograd.grad((jy * jgo).sum(), haves)
    for a, b in zip(jgr, tgr):
        assert close(a, b, tol * 10), (vals(a)[:6], vals(b)[:6])
    return jy, ty


def torch_text(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
    except Exception as e:  # noqa: BLE001 (the oracle's message, whatever its type)
        return type(e).__name__, str(e)
    return None


def same_error(jg_fn, torch_fn):
    want = torch_text(torch_fn)
    assert want is not None
    got = torch_text(jg_fn)
    assert got == want


# ---------------------------------------------------------------- distances

@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("s1,s2", [((4, 5), (4, 5)), ((4, 5), (5,)), ((5,), (5,)),
                                   ((2, 3, 4), (3, 4)), ((1, 5), (3, 5))])
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, math.inf, 0.5])
def test_pairwise_distance_matches_torch(jg, torch, dtype, tol, s1, s2, p):
    jx, tx = randn(jg, torch, s1, 1, dtype)
    jy, ty = randn(jg, torch, s2, 2, dtype)
    for kw in ({}, {"eps": 1e-3, "keepdim": True}):
        check(jg, torch, lambda a, b: jg.nn.functional.pairwise_distance(a, b, p, **kw),
              lambda a, b: torch.nn.functional.pairwise_distance(a, b, p, **kw), (jx, jy),
              (tx, ty), tol)
    jm, tm = jg.nn.PairwiseDistance(p, keepdim=True), torch.nn.PairwiseDistance(p, keepdim=True)
    assert repr(jm) == repr(tm)
    check(jg, torch, jm, tm, (jx, jy), (tx, ty), tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("n,d", [(5, 4), (2, 3), (7, 1)])
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, math.inf, 0.5])
def test_pdist_matches_torch(jg, torch, dtype, tol, n, d, p):
    jx, tx = randn(jg, torch, (n, d), 3, dtype)
    check(jg, torch, lambda x: jg.nn.functional.pdist(x, p),
          lambda x: torch.nn.functional.pdist(x, p), (jx,), (tx,), tol)


def test_pdist_edge_cases_and_errors(jg, torch):
    F, TF = jg.nn.functional, torch.nn.functional
    for n in (0, 1):  # (PyTorch 1.13 crashes in the backward of an empty pdist)
        jx, tx = randn(jg, torch, (n, 3), 3, "float64", grad=False)
        check(jg, torch, F.pdist, TF.pdist, (jx,), (tx,), 1e-12)
    # two equal rows: a zero distance passes no gradient (PyTorch's backward)
    jx, tx = both(jg, torch, [[1.0, 2.0], [1.0, 2.0], [0.0, 5.0]], "float64", grad=True)
    check(jg, torch, F.pdist, TF.pdist, (jx,), (tx,), 1e-12)
    same_error(lambda: F.pdist(jg.ones(2, 3, 4)), lambda: TF.pdist(torch.ones(2, 3, 4)))
    same_error(lambda: F.pdist(jg.ones(3, 4), -1), lambda: TF.pdist(torch.ones(3, 4), -1))
    same_error(lambda: F.pdist(jg.ones(3, 4, dtype=jg.int64)),
               lambda: TF.pdist(torch.ones(3, 4, dtype=torch.int64)))


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_cosine_similarity_module_matches_torch(jg, torch, dtype, tol):
    jx, tx = randn(jg, torch, (4, 5, 3), 1, dtype)
    jy, ty = randn(jg, torch, (4, 5, 3), 2, dtype)
    for args in ((), (2,), (0, 1e-3)):
        jm, tm = jg.nn.CosineSimilarity(*args), torch.nn.CosineSimilarity(*args)
        assert repr(jm) == repr(tm)
        assert (jm.dim, jm.eps) == (tm.dim, tm.eps)
        check(jg, torch, jm, tm, (jx, jy), (tx, ty), tol)


# ---------------------------------------------------------------- the losses

def _pm1(torch, shape, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, 2, shape, generator=g) * 2 - 1).to(torch.float64)


def _cases(jg, torch, dtype):
    """(name, jitgrad args, torch args, kwargs) for each loss, the inputs
    requiring grad where PyTorch differentiates them."""
    r = lambda shape, seed, grad=True: randn(jg, torch, shape, seed, dtype, grad)  # noqa: E731
    x1, x2, x3 = r((6,), 1), r((6,), 2), r((6,), 3)
    y = both(jg, torch, _pm1(torch, (6,), 4), dtype)
    a2, b2 = r((5, 4), 5), r((5, 4), 6)
    y5 = both(jg, torch, _pm1(torch, (5,), 7), dtype)
    y0 = both(jg, torch, [-1.0], dtype)
    yhinge = both(jg, torch, [1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, 0.5], dtype)
    xh = both(jg, torch, [0.3, 0.3, -2.0, 1.0, 0.0, 2.0, 1.5, -0.5], dtype, grad=True)
    multi_t = both(jg, torch, (torch.rand(5, 4, generator=torch.Generator().manual_seed(8))
                               > 0.5).to(torch.float64), dtype)
    w4 = both(jg, torch, [0.5, 1.0, 2.0, 0.25], dtype)
    an, po, ne = r((5, 4), 9), r((5, 4), 10), r((5, 4), 11)
    lam = both(jg, torch, [0.5, 1.0, 2.0, 3.0, 0.0, 7.0], dtype)
    rate = both(jg, torch, [0.5, 1.5, 2.0, 0.1, 0.8, 3.0], dtype, grad=True)
    var = both(jg, torch, [0.5, 1.5, 1e-8, 0.1, 0.8, 3.0], dtype, grad=True)
    var5 = both(jg, torch, [0.5, 1.5, 1e-8, 0.1, 0.8], dtype, grad=True)
    cls = both(jg, torch, [3, 0, 1, 3, 2], None)
    ml = both(jg, torch, [[3, 0, -1, 1], [1, 2, 3, 0], [-1, 0, 1, 2], [2, -1, 2, 0],
                          [0, 0, 1, -1]], None)
    j, t = 0, 1
    return [
        ("margin_ranking_loss", (x1, x2, y), {}),
        ("margin_ranking_loss", (x1, x2, y), {"margin": 0.5}),
        ("hinge_embedding_loss", (xh, yhinge), {}),
        ("hinge_embedding_loss", (xh, yhinge), {"margin": 0.3}),
        ("soft_margin_loss", (x1, y), {}),
        ("multilabel_soft_margin_loss", (a2, multi_t), {}),
        ("multilabel_soft_margin_loss", (a2, multi_t), {"weight": w4}),
        ("cosine_embedding_loss", (a2, b2, y5), {}),
        ("cosine_embedding_loss", (a2, b2, y5), {"margin": -0.2}),
        ("cosine_embedding_loss", (x1, x2, (y0[j][0], y0[t][0])), {"margin": -0.5}),
        ("triplet_margin_loss", (an, po, ne), {}),
        ("triplet_margin_loss", (an, po, ne), {"margin": 2.0, "p": 1, "eps": 1e-3,
                                               "swap": True}),
        ("triplet_margin_loss", (x1, x2, x3), {"p": 3}),
        ("triplet_margin_with_distance_loss", (an, po, ne), {}),
        ("triplet_margin_with_distance_loss", (an, po, ne), {"margin": 3.0, "swap": True}),
        ("poisson_nll_loss", (x1, lam), {}),
        ("poisson_nll_loss", (rate, lam), {"log_input": False, "full": True}),
        ("poisson_nll_loss", (x1, lam), {"full": True, "eps": 1e-2}),
        ("gaussian_nll_loss", (x1, x2, var), {}),
        ("gaussian_nll_loss", (a2, b2, var5), {"full": True, "eps": 1e-3}),
        ("gaussian_nll_loss", (a2, b2, (var5[j].unsqueeze(1), var5[t].unsqueeze(1))), {}),
        ("multi_margin_loss", (a2, cls), {}),
        ("multi_margin_loss", (a2, cls), {"p": 2, "margin": 0.7, "weight": w4}),
        ("multi_margin_loss", (a2[j][1], a2[t][1], (cls[j][1], cls[t][1])), {}),
        ("multilabel_margin_loss", (a2, ml), {}),
        ("multilabel_margin_loss", (a2[j][0], a2[t][0], (ml[j][0], ml[t][0])), {}),
    ]


def _split(args):
    """((j, t), ...) -> the jitgrad and the torch arguments; a 3-tuple is
    (jitgrad, torch, ...) written in place."""
    if len(args) == 3 and not isinstance(args[0], tuple):
        return [args[0], args[2][0]], [args[1], args[2][1]]
    return [a[0] for a in args], [a[1] for a in args]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("index", range(26))
def test_losses_match_torch(jg, torch, dtype, tol, reduction, index):
    name, args, kw = _cases(jg, torch, dtype)[index]
    jargs, targs = _split(args)
    jkw, tkw = _split_kw(kw)
    jf, tf = getattr(jg.nn.functional, name), getattr(torch.nn.functional, name)
    check(jg, torch, lambda *a: jf(*a, reduction=reduction, **jkw),
          lambda *a: tf(*a, reduction=reduction, **tkw), jargs, targs, tol)


def _split_kw(kw):
    jkw, tkw = dict(kw), dict(kw)
    if "weight" in kw:
        jkw["weight"], tkw["weight"] = kw["weight"]
    return jkw, tkw


_MODULES = {
    "margin_ranking_loss": "MarginRankingLoss", "hinge_embedding_loss": "HingeEmbeddingLoss",
    "soft_margin_loss": "SoftMarginLoss", "multilabel_soft_margin_loss":
    "MultiLabelSoftMarginLoss", "cosine_embedding_loss": "CosineEmbeddingLoss",
    "triplet_margin_loss": "TripletMarginLoss", "triplet_margin_with_distance_loss":
    "TripletMarginWithDistanceLoss", "poisson_nll_loss": "PoissonNLLLoss",
    "gaussian_nll_loss": "GaussianNLLLoss", "multi_margin_loss": "MultiMarginLoss",
    "multilabel_margin_loss": "MultiLabelMarginLoss",
}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("index", range(26))
def test_loss_modules_match_torch(jg, torch, reduction, index):
    name, args, kw = _cases(jg, torch, "float64")[index]
    jargs, targs = _split(args)
    jkw, tkw = _split_kw(kw)
    jm = getattr(jg.nn, _MODULES[name])(reduction=reduction, **jkw)
    tm = getattr(torch.nn, _MODULES[name])(reduction=reduction, **tkw)
    assert repr(jm) == repr(tm)
    assert list(jm.state_dict().keys()) == list(tm.state_dict().keys())
    assert jm.reduction == tm.reduction
    for k in kw:
        if k != "weight":
            assert getattr(jm, k) == getattr(tm, k), k
    check(jg, torch, jm, tm, jargs, targs, 1e-12)


@pytest.mark.parametrize("size_average,reduce", [(False, None), (None, False), (True, True),
                                                 (False, True), (True, None)])
def test_deprecated_reduction_arguments(jg, torch, size_average, reduce):
    for index, (name, args, kw) in enumerate(_cases(jg, torch, "float64")):
        if name in ("triplet_margin_with_distance_loss", "gaussian_nll_loss"):
            continue  # PyTorch's take no size_average / reduce
        jargs, targs = _split(args)
        jkw, tkw = _split_kw(kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            jm = getattr(jg.nn, _MODULES[name])(size_average=size_average, reduce=reduce)
            tm = getattr(torch.nn, _MODULES[name])(size_average=size_average, reduce=reduce)
            assert jm.reduction == tm.reduction
            jf, tf = getattr(jg.nn.functional, name), getattr(torch.nn.functional, name)
            check(jg, torch, lambda *a: jf(*a, size_average=size_average, reduce=reduce, **jkw),
                  lambda *a: tf(*a, size_average=size_average, reduce=reduce, **tkw),
                  jargs, targs, 1e-12)


def test_default_arguments_match_torch(jg, torch):
    import inspect
    for name in list(_MODULES) + ["pairwise_distance", "pdist", "bilinear", "embedding_bag"]:
        js = inspect.signature(getattr(jg.nn.functional, name))
        ts = inspect.signature(getattr(torch.nn.functional, name)) if not name.startswith(
            ("pairwise", "pdist", "bilinear")) else None
        if ts is None:
            continue
        assert [(p.name, p.default, p.kind) for p in js.parameters.values()] == \
            [(p.name, p.default, p.kind) for p in ts.parameters.values()], name
    for name in list(_MODULES.values()) + ["PairwiseDistance", "CosineSimilarity", "Bilinear",
                                           "EmbeddingBag", "NLLLoss2d", "LazyLinear"]:
        js = inspect.signature(getattr(jg.nn, name).__init__)
        ts = inspect.signature(getattr(torch.nn, name).__init__)
        assert [(p.name, p.default, p.kind) for p in js.parameters.values()] == \
            [(p.name, p.default, p.kind) for p in ts.parameters.values()], name


def test_custom_distance_function(jg, torch):
    def jd(a, b):
        return 1.0 - jg.nn.functional.cosine_similarity(a, b)

    def td(a, b):
        return 1.0 - torch.nn.functional.cosine_similarity(a, b)

    jan, tan = randn(jg, torch, (5, 4), 1, "float64")
    jpo, tpo = randn(jg, torch, (5, 4), 2, "float64")
    jne, tne = randn(jg, torch, (5, 4), 3, "float64")
    jm = jg.nn.TripletMarginWithDistanceLoss(distance_function=jd, margin=0.5, swap=True)
    tm = torch.nn.TripletMarginWithDistanceLoss(distance_function=td, margin=0.5, swap=True)
    check(jg, torch, jm, tm, (jan, jpo, jne), (tan, tpo, tne), 1e-12)
    jm = jg.nn.TripletMarginWithDistanceLoss(distance_function=jg.nn.PairwiseDistance(1))
    tm = torch.nn.TripletMarginWithDistanceLoss(distance_function=torch.nn.PairwiseDistance(1))
    assert repr(jm) == repr(tm)
    check(jg, torch, jm, tm, (jan, jpo, jne), (tan, tpo, tne), 1e-12)


def test_boundaries_match_torch(jg, torch):
    """At the kinks: a zero hinge passes the gradient (clamp_min) in
    margin_ranking and hinge_embedding, none in multi_margin (z > 0)."""
    F, TF = jg.nn.functional, torch.nn.functional
    jx1, tx1 = both(jg, torch, [1.0, 2.0, 0.0], "float64", grad=True)
    jx2, tx2 = both(jg, torch, [1.0, 1.0, 0.0], "float64", grad=True)
    jy, ty = both(jg, torch, [1.0, 1.0, -1.0], "float64")
    check(jg, torch, lambda a, b: F.margin_ranking_loss(a, b, jy, margin=0.0),
          lambda a, b: TF.margin_ranking_loss(a, b, ty, margin=0.0), (jx1, jx2), (tx1, tx2),
          1e-12)
    check(jg, torch, lambda a, b: F.margin_ranking_loss(a, b, jy, margin=1.0),
          lambda a, b: TF.margin_ranking_loss(a, b, ty, margin=1.0), (jx1, jx2), (tx1, tx2),
          1e-12)
    jx, tx = both(jg, torch, [[1.0, 0.0, 2.0], [0.5, 0.5, 0.5]], "float64", grad=True)
    jc, tc = both(jg, torch, [1, 2], None)
    check(jg, torch, lambda a: F.multi_margin_loss(a, jc),
          lambda a: TF.multi_margin_loss(a, tc), (jx,), (tx,), 1e-12)
    jt, tt = both(jg, torch, [[1, -1, 0], [2, 1, 0]], None)
    check(jg, torch, lambda a: F.multilabel_margin_loss(a, jt),
          lambda a: TF.multilabel_margin_loss(a, tt), (jx,), (tx,), 1e-12)
    check(jg, torch, lambda a: F.hinge_embedding_loss(a, jy, margin=2.0),
          lambda a: TF.hinge_embedding_loss(a, ty, margin=2.0), (jx1,), (tx1,), 1e-12)


def test_loss_errors_match_torch(jg, torch):
    F, TF = jg.nn.functional, torch.nn.functional
    j1, t1 = jg.ones(3), torch.ones(3)
    j2, t2 = jg.ones(3, 2), torch.ones(3, 2)
    jc, tc = jg.tensor([0, 1, 1]), torch.tensor([0, 1, 1])
    pairs = [
        (lambda: F.margin_ranking_loss(j1, j2, j1), lambda: TF.margin_ranking_loss(t1, t2, t1)),
        (lambda: F.margin_ranking_loss(j1, j1, j1, reduction="avg"),
         lambda: TF.margin_ranking_loss(t1, t1, t1, reduction="avg")),
        (lambda: F.soft_margin_loss(j1, j1, reduction="x"),
         lambda: TF.soft_margin_loss(t1, t1, reduction="x")),
        (lambda: F.multilabel_soft_margin_loss(j2, j2, reduction="x"),
         lambda: TF.multilabel_soft_margin_loss(t2, t2, reduction="x")),
        (lambda: F.cosine_embedding_loss(j2, j2, j2), lambda: TF.cosine_embedding_loss(t2, t2, t2)),
        (lambda: F.cosine_embedding_loss(j1, j1, j1), lambda: TF.cosine_embedding_loss(t1, t1, t1)),
        (lambda: F.cosine_embedding_loss(j2, j2, jg.tensor(1.0)),
         lambda: TF.cosine_embedding_loss(t2, t2, torch.tensor(1.0))),
        (lambda: F.triplet_margin_loss(j1, j2, j2), lambda: TF.triplet_margin_loss(t1, t2, t2)),
        (lambda: F.triplet_margin_with_distance_loss(j1, j1, j1, reduction="x"),
         lambda: TF.triplet_margin_with_distance_loss(t1, t1, t1, reduction="x")),
        (lambda: F.poisson_nll_loss(j1, j1, reduction="x"),
         lambda: TF.poisson_nll_loss(t1, t1, reduction="x")),
        (lambda: F.gaussian_nll_loss(j2, j2, jg.ones(2)),
         lambda: TF.gaussian_nll_loss(t2, t2, torch.ones(2))),
        (lambda: F.gaussian_nll_loss(j2, j2, -j2), lambda: TF.gaussian_nll_loss(t2, t2, -t2)),
        (lambda: F.gaussian_nll_loss(j2, j2, j2, reduction="x"),
         lambda: TF.gaussian_nll_loss(t2, t2, t2, reduction="x")),
        (lambda: F.multi_margin_loss(j2, jc, p=3), lambda: TF.multi_margin_loss(t2, tc, p=3)),
        (lambda: F.multi_margin_loss(j2, jc, weight=j2),
         lambda: TF.multi_margin_loss(t2, tc, weight=t2)),
        (lambda: F.multi_margin_loss(j2, jc[:2]), lambda: TF.multi_margin_loss(t2, tc[:2])),
        (lambda: F.multi_margin_loss(j2, jc + 1), lambda: TF.multi_margin_loss(t2, tc + 1)),
        (lambda: F.multi_margin_loss(jg.ones(2, 2, 2), jc),
         lambda: TF.multi_margin_loss(torch.ones(2, 2, 2), tc)),
        (lambda: F.multilabel_margin_loss(j2, jc), lambda: TF.multilabel_margin_loss(t2, tc)),
        (lambda: F.multilabel_margin_loss(j2, jg.ones(3, 2, dtype=jg.int64) * 2),
         lambda: TF.multilabel_margin_loss(t2, torch.ones(3, 2, dtype=torch.int64) * 2)),
        (lambda: F.multilabel_margin_loss(j1, jc[:2]),
         lambda: TF.multilabel_margin_loss(t1, tc[:2])),
        (lambda: jg.nn.MultiMarginLoss(p=3), lambda: torch.nn.MultiMarginLoss(p=3)),
    ]
    for jf, tf in pairs:
        same_error(jf, tf)


def test_nll_loss2d_is_nll_loss(jg, torch):
    with pytest.warns(UserWarning) as jw:
        jm = jg.nn.NLLLoss2d(ignore_index=1)
    with pytest.warns(UserWarning) as tw:
        tm = torch.nn.NLLLoss2d(ignore_index=1)
    assert str(jw[0].message) == str(tw[0].message)
    assert isinstance(jm, jg.nn.NLLLoss)
    assert repr(jm) == repr(tm)
    jx, tx = randn(jg, torch, (2, 3, 4, 5), 1, "float64")
    g = torch.Generator().manual_seed(2)
    jt, tt = both(jg, torch, torch.randint(0, 3, (2, 4, 5), generator=g))
    check(jg, torch, lambda a: jm(a.log_softmax(1), jt), lambda a: tm(a.log_softmax(1), tt),
          (jx,), (tx,), 1e-12)


# ---------------------------------------------------------------- bilinear

@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("lead", [(5,), (2, 3), ()])
def test_bilinear_matches_torch(jg, torch, dtype, tol, lead):
    j1, t1 = randn(jg, torch, lead + (3,), 1, dtype)
    j2, t2 = randn(jg, torch, lead + (4,), 2, dtype)
    jw, tw = randn(jg, torch, (6, 3, 4), 3, dtype)
    jb, tb = randn(jg, torch, (6,), 4, dtype)
    F, TF = jg.nn.functional, torch.nn.functional
    check(jg, torch, F.bilinear, TF.bilinear, (j1, j2, jw, jb), (t1, t2, tw, tb), tol)
    check(jg, torch, F.bilinear, TF.bilinear, (j1, j2, jw), (t1, t2, tw), tol)


def test_bilinear_module_matches_torch(jg, torch):
    for kw in ({}, {"bias": False}, {"dtype": "float64"}):
        jkw = {k: (getattr(jg, v) if k == "dtype" else v) for k, v in kw.items()}
        tkw = {k: (getattr(torch, v) if k == "dtype" else v) for k, v in kw.items()}
        jm, tm = jg.nn.Bilinear(3, 4, 6, **jkw), torch.nn.Bilinear(3, 4, 6, **tkw)
        assert repr(jm) == repr(tm)
        assert list(jm.state_dict().keys()) == list(tm.state_dict().keys())
        for (n, a), (_, b) in zip(jm.named_parameters(), tm.named_parameters()):
            assert tuple(a.shape) == tuple(b.shape) and str(a.dtype)[8:] == str(b.dtype)[6:]
            bound = 1 / math.sqrt(3)
            assert all(-bound <= v <= bound for v in vals(a)), n
        # load PyTorch's parameters: the same outputs
        jm.load_state_dict({k: jg.tensor(v.tolist(), dtype=jm.weight.dtype)
                            for k, v in tm.state_dict().items()})
        dt = str(tm.weight.dtype).split(".")[1]
        j1, t1 = randn(jg, torch, (5, 3), 1, dt)
        j2, t2 = randn(jg, torch, (5, 4), 2, dt)
        check(jg, torch, jm, tm, (j1, j2), (t1, t2), 3e-5)
    jw, tw = jg.ones(6, 3, 4), torch.ones(6, 3, 4)
    F, TF = jg.nn.functional, torch.nn.functional
    for s1, s2, sb in [((5, 2), (5, 4), 6), ((5, 3), (5, 5), 6), ((5, 3), (4, 4), 6),
                       ((5, 3), (5, 4), 7), ((5, 3), (5, 1, 4), 6)]:
        same_error(lambda: F.bilinear(jg.ones(*s1), jg.ones(*s2), jw, jg.ones(sb)),
                   lambda: TF.bilinear(torch.ones(*s1), torch.ones(*s2), tw, torch.ones(sb)))


def test_lazy_linear_matches_torch(jg, torch):
    for kw in ({}, {"bias": False}, {"dtype": "float64"}):
        jkw = {k: (getattr(jg, v) if k == "dtype" else v) for k, v in kw.items()}
        tkw = {k: (getattr(torch, v) if k == "dtype" else v) for k, v in kw.items()}
        with pytest.warns(UserWarning) as jw:
            jm = jg.nn.LazyLinear(4, **jkw)
        with pytest.warns(UserWarning) as tw:
            tm = torch.nn.LazyLinear(4, **tkw)
        assert str(jw[0].message) == str(tw[0].message)
        assert repr(jm) == repr(tm)
        assert jm.has_uninitialized_params() and tm.has_uninitialized_params()
        assert list(jm.state_dict().keys()) == list(tm.state_dict().keys())
        assert len(list(jm.parameters())) == len(list(tm.parameters()))
        dt = kw.get("dtype", "float32")
        jx, tx = randn(jg, torch, (2, 5, 3), 1, dt, grad=False)
        jy, ty = jm(jx), tm(tx)
        assert type(jm) is jg.nn.Linear and type(tm) is torch.nn.Linear
        assert repr(jm) == repr(tm)
        assert not jm.has_uninitialized_params() if hasattr(jm, "has_uninitialized_params") \
            else True
        assert tuple(jy.shape) == tuple(ty.shape)
        for (n, a), (m, b) in zip(jm.named_parameters(), tm.named_parameters()):
            assert n == m and tuple(a.shape) == tuple(b.shape)
            assert str(a.dtype)[8:] == str(b.dtype)[6:] and a.requires_grad
            assert all(-1 / math.sqrt(3) <= v <= 1 / math.sqrt(3) for v in vals(a)), n
        # PyTorch's parameters loaded: the same outputs and gradients
        jm.load_state_dict({k: jg.tensor(v.tolist(), dtype=jm.weight.dtype)
                            for k, v in tm.state_dict().items()})
        jx.requires_grad_(True)
        tx.requires_grad_(True)
        check(jg, torch, jm, tm, (jx,), (tx,), 3e-6)


# ---------------------------------------------------------------- embedding_bag

BAGS = [
    # (input, offsets, include_last_offset, padding_idx)
    ([[1, 2, 4], [4, 3, 2], [0, 0, 9]], None, False, None),
    ([[1, 2, 4], [4, 3, 2], [0, 0, 9]], None, False, 4),
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 3, 3, 6], False, None),
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 3, 3, 6], False, 2),
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 2, 5, 8], True, None),
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 2, 5, 8], True, -1),
    ([2, 2, 2], [0, 1], False, 2),
]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("bag", BAGS)
def test_embedding_bag_matches_torch(jg, torch, dtype, tol, mode, bag):
    data, offsets, last, pad = bag
    ji, ti = both(jg, torch, data)
    jo, to = both(jg, torch, offsets) if offsets is not None else (None, None)
    jw, tw = randn(jg, torch, (10, 3), 1, dtype)
    kw = {"mode": mode, "include_last_offset": last, "padding_idx": pad}
    check(jg, torch, lambda w: jg.nn.functional.embedding_bag(ji, w, jo, **kw),
          lambda w: torch.nn.functional.embedding_bag(ti, w, to, **kw), (jw,), (tw,), tol)
    if mode == "sum":
        jp, tp = randn(jg, torch, tuple(ti.shape), 2, dtype)
        check(jg, torch,
              lambda w, p: jg.nn.functional.embedding_bag(ji, w, jo, per_sample_weights=p, **kw),
              lambda w, p: torch.nn.functional.embedding_bag(ti, w, to, per_sample_weights=p,
                                                             **kw), (jw, jp), (tw, tp), tol)


def test_embedding_bag_module_matches_torch(jg, torch):
    for args, kw in [((10, 3), {}), ((10, 3), {"mode": "max", "padding_idx": -2}),
                     ((10, 3), {"mode": "sum", "include_last_offset": True, "norm_type": 3.0}),
                     ((10, 3), {"dtype": "float64"})]:
        jkw = {k: (getattr(jg, v) if k == "dtype" else v) for k, v in kw.items()}
        tkw = {k: (getattr(torch, v) if k == "dtype" else v) for k, v in kw.items()}
        jm, tm = jg.nn.EmbeddingBag(*args, **jkw), torch.nn.EmbeddingBag(*args, **tkw)
        assert repr(jm) == repr(tm)
        assert list(jm.state_dict().keys()) == list(tm.state_dict().keys())
        assert tuple(jm.weight.shape) == tuple(tm.weight.shape)
        assert str(jm.weight.dtype)[8:] == str(tm.weight.dtype)[6:]
        assert jm.padding_idx == tm.padding_idx
        if jm.padding_idx is not None:
            assert vals(jm.weight[jm.padding_idx]) == [0.0] * 3
        jm.load_state_dict({"weight": jg.tensor(tm.weight.tolist(), dtype=jm.weight.dtype)})
        ji, ti = both(jg, torch, [1, 2, 4, 5, 4, 3, 2, 8])
        jo, to = both(jg, torch, [0, 2, 5, 8])
        jy, ty = jm(ji, jo), tm(ti, to)
        assert close(jy, ty, 1e-6)
        jy.sum().backward()
        ty.sum().backward()
        assert close(jm.weight.grad, tm.weight.grad, 1e-6)
    jw = jg.tensor([[1.0, 2.0], [3.0, 4.0]])
    tw = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    jm = jg.nn.EmbeddingBag.from_pretrained(jw, mode="sum")
    tm = torch.nn.EmbeddingBag.from_pretrained(tw, mode="sum")
    assert repr(jm) == repr(tm) and jm.weight.requires_grad == tm.weight.requires_grad
    assert vals(jm(jg.tensor([[0, 1, 1]]))) == vals(tm(torch.tensor([[0, 1, 1]])))


def test_embedding_bag_errors_match_torch(jg, torch):
    F, TF = jg.nn.functional, torch.nn.functional
    # (float64: PyTorch's float32 sum and mean kernel words the index error
    # differently)
    jw, tw = jg.ones(10, 3, dtype=jg.float64), torch.ones(10, 3, dtype=torch.float64)
    ji, ti = jg.tensor([1, 2, 3, 4]), torch.tensor([1, 2, 3, 4])
    jo, to = jg.tensor([0, 2]), torch.tensor([0, 2])
    pairs = [
        (lambda: F.embedding_bag(ji, jw), lambda: TF.embedding_bag(ti, tw)),
        (lambda: F.embedding_bag(ji, jw, jo, mode="min"),
         lambda: TF.embedding_bag(ti, tw, to, mode="min")),
        (lambda: F.embedding_bag(ji, jw, jo, mode="mean", per_sample_weights=jg.ones(4)),
         lambda: TF.embedding_bag(ti, tw, to, mode="mean", per_sample_weights=torch.ones(4))),
        (lambda: F.embedding_bag(ji, jw, jo, mode="sum", per_sample_weights=jg.ones(3)),
         lambda: TF.embedding_bag(ti, tw, to, mode="sum", per_sample_weights=torch.ones(3))),
        (lambda: F.embedding_bag(ji, jw, jg.tensor([1, 2])),
         lambda: TF.embedding_bag(ti, tw, torch.tensor([1, 2]))),
        (lambda: F.embedding_bag(ji.reshape(2, 2), jw, jo),
         lambda: TF.embedding_bag(ti.reshape(2, 2), tw, to)),
        (lambda: F.embedding_bag(jg.ones(2, 2, 2, dtype=jg.int64), jw),
         lambda: TF.embedding_bag(torch.ones(2, 2, 2, dtype=torch.int64), tw)),
        (lambda: F.embedding_bag(ji, jw, jo.reshape(1, 2)),
         lambda: TF.embedding_bag(ti, tw, to.reshape(1, 2))),
        (lambda: F.embedding_bag(ji + 10, jw, jo), lambda: TF.embedding_bag(ti + 10, tw, to)),
        (lambda: F.embedding_bag(ji - 2, jw, jo, mode="max"),
         lambda: TF.embedding_bag(ti - 2, tw, to, mode="max")),
        (lambda: F.embedding_bag(ji, jw, jo + 1), lambda: TF.embedding_bag(ti, tw, to + 1)),
        (lambda: F.embedding_bag(ji, jw, jg.tensor([0, 5])),
         lambda: TF.embedding_bag(ti, tw, torch.tensor([0, 5]))),
        (lambda: F.embedding_bag(ji.reshape(2, 2), jw, padding_idx=10),
         lambda: TF.embedding_bag(ti.reshape(2, 2), tw, padding_idx=10)),
        (lambda: F.embedding_bag(ji.reshape(2, 2), jw, padding_idx=-11),
         lambda: TF.embedding_bag(ti.reshape(2, 2), tw, padding_idx=-11)),
        (lambda: jg.nn.EmbeddingBag(3, 2, padding_idx=3),
         lambda: torch.nn.EmbeddingBag(3, 2, padding_idx=3)),
    ]
    for jf, tf in pairs:
        same_error(jf, tf)


# ---------------------------------------------------------------- ctc_loss

CTC = [
    # (targets, input_lengths, target_lengths, blank, as tensors)
    ([[1, 2, 2], [3, 1, 0], [4, 4, 4]], [7, 5, 6], [3, 2, 1], 0, False),
    ([[1, 2, 2], [3, 1, 2], [4, 4, 4]], [7, 7, 7], [3, 3, 3], 0, True),
    ([1, 2, 2, 3, 1, 4], [7, 5, 6], [3, 2, 1], 0, False),
    ([1, 2, 2, 3, 1, 4], [7, 5, 6], [3, 2, 1], 0, True),
    ([[0, 2, 2], [3, 0, 1], [1, 1, 3]], [7, 6, 2], [2, 3, 0], 4, False),
    ([[2, 2, 2], [1, 2, 3], [1, 1, 1]], [3, 4, 7], [3, 3, 2], 0, False),  # infeasible ones
]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", CTC)
@pytest.mark.parametrize("logits", [True, False])
def test_ctc_loss_matches_torch(jg, torch, dtype, tol, reduction, case, logits):
    tg, il, tl, blank, as_tensors = case
    jt, tt = both(jg, torch, tg)
    jil, til = both(jg, torch, il) if as_tensors else (il, il)
    jtl, ttl = both(jg, torch, tl) if as_tensors else (tl, tl)
    jx, tx = randn(jg, torch, (7, 3, 5), 1, dtype)
    infeasible = case is CTC[-1]

    def fn(F, x, t, il, tl, zero_infinity):
        lp = x.log_softmax(2) if logits else x
        return F.ctc_loss(lp, t, il, tl, blank=blank, reduction=reduction,
                          zero_infinity=zero_infinity)

    F, TF = jg.nn.functional, torch.nn.functional
    check(jg, torch, lambda x: fn(F, x, jt, jil, jtl, True),
          lambda x: fn(TF, x, tt, til, ttl, True), (jx,), (tx,), tol)
    if infeasible:  # an infinite loss without zero_infinity (values only)
        jy = fn(F, jx, jt, jil, jtl, False)
        ty = fn(TF, tx, tt, til, ttl, False)
        assert close(jy, ty, tol) and math.inf in vals(ty)
    else:
        check(jg, torch, lambda x: fn(F, x, jt, jil, jtl, False),
              lambda x: fn(TF, x, tt, til, ttl, False), (jx,), (tx,), tol)


def test_ctc_loss_unbatched_and_module(jg, torch):
    jx, tx = randn(jg, torch, (6, 4), 2, "float64")
    jt, tt = both(jg, torch, [1, 3, 3])
    for red in REDUCTIONS:
        check(jg, torch, lambda x: jg.nn.functional.ctc_loss(x.log_softmax(1), jt, [6], [3],
                                                             reduction=red),
              lambda x: torch.nn.functional.ctc_loss(x.log_softmax(1), tt, [6], [3],
                                                     reduction=red), (jx,), (tx,), 1e-12)
    for kw in ({}, {"blank": 2, "reduction": "sum", "zero_infinity": True}):
        jm, tm = jg.nn.CTCLoss(**kw), torch.nn.CTCLoss(**kw)
        assert repr(jm) == repr(tm)
        assert (jm.blank, jm.reduction, jm.zero_infinity) == \
            (tm.blank, tm.reduction, tm.zero_infinity)
        jx, tx = randn(jg, torch, (5, 2, 4), 3, "float64")
        jt, tt = both(jg, torch, [[1, 3], [3, 1]])
        check(jg, torch, lambda x: jm(x.log_softmax(2), jt, [5, 4], [2, 1]),
              lambda x: tm(x.log_softmax(2), tt, [5, 4], [2, 1]), (jx,), (tx,), 1e-12)


def test_ctc_loss_errors_match_torch(jg, torch):
    F, TF = jg.nn.functional, torch.nn.functional
    jx, tx = randn(jg, torch, (6, 2, 5), 1, "float32", grad=False)
    jt, tt = both(jg, torch, [[1, 2, 3], [1, 2, 3]])
    for args in [([6, 6], [4, 3], {}), ([7, 6], [3, 3], {}), ([6, 6, 6], [3, 3], {}),
                 ([6, 6], [3], {}), ([6, 6], [3, 3], {"blank": 5}),
                 ([6, 6], [3, 3], {"reduction": "x"})]:
        same_error(lambda: F.ctc_loss(jx, jt, *args[:2], **args[2]),
                   lambda: TF.ctc_loss(tx, tt, *args[:2], **args[2]))
    same_error(lambda: F.ctc_loss(jx, jg.tensor([1, 2, 3, 1]), [6, 6], [3, 3]),
               lambda: TF.ctc_loss(tx, torch.tensor([1, 2, 3, 1]), [6, 6], [3, 3]))


# ---------------------------------------------------------------- edge cases

def _edge_cases(lib):
    F = lib.nn.functional
    g = lib.Generator().manual_seed(0) if lib.__name__ == "torch" else None

    def r(*shape):
        if g is not None:
            return lib.randn(*shape, generator=g, dtype=lib.float64)
        return lib.tensor(_EDGE_RANDOM.pop(0), dtype=lib.float64).reshape(shape)

    def t(v, **kw):
        return lib.tensor(v, **kw)

    return [
        lambda: F.multi_margin_loss(t(0.5), t([0]), reduction="none"),
        lambda: F.multi_margin_loss(r(4), t([2]), reduction="none"),
        lambda: F.multi_margin_loss(r(4), t(2), reduction="none"),
        lambda: F.multilabel_margin_loss(r(4), t([2, 0, -1, 1]), reduction="none"),
        lambda: F.multilabel_margin_loss(t(0.3), t(0), reduction="none"),
        lambda: F.multilabel_soft_margin_loss(r(4), t([1.0, 0, 1, 0]), reduction="none"),
        lambda: F.pairwise_distance(t(1.0), t(3.0)),
        lambda: F.pairwise_distance(r(3, 4), r(3, 4), 0),
        lambda: F.pdist(r(4, 3).t()),
        lambda: F.gaussian_nll_loss(r(3, 4), r(3, 4), lib.ones(3), reduction="none"),
        lambda: F.poisson_nll_loss(r(4), t([1, 2, 3, 0]), full=True),
        lambda: F.hinge_embedding_loss(r(4), t([1, -1, 1, -1])),
        lambda: F.embedding_bag(t([1, 2, 3, 4], dtype=lib.int32), r(10, 3),
                                t([0, 2], dtype=lib.int32)),
        lambda: F.embedding_bag(t([[1, 1], [2, 3]]), r(10, 3), padding_idx=1),
        lambda: F.embedding_bag(t([[1, 1], [2, 3]]), r(10, 3), mode="sum", padding_idx=1,
                                per_sample_weights=t([[2.0, 3], [4, 5]], dtype=lib.float64)),
        lambda: F.embedding_bag(t([], dtype=lib.int64), r(10, 3), t([0, 0]), mode="max"),
        lambda: F.embedding_bag(r(10, 3), t([[1, 1], [2, 3]])),  # PyTorch swaps them
        lambda: F.ctc_loss(r(5, 2, 4).log_softmax(2), t([[1, 2], [3, 3]]), [0, 5], [0, 1],
                           reduction="none"),
        lambda: F.ctc_loss(r(5, 2, 4).log_softmax(2), t([[1, 2], [3, 3]], dtype=lib.int32),
                           t([5, 4], dtype=lib.int32), t([2, 1], dtype=lib.int32)),
        lambda: F.ctc_loss(r(5, 4).log_softmax(1), t([[1, 2]]), [5], [2], reduction="none"),
        lambda: F.ctc_loss(r(5, 4).log_softmax(1), t([1, 2]), t(5), t(2), reduction="none"),
    ]


_EDGE_RANDOM = []


@pytest.mark.parametrize("index", range(21))
def test_edge_cases_match_torch(jg, torch, index):
    # the random inputs drawn for PyTorch are replayed for jitgrad
    drawn = []
    real = torch.randn

    def record(*a, **k):
        out = real(*a, **k)
        drawn.append(out.reshape(-1).tolist())
        return out

    torch.randn = record
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = _edge_cases(torch)[index]()
    finally:
        torch.randn = real
    _EDGE_RANDOM[:] = drawn
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _edge_cases(jg)[index]()
    assert tuple(got.shape) == tuple(want.shape)
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    assert close(got, want, 1e-12), (vals(got), vals(want))


def test_dtype_errors_match_torch(jg, torch):
    F, TF = jg.nn.functional, torch.nn.functional
    same_error(lambda: F.embedding_bag(jg.tensor([[1, 1]]), jg.ones(10, 3), mode="sum",
                                       per_sample_weights=jg.ones(1, 2, dtype=jg.float64)),
               lambda: TF.embedding_bag(torch.tensor([[1, 1]]), torch.ones(10, 3), mode="sum",
                                        per_sample_weights=torch.ones(1, 2,
                                                                      dtype=torch.float64)))
    for d1, d2, dw in [("float32", "float64", "float32"), ("float32", "float32", "float64"),
                       ("float64", "float32", "float32")]:
        same_error(lambda: F.bilinear(jg.ones(2, 3, dtype=getattr(jg, d1)),
                                      jg.ones(2, 4, dtype=getattr(jg, d2)),
                                      jg.ones(5, 3, 4, dtype=getattr(jg, dw))),
                   lambda: TF.bilinear(torch.ones(2, 3, dtype=getattr(torch, d1)),
                                       torch.ones(2, 4, dtype=getattr(torch, d2)),
                                       torch.ones(5, 3, 4, dtype=getattr(torch, dw))))


# ---------------------------------------------------------------- torch.* names

@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_top_level_ops_match_torch(jg, torch, reduction):
    r = lambda shape, seed: randn(jg, torch, shape, seed, "float64")  # noqa: E731
    a, b, c = r((5, 4), 1), r((5, 4), 2), r((5, 4), 3)
    y = both(jg, torch, _pm1(torch, (5,), 4), "float64")
    y4 = both(jg, torch, _pm1(torch, (5, 4), 5), "float64")
    lam = both(jg, torch, torch.rand(5, 4, generator=torch.Generator().manual_seed(6)) * 3,
               "float64")
    w = r((3, 4, 4), 7)
    tg = both(jg, torch, [[1, 2], [3, 3], [1, 0], [2, 1], [3, 2]])
    cases = [
        ("cosine_similarity", (a, b), {"dim": 0, "eps": 1e-6}),
        ("pairwise_distance", (a, b), {"p": 1.5, "keepdim": True}),
        ("pdist", (a,), {"p": 3}),
        ("bilinear", (a, b, w), {}),
        ("margin_ranking_loss", (r((5,), 9), r((5,), 10), y), {"margin": 0.3,
                                                               "reduction": reduction}),
        ("hinge_embedding_loss", (a, y4), {"margin": 0.5, "reduction": reduction}),
        ("poisson_nll_loss", (a, lam, True, True, 1e-8, reduction), {}),
        ("cosine_embedding_loss", (a, b, y), {"margin": 0.1, "reduction": reduction}),
        ("triplet_margin_loss", (a, b, c), {"p": 1, "swap": True, "reduction": reduction}),
    ]
    for name, args, kw in cases:
        jargs = [x[0] if isinstance(x, tuple) else x for x in args]
        targs = [x[1] if isinstance(x, tuple) else x for x in args]
        check(jg, torch, lambda *v: getattr(jg, name)(*v, **kw),
              lambda *v: getattr(torch, name)(*v, **kw), jargs, targs, 1e-12)
    jx, tx = r((6, 5, 4), 8)
    check(jg, torch, lambda x: jg.ctc_loss(x.log_softmax(2), tg[0], [6, 5, 4, 6, 3],
                                           [2, 2, 1, 2, 0], 0, reduction, True),
          lambda x: torch.ctc_loss(x.log_softmax(2), tg[1], [6, 5, 4, 6, 3], [2, 2, 1, 2, 0], 0,
                                   reduction, True), (jx,), (tx,), 1e-12)


# ---------------------------------------------------------------- compiled == eager

def _net(jg, dtype):
    jg.manual_seed(5)
    m = jg.nn.Module()
    m.bil = jg.nn.Bilinear(4, 4, 4, dtype=dtype)
    m.bag = jg.nn.EmbeddingBag(10, 4, mode="mean", dtype=dtype)
    return m


def _step(jg, m, x, y, idx, offs, cls, ml):
    F = jg.nn.functional
    e = m.bag(idx, offs)
    h = m.bil(x, e) + F.embedding_bag(idx, m.bag.weight, offs, mode="max")
    tgt = y.sign()
    loss = (F.margin_ranking_loss(h[:, 0], h[:, 1], tgt[:, 0], margin=0.1) +
            F.hinge_embedding_loss(h, tgt) + F.soft_margin_loss(h, tgt) +
            F.multilabel_soft_margin_loss(h, (tgt + 1) / 2) +
            F.cosine_embedding_loss(h, y, tgt[:, 1], margin=0.2) +
            F.triplet_margin_loss(h, y, x, swap=True) +
            F.triplet_margin_with_distance_loss(h, y, x, margin=0.5) +
            F.poisson_nll_loss(h, y.abs()) + F.poisson_nll_loss(h.exp(), y.abs(), False, True) +
            F.gaussian_nll_loss(h, y, x * x, full=True) +
            F.multi_margin_loss(h, cls, p=2) + F.multilabel_margin_loss(h, ml) +
            F.pairwise_distance(h, y).sum() + F.pdist(h, 3).sum() +
            F.cosine_similarity(h, y).sum() +
            F.ctc_loss(h.unsqueeze(1).log_softmax(2), ml[:1, :2].clamp_min(1), [4], [2]))
    params = [p for p in m.parameters()]
    grads = jg.autograd.grad(loss, [x] + params)
    return [loss] + list(grads)


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_training_step_equals_eager_bitwise(jg, backend, dtype):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    dt = getattr(jg, dtype)
    em, cm = _net(jg, dt), _net(jg, dt)
    idx = jg.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    offs = jg.tensor([0, 3, 3, 6])
    cls = jg.tensor([3, 0, 1, 2])
    ml = jg.tensor([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 0, 1, 2], [2, -1, 2, 0]])
    f = jg.compile(lambda x, y: _step(jg, cm, x, y, idx, offs, cls, ml), backend=backend,
                   fullgraph=True)
    for i in range(2):
        x = jg.randn(4, 4, dtype=dt, requires_grad=True)
        y = jg.randn(4, 4, dtype=dt)
        want, got = _step(jg, em, x, y, idx, offs, cls, ml), f(x, y)
        for a, b in zip(want, got):
            assert vals(a) == vals(b), i
