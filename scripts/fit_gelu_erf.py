"""Derives the float32 gelu kernel's rational fit (gelus in
csrc/runtime/sim/kernels/vector_math-inl.h) and checks it:

    Phi(x) = 1/2 + x P(x^2) / Q(x^2),  |x| < 4 sqrt 2,  P and Q of degree 5, Q(0) = 1

a near-minimax fit of erf(x / sqrt 2) / 2 by Loeb's linearised least squares inside
Lawson's reweighting, on Chebyshev-spaced points in x^2 / X^2 (powers of x^2 itself are
too badly conditioned). Prints the coefficients as the kernel writes them, the fit's
error in float64 and gelu's error in float32 arithmetic (an FMA per Horner step),
in units of u |x| (u = 2^-24), beside torch's own gelu.

    python scripts/fit_gelu_erf.py
"""
import numpy as np
import torch
from scipy.special import erf, erfc

DEGREE = 5
LIMIT = 4 * np.sqrt(2)  # erf(4) = 1 - 1.5e-8: beyond, Phi is its step within 7.7e-9


def fit() -> tuple[np.ndarray, np.ndarray, float]:
    """P and Q's coefficients in powers of x^2 (Q[0] = 1), and the fit's largest error."""
    x = (np.cos(np.linspace(0, np.pi, 40001)) + 1) / 2 * LIMIT
    x = x[x > 1e-6]
    target, t = erf(x / np.sqrt(2)) / 2, (x / LIMIT) ** 2
    powers = t[:, None] ** np.arange(DEGREE + 1)
    system = np.hstack([x[:, None] * powers, -target[:, None] * powers[:, 1:]])
    weights, best = np.full(len(x), 1 / len(x)), None
    for _ in range(60):  # Lawson: weights grow where the error is largest
        denominator = np.ones_like(x)
        for _ in range(30):  # Loeb: x P - f Q = f Q's error, weighted by 1 / Q
            scale = np.sqrt(weights) / np.abs(denominator)
            solution, *_ = np.linalg.lstsq(system * scale[:, None], target * scale, rcond=None)
            p, q = solution[:DEGREE + 1], np.concatenate([[1.0], solution[DEGREE + 1:]])
            denominator = powers @ q
        residual = x * (powers @ p) / denominator - target
        error = np.abs(residual).max()
        if best is None or error < best[2]:
            best = (p, q, error)
        weights = weights * np.abs(residual)
        weights /= weights.sum()
    p, q, error = best
    rescale = LIMIT ** (-2.0 * np.arange(DEGREE + 1))  # from powers of t back to powers of x^2
    return p * rescale, q * rescale, error


def gelu_float32(x: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The kernel's arithmetic: float32 steps, each Horner step one rounding (an FMA)."""
    square = x * x

    def horner(coefficients):
        acc = np.full_like(square, coefficients[-1])
        for c in coefficients[-2::-1]:
            acc = (acc.astype(np.float64) * square + c).astype(np.float32)
        return acc

    ratio = horner(p) / horner(q)
    cdf = (x.astype(np.float64) * ratio + 0.5).astype(np.float32)
    step = np.where(np.signbit(x), np.float32(0), np.float32(1))
    return x * np.where(np.abs(x) < np.float32(LIMIT), cdf, step)


def main() -> None:
    p, q, error = fit()
    p32, q32 = p.astype(np.float32), q.astype(np.float32)
    print("kNumerator  ", ", ".join(f"{c:.9g}f" for c in p32))
    print("kDenominator", ", ".join(f"{c:.9g}f" for c in q32))
    print(f"fit of erf(x / sqrt 2) / 2 within {error:.2g} (float64)")
    x = np.concatenate([np.linspace(-10, 10, 20_000_001, dtype=np.float32),
                        np.random.default_rng(0).standard_normal(10_000_000).astype(np.float32) * 3])
    exact = x.astype(np.float64) / 2 * erfc(-x.astype(np.float64) / np.sqrt(2))
    scale = np.abs(x.astype(np.float64)) * 2.0**-24
    nonzero = scale > 0
    ours = np.abs(gelu_float32(x, p32, q32) - exact)[nonzero] / scale[nonzero]
    torchs = np.abs(torch.nn.functional.gelu(torch.from_numpy(x)).double().numpy() - exact)[nonzero] / scale[nonzero]
    print(f"gelu in float32: within {ours.max():.2f} u |x|; torch's own: {torchs.max():.2f} u |x|")


if __name__ == "__main__":
    main()
