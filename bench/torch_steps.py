"""The timed training steps shared by the PyTorch sides of the model benchmarks (gpt2_torch.py,
llama_torch.py): AdamW (weight decay 0.1 on matrices), clipping at 1.0, tokens/s as the mean of the
steps after the first, printed as bench/train_steps.h prints meshflow's."""
import time

import torch


def time_training_steps(model, x, y, steps, name):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"pytorch {torch.__version__}: {name} {nparams / 1e6:.1f}M params, {torch.get_num_threads()} threads, "
          f"capability {torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, 'cpu') else '?'}")
    times = []
    for s in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        t_fwd = time.perf_counter() - t0
        loss.backward()
        t_bwd = time.perf_counter() - t0
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        times.append(dt)
        print(f"step {s}: loss {loss.item():.4f}, {dt:.3f} s (forward {t_fwd:.3f}, backward {t_bwd - t_fwd:.3f}, "
              f"clip + AdamW {dt - t_bwd:.3f})", flush=True)
    mean = sum(times[1:]) / (len(times) - 1)
    tokens = x[0].numel() if isinstance(x, tuple) else x.numel()  # x: the ids, or a tuple led by them
    print(f"pytorch: {tokens / mean:.1f} tokens/s (mean of steps 1..{steps - 1}), "
          f"best step {tokens / min(times[1:]):.1f} tokens/s")
