#!/usr/bin/env python3
"""Prints the polynomial coefficients of src/ops/ew_math.h (erf, f32 exp,
f32 tanh, f32 erf).

Run with mpmath: python3 scripts/ew_math_coeffs.py.  Coefficients are the
exact Taylor terms or Chebyshev interpolants at 40 digits, rounded to double
(printed with 17 significant digits, which round-trips)."""
import mpmath as mp

mp.mp.dps = 40


def d(x):
    return repr(float(x))


def cheb(f, a, b, n):
    """Chebyshev coefficients c_0..c_{n-1} of f on [a, b] (c_0 halved)."""
    xs = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    fx = [f((b - a) / mp.mpf(2) * x + (a + b) / mp.mpf(2)) for x in xs]
    c = [2 * sum(fx[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / n) for k in range(n)) / n
         for j in range(n)]
    c[0] /= 2
    return c


def cheb_to_monomial(c):
    """The same polynomial in powers of the [-1, 1] variable."""
    n = len(c)
    T = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]
    for k in range(2, n):
        a = [mp.mpf(0)] + [2 * v for v in T[k - 1]]
        b = T[k - 2] + [mp.mpf(0)] * (len(a) - len(T[k - 2]))
        T.append([a[i] - b[i] for i in range(len(a))])
    m = [mp.mpf(0)] * n
    for k in range(n):
        for i, v in enumerate(T[k]):
            m[i] += c[k] * v
    return m


def erf_taylor(nterms):
    """erf(x) = x + x * sum_{n>=0} t_n z^n, z = x^2: t_0 = 2/sqrt(pi) - 1,
    t_n = 2/sqrt(pi) (-1)^n / (n! (2n+1)) for n >= 1."""
    k = 2 / mp.sqrt(mp.pi)
    return [k - 1] + [k * (-1) ** n / (mp.factorial(n) * (2 * n + 1)) for n in range(1, nterms)]


def expf_fit(deg, n=300):
    """q of exp(r) ~ 1 + r + r^2 q(r), q of degree deg: least squares in
    relative error at n Chebyshev nodes of |r| <= 1.01 ln2/2 (a little past
    the reduced range: k = round(x / ln2) is computed in f32)."""
    a = mp.log(2) / 2 * mp.mpf("1.01")
    rs = [mp.cos(mp.pi * (i + mp.mpf(1) / 2) / n) * a for i in range(n)]
    A = mp.matrix(n, deg + 1)
    b = mp.matrix(n, 1)
    for i, r in enumerate(rs):
        w = r * r / mp.exp(r)  # weight of the relative error
        for j in range(deg + 1):
            A[i, j] = w * r**j
        b[i] = w * (mp.exp(r) - 1 - r) / (r * r)
    x, _ = mp.qr_solve(A, b)
    return [x[j] for j in range(deg + 1)]


def tanhf_fit(t, deg, n=400):
    """q of tanh(a) ~ a + a z q(z), z = a^2, q of degree deg: least squares
    in relative error of tanh at n Chebyshev nodes of [0, t]."""
    A = mp.matrix(n, deg + 1)
    b = mp.matrix(n, 1)
    for i in range(n):
        a = t * (mp.cos(mp.pi * (i + mp.mpf(1) / 2) / n) + 1) / 2
        z = a * a
        w = a / mp.tanh(a)  # weight of the relative error
        for j in range(deg + 1):
            A[i, j] = w * z ** (j + 1)
        b[i] = w * (mp.tanh(a) / a - 1)
    x, _ = mp.qr_solve(A, b)
    return [x[j] for j in range(deg + 1)]


def erff_fits():
    """f32 erf: P of erf(a) ~ a + a P(a^2) on [0, 1], degree 6, and g of
    erfc(a) ~ exp(-a^2) g(v), v = (2a - 5) / 3, on [1, 4], degree 12; both
    least squares in relative error at 400 Chebyshev nodes."""
    def fit(fn, var, lo, hi, deg, w, n=400):
        A = mp.matrix(n, deg + 1)
        b = mp.matrix(n, 1)
        for i in range(n):
            a = lo + (hi - lo) * (mp.cos(mp.pi * (i + mp.mpf(1) / 2) / n) + 1) / 2
            for j in range(deg + 1):
                A[i, j] = w(a) * var(a)**j
            b[i] = w(a) * fn(a)
        x, _ = mp.qr_solve(A, b)
        return [x[j] for j in range(deg + 1)]
    P = fit(lambda a: mp.erf(a) / a - 1, lambda a: a * a, mp.mpf("1e-6"), mp.mpf(1), 6,
            lambda a: a / mp.erf(a))
    g = fit(lambda a: mp.erfc(a) * mp.exp(a * a), lambda a: (2 * a - 5) / 3, mp.mpf(1),
            mp.mpf(4), 12, lambda a: 1 / (mp.erfc(a) * mp.exp(a * a)))
    return P, g


def f32hex(x):
    import struct
    return float(struct.unpack("f", struct.pack("f", float(x)))[0]).hex()


def show(name, cs):
    print(f"{name} ({len(cs)}):")
    print(", ".join(d(c) for c in cs))
    print()


show("erf f64 Taylor, |x| < 1", erf_taylor(20))
# In powers of u = 0.4 x - 1.4: the coefficients alternate in sign, so at
# u = -1 (x = 1) all terms add and Horner's rule has no cancellation.
show("erfcx f64 Chebyshev interpolant on [1, 6], powers of u",
     cheb_to_monomial(cheb(lambda x: mp.erfc(x) * mp.exp(x * x), 1, 6, 33)))
# f32 exp: q's coefficients rounded to f32, constant term first (the source
# evaluates them by Horner's rule from the highest).
print("exp f32 q, degree 4 (f32):")
print(", ".join(f32hex(c) for c in expf_fit(4)))
print()
# f32 tanh: q's coefficients rounded to f32, constant term first (Horner's
# rule from the highest in the source); |x| < 0.8.
print("tanh f32 q, degree 6 on [0, 0.8] (f32):")
print(", ".join(f32hex(c) for c in tanhf_fit(mp.mpf("0.8"), 6)))
print()
# f32 erf: both fits rounded to f32, constant term first (Horner's rule from
# the highest in the source).
P, g = erff_fits()
print("erf f32 P, degree 6 in a^2 on [0, 1] (f32):")
print(", ".join(f32hex(c) for c in P))
print("erf f32 g (erfcx), degree 12 in (2a - 5) / 3 on [1, 4] (f32):")
print(", ".join(f32hex(c) for c in g))
