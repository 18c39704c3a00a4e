"""``torch.distributed`` on pto: the ``pccl`` backend (as NCCL is CUDA's, HCCL Ascend's).

Importing pypto_torch registers it for the device ``pto``, so each of these works::

    dist.init_process_group("pccl")                 # pto tensors (CPU tensors: no)
    dist.init_process_group("cpu:gloo,pto:pccl")    # both
    dist.init_process_group()                       # the default map now holds pto:pccl

Collectives are queued on the device's communication stream after the caller's
current stream, and return a Work whose ``wait()`` makes the current stream wait
(the host does not block). The bytes move through shared memory when every rank
of the group is on this host (ranks in two network namespaces count as two hosts),
else as messages of Gloo over TCP, where an allreduce past one exchange is a
reduce-scatter and an allgather of messages straight between ranks, chunk by chunk
(``GLOO_SOCKET_IFNAME`` picks the network, as for Gloo); ``PTO_PCCL_TRANSPORT``
(``auto``, ``shm``, ``gloo``) overrides the choice, ``PTO_PCCL_BUFFER_BYTES`` sets
how many bytes one exchange carries per rank (4 MiB by default).

As with NCCL, each process drives one device: call ``torch.pto.set_device(local_rank)``
or pass tensors of ``pto:LOCAL_RANK``; a barrier before any collective uses
``pto:LOCAL_RANK % device_count``.
"""
from __future__ import annotations

import os

import torch.distributed as dist

from pypto_torch import _C

BACKEND = "pccl"


def _create_backend(options, backend_options) -> dist.Backend:
    """The c10d creator (extended API): a pccl backend over the group's store."""
    _C._init_distributed()
    # Gloo backends of the same ranks: one carries point-to-point messages; between
    # hosts, another (made only then) the collectives' bytes, so that their tags
    # never meet. Each key space keeps its rendezvous off pccl's keys.
    def gloo(prefix: str) -> dist.ProcessGroupGloo:
        return dist.ProcessGroupGloo(dist.PrefixStore(prefix, options.store), options.group_rank,
                                     options.group_size, options.timeout)

    return _C._ProcessGroupPCCL(
        options.store, options.group_rank, options.group_size, gloo("pccl-gloo/"),
        transport_gloo=lambda: gloo("pccl-transport/"),
        timeout_ms=int(options.timeout.total_seconds() * 1000),
        group_name=str(options.group_id),
        transport=os.environ.get("PTO_PCCL_TRANSPORT", "auto"),
        bound_device=None,
    )


def register() -> None:
    """Registers ``pccl`` with torch.distributed for the device ``pto`` (idempotent)."""
    if not dist.is_available() or hasattr(dist.Backend, BACKEND.upper()):
        return
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=["pto"])
