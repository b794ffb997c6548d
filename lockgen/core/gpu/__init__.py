"""GPU targets: architectures, CUDA and driver rules, the facts that age, and explain."""
