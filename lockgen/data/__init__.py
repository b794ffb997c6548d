"""Package data: `gpu_facts.json`, the GPU/CUDA/driver/PyTorch facts with their sources."""
