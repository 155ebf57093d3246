"""FSDP2 on a Hugging Face Llama (random weights), for gpuscope's job figures.

A Llama of ~0.37 B parameters built from ``transformers.LlamaConfig``
(hidden 1024, 24 layers, intermediate 2816, vocab 32000, SDPA attention),
bf16 parameters, ``fully_shard`` on each decoder layer and then on the root,
AdamW, a batch of 1 x 512 random token ids. Run under torchrun, one process
per GPU, with NVLink multicast off (the lent machines require it)::

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
      gpuscope run -o fsdp-{rank}.json -- \\
      torchrun --standalone --nproc_per_node=2 bench/multi_gpu/fsdp.py

No NVTX range unless ``--ranges`` (then each iteration is a range
``step``). Each rank prints its per-step time, then one line ``SUITE
{"rank": r, "step_ms": m, "steps": n}``: the median over the steps after
``--warmup``. ``--alone`` runs the same model unsharded on cuda:0, with no
process group (no torchrun), as the truth of one GPU's own work::

    python3 bench/multi_gpu/fsdp.py --alone

Nothing is downloaded.
"""

import argparse
import os
import time

import suite
import torch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=35, help="training steps, warm-up included")
    p.add_argument("--warmup", type=int, default=5, help="first steps left out of the SUITE median")
    p.add_argument("--ranges", action="store_true", help="an NVTX range `step` around each iteration")
    p.add_argument("--alone", action="store_true", help="no process group: the unsharded model on cuda:0")
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--intermediate", type=int, default=2816)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=1)
    return p.parse_args()


def fully_shard_fn():
    try:
        from torch.distributed.fsdp import fully_shard  # torch >= 2.6
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard  # torch 2.4, 2.5
    return fully_shard


def build(args):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=32000,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=16,
        num_key_value_heads=16,
        max_position_embeddings=max(2048, args.seq),
        tie_word_embeddings=False,
        use_cache=False,
        attn_implementation="sdpa",
    )
    # The same seed on every rank: each rank keeps its shard of the same
    # full weights (fully_shard does not broadcast).
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    model = model.to(dtype=torch.bfloat16)
    model.train()
    return cfg, model


def main():
    args = parse_args()
    if args.alone:
        dist = None
        rank, local = 0, 0
    else:
        import torch.distributed as dist

        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        rank = dist.get_rank()
    torch.cuda.set_device(local)
    cfg, model = build(args)
    params = sum(p.numel() for p in model.parameters())
    if dist is not None:
        fully_shard = fully_shard_fn()
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
    if rank == 0:
        attn = getattr(model.config, "_attn_implementation", "?")
        mode = "alone (unsharded, one GPU)" if dist is None else f"FSDP2 on {dist.get_world_size()} ranks"
        print(f"llama {params / 1e9:.3f} B parameters, attention {attn}, {mode}", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device="cuda").manual_seed(1 + rank)
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device="cuda", generator=g)
    times, issue, cpu = [], [], []
    for step in range(args.steps):
        torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), time.thread_time()
        if args.ranges:
            torch.cuda.nvtx.range_push("step")
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        # The host's own pace: the step issued (launches are asynchronous)
        # before the wait for the GPU, in wall and thread CPU time.
        issue.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        torch.cuda.synchronize()
        if args.ranges:
            torch.cuda.nvtx.range_pop()
        suite.record(rank, step, t0, times)
    med = lambda v: 1e3 * sorted(v[args.warmup:])[len(v[args.warmup:]) // 2] if len(v) > args.warmup else float("nan")  # noqa: E731
    print(f"HOST rank {rank}: issued a step in {med(issue):.2f} ms (median), main thread CPU {med(cpu):.2f} ms", flush=True)
    suite.finish(rank, times, args.warmup, dist)


if __name__ == "__main__":
    main()
