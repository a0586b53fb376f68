# Run by torchrun's elastic agents on each rank: an all-reduce of ones every
# half second, printing the world it ran in, until the file STOP_FILE names
# exists. A member joining or leaving makes the agents restart their
# workers in a new rendezvous round, with the world it leaves.
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
while True:
    # The ranks decide together, so that none leaves the others waiting.
    stop = torch.tensor([1.0 if os.path.exists(os.environ["STOP_FILE"]) else 0.0])
    dist.all_reduce(stop, op=dist.ReduceOp.MAX)
    if stop.item() > 0:
        break
    ones = torch.ones(1)
    dist.all_reduce(ones)
    print(f"rank={rank} world={world} sum={int(ones.item())}", flush=True)
    time.sleep(0.5)
dist.destroy_process_group()
