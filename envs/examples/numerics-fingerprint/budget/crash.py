import torch

x = torch.ones(10, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = x * 2
print("captured", flush=True)
