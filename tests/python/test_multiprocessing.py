"""pto tensors sent to other processes by their memory (pypto_torch/sharing.py), as CUDA
tensors are: torch.multiprocessing Queues, DataLoader workers, the sender's memory kept
while a receiver uses it, and the clear errors where sharing cannot work.

Each scenario runs as a script in a fresh interpreter (spawned children import it as
their main module) under a timeout, so a hang fails the test instead of the suite."""

import os
import subprocess
import sys
import textwrap

import pytest

# What every script starts with: a check that torch.multiprocessing sees pto's reductions,
# and the names of this process's leftover shared-memory files.
PRELUDE = """
import os, sys
import torch, torch.multiprocessing as mp
import pypto_torch

def leftover_shm(*pids):
    return sorted(name for name in os.listdir("/dev/shm") for pid in pids if name.startswith(f"torch_{pid}_"))
"""


def run_script(tmp_path, body: str, **env: str) -> str:
    script = tmp_path / "scenario.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                            env={**os.environ, **env}, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize("strict", ["0", "1"], ids=["default", "strict"])
def test_a_queue_hands_pto_tensors_over_and_both_sides_see_writes(tmp_path, strict):
    out = run_script(tmp_path, """
        def consumer(inbox, outbox):
            received = [inbox.get(timeout=60) for _ in range(5)]
            expected = inbox.get(timeout=60)
            outbox.put([(str(t.device), t.dtype, t.shape, torch.equal(t.cpu(), e), type(t).__name__, t.requires_grad)
                        for t, e in zip(received, expected)])
            received[0].mul_(10)  # a view of the sender's tensor: the sender sees it
            torch.pto.synchronize()
            outbox.put(os.getpid())
            del received
            inbox.get(timeout=60)

        if __name__ == "__main__":
            context = mp.get_context("spawn")
            inbox, outbox = context.Queue(), context.Queue()
            child = context.Process(target=consumer, args=(inbox, outbox))
            child.start()
            baseline = torch.pto.memory_allocated()
            x = torch.arange(1.0, 13.0, device="pto")
            sent = [x[2:6], torch.randn(3, 4, device="pto").half(), torch.arange(6, device="pto").view(2, 3).t(),
                    torch.empty(0, device="pto"), torch.nn.Parameter(torch.randn(2, device="pto"))]
            for tensor in sent:
                inbox.put(tensor)
            inbox.put([t.detach().cpu() for t in sent])
            for row in outbox.get(timeout=60):
                print("received", *row)
            consumer_pid = outbox.get(timeout=60)
            expected = torch.arange(1.0, 13.0)
            expected[2:6] *= 10
            print("sender sees the write:", torch.equal(x.cpu(), expected))
            inbox.put(None)
            child.join(60)
            del x, sent, tensor
            torch.pto.ipc_collect()
            print("allocated after:", torch.pto.memory_allocated() - baseline)
            print("leftover shm:", leftover_shm(os.getpid(), consumer_pid))
    """, PTO_SIM_STRICT=strict)
    assert out.count("received pto:0") == 5, out
    assert "received pto:0 torch.float32 torch.Size([4]) True Tensor False" in out
    assert "received pto:0 torch.float16 torch.Size([3, 4]) True Tensor False" in out
    assert "received pto:0 torch.int64 torch.Size([3, 2]) True Tensor False" in out
    assert "received pto:0 torch.float32 torch.Size([0]) True Tensor False" in out
    assert "received pto:0 torch.float32 torch.Size([2]) True Parameter True" in out
    assert "sender sees the write: True" in out
    assert "allocated after: 0" in out and "leftover shm: []" in out


def test_the_sender_keeps_the_memory_while_the_receiver_holds_it(tmp_path):
    out = run_script(tmp_path, """
        def consumer(inbox, outbox):
            held = inbox.get(timeout=60)
            outbox.put("opened")
            inbox.get(timeout=60)  # the sender dropped its tensor and allocated again
            outbox.put(torch.equal(held.cpu(), torch.full((1000,), 7.0)))
            del held
            outbox.put("released")
            inbox.get(timeout=60)

        if __name__ == "__main__":
            context = mp.get_context("spawn")
            inbox, outbox = context.Queue(), context.Queue()
            child = context.Process(target=consumer, args=(inbox, outbox))
            child.start()
            baseline = torch.pto.memory_allocated()
            x = torch.full((1000,), 7.0, device="pto")
            inbox.put(x)
            outbox.get(timeout=60)
            del x
            torch.pto.ipc_collect()
            print("held while the receiver has it:", torch.pto.memory_allocated() - baseline)
            others = [torch.zeros(1000, device="pto") for _ in range(8)]  # would reuse a freed block
            inbox.put(None)
            print("receiver still reads its values:", outbox.get(timeout=60))
            outbox.get(timeout=60)
            torch.pto.ipc_collect()
            del others
            print("after the receiver let go:", torch.pto.memory_allocated() - baseline)
            inbox.put(None)
            child.join(60)
    """)
    assert "held while the receiver has it: 4096" in out, out
    assert "receiver still reads its values: True" in out
    assert "after the receiver let go: 0" in out


def test_memory_a_receiver_held_when_it_exited_goes_back(tmp_path):
    out = run_script(tmp_path, """
        def consumer(inbox, outbox):
            held = inbox.get(timeout=60)
            outbox.put(held.sum().item())
            outbox.close()
            outbox.join_thread()
            os._exit(0)  # no deleter runs: the sender sees the receiver is gone

        if __name__ == "__main__":
            context = mp.get_context("spawn")
            inbox, outbox = context.Queue(), context.Queue()
            child = context.Process(target=consumer, args=(inbox, outbox))
            child.start()
            baseline = torch.pto.memory_allocated()
            inbox.put(torch.ones(100, device="pto"))
            print("receiver summed", outbox.get(timeout=60))
            child.join(60)
            torch.pto.ipc_collect()
            print("allocated after:", torch.pto.memory_allocated() - baseline)
    """)
    assert "receiver summed 100.0" in out and "allocated after: 0" in out, out


def test_a_dataloader_with_two_spawned_workers_yields_pto_tensors(tmp_path):
    out = run_script(tmp_path, """
        class Squares(torch.utils.data.Dataset):
            def __len__(self):
                return 10

            def __getitem__(self, index):
                return torch.full((3,), float(index), device="pto") ** 2, index

        if __name__ == "__main__":
            torch.ones(1, device="pto")  # the device runs here too: workers must be spawned
            baseline = torch.pto.memory_allocated()
            loader = torch.utils.data.DataLoader(Squares(), batch_size=4, num_workers=2,
                                                 multiprocessing_context="spawn")
            for values, indices in loader:
                expected = indices.float()[:, None].expand(-1, 3) ** 2
                print("batch", values.device, indices.tolist(), torch.equal(values.cpu(), expected))
                print("allocated here:", torch.pto.memory_allocated() - baseline)
    """)
    assert "batch pto:0 [0, 1, 2, 3] True" in out, out
    assert "batch pto:0 [4, 5, 6, 7] True" in out and "batch pto:0 [8, 9] True" in out
    assert out.count("allocated here: 0") == 3  # a received batch is the worker's memory


def test_dataloader_workers_forked_after_the_device_started_are_refused(tmp_path):
    out = run_script(tmp_path, """
        class OnDevice(torch.utils.data.Dataset):
            def __len__(self):
                return 2

            def __getitem__(self, index):
                return torch.ones(2, device="pto")

        if __name__ == "__main__":
            torch.ones(1, device="pto")
            loader = torch.utils.data.DataLoader(OnDevice(), num_workers=1, multiprocessing_context="fork")
            try:
                next(iter(loader))
            except RuntimeError as error:
                print("raised:", error)
    """)
    assert "raised: " in out and "forked after the device started" in out and "'spawn'" in out, out


def test_a_forked_receiver_is_refused_as_cuda_refuses_one(tmp_path):
    out = run_script(tmp_path, """
        def consumer(inbox, outbox):
            try:
                inbox.get(timeout=60)
                outbox.put("received")
            except RuntimeError as error:
                outbox.put(f"raised: {error}")

        if __name__ == "__main__":
            context = mp.get_context("fork")
            inbox, outbox = context.Queue(), context.Queue()
            x = torch.ones(3, device="pto")
            child = context.Process(target=consumer, args=(inbox, outbox))
            child.start()
            inbox.put(x)
            print(outbox.get(timeout=60))
            child.join(60)
    """)
    assert "raised: " in out and "forked after the device started" in out and "'spawn'" in out, out


def test_what_cannot_be_sent_raises_at_the_send(tmp_path):
    out = run_script(tmp_path, """
        from multiprocessing.reduction import ForkingPickler
        context = mp.get_context("spawn")
        leaf = torch.ones(2, device="pto", requires_grad=True)
        for item in (torch.ones(2, device="pto").untyped_storage(), leaf * 2):
            try:
                ForkingPickler.dumps(item)
            except RuntimeError as error:
                print("pickle raised:", error)
            for queue in (context.Queue(), context.JoinableQueue()):
                try:
                    queue.put([item])
                except RuntimeError as error:
                    print("put raised:", error)
    """)
    assert out.count("raised: Cannot pickle pto storage; try pickling a pto tensor instead") == 3, out
    assert out.count("raised: Cowardly refusing to serialize non-leaf tensor which requires_grad") == 3, out
