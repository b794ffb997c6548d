"""Frozen pydantic models: the values that flow between lockgen's layers."""
