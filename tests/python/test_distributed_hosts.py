"""pccl between hosts: two network namespaces of this machine joined by a veth pair,
one `torchrun --nnodes 2` node in each, backend "pccl" on pto tensors.

The namespaces are this test's own (unique names, addresses inside them only) and are
removed afterwards, whatever happened. Where they cannot be made (not root, no `ip`,
a kernel or container that refuses them) the test is skipped, saying why.

The two nodes share the filesystem and /dev/shm: only their network namespace tells
them apart, and the ranks must see two hosts (the Gloo transport), not one (shared
memory). Gloo binds to the veth (GLOO_SOCKET_IFNAME), as on hosts with several networks.
"""

import os
import shutil
import subprocess
import sys
import textwrap
import uuid

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What each node's rank runs: every check against the CPU's result, on both ranks.
RANK_SCRIPT = textwrap.dedent("""
    import os
    import torch
    import torch.distributed as dist
    import pypto_torch

    pypto_torch.set_fallback_mode("silent")
    dist.init_process_group("pccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == 2, world
    device = torch.device("pto", 0)
    transport = dist.group.WORLD._get_backend(device).transport
    assert transport == "gloo", f"rank {rank}: two hosts took the {transport} transport"

    def contribution(q, numel, dtype=torch.float32):
        return (torch.arange(numel) % 97 + q * 1000).to(dtype)

    # all_reduce: one exchange (small) and a reduce-scatter and an allgather by messages (past it)
    for numel, dtype, op in ((10, torch.float32, dist.ReduceOp.SUM), (300_001, torch.float32, dist.ReduceOp.SUM),
                             (300_001, torch.int64, dist.ReduceOp.MAX), (200_003, torch.bfloat16, dist.ReduceOp.SUM)):
        x = contribution(rank, numel, dtype).to(device)
        dist.all_reduce(x, op=op)
        parts = torch.stack([contribution(q, numel, dtype) for q in range(world)])
        want = parts.float().sum(0).to(dtype) if op == dist.ReduceOp.SUM else parts.amax(0)
        assert torch.equal(x.cpu(), want), f"all_reduce {numel} {dtype} {op}"

    x = contribution(rank, 50_000).to(device)
    dist.broadcast(x, src=1)
    assert torch.equal(x.cpu(), contribution(1, 50_000)), "broadcast"

    out = torch.empty(2 * 40_000, device=device)
    dist.all_gather_into_tensor(out, contribution(rank, 40_000).to(device))
    assert torch.equal(out.cpu(), torch.cat([contribution(q, 40_000) for q in range(world)])), "all_gather"

    out = torch.empty(30_000, device=device)
    dist.reduce_scatter_tensor(out, contribution(rank, 2 * 30_000).to(device))
    want = sum(contribution(q, 2 * 30_000) for q in range(world))[rank * 30_000:(rank + 1) * 30_000]
    assert torch.equal(out.cpu(), want), "reduce_scatter"

    # A DDP step: each rank's gradient of its half of the batch, averaged, is the
    # full batch's gradient on the CPU.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    inputs, targets = torch.randn(8, 16), torch.randn(8, 4)
    torch.nn.functional.mse_loss(model(inputs), targets).backward()
    want = [p.grad.clone() for p in model.parameters()]
    ddp = torch.nn.parallel.DistributedDataParallel(model.to(device))
    ddp.zero_grad()
    half = slice(4 * rank, 4 * rank + 4)
    torch.nn.functional.mse_loss(ddp(inputs[half].to(device)), targets[half].to(device)).backward()
    for p, g in zip(ddp.parameters(), want):
        torch.testing.assert_close(p.grad.cpu(), g, rtol=1e-5, atol=1e-6)

    dist.destroy_process_group()
    print(f"rank {rank}: ok")
""")


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def two_hosts():
    """Two network namespaces joined by a veth pair: [(namespace, interface, address)] * 2."""
    if shutil.which("ip") is None:
        pytest.skip("needs iproute2's `ip` to make network namespaces")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (ip netns add)")
    tag = uuid.uuid4().hex[:8]
    hosts = [(f"pccl-{tag}-{i}", f"pc{tag}{i}", f"10.23.0.{i + 1}") for i in range(2)]
    made = []
    try:
        for namespace, _, _ in hosts:
            result = _ip("netns", "add", namespace)
            if result.returncode != 0:
                pytest.skip(f"the kernel refuses network namespaces: {result.stderr.strip()}")
            made.append(namespace)
        (ns0, if0, _), (ns1, if1, _) = hosts
        steps = [("link", "add", if0, "netns", ns0, "type", "veth", "peer", "name", if1, "netns", ns1)]
        for namespace, interface, address in hosts:
            steps += [("-n", namespace, "link", "set", "lo", "up"),
                      ("-n", namespace, "addr", "add", f"{address}/24", "dev", interface),
                      ("-n", namespace, "link", "set", interface, "up")]
        for step in steps:
            result = _ip(*step)
            if result.returncode != 0:
                pytest.skip(f"`ip {' '.join(step)}` failed: {result.stderr.strip()}")
        yield hosts
    finally:
        for namespace in made:  # removing a namespace removes its end of the veth pair, and the pair
            _ip("netns", "del", namespace)


def test_pccl_collectives_and_ddp_between_two_hosts(two_hosts, tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    master = two_hosts[0][2]
    nodes = []
    for node_rank, (namespace, interface, _) in enumerate(two_hosts):
        env = dict(os.environ, GLOO_SOCKET_IFNAME=interface, OMP_NUM_THREADS="1", TORCH_CPP_LOG_LEVEL="ERROR",
                   PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
        command = ["ip", "netns", "exec", namespace, sys.executable, "-m", "torch.distributed.run",
                   "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(node_rank),
                   "--master-addr", master, "--master-port", "29511", str(script)]
        nodes.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, start_new_session=True))
    outputs = []
    try:
        for node in nodes:
            outputs.append(node.communicate(timeout=120)[0])
    finally:
        for node in nodes:
            if node.poll() is None:
                os.killpg(node.pid, 9)
                node.wait()
    for node_rank, (node, output) in enumerate(zip(nodes, outputs)):
        assert node.returncode == 0 and f"rank {node_rank}: ok" in output, \
            f"node {node_rank} exited {node.returncode}:\n{output[-4000:]}"
