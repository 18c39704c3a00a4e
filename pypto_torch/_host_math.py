"""The host's CPU math libraries, made safe to share with the device's threads."""

import torch


def choose_mkl_vml_code_path() -> None:
    """Makes torch's MKL pick its VML code path now, on this one thread.

    torch's CPU build computes exp, log, sin, tanh ... of float tensors with MKL's
    VML (vmsExp and friends), and MKL detects the CPU and picks VML's code path
    lazily, at the first VML call in the process. That detection is not safe to
    race: when torch's first such call is a parallel one, its second OpenMP
    thread can start while the first is still detecting, and then runs its
    whole half with VML's low-accuracy code (EP mode, AVX2 path; exp off by
    1.5e-4 relative). A process with pto loaded made that race likely: 5 in 100
    fresh processes computed torch.exp(torch.randn(1024, 1024)) wrong after one
    x.to("pto"). One serial call here settles the choice for every VML function
    before any user code runs.
    """
    if torch.backends.mkl.is_available():
        torch.exp(torch.zeros(1))
