"""The PyPI layer's rules: the plan for uv, torch's sources and choice, wheel names."""
