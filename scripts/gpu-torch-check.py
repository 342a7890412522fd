#!/usr/bin/env python3
"""gpu-check's PyTorch step (python3 + torch only): a seeded matmul on the GPU
checked against the CPU, then 50 training steps of a small MLP on random data.
Prints each step's loss and the mean step time, and writes them as JSON:

  gpu-torch-check.py [--json FILE] [--steps N] [--device cuda|cpu]

gpu-check runs it plainly and through rig's shim and compares the two: the
same seeds give the same data and weights, so the losses should agree to
rounding. TF32 is off, so the matmul is full float32."""
import argparse
import json
import sys
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the result here too")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    dev = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu"}

    # Matmul: CPU float64 is the reference.
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 384, generator=g)
    y = torch.randn(384, 256, generator=g)
    t0 = time.perf_counter()
    got = (x.to(dev) @ y.to(dev)).cpu()
    out["matmul_ms"] = (time.perf_counter() - t0) * 1e3
    want = x.double() @ y.double()
    err = ((got.double() - want).abs().max() / want.abs().max()).item()
    out["matmul_err"] = err
    out["matmul_ok"] = err < 1e-5

    # MLP: weights and data made on the CPU from seeds, then moved.
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10),
    )
    # Labels from a random linear teacher, so there is something to learn.
    data = torch.randn(2048, 64, generator=g)
    labels = (data @ torch.randn(64, 10, generator=g)).argmax(1)
    model = model.to(dev)
    data, labels = data.to(dev), labels.to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    losses, times = [], []
    for step in range(a.steps):
        sync()
        t0 = time.perf_counter()
        i = (step * 256) % 2048
        opt.zero_grad()
        loss = loss_fn(model(data[i:i + 256]), labels[i:i + 256])
        loss.backward()
        opt.step()
        lv = loss.item()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
        losses.append(lv)
        print("step %d loss %.6f %.3f ms" % (step, lv, times[-1]))
    out["losses"] = losses
    out["step_ms"] = times
    out["first_step_ms"] = times[0]
    rest = times[5:] or times
    out["step_ms_mean"] = sum(rest) / len(rest)
    print(json.dumps({k: v for k, v in out.items() if k not in ("losses", "step_ms")}))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f)
    return 0 if out["matmul_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
