# Run by torchrun on each rank: a gloo all-reduce of rank+1 across the
# world. Every rank prints what it saw; the harness checks the sum.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(total)
print(f"rank={dist.get_rank()} world={dist.get_world_size()} sum={int(total.item())}", flush=True)
dist.destroy_process_group()
